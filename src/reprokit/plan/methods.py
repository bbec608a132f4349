"""One table of methods per experiment kind: every place that names a method reads its entry here. Torch-free.

A kind's plan (`plan/<kind>.py`) defines its table (`MethodTable`, one :class:`MethodEntry` per method, in the
order figures and tables list them) and registers it with :func:`register_methods`. Then:

* the plan's `Method` literal (the allowed values of the `method` axis) and the settings blocks a cell keeps
  (`blocks`) come from the table;
* the builder dispatches on it: `entry.builder` is a dotted path ('module:function'), imported only when a cell
  runs (:func:`load_builder`), so the plan stays torch-free;
* the cost model's step key is `entry.cost_step` (a step kind of `plan/costs.py`, or a function of the cell's
  typed settings that returns one);
* the report draws and names each method with `label`, `colour` and `line` (matplotlib keyword arguments).

`tests/test_method_tables.py` checks that every method a plan allows has every entry and that each builder
path imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class MethodEntry:
    """One method of one kind: its name on the `method` axis and everything the pipeline says about it."""

    name: str
    label: str  # in tables and legends
    builder: str  # 'module:function' that builds the method's training object (builders/<kind>.py)
    cost_step: str | Callable[[Any], str]  # the step kind priced by the cost model (plan/costs.py, Part.step)
    colour: str = ""  # a matplotlib colour (kinds whose figures draw methods side by side)
    blocks: tuple[str, ...] = ()  # the settings keys only this method reads (a cell keeps its own method's only)
    needs: tuple[str, ...] = ()  # optional settings this method requires besides its blocks (shared with others)
    line: Mapping[str, Any] = field(default_factory=dict)  # matplotlib line keywords (lw, zorder, marker, alpha)

    def __post_init__(self):
        object.__setattr__(self, "line", MappingProxyType(dict(self.line)))

    def step(self, settings) -> str:
        """The cost model's step kind for a cell of this method with typed `settings`."""
        return self.cost_step(settings) if callable(self.cost_step) else self.cost_step


MethodTable = Mapping[str, MethodEntry]
TABLES: dict[str, dict[str, MethodEntry]] = {}  # kind -> {method: entry}


def table(*entries: MethodEntry) -> dict[str, MethodEntry]:
    """A kind's table from its entries, in order; a name given twice is an error."""
    out: dict[str, MethodEntry] = {}
    for e in entries:
        if e.name in out:
            raise ValueError(f"method {e.name!r} is in the table twice")
        out[e.name] = e
    return out


def register_methods(kind: str, entries: dict[str, MethodEntry]) -> dict[str, MethodEntry]:
    """Register `kind`'s method table (the plan module does, at import) and return it."""
    TABLES[kind] = entries
    return entries


def methods_of(kind: str) -> dict[str, MethodEntry]:
    """The method table of `kind` (KeyError for a kind without one)."""
    return TABLES[kind]


def entry(kind: str, method: str) -> MethodEntry:
    """The entry of `method` in `kind`'s table; a method not in it is an error naming the ones there are."""
    methods = TABLES[kind]
    if method not in methods:
        raise KeyError(f"kind {kind!r} has no method {method!r} (its table: {', '.join(methods)})")
    return methods[method]


def method_keys(entries: MethodTable) -> dict[str, tuple[str, ...]]:
    """{method: the settings keys only it reads}, from a table (a plan's METHOD_KEYS)."""
    return {name: e.blocks for name, e in entries.items()}


def load_builder(entry: MethodEntry) -> Callable:
    """The function `entry.builder` names, imported now (only a running cell calls this)."""
    module, _, func = entry.builder.partition(":")
    return getattr(importlib.import_module(module), func)


class Column(Mapping):
    """{method: one attribute of its entry}, read from the table at each look-up (a method registered later, as
    a test does, is in it), followed by `extra` entries (drawn things that are not grid methods). `first`: methods
    listed before the others in this order (a table whose columns keep an order of their own)."""

    def __init__(self, entries: MethodTable, attr: str, extra: Mapping | None = None, first: tuple = ()):
        self._entries, self._attr, self._extra, self._first = entries, attr, dict(extra or {}), tuple(first)

    def _value(self, e: MethodEntry):
        v = getattr(e, self._attr)
        return dict(v) if isinstance(v, Mapping) else v

    def __getitem__(self, key):
        if key in self._entries:
            return self._value(self._entries[key])
        return self._extra[key]

    def __iter__(self):
        yield from (m for m in self._first if m in self._entries)
        yield from (m for m in self._entries if m not in self._first)
        yield from (k for k in self._extra if k not in self._entries)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self))
