"""Plan: everything about a cell that is known before it runs, torch-free by construction.

The pipeline reads top-down in the order data flows:

    config.py (grids, cells)  ->  plan/ (this package: typed settings, inputs, cost)  ->
    experiments/ (build: data + model + method, imports torch)  ->  train.py (the loop)  ->
    metrics.py  ->  report/aggregate.py  ->  report/ + workflow/notebooks (artefacts)

Each experiment kind is one :class:`KindPlan` registered in :data:`KINDS` (explicit, no module
discovery). A plan owns the kind's typed :class:`Settings` (each default in exactly one place: the
dataclass; the JSON schema in workflow/schemas/kinds/ validates, a test keeps the two in step), and
answers, without torch:

* ``settings(cell)``          the cell's typed settings (grid coordinates override shared settings)
* ``required_variants(cell)`` {name: (dataset, variant file)} the pipeline builds first
* ``required_cells(cell)``    {name: (experiment, coords)} whose metrics.json this cell reads
* ``cell_settings(cell)``     the settings a cell's re-run depends on (Snakemake params)
* ``n_steps(cell)``           training iterations (the cost model and progress)
* ``check(cell)``             everything above, plus what the cell's method needs (a setting only
                              some methods use): :func:`validate_cells` runs it for every cell of a
                              scale before any job starts, so a bad value fails ``snakemake -n``

and names its build function (``experiments.<kind>.build``), imported only when a cell runs.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import typing
import weakref
from dataclasses import dataclass, fields

from ..config import ConfigError


@dataclass(frozen=True)
class Settings:
    """Base of every kind's (and method block's) typed settings.

    Subclasses are frozen dataclasses: a field without a default is required; nested blocks are
    dataclass-typed fields built from the config's mapping. `from_dict` names an unknown or missing key.
    """

    @classmethod
    def from_dict(cls, values: dict, where: str = "settings"):
        values = {k: v for k, v in (values or {}).items() if not str(k).startswith("_")}  # _inputs: pipeline glue
        spec = _field_spec(cls)
        unknown = sorted(set(values) - set(spec))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} for {cls.__name__} "
                              f"(valid: {', '.join(spec)})")
        out = {}
        for name, (required, block) in spec.items():
            if name not in values:
                if required:
                    raise ConfigError(f"{where}.{name}: required by {cls.__name__} but not set")
                continue
            value = values[name]
            if block is not None and isinstance(value, dict):
                value = block.from_dict(value, f"{where}.{name}")
            out[name] = value
        return cls(**out)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=None)
def _field_spec(cls) -> dict:
    """{field: (required, nested Settings type or None)} of a Settings dataclass, computed once per class."""
    hints = typing.get_type_hints(cls)
    return {f.name: (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                     _settings_type(hints.get(f.name))) for f in fields(cls)}


def _settings_type(hint):
    """The Settings subclass a field holds (also inside `X | None`), else None."""
    for cand in (hint, *typing.get_args(hint)):
        if isinstance(cand, type) and issubclass(cand, Settings):
            return cand
    return None


class KindPlan:
    """One experiment kind's plan. Subclasses set `name`, `Settings`, `build` ('module:function') and
    override what differs from these defaults (no variants, no upstream cells, every setting matters)."""

    name: str = ""
    Settings: type[Settings] = Settings
    build_target: str = ""

    def settings(self, cell):
        """Typed settings of one cell: shared settings overridden by the cell's grid coordinates. Built once
        per cell object (the DAG asks for them several times per cell)."""
        hit = self._cache.get(id(cell))
        if hit is not None and hit[0]() is cell:
            return hit[1]
        st = self.Settings.from_dict(cell.values(), f"{cell.experiment} ({self.name})")
        self._cache[id(cell)] = (weakref.ref(cell, lambda _r, k=id(cell): self._cache.pop(k, None)), st)
        return st

    @functools.cached_property
    def _cache(self) -> dict:
        return {}

    def required_variants(self, cell) -> dict:
        return {}

    def required_cells(self, cell) -> dict:
        return {}

    def cell_settings(self, cell) -> dict:
        return dict(cell.settings)

    def n_steps(self, cell) -> int:
        return int(self.settings(cell).n_steps)

    def cost_parts(self, cell):
        """The cell's work for the cost model (`plan.costs.CellWork`), or None for a kind without a cost model
        (the budget prices it as a loud FALLBACK)."""
        return None

    def needs(self, st) -> tuple:
        """Settings (names of fields) that the cell's method needs although the kind makes them optional."""
        return ()

    def check(self, cell) -> None:
        """Raise ConfigError when the cell cannot run as configured: its settings (types, allowed values,
        unknown or missing keys), its step count, its inputs, and each setting its method needs."""
        st = self.settings(cell)
        for name in self.needs(st):
            if getattr(st, name, None) is None:
                raise ConfigError(f"method '{getattr(st, 'method', '?')}' needs the setting '{name}'")
        self.n_steps(cell)
        self.required_variants(cell)
        self.required_cells(cell)

    def build(self, cell, ctx):
        module, _, func = self.build_target.partition(":")
        return getattr(importlib.import_module(module), func)(cell, ctx)


KINDS: dict[str, KindPlan] = {}


def register(plan: KindPlan) -> KindPlan:
    if plan.name in KINDS:
        raise ValueError(f"experiment kind '{plan.name}' registered twice")
    KINDS[plan.name] = plan
    return plan


def kind(name: str) -> KindPlan:
    """The plan of experiment kind `name` (the config's `kind`)."""
    if name not in KINDS:
        raise ConfigError(f"experiment kind '{name}' unknown (valid: {', '.join(sorted(KINDS))})")
    return KINDS[name]


def kind_names() -> list[str]:
    return sorted(KINDS)


def validate_cells(grids) -> int:
    """Check every cell of `grids` (ExperimentGrid objects, one scale) with its kind's plan; the first
    problem raises ConfigError naming the experiment, the cell and the key. Returns the cells checked.
    The plan caches each cell's settings, so the DAG that follows reuses them."""
    n = 0
    for grid in grids:
        plan = kind(grid.kind)
        for cell in grid.cells():
            try:
                plan.check(cell)
            except ConfigError as err:
                text = str(err)
                prefix = f"{cell.experiment} ({plan.name}): "
                text = text[len(prefix):] if text.startswith(prefix) else text
                raise ConfigError(f"experiment '{grid.name}', cell {cell.rel_dir}: {text}") from None
            n += 1
    return n


from . import (  # noqa: E402,F401 - each module registers its kind
    affine_invariance,
    bali_classification,
    federated,
    input_selection,
    synthetic_predictive,
    uci_regression,
    update_timing,
)
