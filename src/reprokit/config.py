"""Experiment grids: scale resolution, cell enumeration, and cell paths.

The pipeline config (config/config.yaml, validated by workflow/schemas/config.schema.yaml) describes
every experiment as a grid of axes (method x dataset x proportions x seed ...) with settings, and
per-scale overrides (`paper`, `quick`, `test`). A *cell* is one point of a grid; its output folder
carries its coordinates as `axis~value` path segments so that asking for a cell's file re-runs exactly
that cell.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import plan
from ._jsonschema import first_error
from .errors import ConfigError
from .runtime_settings import RuntimeSettings, run_schema

SCALES = ("paper", "quick", "test")


def deep_merge(base: dict, override: dict) -> dict:
    """Recursive merge; copies the dicts along merged paths only (config values are never mutated,
    and a deep copy per cell made building the paper-scale DAG several seconds slower)."""
    out = dict(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def format_value(value: Any) -> str:
    """Path-safe text for a grid value: lists join with '-', floats use the shortest form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "-".join(format_value(v) for v in value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:g}"
    text = str(value)
    if "/" in text or "~" in text or text == "":
        raise ConfigError(f"grid value {value!r} cannot be used in a path (no '/', '~' or empty)")
    return text


def expand_axis(name: str, values: Any) -> list:
    """An axis is a list of values or {range: [first, last]} (inclusive integers)."""
    if isinstance(values, dict):
        if set(values) != {"range"} or len(values["range"]) != 2:
            raise ConfigError(f"grid axis '{name}': expected a list or {{range: [first, last]}}, got {values!r}")
        lo, hi = values["range"]
        return list(range(int(lo), int(hi) + 1))
    if not isinstance(values, list) or not values:
        raise ConfigError(f"grid axis '{name}': expected a non-empty list, got {values!r}")
    return values


@dataclass(frozen=True)
class Cell:
    """One grid point of one experiment at one scale."""

    scale: str
    experiment: str
    coords: tuple  # ((axis, value), ...) in grid order
    settings: dict = field(hash=False, compare=False)
    kind: str = ""
    datasets: tuple = ()

    @property
    def coord_dict(self) -> dict:
        return dict(self.coords)

    def settings_with_coords(self) -> dict:
        """The cell's settings with its grid coordinates applied. A dotted axis such as `bali.alpha` sets
        that key of a nested block (a sweep over one method's hyperparameter)."""
        nested: dict = {}
        for axis, value in self.coords:
            *blocks, key = axis.split(".")
            target = nested
            for block in blocks:
                target = target.setdefault(block, {})
            target[key] = value
        return deep_merge(self.settings, nested)

    @property
    def rel_dir(self) -> str:
        parts = [f"{axis}~{format_value(value)}" for axis, value in self.coords]
        return "/".join([self.scale, self.experiment, *parts])

    def to_dict(self) -> dict:
        return {
            "scale": self.scale,
            "experiment": self.experiment,
            "kind": self.kind,
            "coords": self.coord_dict,
            "settings": self.settings,
            "datasets": list(self.datasets),
        }


