"""Experiment kinds: how one grid cell's settings become data + model + method for the loop.

Each kind is a module of this package (its name is the config's `kind`) and exposes
  required_variants(cell) -> dict[name, (dataset, variant_filename)]   (files the pipeline builds first)
  build(cell, ctx) -> Run                                               (method + loop settings)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..methods.base import Method

def kind_names() -> list[str]:
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@dataclass
class CellContext:
    """Where a cell finds its inputs; filled by cell.py from the pipeline config."""

    mirrors: list[str]
    cache_dir: str | None
    variants_dir: str
    download: bool = False
    variant_paths: dict = field(default_factory=dict)  # name -> Path of required variants
    runtime_settings: dict = field(default_factory=lambda: {"device": "cpu"})  # the `run:` block (device, precision)
    _runtime: object = field(default=None, repr=False, compare=False)

    @property
    def runtime(self):
        """The cell's :class:`reprokit.runtime.Runtime` (device, precision): where build() places data,
        models and generators. Tests that build a context by hand get the CPU."""
        if self._runtime is None:
            from ..runtime import Runtime, RuntimeSettings

            self._runtime = Runtime(RuntimeSettings.from_dict(self.runtime_settings))
        return self._runtime

    def variant(self, name: str) -> Path:
        if name not in self.variant_paths:
            raise KeyError(f"variant '{name}' was not declared by required_variants()")
        return Path(self.variant_paths[name])


@dataclass
class Evaluation:
    """What a cell measures, apart from how it trains: `curve(step)` is one row of the per-step curve
    (called every `eval_every` steps), `final()` the metrics of metrics.json. The one seam where a kind
    adds metrics (a grid predictive, learned mask probabilities, OOD detection); the method's own
    `evaluate` / `final_metrics` are the default."""

    curve: Callable[[int], dict]
    final: Callable[[], dict]

    @classmethod
    def of(cls, method: Method, extra_curve: Callable[[], dict] | None = None,
           extra_final: Callable[[], dict] | None = None) -> "Evaluation":
        """The method's evaluation, with `extra_curve()` added to every curve row and `extra_final()` to
        the final metrics."""
        def curve(step: int) -> dict:
            return {**method.evaluate(step), **(extra_curve() if extra_curve else {})}

        def final() -> dict:
            return {**method.final_metrics(), **(extra_final() if extra_final else {})}

        return cls(curve, final)


@dataclass
class Run:
    method: Method
    n_steps: int
    eval_every: int
    info: dict = field(default_factory=dict)  # extra facts for metrics.json (e.g. data sizes)
    evaluation: Evaluation | None = None  # None: the method's own evaluate / final_metrics

    def __post_init__(self):
        if self.evaluation is None:
            self.evaluation = Evaluation.of(self.method)


def kind_module(kind: str):
    """The module `reprokit.experiments.<kind>` (one per experiment kind)."""
    if kind not in kind_names():
        raise ValueError(f"experiment kind '{kind}' unknown (valid: {', '.join(kind_names())})")
    return importlib.import_module(f"{__name__}.{kind}")


def variant_path(variants_dir: str | Path, dataset: str, filename: str) -> Path:
    return Path(variants_dir) / dataset / filename
