"""Deferred imports for the modules the pipeline imports while building its DAG.

Snakemake imports the data registry and every experiment kind to plan the jobs (dataset availability,
variant files, cell settings) but runs no tensor code then; importing torch would add ~2 s to every
`snakemake` call. `lazy_import` is the `importlib.util.LazyLoader` recipe from the Python docs: the
module object exists at once and torch executes on its first attribute access.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """`import name`, executed on first attribute access (the module itself if already imported)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named '{name}'", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def no_grad(fn):
    """`@torch.no_grad()` for modules that import torch lazily: the decorator itself touches no torch
    attribute at import time, the call runs under `torch.no_grad()`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapper
