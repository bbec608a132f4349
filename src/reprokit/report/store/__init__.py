"""The store: a cell's files, the committed archive, the tidy CSVs, provenance records, mean ± s.e.

The lowest layer of reprokit.report: it imports no verdict, rendering or command module.
"""
