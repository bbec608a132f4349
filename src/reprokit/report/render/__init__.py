"""Figures and tables: the notebooks' run, styling, n/a texts, LaTeX tables (see reprokit.report)."""