class ExperimentGrid:
    """Resolved view of one experiment at one scale."""

    def __init__(self, name: str, spec: dict, scale: str):
        if scale not in SCALES:
            raise ConfigError(f"scale '{scale}' is not one of {', '.join(SCALES)}")
        self.name = name
        self.scale = scale
        self.kind = spec["kind"]
        override = (spec.get("scales") or {}).get(scale, {}) or {}
        # applied in this order by layered_settings: the experiment's, then its scale's (see there)
        self._layers = (spec.get("settings", {}) or {}, override.get("settings", {}) or {})
        self.settings = deep_merge(*self._layers)  # every key of both, for the checks below
        grid = dict(spec["grid"])
        for axis, values in (override.get("grid") or {}).items():
            if axis not in grid:
                raise ConfigError(
                    f"experiments.{name}.scales.{scale}.grid.{axis}: no such axis (axes: {', '.join(grid)})"
                )
            grid[axis] = values
        self.axes = {axis: expand_axis(f"{name}.{axis}", values) for axis, values in grid.items()}
        self.exclude = []  # [{axis: {formatted values}}]: grid points this scale leaves out
        for i, entry in enumerate(override.get("exclude") or []):
            unknown = [a for a in entry if a not in self.axes]
            if unknown:
                raise ConfigError(
                    f"experiments.{name}.scales.{scale}.exclude[{i}]: no such axis {unknown} "
                    f"(axes: {', '.join(self.axes)})"
                )
            self.exclude.append(
                {a: {format_value(v) for v in self._alternatives(a, vals)} for a, vals in entry.items()}
            )
        for key, block in self.settings.items():  # a non-empty per_<axis> block on no axis would be ignored
            axis = key.removeprefix("per_")
            if axis != key and block and axis not in self.axes:
                raise ConfigError(
                    f"experiments.{name} (scale {scale}): settings.{key} overrides by '{axis}', "
                    f"which is not an axis of this grid (axes: {', '.join(self.axes)}); "
                    f"make it an axis or set the values directly"
                )
        self._by_text = {axis: {format_value(v): v for v in values} for axis, values in self.axes.items()}
        self._cells: list | None = None
        self._index: dict | None = None
        self.artefacts = list(spec.get("artefacts", []))

    def layered_settings(self, coords: dict) -> dict:
        """Settings for one cell. A `per_<axis>` block overrides settings for one value of that axis; the
        layers apply in this order, each overriding the ones before it:

        1. the experiment's `settings`;
        2. its `per_<axis>` blocks (in grid axis order);
        3. the scale's `settings` (`scales.<scale>.settings`);
        4. the scale's own `per_<axis>` blocks.

        So a value a scale sets explicitly wins over the experiment's, per-axis or not (a scale that shortens
        training sets `n_steps` once), and only the scale's own per-axis blocks refine it further."""
        settings: dict = {}
        for layer in self._layers:
            settings = deep_merge(settings, {k: v for k, v in layer.items() if not k.startswith("per_")})
            for axis, value in coords.items():
                block = layer.get(f"per_{axis}", {}) or {}
                settings = deep_merge(settings, block.get(format_value(value), {}) or {})
        return settings

    def datasets_for(self, coords: dict, settings: dict) -> tuple:
        if "dataset" in coords:
            return (str(coords["dataset"]),)
        return tuple(settings.get("datasets", [settings["dataset"]] if "dataset" in settings else []))

    def make_cell(self, coords: dict) -> Cell:
        settings = self.layered_settings(coords)
        return Cell(
            scale=self.scale,
            experiment=self.name,
            coords=tuple((axis, coords[axis]) for axis in self.axes),
            settings=settings,
            kind=self.kind,
            datasets=self.datasets_for(coords, settings),
        )

    def cells(self) -> Iterator[Cell]:
        if self._cells is None:  # built once: the DAG asks for them several times
            names = list(self.axes)
            self._cells = [
                self.make_cell(dict(zip(names, values)))
                for values in itertools.product(*(self.axes[a] for a in names))
                if not self.excluded(dict(zip(names, values)))
            ]
        return iter(self._cells)

    def _alternatives(self, axis: str, vals) -> list:
        """An exclude entry's value(s) for `axis`: a list means alternatives, unless the axis's own values are
        lists (proportions), where a list is one value and a list of lists the alternatives."""
        list_valued = any(isinstance(v, list) for v in self.axes[axis])
        if isinstance(vals, list) and (not list_valued or (vals and isinstance(vals[0], list))):
            return vals
        return [vals]

    def excluded(self, coords: dict) -> bool:
        """Whether this scale's `exclude` leaves the grid point out."""
        return any(all(format_value(coords[a]) in vals for a, vals in entry.items()) for entry in self.exclude)

    def parse(self, coord_path: str) -> Cell:
        """Map 'axis~value/...' back to the grid's typed values; unknown values are named."""
        parts = [p for p in coord_path.strip("/").split("/") if p]
        names = list(self.axes)
        if len(parts) != len(names):
            raise ConfigError(
                f"cell path '{coord_path}' of experiment '{self.name}' needs the axes "
                f"{'/'.join(a + '~...' for a in names)}"
            )
        coords = {}
        for axis, part in zip(names, parts):
            got_axis, _, text = part.partition("~")
            if got_axis != axis:
                raise ConfigError(f"cell path '{coord_path}': expected axis '{axis}', got '{got_axis}'")
            matches = [self._by_text[axis][text]] if text in self._by_text[axis] else []
            if not matches:
                valid = ", ".join(format_value(v) for v in self.axes[axis])
                raise ConfigError(
                    f"cell path '{coord_path}': {axis}={text!r} is not in the {self.scale}-scale grid of "
                    f"'{self.name}' (valid: {valid})"
                )
            coords[axis] = matches[0]
        if self.excluded(coords):
            raise ConfigError(
                f"cell path '{coord_path}' is left out of the {self.scale}-scale grid of '{self.name}' by its `exclude`"
            )
        if self._index is None:  # the grid's own Cell objects: what a plan cached for them (settings) is reused
            self._index = {tuple(format_value(v) for _, v in c.coords): c for c in self.cells()}
        return self._index[tuple(format_value(coords[a]) for a in names)]


