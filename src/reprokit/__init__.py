"""Reproduction of *Hyperparameter Optimization through Neural Network Partitioning* and *BALI*.

The map of the package (the library a researcher imports without the pipeline, and the pipeline in the
order data flows) is docs/layout.md, its one place.
"""

__version__ = "0.1.0"
