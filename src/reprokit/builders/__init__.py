"""Build: how one grid cell becomes data + model + method (+ evaluation) for the training loop.

One module per experiment kind, each with `build(cell, ctx) -> Run`; what a cell needs before it runs
(typed settings, variant files, upstream cells) is its plan, `reprokit.plan.<kind>`, which also names
this build function. Modules here import torch; the pipeline imports them only when a cell runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..data import registry
from ..data.checksums import overrides_for
from ..methods.base import Method
from ..runtime import Runtime
from ..runtime_settings import RuntimeSettings


@dataclass
class CellContext:
    """Where a cell finds its inputs; filled by cell.py from the pipeline config."""

    mirrors: list[str]
    cache_dir: str | None
    variants_dir: str
    download: bool = False
    checksums: dict = field(default_factory=dict)  # data.checksums: {mirror-relative path: digest} overrides
    variant_paths: dict = field(default_factory=dict)  # name -> Path of required variants
    runtime_settings: dict = field(default_factory=dict)  # the `run:` block (reprokit.runtime_settings.RuntimeSettings)
    _runtime: object = field(default=None, repr=False, compare=False)

    @property
    def runtime(self):
        """The cell's :class:`reprokit.runtime.Runtime` (device, precision): where build() places data,
        models and generators. A context built without a `run` block gets RuntimeSettings' defaults."""
        if self._runtime is None:
            self._runtime = Runtime(RuntimeSettings.from_dict(self.runtime_settings))
        return self._runtime

    def load(self, name: str, **kw):
        """Dataset ``name`` as a :class:`reprokit.data.bundle.Bundle`, from this context's mirrors and cache
        (downloaded when the context allows it), checked against its checksums (and the overrides that
        name its files). ``kw`` go to :func:`reprokit.data.registry.load` (split, dtype, ...)."""

        checksums = overrides_for(registry.dataset_info(name), self.checksums) or None
        return registry.load(
            name, self.mirrors, cache_dir=self.cache_dir, download=self.download, checksums=checksums, **kw
        )

    def variant(self, name: str) -> Path:
        if name not in self.variant_paths:
            raise KeyError(
                f"variant '{name}' was not given to this cell (its plan's required_variants() declares "
                f"the files the pipeline passes; given: {sorted(self.variant_paths)})"
            )
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
    def of(
        cls,
        method: Method,
        extra_curve: Callable[[], dict] | None = None,
        extra_final: Callable[[], dict] | None = None,
    ) -> Evaluation:
        """The method's evaluation, with `extra_curve()` added to every curve row and `extra_final()` to
        the final metrics."""

        def curve(step: int) -> dict:
            return {**method.evaluate(step), **(extra_curve() if extra_curve else {})}

        def final() -> dict:
            return {**method.final_metrics(), **(extra_final() if extra_final else {})}

        return cls(curve, final)


@dataclass
class Measurement:
    """What a measuring (not training) kind builds, e.g. Table 8's update timing: `measure()` returns the
    per-repetition rows (the cell's curve.csv) and the metrics. No training loop, no checkpoint (an
    interrupted measurement starts again: timings are not reproducible anyway)."""

    n_steps: int
    measure: Callable[[], tuple[list[dict], dict]]
    info: dict = field(default_factory=dict)


@dataclass
class Run:
    method: Method
    n_steps: int
    eval_every: int
    info: dict = field(default_factory=dict)  # extra facts for metrics.json (e.g. data sizes)
    evaluation: Evaluation | None = None  # None: the method's own evaluate / final_metrics
    eval_doubling_until: int = 0  # LoopConfig's: extra curve rows at steps 1, 2, 4, .. below it
    evals_per_doubling: int = 1  # LoopConfig's: that schedule's rows per doubling of the step

    def __post_init__(self):
        if self.evaluation is None:
            self.evaluation = Evaluation.of(self.method)