def unavailable_cells(grid: ExperimentGrid, is_available) -> dict[str, list[str]]:
    """{cell.rel_dir: [missing datasets]} for cells whose data `is_available(name)` denies.

    Decided before any job runs; such cells are not scheduled and appear as n/a in tables.
    """
    out = {}
    for cell in grid.cells():
        missing = [d for d in cell.datasets if not is_available(d)]
        if missing:
            out[cell.rel_dir] = missing
    return out


def grid_of(config: dict, name: str, scale: str) -> ExperimentGrid:
    experiments = config.get("experiments", {})
    if name not in experiments:
        raise ConfigError(f"no experiment '{name}' in the config (have: {', '.join(sorted(experiments))})")
    return ExperimentGrid(name, experiments[name], scale)


def pipeline_files(root: str | Path = ".") -> list[Path]:
    """The pipeline's config files, in merge order: config/config.yaml, then config/experiments/*.yaml by name."""
    root = Path(root)
    return [root / "config" / "config.yaml", *sorted((root / "config" / "experiments").glob("*.yaml"))]


def schema_path(root: str | Path = ".") -> Path:
    """The top-level JSON schema (workflow/schemas/config.schema.yaml; each kind's is generated: reprokit.plan.kind_schema)."""
    return Path(root) / "workflow" / "schemas" / "config.schema.yaml"


def load_pipeline_config(root: str | Path = ".", overrides: dict | None = None) -> dict:
    """The pipeline's config as every consumer sees it: :func:`pipeline_files` merged in order, then
    `overrides` (Snakemake's `--config`, a test's changes), typed and validated. The one loader of the
    project: the Snakefile, the budget, the report, the benchmarks and the tests call it."""
    return load_config(pipeline_files(root), schema_path(root), overrides)


