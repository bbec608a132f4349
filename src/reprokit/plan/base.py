"""The registry of experiment kinds and what every kind's plan shares: :class:`Settings` (the base of each kind's
typed settings), :class:`KindPlan` (the defaults a kind overrides), :func:`register` / :func:`kind` and the checks run
over every cell of a scale (:func:`validate_cells`, :func:`check_experiment_specs`).

It imports no kind module: each kind imports this one and registers itself (reprokit.plan imports them all).
Torch-free.
"""

from __future__ import annotations

import functools
import importlib
import weakref
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .._jsonschema import first_error
from ..errors import ConfigError
from .methods import TABLES


class Settings(BaseModel):
    """Base of every kind's (and method block's) typed settings: a frozen pydantic model.

    Each field holds its default (a field without one is required), its allowed values (``Literal``), its
    bounds (``Field(ge=...)``) and its description; the kind's JSON schema, which validates the config's
    blocks before any cell exists, is generated from it (:meth:`KindPlan.schema`). Nested method blocks are
    Settings-typed fields built from the config's mapping. Unknown keys are errors. pydantic v2 because one
    class gives the typed object, its checks and that schema (as ``RuntimeSettings`` does for ``run:``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())
    # Keys added after cells were archived whose default is what those cells ran (e.g. a new option off by default):
    # a cell's resolved settings (KindPlan.resolved_settings) hold them only where they differ from it, so the archived
    # lines and artefact fingerprints stay valid. Such a default must never change.
    RECORDED_WHEN_SET: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_dict(cls, values: dict, where: str = "settings"):
        """The typed settings of `values` (keys starting with `_`, pipeline glue such as `_inputs`, dropped);
        a ConfigError naming `where`, the key and the bad value otherwise."""
        values = {k: v for k, v in (values or {}).items() if not str(k).startswith("_")}
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            raise ConfigError(_message(err, cls, where)) from None

    def to_dict(self) -> dict:
        return self.model_dump()


def _message(err: ValidationError, cls, where: str) -> str:
    """One line for the first problem pydantic found (all unknown keys at once)."""
    errors = err.errors(include_url=False)
    extra = [e for e in errors if e["type"] == "extra_forbidden"]
    if extra:
        keys = sorted(".".join(map(str, e["loc"])) for e in extra)
        valid = ", ".join(cls.model_fields) if all(len(e["loc"]) == 1 for e in extra) else ""
        return f"{where}: unknown key(s) {', '.join(keys)} for {cls.__name__}" + (f" (valid: {valid})" if valid else "")
    e = errors[0]
    loc = ".".join(str(p) for p in e["loc"] if isinstance(p, int) or "[" not in str(p))  # drop union member tags
    at = f"{where}.{loc}" if loc else where
    if e["type"] == "missing":
        return f"{at}: required by {cls.__name__} but not set"
    if e["type"] == "literal_error":
        return f"{at}: '{e['input']}' unknown (valid: {e['ctx']['expected']})"
    if e["type"] in ("value_error", "assertion_error"):
        return f"{at}: {e['ctx']['error']}"
    return f"{at}: {e['msg']} (got {e['input']!r})"


class KindPlan:
    """One experiment kind's plan. Subclasses set `name`, `Settings`, `build` ('module:function') and
    override what differs from these defaults (no variants, no upstream cells, every setting matters)."""

    name: str = ""
    title: str = ""  # what the kind is for (the schema's title)
    Settings: type[Settings] = Settings
    axes: tuple[str, ...] = ()  # the settings a grid may sweep (dotted for a method block's key)
    build_target: str = ""

    def schema(self) -> dict:
        """The kind's JSON schema for the config, generated from `Settings`: `axes` and `settings` (every key
        optional, since a scale's block overrides only some of them; a `per_<axis>` block for each axis but the
        seed maps an axis value to such partial settings)."""
        per_axes = [a for a in self.axes if "." not in a and a != "seed"]  # a `per_<axis>` block each
        return {"title": self.title, "axes": list(self.axes), "settings": settings_schema(self.Settings, per_axes)}

    def typed_settings(self, cell):
        """Typed settings of one cell: shared settings overridden by the cell's grid coordinates. Built once
        per cell object (the DAG asks for them several times per cell)."""
        hit = self._cache.get(id(cell))
        if hit is not None and hit[0]() is cell:
            return hit[1]
        st = self.Settings.from_dict(cell.settings_with_coords(), f"{cell.experiment} ({self.name})")
        self._cache[id(cell)] = (weakref.ref(cell, lambda _r, k=id(cell): self._cache.pop(k, None)), st)  # noqa: B008 (the key, bound now)
        return st

    @functools.cached_property
    def _cache(self) -> dict:
        return {}

    def required_variants(self, cell) -> dict:
        return {}

    def required_cells(self, cell) -> dict:
        return {}

    def resolved_settings(self, cell) -> dict:
        """The settings a cell runs with, resolved: every field of the kind's `Settings`, its default filled in
        where the config leaves it out, the grid coordinates applied (a dotted axis inside its block). Left out:
        the top-level axes (the cell's `coords` hold them) and the keys only other methods read
        (:meth:`other_methods_keys`), and the `Settings.RECORDED_WHEN_SET` keys at their defaults. A cell's
        config.json, its archived line and the artefact fingerprints record this, so a changed default re-runs the
        cells it changes and flags their archived lines, and changing one method's settings leaves the other
        methods' cells untouched."""
        st = self.typed_settings(cell)
        resolved = st.model_dump(mode="json")
        drop = {a for a in cell.coord_dict if "." not in a} | self.other_methods_keys(cell, resolved)
        drop |= {k for k in st.RECORDED_WHEN_SET if getattr(st, k) == type(st).model_fields[k].default}
        return {k: v for k, v in resolved.items() if k not in drop}

    def other_methods_keys(self, cell, resolved: dict) -> set:
        """Keys of `resolved` that only another method than the cell's reads: the other entries' `blocks` of the
        kind's method table (plan/methods.py), so editing one method's settings leaves the others' cells untouched;
        none for a kind without a `method` axis (no table)."""
        methods = TABLES.get(self.name)
        if methods is None:
            return set()
        own = set(methods[resolved["method"]].blocks)
        return {k for e in methods.values() for k in e.blocks} - own

    def n_steps(self, cell) -> int:
        return int(self.typed_settings(cell).n_steps)

    def derived(self, cell) -> dict:
        """Quantities the cell's settings imply, by name (e.g. how often its least-updated partition is updated):
        what a claim's `requires` reads beside the settings themselves. None here."""
        return {}

    def cost_parts(self, cell):
        """The cell's work for the cost model (`plan.costs.CellWork`), or None for a kind without a cost model
        (the budget prices it as a loud FALLBACK)."""

    def needs(self, st) -> tuple:
        """Settings (names of fields) that the cell's method needs although the kind makes them optional."""
        return ()

    def check(self, cell) -> None:
        """Raise ConfigError when the cell cannot run as configured: its settings (types, allowed values,
        unknown or missing keys), its step count, its inputs, and each setting its method needs."""
        st = self.typed_settings(cell)
        for name in self.needs(st):
            if getattr(st, name, None) is None:
                raise ConfigError(f"method '{getattr(st, 'method', '?')}' needs the setting '{name}'")
        self.n_steps(cell)
        self.required_variants(cell)
        self.required_cells(cell)

    def build(self, cell, ctx):
        module, _, func = self.build_target.partition(":")
        return getattr(importlib.import_module(module), func)(cell, ctx)


def settings_schema(model: type[Settings], per_axes=()) -> dict:
    """`model`'s JSON schema with no key required and no titles, plus a `per_<axis>` block for each of
    `per_axes` ({axis value: partial settings}; its keys limited to the axis' allowed values where the field
    is a Literal)."""
    schema = _partial(model.model_json_schema())
    defs = schema.pop("$defs", {})
    props = dict(schema.get("properties", {}))
    for axis in per_axes:
        block = {
            "type": "object",
            "description": f"settings for one {axis} (keys: its values), over the above",
            "additionalProperties": {"$ref": "#/$defs/settings"},
        }
        values = _allowed(props.get(axis, {}))
        if values:
            block["propertyNames"] = {"enum": [str(v) for v in values]}
        elif "pattern" in props.get(axis, {}):
            block["propertyNames"] = {"pattern": props[axis]["pattern"]}
        props[f"per_{axis}"] = block
    return {**schema, "properties": props, "$defs": {**defs, "settings": schema}}


def _allowed(prop: dict) -> list:
    """The values a field's schema allows when it is a Literal or a union of Literals (empty: not listed)."""
    if "enum" in prop:
        return list(prop["enum"])
    if "const" in prop:
        return [prop["const"]]
    if "anyOf" in prop:
        parts = [_allowed(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return [v for p in parts for v in p] if parts and all(parts) else []
    return []


def _partial(schema):
    """`schema` (a pydantic JSON schema) without `required` lists and `title`s, recursively."""
    if isinstance(schema, dict):
        return {k: _partial(v) for k, v in schema.items() if k not in ("required", "title")}
    if isinstance(schema, list):
        return [_partial(v) for v in schema]
    return schema


@functools.cache
def kind_schema(name: str) -> dict:
    """The generated schema of experiment kind `name` (see :meth:`KindPlan.schema`), built once."""
    return kind(name).schema()


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
                text = text[len(prefix) :] if text.startswith(prefix) else text
                raise ConfigError(f"experiment '{grid.name}', cell {cell.rel_dir}: {text}") from None
            n += 1
    return n


def check_experiment_specs(config: dict) -> None:
    """Each experiment's settings blocks (base and per scale) against its kind's schema, generated from the kind's
    settings model (`kind_schema`), and its grid axes against the kind's axes; raise one ConfigError naming the
    bad key or value. reprokit.config.validate_config calls it after the top-level schema."""
    import jsonschema

    kinds: dict[str, tuple[dict, object]] = {}  # kind -> (schema, settings validator), each built once
    for name, spec in config.get("experiments", {}).items():
        if spec["kind"] not in kinds:
            if spec["kind"] not in KINDS:
                raise ConfigError(
                    f"config error at 'experiments.{name}.kind': no experiment kind '{spec['kind']}' "
                    f"(valid: {', '.join(kind_names())})"
                )
            schema = kind_schema(spec["kind"])
            kinds[spec["kind"]] = (schema, jsonschema.Draft202012Validator(schema["settings"]))
        schema, settings_validator = kinds[spec["kind"]]
        blocks = [(f"experiments.{name}.settings", spec.get("settings", {}), spec.get("grid", {}))]
        for scale, override in (spec.get("scales") or {}).items():
            override = override or {}
            blocks.append(
                (
                    f"experiments.{name}.scales.{scale}.settings",
                    override.get("settings") or {},
                    override.get("grid") or {},
                )
            )
        for prefix, settings, grid in blocks:
            message = first_error(settings_validator, settings, prefix)
            if message:
                raise ConfigError(message)
            for axis in grid:
                if axis not in schema["axes"]:
                    raise ConfigError(
                        f"config error at '{prefix.rsplit('.', 1)[0]}.grid.{axis}': axis '{axis}' is not "
                        f"one of {', '.join(schema['axes'])} for kind '{spec['kind']}'"
                    )
