"""The one reader of a scale's results for the verdict engine: every cell that ran, from results/, the tidy CSVs or
the committed archive, and our mean +- s.e. of each of the papers' numbers.

`Context` reads what the report reads (results/<scale>/ and figures/<scale>/cells/); `InputsContext` reads what
an artefact's notebook was handed (its experiments' tidy CSVs), so a figure or table states the same verdicts as
the report from the same claim code. Torch-free and free of plotting, so figures can import it.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...config import grid_of, load_pipeline_config, unavailable_cells
from ...data.mirrors import is_available
from ...plan import kind as plan_kind
from ..store import archive as cell_archive
from ..store import cells
from ..store.cells import RAN_STATUSES, matches, metric_values, norm, read_csv, unavailable_notes
from ..store.stats import mean_se
from . import noise, papers


def finished_cells(experiment_dir: str | Path) -> pd.DataFrame:
    """One row per metrics.json under `experiment_dir` (`cells.row`: coordinates, scale, status, metrics, the
    recorded info and the device it ran on). Empty when none has finished."""
    return pd.DataFrame([cells.row(record) for _, record in cells.records(experiment_dir)])


@dataclass(frozen=True)
class Ours:
    """Our mean ± s.e. of one of the paper's numbers, over `n` seeds / splits that ran."""

    mean: float = math.nan
    se: float = math.nan
    n: int = 0
    device: str = ""
    note: str = ""  # "not run", "dataset unavailable", "OOM", "no run of ours (quoted)", "partial"...
    same: bool = False  # every cell gave the same value (a setting): shown without a float-noise s.e.


@functools.lru_cache(maxsize=1)
def _working_config() -> dict:
    """The pipeline config of the working directory, read once per process (a notebook's or test's Context has
    no archive config; the grid axes come from here)."""
    return load_pipeline_config(".")


def _safe_working_config() -> dict | None:
    try:
        return _working_config()
    except (FileNotFoundError, ValueError, KeyError):
        return None


@functools.cache
def _working_axes(experiment: str, scale: str) -> tuple[str, ...]:
    """The grid axes of `experiment` at `scale` in the working directory's config; () when it has none."""
    try:
        return tuple(grid_of(_working_config(), experiment, scale).axes)
    except (KeyError, FileNotFoundError, ValueError):
        return ()