def load_config(paths, schema_path: str | Path, overrides: dict | None = None) -> dict:
    """Load and merge YAML files (later files override earlier), apply overrides, type command-line
    strings by the schemas, validate. :func:`load_pipeline_config` is this over the pipeline's files;
    call this directly only for a config assembled from other files (a test's own experiment file)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where installed: ~7x faster per DAG build
    config: dict = {}
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        try:
            with open(path) as f:
                config = deep_merge(config, yaml.load(f, Loader=loader) or {})
        except FileNotFoundError:
            raise ConfigError(f"config file {path} not found (run from the project's root folder)") from None
    config = expand_targets(coerce_config(deep_merge(config, overrides or {}), schema_path))
    validate_config(config, schema_path)

    return {**config, "run": RuntimeSettings.from_dict(config.get("run")).to_dict()}  # every key, defaults filled


def expand_targets(config: dict) -> dict:
    """The config with each artefact target that has a `for_each` replaced by the targets it stands for.

    `for_each: {axis: [values], ...}` is one target per combination of the values (the first axis outermost,
    each in the order listed), the rest of the entry shared; a generated target's `where` is the entry's own
    plus the combination, and it names those of the entry's `experiments` whose grid (the experiment's
    `grid`, before any scale narrows it) has the combination's value on every axis. A combination that no
    listed experiment's grid has is skipped, so `for_each: {method: [a, b], dataset: [x, y]}` over two
    experiments that split the datasets gives one target per method and dataset, each naming its experiment;
    a value that no generated target uses is an error (a misspelt value would otherwise drop its targets)."""
    artefacts = config.get("artefacts") or {}
    if not any(
        isinstance(t, dict) and "for_each" in t
        for art in artefacts.values()
        for ts in (art.get("targets") or {}).values()
        for t in ts or []
    ):
        return config  # (the schema check that follows names a malformed entry)
    grids = {
        name: {
            axis: {format_value(v) for v in expand_axis(f"{name}.{axis}", values)}
            for axis, values in (spec.get("grid") or {}).items()
        }
        for name, spec in (config.get("experiments") or {}).items()
        if isinstance(spec, dict)
    }
    out = {}
    for name, art in artefacts.items():
        if "targets" in art:
            art = {
                **art,
                "targets": {
                    scale: [
                        row
                        for i, target in enumerate(targets or [])
                        for row in _target_rows(target, grids, f"artefacts.{name}.targets.{scale}[{i}].for_each")
                    ]
                    for scale, targets in art["targets"].items()
                },
            }
        out[name] = art
    return {**config, "artefacts": out}


def _target_rows(target: dict, grids: dict, where: str) -> list[dict]:
    """One target of the config, or the targets its `for_each` stands for (:func:`expand_targets`)."""
    if not isinstance(target, dict) or "for_each" not in target:
        return [target]
    axes = target["for_each"]
    if not isinstance(axes, dict) or not axes or not all(isinstance(v, list) and v for v in axes.values()):
        raise ConfigError(f"config error at '{where}': expected {{axis: [values], ...}}, got {axes!r}")
    fixed = target.get("where") or {}
    if set(axes) & set(fixed):
        raise ConfigError(f"config error at '{where}': {sorted(set(axes) & set(fixed))} also in the target's `where`")
    rest = {k: v for k, v in target.items() if k not in ("for_each", "experiments", "where")}
    rows, used = [], set()
    for values in itertools.product(*axes.values()):
        combo = dict(zip(axes, values))
        keys = {(axis, format_value(v)) for axis, v in combo.items()}
        exps = [e for e in target.get("experiments") or [] if all(v in grids.get(e, {}).get(a, ()) for a, v in keys)]
        if exps:
            used |= keys
            rows.append({"experiments": exps, "where": {**fixed, **combo}, **rest})
    unused = [f"{a}={format_value(v)}" for a, vs in axes.items() for v in vs if (a, format_value(v)) not in used]
    if unused:
        raise ConfigError(
            f"config error at '{where}': no experiment of {target.get('experiments')} has {', '.join(unused)} in its grid"
        )
    return rows


_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


def _resolve(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not ref:
        return schema if isinstance(schema, dict) else {}
    if not ref.startswith("#"):
        return {}
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        node = node.get(part, {})
    return _resolve(node, root)


def _scalar_from_text(text: str, types: set[str]):
    """The value a YAML file would give for `text`, when the schema allows that type; else `text` unchanged."""
    low = text.strip().lower()
    if "boolean" in types and low in _TRUE | _FALSE:
        return low in _TRUE
    if "null" in types and low in ("", "~", "null", "none"):
        return None
    if "integer" in types and re.fullmatch(r"[+-]?\d+", text.strip()):
        return int(text)
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            pass
    if "array" in types or "object" in types:
        import yaml

        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            return text
        if isinstance(parsed, list) and "array" in types or isinstance(parsed, dict) and "object" in types:
            return parsed
    return text


def coerce_strings(value, schema: dict, root: dict | None = None):
    """`value` with every string leaf that its JSON schema types otherwise (boolean, integer, number,
    null, array, object) read as YAML would read it; everything else as it is.

    Snakemake parses a nested `--config key='{a: true, b: 100}'` with YAML's BaseLoader, so its leaves
    arrive as strings ('true', '100'); the schema says what they were meant to be."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    for key in ("oneOf", "anyOf"):
        if key in schema:  # the first branch under which the value validates
            import jsonschema

            for branch in schema[key]:
                candidate = coerce_strings(value, branch, root)
                if jsonschema.Draft202012Validator({**_resolve(branch, root), "$defs": root.get("$defs", {})}).is_valid(
                    candidate
                ):
                    return candidate
            return value
    types = schema.get("type", [])
    types = {types} if isinstance(types, str) else set(types)
    if "enum" in schema and isinstance(value, str) and value not in schema["enum"]:
        for option in schema["enum"]:
            if not isinstance(option, str) and str(option).lower() == value.strip().lower():
                return option
        return value
    if isinstance(value, str) and types and "string" not in types:
        value = _scalar_from_text(value, types)
    if isinstance(value, list):
        items = schema.get("items")
        return [coerce_strings(v, items, root) if isinstance(items, dict) else v for v in value]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            out[k] = coerce_strings(v, sub, root) if sub else v
        return out
    return value


def _coerce_grid(grid: dict, settings_schema: dict) -> dict:
    """Grid axes given on the command line: each string value read as its setting's type where the kind's
    settings schema types it, else as YAML would read it ('0' -> 0, 'partitioned' stays a string)."""
    import yaml

    out = {}
    props = settings_schema.get("properties", {})
    for axis, values in grid.items():
        if isinstance(values, list):
            sub = props.get(axis)
            fixed = []
            for v in values:
                if sub is not None:
                    fixed.append(coerce_strings(v, sub, settings_schema))
                elif isinstance(v, str):
                    try:
                        fixed.append(yaml.safe_load(v) if v.strip() else v)
                    except yaml.YAMLError:
                        fixed.append(v)
                else:
                    fixed.append(v)
            values = fixed
        out[axis] = values
    return out


def coerce_config(config: dict, schema_path: str | Path) -> dict:
    """The config with command-line strings typed by the schemas: the top-level schema, then each
    experiment's settings and grid by its kind's schema (see :func:`coerce_strings`). Values that are
    already typed (from the YAML files) are returned as they are."""
    schema = _top_schema(schema_path)
    config = coerce_strings(config, schema)
    experiments = dict(config.get("experiments") or {})
    for name, spec in experiments.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str):
            continue
        if spec["kind"] not in plan.KINDS:
            continue  # validate_config names the unknown kind
        settings_schema = plan.kind_schema(spec["kind"])["settings"]
        spec = dict(spec)
        if isinstance(spec.get("settings"), dict):
            spec["settings"] = coerce_strings(spec["settings"], settings_schema)
        if isinstance(spec.get("grid"), dict):
            spec["grid"] = _coerce_grid(spec["grid"], settings_schema)
        scales = {}
        for scale, override in (spec.get("scales") or {}).items():
            override = dict(override or {})
            if isinstance(override.get("settings"), dict):
                override["settings"] = coerce_strings(override["settings"], settings_schema)
            if isinstance(override.get("grid"), dict):
                override["grid"] = _coerce_grid(override["grid"], settings_schema)
            scales[scale] = override
        if scales:
            spec["scales"] = scales
        experiments[name] = spec
    if experiments:
        config = {**config, "experiments": experiments}
    return config


_YAML_CACHE: dict[str, dict] = {}


def _load_yaml(path: str | Path) -> dict:
    import yaml

    key = str(path)
    if key not in _YAML_CACHE:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(path) as f:
            _YAML_CACHE[key] = yaml.load(f, Loader=loader)
    return _YAML_CACHE[key]


def _top_schema(schema_path: str | Path) -> dict:
    """The top-level schema with its generated parts filled in: `run` from reprokit.runtime_settings.RuntimeSettings."""

    schema = dict(_load_yaml(schema_path))
    schema["properties"] = {**schema.get("properties", {}), "run": run_schema()}
    return schema


def validate_config(config: dict, schema_path: str | Path) -> None:
    """Validate against the JSON schema; raise one ConfigError naming the bad key or value.

    The top-level schema (workflow/schemas/config.schema.yaml) fixes the structure; each experiment's
    settings blocks and grid axes are checked against its kind's schema, generated from the kind's settings
    model (`reprokit.plan.kind_schema`), which also checks every merged cell before the DAG runs.
    """
    import jsonschema

    schema_path = Path(schema_path)
    schema = _top_schema(schema_path)
    message = first_error(jsonschema.Draft202012Validator(schema), config, "")
    if message:
        raise ConfigError(message)
    plan.check_experiment_specs(config)
    for name, art in config.get("artefacts", {}).items():
        for exp in art["experiments"]:
            if exp not in config.get("experiments", {}):
                raise ConfigError(f"config error at 'artefacts.{name}.experiments': no experiment '{exp}'")
        for scale_name, targets in (art.get("targets") or {}).items():
            for i, target in enumerate(targets):
                for exp in target["experiments"]:
                    if exp not in art["experiments"]:
                        raise ConfigError(
                            f"config error at 'artefacts.{name}.targets.{scale_name}[{i}].experiments': "
                            f"'{exp}' is not one of the artefact's experiments "
                            f"({', '.join(art['experiments'])})"
                        )
    scale = config.get("scale", "quick")
    for name in config.get("experiments", {}):
        ExperimentGrid(name, config["experiments"][name], scale)  # axis names, ranges