class Context:
    """The results of one scale, read once per experiment, and the papers' row/column specs."""

    def __init__(
        self,
        results: str | Path,
        scale: str,
        docs: list[dict],
        expected: dict | None = None,
        artefacts: dict | None = None,
        archive: tuple[str | Path, dict] | None = None,
    ):
        self.results, self.scale, self.docs = Path(results), scale, docs
        self.expected = expected or {}
        # (repository root, pipeline config): read figures/<scale>/cells/<experiment>.jsonl too
        self.archive = archive
        self.archived: dict[str, int] = {}  # experiment -> cells taken from the archive
        self.stale: dict[str, list[str]] = {}  # experiment -> archived cells not used, and why
        # the pipeline config's `artefacts:` (name -> {paper, experiments, ...}): every one gets a section
        self.artefacts = artefacts or {}
        self._tables: dict[str, pd.DataFrame | None] = {}
        self._curves: dict[str, pd.DataFrame] = {}
        self._archive_lines: dict[str, list[dict]] = {}
        self.arts = {name: spec for doc in docs for name, spec in doc["artefacts"].items()}
        self._paper = {(n.artefact, n.row, n.column): n for doc in docs for n in papers.numbers(doc)}

    def axes(self, experiment: str) -> list[str]:
        """The grid axes of `experiment` at this scale (the pipeline config's: the archive's, else the one in the
        working directory); [] when no config is at hand or it lacks the experiment."""
        if not self.archive:
            return list(_working_axes(experiment, self.scale))
        cache = self.__dict__.setdefault("_axes", {})
        if experiment not in cache:
            try:
                cache[experiment] = list(grid_of(self.archive[1], experiment, self.scale).axes)
            except (KeyError, ValueError):
                cache[experiment] = []
        return cache[experiment]

    def kinds(self, experiments: list[str]) -> list[str]:
        """The families (experiment kinds) of `experiments` in the pipeline config at hand; [] where unknown."""
        config = self.archive[1] if self.archive else _safe_working_config()
        specs = (config or {}).get("experiments") or {}
        return sorted({specs[e]["kind"] for e in experiments if e in specs and specs[e].get("kind")})

    def spread(self, experiments: list[str], metric: str):
        """The measured spread of one cell's `metric` (report.verdicts.noise): over `experiments`' own cells with
        >= 3 seeds; else their family's (the experiments of the same kind, figures/<scale>/seed_spread.json); an
        accuracy's never below its test set's binomial s.e.; None when no seed spread was measured."""
        tables = {e: self.table(e) for e in experiments}
        axes = {e: self.axes(e) for e in experiments}
        if " - " in metric:  # a per-cell difference of two metrics (claims.compare)
            return noise.difference_spread(tables, axes, metric, self.scale, self.kinds(experiments))
        found = noise.own_spread(tables, axes, metric) or noise.family(self.scale, self.kinds(experiments), metric)
        if found is not None and "acc" in metric:
            frames = [df for df in tables.values() if df is not None and metric in df]
            cells = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
            if len(cells) and "n_test" in cells:
                p = float(pd.to_numeric(cells[metric], errors="coerce").median())
                n_test = float(pd.to_numeric(cells["n_test"], errors="coerce").median())
                found = noise.binomial_floor(found, p, n_test)
        return found

    def _grid_config(self, experiment: str) -> dict | None:
        """The config whose grid the claims' coverage is read against: the archive's, else the working directory's
        where this report was told the experiment's cells (a pipeline run); None for results read on their own."""
        if self.archive:
            return self.archive[1]
        return _safe_working_config() if experiment in self.expected else None

    def _grid_cells(self, experiment: str) -> list:
        cache = self.__dict__.setdefault("_grids", {})
        if experiment not in cache:
            config = self._grid_config(experiment)
            try:
                cache[experiment] = list(grid_of(config, experiment, self.scale).cells()) if config else []
            except (KeyError, ValueError):
                cache[experiment] = []
        return cache[experiment]

    def grid(self, experiment: str) -> list[dict]:
        """The coordinates of every cell of `experiment` in this scale's grid (the pipeline config's)."""
        return [cell.coord_dict for cell in self._grid_cells(experiment)]

    def cell_values(self, experiment: str) -> list[tuple[dict, dict]]:
        """(coordinates, settings with the coordinates applied and the quantities its kind derives from them, e.g.
        `partition_updates`) of every cell of `experiment` in this scale's grid."""
        out = []
        for cell in self._grid_cells(experiment):
            try:
                derived = plan_kind(cell.kind).derived(cell)
            except (KeyError, ValueError):  # a kind without a plan, or settings it rejects: the settings alone
                derived = {}
            out.append((cell.coord_dict, {**cell.settings_with_coords(), **derived}))
        return out

    def machine(self, experiments: list[str], metric: str):
        """The machine spread of `metric` measured on these experiments' own cells (reported, never a band)."""
        return noise.own_machine(self.scale, experiments, metric)

    def at_scale(self, scale: str) -> Context:
        """The same results, papers and archive read at another scale (read once): what a target relative to the
        paper-scale cells compares with."""
        if scale == self.scale:
            return self
        others = self.__dict__.setdefault("_other_scales", {})
        if scale not in others:
            others[scale] = Context(self.results, scale, self.docs, self.expected, self.artefacts, self.archive)
        return others[scale]

    def paper_number(self, artefact: str, row: str, column: str):
        """The paper's number at (artefact, row, column) (a papers.PaperNumber), None where it prints none."""
        return self._paper.get((artefact, str(row), str(column)))

    def table(self, experiment: str) -> pd.DataFrame | None:
        """Every cell of the experiment found (ran or unavailable), None when nothing is there."""
        if experiment not in self._tables:
            folder = self.results / self.scale / experiment
            csv = self.results / self.scale / f"{experiment}.csv"
            df = finished_cells(folder) if folder.is_dir() else pd.DataFrame()
            if df.empty and csv.exists():  # the tidy aggregate holds every cell: no archive needed
                df = pd.read_csv(csv)
            else:
                extra = self._archived(experiment)
                if extra:
                    df = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
                if csv.exists() and "status" in (agg := pd.read_csv(csv)):
                    df = pd.concat([df, agg[agg["status"] == "unavailable"]], ignore_index=True)
                elif self.archive is not None and experiment in self.archive[1].get("experiments", {}):
                    df = pd.concat([df, self._unavailable_rows(experiment, df)], ignore_index=True)
            self._tables[experiment] = None if df.empty else df
        return self._tables[experiment]

    def _unavailable_rows(self, experiment: str, found: pd.DataFrame) -> pd.DataFrame:
        """n/a rows (status 'unavailable') for the cells of `experiment` that are neither under results/ nor
        archived and whose datasets this machine lacks, as the aggregate step writes them in a full build."""
        config = self.archive[1]
        grid = grid_of(config, experiment, self.scale)
        ran = {
            f"{self.scale}/{experiment}/{line['cell'].split('/', 2)[2]}" for line in self._archived_lines(experiment)
        }
        ran |= (
            {
                str(p.parent.relative_to(self.results))
                for p in (self.results / self.scale / experiment).rglob("metrics.json")
            }
            if (self.results / self.scale / experiment).is_dir()
            else set()
        )
        missing = unavailable(config, experiment, self.scale, ran)
        reason = "not in the data mirrors or the cache of the machine that built this report"
        rows = [
            {
                "scale": self.scale,
                **cell.coord_dict,
                "status": "unavailable",
                "note": "dataset unavailable: " + ", ".join(f"{d} ({reason})" for d in missing[cell.rel_dir]),
            }
            for cell in grid.cells()
            if cell.rel_dir in missing
        ]
        return pd.DataFrame(rows)

    def _archived_lines(self, experiment: str) -> list[dict]:
        """The archived lines of `experiment`'s cells that are not under results/ and still match the config
        (read once; counted in `archived`, the others named in `stale`)."""
        if self.archive is None:
            return []
        if experiment not in self._archive_lines:
            root, config = self.archive
            lines = cell_archive.load(cell_archive.path_of(root, self.scale, experiment))
            fresh = []
            if lines:
                lines = {c: line for c, line in lines.items() if not (self.results / c / "metrics.json").exists()}
                fresh, stale = cell_archive.split(lines, cell_archive.current_settings(config, self.scale, experiment))
                if stale:
                    self.stale[experiment] = stale
                self.archived[experiment] = len(fresh)
            self._archive_lines[experiment] = fresh
        return self._archive_lines[experiment]

    def _archived(self, experiment: str) -> list[dict]:
        """Rows of the archived cells of `experiment` that are not under results/ and still match the config."""
        return [cells.row(line) for line in self._archived_lines(experiment)]

    def state(self, experiment: str) -> str:
        """'complete (12 cells)', 'partial: 3 of 12 cells', 'not run'."""
        df = self.table(experiment)
        ran = 0 if df is None else int(df["status"].isin(RAN_STATUSES).sum())
        unavailable = 0 if df is None else int((df["status"] == "unavailable").sum())
        expected = self.expected.get(experiment)
        if df is None or (ran == 0 and unavailable == 0):
            return "not run"
        text = f"{ran} cell(s) ran" + (f", {unavailable} unavailable (dataset missing)" if unavailable else "")
        if expected is not None and ran + unavailable < expected:
            text = f"partial: {ran} of {expected} cells ran" + (f", {unavailable} unavailable" if unavailable else "")
        if self.archived.get(experiment):
            text += f" ({self.archived[experiment]} from the archive figures/{self.scale}/cells)"
        return text

    def missing(self, experiment: str) -> list[str]:
        """The notes of the experiment's cells whose dataset is unavailable ("dataset unavailable: mnist (...)"),
        each once, as the aggregation wrote them; [] when none is."""
        df = self.table(experiment)
        return [] if df is None else unavailable_notes(df)

    def cells(self, experiment: str, where: dict) -> pd.DataFrame:
        """The cells of `experiment` that ran with the coordinates `where`."""
        df = self.table(experiment)
        if df is None:
            return pd.DataFrame()
        df = df[df["status"].isin(RAN_STATUSES)]
        for key, value in where.items():
            if key not in df:
                return df.iloc[0:0]
            df = df[matches(df[key], value)]
        return df

    def curves(self, experiment: str, where: dict) -> pd.DataFrame:
        """The learning curves (one row per cell and evaluation) of the cells of `experiment` with the
        coordinates `where`: each finished cell's curve.csv beside its metrics.json and each archived cell's
        curve (as `table` reads its metrics), else the tidy results/<scale>/<experiment>_curves.csv. Empty
        when there is none."""
        if experiment not in self._curves:
            self._curves[experiment] = self._load_curves(experiment)
        df = self._curves[experiment]
        for key, value in where.items():
            if key not in df:
                return df.iloc[0:0]
            df = df[matches(df[key], value)]
        return df

    def _load_curves(self, experiment: str) -> pd.DataFrame:
        """Every curve of `experiment` found (see `curves`)."""
        folder, frames = self.results / self.scale / experiment, []
        for cell_dir, record in cells.records(folder):
            curve = cells.curve(cell_dir) if record["status"] in RAN_STATUSES else None
            if curve is not None:
                frames.append(curve.assign(**record["coords"]))
        csv = self.results / self.scale / f"{experiment}_curves.csv"
        if not frames and csv.exists() and csv.stat().st_size:
            try:
                frames = [pd.read_csv(csv)]
            except pd.errors.EmptyDataError:  # no cell had a curve (older aggregations wrote no header)
                frames = []
        else:  # the tidy aggregate holds every cell; without it, archived cells add their curves
            frames += [
                pd.DataFrame(line["curve"]).assign(**line["coords"])
                for line in self._archived_lines(experiment)
                if line.get("status") in RAN_STATUSES and line.get("curve")
            ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _entry(self, artefact: str, row: str, column: str):
        """Where one table entry of ours comes from: (experiment, metric, factor, where, largest), or an Ours
        saying why there is none."""
        spec = self.arts[artefact]
        columns = {**(spec.get("columns") or {}), **(spec.get("ours_columns") or {})}
        base, r, c = spec.get("ours") or {}, (spec.get("rows") or {}).get(row) or {}, columns.get(column) or {}

        def pick(key, default=None):
            return r.get(key, c.get(key, base.get(key, default)))

        if "where" not in c and c.get("quoted"):
            return Ours(note="quoted; not run by us")
        experiment, metric, factor = pick("experiment"), pick("metric"), float(pick("factor", 1))
        if experiment is None or metric is None:
            return Ours(note="no run of ours")
        where = {**(base.get("where") or {}), **(r.get("where") or {}), **(c.get("where") or {})}
        return experiment, metric, factor, where, pick("largest")

    def _entry_rows(self, experiment: str, where: dict, largest) -> pd.DataFrame:
        rows = self.cells(experiment, where)
        if largest and len(rows):
            rows = rows[rows[largest] == rows[largest].max()]
        return rows

    def paired(self, artefact: str, a: tuple[str, str], b: tuple[str, str]) -> pd.Series:
        """Entry a minus entry b ((row, column) each) per seed / split both ran, in the table's unit; empty when
        either entry has no cells or they share no seed."""
        ea, eb = self._entry(artefact, *a), self._entry(artefact, *b)
        if isinstance(ea, Ours) or isinstance(eb, Ours):
            return pd.Series(dtype=float)
        values = []
        for experiment, metric, factor, where, largest in (ea, eb):
            rows = self._entry_rows(experiment, where, largest)
            if rows.empty or "seed" not in rows or metric not in rows:
                return pd.Series(dtype=float)
            values.append(pd.to_numeric(rows[metric], errors="coerce").groupby(rows["seed"]).mean() * factor)
        return (values[0] - values[1]).dropna()

    def ours(self, artefact: str, row: str, column: str) -> Ours:
        found = self._entry(artefact, row, column)
        if isinstance(found, Ours):
            return found
        experiment, metric, factor, where, largest = found
        df = self.table(experiment)
        if df is None:
            return Ours(note="not run")
        rows = self._entry_rows(experiment, where, largest)
        if rows.empty:
            unavailable = df[df["status"] == "unavailable"]
            for key, value in where.items():
                if key in unavailable:
                    unavailable = unavailable[matches(unavailable[key], value)]
            return Ours(
                note="; ".join(unavailable_notes(unavailable)) or "dataset unavailable"
                if len(unavailable)
                else "not run at this scale"
            )
        device = ", ".join(sorted(set(rows["device"].dropna().astype(str)))) if "device" in rows else ""
        if "oom" in set(rows["status"]):
            return Ours(n=len(rows), device=device, note="OOM")
        values = pd.to_numeric(rows[metric], errors="coerce") * factor if metric in rows else [math.nan] * len(rows)
        m, se, n = mean_se(values)
        note = "diverged (NaN)" if "diverged" in set(rows["status"]) else ""
        if self.state(experiment).startswith("partial"):
            note = ", ".join(filter(None, [note, "partial"]))
        return Ours(m, se, n, device or "not recorded", note, same=len(set(map(float, values))) == 1)


def unavailable(config: dict, experiment: str, scale: str, found: set[str]) -> dict[str, list[str]]:
    """{cell rel_dir: [datasets]} of the cells not found whose datasets are on neither the mirrors nor the cache of
    this machine (as the pipeline decides before any job): they are n/a rows, as in a full build, not missing."""
    data = config.get("data") or {}
    grid = grid_of(config, experiment, scale)
    missing = unavailable_cells(grid, lambda d: is_available(d, data.get("mirrors") or [], data.get("cache_dir")))
    return {rel: ds for rel, ds in missing.items() if f"{scale}/{experiment}/{rel}" not in found}


class InputsContext(Context):
    """The results an artefact's notebook was handed: {experiment: tidy CSV, "<experiment>_curves": curves CSV}
    (the artefact rule's inputs, or build_partial's). The same claim code then gives a figure or table the verdicts
    the report gives, from the same cells."""

    def __init__(self, inputs: dict, scale: str, docs: list[dict]):
        super().__init__(".", scale, docs)
        self.inputs = {str(k): str(v) for k, v in dict(inputs).items()}

    def table(self, experiment: str) -> pd.DataFrame | None:
        if experiment not in self._tables:
            path = self.inputs.get(experiment)
            df = read_csv(path) if path and Path(path).exists() else pd.DataFrame()
            self._tables[experiment] = None if df.empty else df
        return self._tables[experiment]

    def _grid_config(self, experiment: str) -> dict | None:
        return _safe_working_config()  # a notebook runs in the repository: its config's grid

    def at_scale(self, scale: str) -> Context:
        """The grid at another scale from the same config, with none of its cells (a notebook is handed one
        scale's): what a `requires: paper` claim compares its cells' settings with, as the report does."""
        if scale == self.scale:
            return self
        others = self.__dict__.setdefault("_other_scales", {})
        if scale not in others:
            others[scale] = InputsContext({}, scale, self.docs)
        return others[scale]

    def _load_curves(self, experiment: str) -> pd.DataFrame:
        path = self.inputs.get(f"{experiment}_curves")
        return read_csv(path) if path and Path(path).exists() else pd.DataFrame()


# A number in a claim's reason, taken from the cells when the report is built: {{experiment metric axis=value ...}}
# (values as in cell paths; `axis=a,b` picks either). Reasons keep their reasoning in words, never a typed number
# that a re-run would make stale.
_NUMBER = re.compile(r"\{\{\s*([\w.]+)\s+([\w.]+(?:-[\w.]+)?)((?:\s+[\w.]+(?:=[^\s}]+)?)*)\s*\}\}")
# {{... max}}: the largest of the cells' values; {{... each}}: every cell's value, in seed order
_REDUCERS = {"max": ("best", max), "min": ("lowest", min), "each": ("each", None)}


def _fmt(x: float, like: float | None = None) -> str:
    """A reason's number: 3 decimals, 4 below 0.5, two significant digits below 1e-3 (a training NLL of 5e-05
    is not 0.0000); `like`: format as that value would be (a mean's s.e. as the mean)."""
    ref = abs(x if like is None else like)
    if 0 < ref < 1e-3:
        return f"{x:.2g}"
    return f"{x:.{4 if ref < 0.5 else 3}f}"


def _picked(rows: pd.DataFrame, where: dict[str, list[str]]) -> pd.DataFrame:
    """The rows whose coordinates take one of the listed values on every axis of `where` (none when an axis is
    missing)."""
    for key, values in where.items():
        rows = (
            rows[rows[key].map(lambda v, vs=values: any(norm(v) == norm(x) for x in vs))]
            if key in rows
            else rows.iloc[0:0]
        )
    return rows


# {{experiment peak.test_ll ...}}: each cell's curve reduced to one number (its largest value, or the step of it)
_CURVE_STATISTICS = {
    "peak": lambda curve, col: curve[col].max(),
    "peak_step": lambda curve, col: curve["step"][curve[col].idxmax()],
}


def _curve_values(ctx: Context, experiment: str, curves: pd.DataFrame, statistic: str, column: str) -> pd.Series:
    """One value per cell (in seed order) of `statistic` over its learning curve's `column`; empty when no cell
    has a curve with that column."""
    if curves.empty or column not in curves or "step" not in curves:
        return pd.Series(dtype=float)
    axes = [a for a in ctx.axes(experiment) if a in curves]
    order = ["seed"] if "seed" in axes else []
    curves = curves.assign(**{column: pd.to_numeric(curves[column], errors="coerce")}).dropna(subset=[column])
    groups = (
        curves.sort_values(order + ["step"], kind="stable").groupby(axes, sort=False, dropna=False)
        if axes
        else [((), curves)]
    )
    return pd.Series([float(_CURVE_STATISTICS[statistic](g.reset_index(drop=True), column)) for _, g in groups])


def fill_numbers(ctx: Context, text: str) -> str:
    """`text` with each {{experiment metric axis=value ...}} replaced by our mean ± s.e. of `metric` over the cells
    of `experiment` with those coordinates and how many ("1.119 ± 0.006 (5 cells)"), or "n/a (no cell ran)"; a
    trailing `max` / `min` gives the largest / smallest cell instead ("0.9060 (best of 4 cells)"), `each` every
    cell's value in seed order ("0.068, 0.059 (2 cells)"; whole counts without decimals: "29, 27 (2 cells)"). The
    metric may be a per-cell difference of two, `test_nll-train_nll`, or a statistic of each cell's learning curve,
    `peak.<column>` (the curve's largest value) or `peak_step.<column>` (the step where it is largest; the first
    such step on a tie), from the cells' curves (`Context.curves`)."""

    def one(match: re.Match) -> str:
        experiment, metric, where_text = match.groups()
        where, reducer = {}, None
        for part in where_text.split():
            key, eq, value = part.partition("=")
            if not eq:
                if key not in _REDUCERS:
                    raise ValueError(f"{match.group(0)}: '{key}' is neither axis=value nor one of {sorted(_REDUCERS)}")
                reducer = key
                continue
            where[key] = value.split(",")
        statistic, dot, column = metric.partition(".")
        if dot and statistic in _CURVE_STATISTICS:
            v = _curve_values(ctx, experiment, _picked(ctx.curves(experiment, {}), where), statistic, column)
        else:
            rows = _picked(ctx.cells(experiment, {}), where)
            if "seed" in rows:
                rows = rows.sort_values("seed", kind="stable")
            v = metric_values(rows, metric)
        v = pd.Series(dtype=float) if v is None else v.dropna()
        if v.empty:
            return "n/a (no cell ran)"
        n_cells = f"{len(v)} cell{'s' if len(v) > 1 else ''}"
        counts = bool((v == v.round()).all() and v.abs().max() > 1)  # counts (inputs kept): no decimals
        show = (lambda x: f"{int(x)}") if counts else _fmt
        if reducer == "each":
            return ", ".join(show(x) for x in v) + f" ({n_cells})"
        if reducer:
            word, pick = _REDUCERS[reducer]
            return f"{show(float(pick(v)))} ({word} of {n_cells})"
        m, se, n = mean_se(v)
        if statistic == "peak_step":  # a step: whole numbers
            return (f"{m:.0f} ± {se:.0f}" if n > 1 else f"{m:.0f}") + f" ({n_cells})"
        return (f"{_fmt(m)} ± {_fmt(se, like=m)}" if n > 1 else _fmt(m)) + f" ({n_cells})"

    return _NUMBER.sub(one, text)
