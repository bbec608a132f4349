"""The reproduction report: which of the papers' numbers and claims reproduce, at which scale.

For every artefact with numbers in config/papers/<paper>.yaml: each number the paper states next to ours
(mean ± s.e., n seeds / splits, scale, device), the difference in units of the paper's s.e.
(z_paper = (ours - paper) / se_paper) and of the combined s.e. (z_comb = (ours - paper) /
sqrt(se_paper² + se_ours²)); then every claim the paper makes in words with its verdict (holds / does not
hold / not run), computed by reprokit/report/claims.py from the results.

Results are read as they are now: the cells' metrics.json under results/<scale>/<experiment>/ (so cells
still running show as a partial experiment with the n that finished), else the tidy CSV
results/<scale>/<experiment>.csv; an experiment with neither is "not run". With an archive (the command line
reads figures/<scale>/cells/, reprokit/report/archive.py), archived cells that are not under results/ count
too, each checked against the config's settings for it now; the report says how many came from there and
names any it did not use. Nothing here knows Snakemake.

    python -m reprokit.report.reproduction --scale quick --results results --out figures/reproduction.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..io import atomic_write_text
from . import archive as cell_archive
from . import claims as claim_checks
from . import papers, provenance
from .aggregate import device_of, norm
from .stats import mean_se
from .style import GET_DATA, RAN_STATUSES, SCALE_NOTE, unavailable_notes

PAPER_NAMES = {"partitioned": "Partitioned networks (Mlodozeniec et al., ICLR 2023)",
               "bali": "BALI (Kurle, Klushyn, Herbrich)"}


def matches(column: pd.Series, value) -> pd.Series:
    """Which entries of `column` equal the coordinate `value` after `norm` (element by element, so a list-valued
    coordinate such as a partition ratio [0.3, 0.7] is one value, never an operand of the same length)."""
    target = norm(value)
    return column.map(lambda entry: norm(entry) == target).astype(bool)


def finished_cells(experiment_dir: str | Path) -> pd.DataFrame:
    """One row per metrics.json under `experiment_dir`: coordinates, scale, status, metrics, the recorded
    info and the device it ran on. Empty when none has finished."""
    rows = []
    for path in sorted(Path(experiment_dir).rglob("metrics.json")):
        record = json.loads(path.read_text())
        missing = {"coords", "status", "metrics", "scale"} - set(record)
        if missing:
            raise ValueError(f"{path} lacks {sorted(missing)}: not a cell's metrics.json")
        rows.append(_row(record))
    return pd.DataFrame(rows)


def _row(record: dict) -> dict:
    """A cell's metrics.json record (or its archived line) as one table row."""
    return {**(record.get("info") or {}), "scale": record["scale"], **record["coords"],
            "status": record["status"], **record["metrics"], "device": device_of(record)}


@dataclass(frozen=True)
class Ours:
    """Our mean ± s.e. of one of the paper's numbers, over `n` seeds / splits that ran."""

    mean: float = math.nan
    se: float = math.nan
    n: int = 0
    device: str = ""
    note: str = ""  # "not run", "dataset unavailable", "OOM", "no run of ours (quoted)", "partial"...
    same: bool = False  # every cell gave the same value (a setting): shown without a float-noise s.e.


class Context:
    """The results of one scale, read once per experiment, and the papers' row/column specs."""

    def __init__(self, results: str | Path, scale: str, docs: list[dict], expected: dict | None = None,
                 artefacts: dict | None = None, archive: tuple[str | Path, dict] | None = None):
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
            self._tables[experiment] = None if df.empty else df
        return self._tables[experiment]

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
        return [_row(line) for line in self._archived_lines(experiment)]

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
            folder, frames = self.results / self.scale / experiment, []
            for path in sorted(folder.rglob("metrics.json")) if folder.is_dir() else []:
                record = json.loads(path.read_text())
                curve = path.with_name("curve.csv")
                if record.get("status") in RAN_STATUSES and curve.exists() and curve.stat().st_size:
                    frames.append(pd.read_csv(curve).assign(**record["coords"]))
            csv = self.results / self.scale / f"{experiment}_curves.csv"
            if not frames and csv.exists() and csv.stat().st_size:
                try:
                    frames = [pd.read_csv(csv)]
                except pd.errors.EmptyDataError:  # no cell had a curve (older aggregations wrote no header)
                    frames = []
            else:  # the tidy aggregate holds every cell; without it, archived cells add their curves
                frames += [pd.DataFrame(line["curve"]).assign(**line["coords"])
                           for line in self._archived_lines(experiment)
                           if line.get("status") in RAN_STATUSES and line.get("curve")]
            self._curves[experiment] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        df = self._curves[experiment]
        for key, value in where.items():
            if key not in df:
                return df.iloc[0:0]
            df = df[matches(df[key], value)]
        return df

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
            return Ours(note="; ".join(unavailable_notes(unavailable)) or "dataset unavailable"
                        if len(unavailable) else "not run at this scale")
        device = ", ".join(sorted(set(rows["device"].dropna().astype(str)))) if "device" in rows else ""
        if "oom" in set(rows["status"]):
            return Ours(n=len(rows), device=device, note="OOM")
        values = pd.to_numeric(rows[metric], errors="coerce") * factor if metric in rows else [math.nan] * len(rows)
        m, se, n = mean_se(values)
        note = "diverged (NaN)" if "diverged" in set(rows["status"]) else ""
        if self.state(experiment).startswith("partial"):
            note = ", ".join(filter(None, [note, "partial"]))
        return Ours(m, se, n, device or "not recorded", note, same=len(set(map(float, values))) == 1)


def _f(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}" if x is not None and math.isfinite(x) else "—"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def artefact_section(ctx: Context, doc: dict, name: str, verdicts: list | None = None) -> list[str]:
    """One artefact: the paper's numbers next to ours, then its claims' verdicts. An artefact the paper file
    does not list (or lists without numbers) still gets its section: the pipeline's experiments for it and
    "the paper prints no number"."""
    spec = doc["artefacts"].get(name) or {}
    pipeline = ctx.artefacts.get(name) or {}
    rows, cols = spec.get("rows") or {}, spec.get("columns") or {}
    exps = sorted(({v.get("experiment") for v in [*rows.values(), *cols.values(), spec.get("ours") or {}]}
                   | set(pipeline.get("experiments") or [])) - {None})
    caption = spec.get("caption") or pipeline.get("caption") or ""
    lines = [f"### {name}" + (f": {caption}" if caption else ""), ""]
    if spec.get("unit"):
        lines.append(f"Unit: {spec['unit']}.")
    lines += ["Our experiments: " + ("; ".join(f"`{e}` {ctx.state(e)}" for e in exps) or "none (rendered from the "
                                     "library or a data file)") + ".", ""]
    missing = list(dict.fromkeys(n for e in exps for n in ctx.missing(e)))
    if missing:
        lines += ["Missing data (its cells are n/a; how to get it: Missing datasets, above): "
                  + "; ".join(missing) + ".", ""]
    nums = papers.numbers(doc, name) if name in doc["artefacts"] else []
    if spec.get("transcribed"):
        lines += [(f"Transcribed from the paper, not measured: {len(nums)} entries ({spec['transcribed']}), rendered "
                  f"as `figures/{name}.*` from config/papers/{doc['paper']}.yaml; nothing of ours to compare."), ""]
    elif not nums:
        lines += [("The paper prints no number for this artefact (a figure, or a table of settings rendered from "
                  "what ran)."), ""]
    else:
        lines += ["| row | column | paper | ours | n | scale | device | z_paper | z_comb | note |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        extra = spec.get("ours_columns") or {}
        for i, num in enumerate(nums):
            lines.append(_number_line(ctx, name, num, rows, cols))
            if extra and (i + 1 == len(nums) or nums[i + 1].row != num.row):  # the row's columns of ours only
                lines += [_number_line(ctx, name, papers.PaperNumber(name, num.row, str(col), None, None,
                                                                     "not in the paper", False, "ours only"),
                                       rows, extra) for col in extra]
        lines.append("")
    mine = [(c, v) for c, v in verdicts or [] if c.artefact == name]
    if mine:
        lines += ["Claims: " + "; ".join(f"`{c.id}` **{v.status}** (n {v.n})" for c, v in mine) + ".", ""]
        lines += [f"- `{c.id}` at {ctx.scale} scale: {why}" for c, v in mine
                  if (why := why_not_here(ctx.scale, c, v))]
        lines += [""] if lines[-1] != "" else []
    elif verdicts is not None:
        lines += ["The paper makes no claim in words about this artefact that we check.", ""]
    return lines


def _number_line(ctx: Context, name: str, num, rows: dict, cols: dict) -> str:
    ours = ctx.ours(name, num.row, num.column)
    row_label = (rows.get(num.row) or {}).get("label", num.row)
    col_label = (cols.get(num.column) or {}).get("label", num.column)
    paper_text = num.shown() + (" (quoted)" if num.quoted else "")
    if ours.n and math.isfinite(ours.mean):
        ours_text = (f"{_f(ours.mean)} (all {ours.n} the same)" if ours.same and ours.n > 1 else
                     f"{_f(ours.mean)} ± {_f(ours.se, 2)}" if ours.n > 1 else _f(ours.mean))
    else:
        ours_text = "OOM" if ours.note == "OOM" else ("NaN" if ours.n else "—")
    z_p = z_c = math.nan
    if num.mean is not None and ours.n and math.isfinite(ours.mean):
        z_p, z_c = papers.z_scores(ours.mean, ours.se if ours.n > 1 else math.nan, num.mean, num.se)
    note = "; ".join(filter(None, [ours.note, num.note, "n = 1: no s.e." if ours.n == 1 else ""]))
    return "| " + " | ".join(_cell(v) for v in (
        row_label, col_label, paper_text, ours_text, ours.n, ctx.scale if ours.n else "—",
        ours.device or "—", _f(z_p, 3), _f(z_c, 3), note)) + " |"


WITHIN_Z = 2.0  # the summary counts a number as reproduced when |z_paper| <= this


def z_rows(ctx: Context, doc: dict) -> list[dict]:
    """Every number of the paper's own runs (not quoted) with a printed s.e. that we also measured: artefact, row,
    column and z_paper (ours - paper in units of the paper's s.e.)."""
    out = []
    for num in papers.numbers(doc):
        if num.quoted or num.mean is None or not num.se:
            continue
        ours = ctx.ours(num.artefact, num.row, num.column)
        if ours.n and math.isfinite(ours.mean):
            z_p, _ = papers.z_scores(ours.mean, ours.se if ours.n > 1 else math.nan, num.mean, num.se)
            out.append({"paper": doc["paper"], "artefact": num.artefact, "row": num.row, "column": num.column,
                        "z_paper": z_p})
    return out


def summary_lines(ctx: Context, doc: dict, verdicts: list) -> list[str]:
    """The table a reader sees first: per artefact, the numbers within WITHIN_Z paper s.e. of the paper's
    (of those compared) and the claims per verdict."""
    zs = pd.DataFrame(z_rows(ctx, doc), columns=["artefact", "z_paper"])
    statuses = claim_checks.STATUSES
    lines = [f"| artefact | numbers within {WITHIN_Z:g} paper s.e. / compared | claims: "
             + " | ".join(statuses) + " |", "|---|---|" + "---|" * len(statuses)]
    totals = [0, 0] + [0] * len(statuses)
    for name in _artefact_order(ctx, doc):
        z = zs.loc[zs["artefact"] == name, "z_paper"]
        mine = [v.status for c, v in verdicts if c.artefact == name and c.paper == doc["paper"]]
        row = [int((z.abs() <= WITHIN_Z).sum()), len(z)] + [mine.count(s) for s in statuses]
        if row[1] == 0 and not mine:
            continue
        totals = [a + b for a, b in zip(totals, row)]
        lines.append(f"| {name} | {row[0]} / {row[1]} | " + " | ".join(map(str, row[2:])) + " |")
    lines.append(f"| **all** | **{totals[0]} / {totals[1]}** | " + " | ".join(f"**{t}**" for t in totals[2:]) + " |")
    return lines


def target_rows(ctx: Context) -> list[dict]:
    """Each target of the config's `artefacts.<name>.targets.<scale>` at this scale: met (every cell it names
    reaches the bound, or with `of: mean` their mean does), missed, or not run (no such cell ran), with the
    worst and the mean cell value."""
    rows = []
    for name in sorted(ctx.artefacts):
        for t in (ctx.artefacts[name].get("targets") or {}).get(ctx.scale) or []:
            for exp in t["experiments"]:
                cells = ctx.cells(exp, t.get("where") or {})
                vals = (pd.to_numeric(cells[t["metric"]], errors="coerce") if t["metric"] in cells
                        else pd.Series(dtype=float))
                lower, of = "at_least" in t, t.get("of", "every")
                bound = float(t["at_least"] if lower else t["at_most"])
                if vals.isna().all():  # also: no cell
                    status, worst, mean = "not run", math.nan, math.nan
                else:
                    worst = float(vals.min() if lower else vals.max())  # a NaN cell (diverged) misses the bound
                    mean = float(vals.mean())
                    value = mean if of == "mean" else worst
                    ok = bool(vals.notna().all()) and (value >= bound if lower else value <= bound)
                    status = "met" if ok else "missed"
                rows.append({"artefact": name, "experiment": exp, "where": t.get("where") or {}, "metric": t["metric"],
                             "bound": f"{'mean' if of == 'mean' else 'each'} {'>=' if lower else '<='} {bound:g}",
                             "worst": worst, "mean": mean,
                             "n": int(vals.notna().sum()), "status": status, "why": t["why"]})
    return rows


def target_lines(ctx: Context) -> list[str]:
    rows = target_rows(ctx)
    if not rows:
        return []
    met = sum(r["status"] == "met" for r in rows)
    lines = [f"### Targets at {ctx.scale} scale: {met} of {len(rows)} met", "",
             ("What each artefact's cells must reach to speak to its claims (config: `artefacts.<name>.targets."
              f"{ctx.scale}`): each cell named, or their mean, must reach the bound."), "",
             "| artefact | experiment | cells | metric | target | worst cell | mean | n | status | why |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        where = ", ".join(f"{k} = {v}" for k, v in r["where"].items()) or "all"
        lines.append("| " + " | ".join(_cell(str(x)) for x in (
            r["artefact"], r["experiment"], where, r["metric"], r["bound"], _f(r["worst"]), _f(r["mean"]), r["n"],
            f"**{r['status']}**", r["why"])) + " |")
    return lines + [""]


def z_figure(ctx: Context, out: str | Path) -> Path:
    """One dot per compared number (z_paper, clipped to +-10), one row per artefact, a panel per paper; written
    atomically to `out` (PNG). With no number compared (nothing ran, or no dataset) the figure says so: it is a
    declared output of the report rule, so it always exists."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .style import finish_figure
    df = pd.DataFrame([r for doc in ctx.docs for r in z_rows(ctx, doc)],
                      columns=["paper", "artefact", "row", "column", "z_paper"])
    papers_here = list(dict.fromkeys(df["paper"])) or [None]
    heights = [max(1.5, 0.35 * df.loc[df["paper"] == p, "artefact"].nunique() + 1) for p in papers_here]
    fig, axes = plt.subplots(len(papers_here), 1, figsize=(7, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, paper in zip(axes[:, 0], papers_here):
        if paper is None:
            ax.text(0.5, 0.5, f"no number of the papers was compared at {ctx.scale} scale (nothing with a printed "
                    "paper s.e. ran)", ha="center", va="center", fontsize=8, transform=ax.transAxes)
            ax.set_yticks([])
            ax.set_xlim(-10.5, 10.5)
            continue
        d = df[df["paper"] == paper]
        names = list(dict.fromkeys(d["artefact"]))
        y = d["artefact"].map({n: i for i, n in enumerate(names)})
        z = d["z_paper"].clip(-10, 10)
        ax.axvspan(-WITHIN_Z, WITHIN_Z, color="0.9", zorder=0)
        ax.scatter(z, y, s=14, c=["tab:blue" if abs(v) <= WITHIN_Z else "tab:red" for v in d["z_paper"]], zorder=2)
        ax.set_yticks(range(len(names)), names)
        ax.set_xlim(-10.5, 10.5)
        ax.set_title(f"{PAPER_NAMES.get(paper, paper)}: {int((d['z_paper'].abs() <= WITHIN_Z).sum())} of {len(d)} "
                     f"numbers within {WITHIN_Z:g} paper s.e.", fontsize=9)
        ax.invert_yaxis()
    axes[-1, 0].set_xlabel("z_paper = (ours - paper) / s.e.(paper), clipped to +-10")
    fig.suptitle(f"Reproduction at {ctx.scale} scale" + ("" if ctx.scale == "paper" else
                                                          f" ({ctx.scale}-scale numbers, not paper scale)"), fontsize=10)
    fig.tight_layout()
    finish_figure(fig, ctx.scale, f"{len(df)} numbers with a printed paper s.e.; results at {ctx.scale} scale "
                  f"({ctx.results / ctx.scale}, archived cells included where read)", None, out)
    return Path(out)


def why_not_here(scale: str, claim, verdict) -> str:
    """Why `claim` does not hold (or did not run) at `scale`: its `below_paper_scale` note below paper scale,
    what its `at_paper_scale` note found at paper scale (marked as a paper-scale finding, not a scale effect),
    or a flag when a claim fails with no recorded reason (a discrepancy to look into). Empty where it holds."""
    if verdict.status == claim_checks.HOLDS:
        return ""
    if scale != "paper" and claim.below_paper_scale:
        return claim.below_paper_scale
    if verdict.status == claim_checks.NOT_TESTABLE:
        return claim.below_paper_scale or f"Not testable at {scale} scale (the claim's testable_at)."
    if verdict.status == claim_checks.INCONCLUSIVE:
        return "The effect is inside the noise (see measured)." + (
            f" Looked into at paper scale: {claim.at_paper_scale}" if scale == "paper" and claim.at_paper_scale else "")
    if verdict.status == claim_checks.NOT_COMPARABLE:
        return "A baseline entry is far from the paper's own number for it at this scale (see measured)."
    if scale == "paper" and verdict.status == claim_checks.FAILS and claim.at_paper_scale:
        return f"Does not reproduce at paper scale; looked into: {claim.at_paper_scale}"
    if verdict.status == claim_checks.FAILS:
        key = "at_paper_scale" if scale == "paper" else "below_paper_scale"
        return f"UNEXPLAINED: no reason recorded (config/papers/<paper>.yaml `{key}`); look into it."
    return ""


def _artefact_order(ctx: Context, doc: dict) -> list[str]:
    """The paper file's artefacts, then the pipeline's artefacts of this paper the file does not list."""
    names = list(doc["artefacts"])
    return names + [a for a, spec in ctx.artefacts.items() if spec.get("paper") == doc["paper"] and a not in names]


def missing_data(ctx: Context) -> dict[str, list[str]]:
    """{note of unavailable cells: the experiments with such cells} over the experiments read so far and those of
    the pipeline's artefacts, e.g. {"dataset unavailable: mnist (...)": ["fig3a", "fig9_random"]}."""
    experiments = set(ctx._tables) | {e for spec in ctx.artefacts.values() for e in spec.get("experiments") or []}
    out: dict[str, list[str]] = {}
    for experiment in sorted(experiments):
        for note in ctx.missing(experiment):
            out.setdefault(note, []).append(experiment)
    return out


def render(ctx: Context, generated: str = "", z_image: str = "") -> str:
    """The report's markdown; `z_image`: the z-score figure's path relative to the report (linked if given)."""
    scale_note = SCALE_NOTE.get(ctx.scale, ctx.scale)
    lines = [f"# Reproduction report: {ctx.scale} scale", "",
             "",  # the results line: set once the body has read every experiment (archived cells counted)
             "Paper numbers from config/papers/<paper>.yaml (\"(quoted)\": a literature value the paper only cites, "
             "not the paper's own run). Ours: mean ± s.e. over the n seeds / splits that ran. "
             "z_paper = (ours − paper) / s.e.(paper); z_comb = (ours − paper) / sqrt(s.e.(paper)² + s.e.(ours)²); "
             "— where the paper prints no s.e. or one of ours did not run. "
             + ("" if ctx.scale == "paper" else f"These are {ctx.scale}-scale numbers: not paper-scale numbers. "),
             ""]
    verdicts = []
    for doc in ctx.docs:
        for claim in papers.claims(doc):
            verdicts.append((claim, claim_checks.verdict(ctx, claim)))
    counts = {s: sum(v.status == s for _, v in verdicts) for s in claim_checks.STATUSES}
    unexplained = sum(why_not_here(ctx.scale, c, v).startswith("UNEXPLAINED") for c, v in verdicts)
    lines += [f"Claims at {ctx.scale} scale: " + ", ".join(f"{n} {s}" for s, n in counts.items())
              + (f" ({counts[claim_checks.FAILS] - unexplained} of those that do not hold with the reason "
                 f"recorded below the claim, {unexplained} unexplained)" if counts[claim_checks.FAILS] else "")
              + ".", ""]
    lines += [f"Verdict rule: {claim_checks.NOISE_RULE}.", ""]
    for doc in ctx.docs:
        lines += [f"### Summary: {PAPER_NAMES.get(doc['paper'], doc['paper'])}", ""]
        lines += summary_lines(ctx, doc, verdicts) + [""]
    lines += target_lines(ctx)
    if z_image:
        lines += [f"![z_paper of every compared number]({z_image})", ""]
    insert_at = len(lines)  # the missing datasets go here, once the sections below have read every experiment
    for doc in ctx.docs:
        lines += [f"## {PAPER_NAMES.get(doc['paper'], doc['paper'])}: numbers", ""]
        for name in _artefact_order(ctx, doc):
            lines += artefact_section(ctx, doc, name, verdicts)
    missing = missing_data(ctx)
    if missing:
        lines[insert_at:insert_at] = (
            ["## Missing datasets", "",
             (f"These datasets were unavailable to this {ctx.scale}-scale build, so the cells that need them are n/a "
              f"(the artefacts build without them and say so). {GET_DATA}."), ""]
            + [f"- {note}: " + ", ".join(f"`{e}`" for e in exps) for note, exps in missing.items()] + [""])
    if ctx.stale:
        lines += ["## Archived cells not used", "",
                  (f"These cells of figures/{ctx.scale}/cells ran with settings the config no longer gives them "
                   "(re-run them: `benchmarks/run_cells.py` or snakemake; then `python -m reprokit.report.archive`):"),
                  ""]
        lines += [f"- `{e}`: {why}" for e, whys in sorted(ctx.stale.items()) for why in whys] + [""]
    lines += ["## Claims", "",
              (f"Each verdict is computed from the results at {ctx.scale} scale (reprokit/report/claims.py; the check "
               "and its arguments are in config/papers/<paper>.yaml)."), "",
              "| paper | claim | artefact | the paper's words | verdict | measured | n | scale | why not here |",
              "|---|---|---|---|---|---|---|---|---|"]
    for claim, v in verdicts:
        lines.append("| " + " | ".join(_cell(x) for x in (
            claim.paper, claim.id, claim.artefact, claim.words, f"**{v.status}**", v.measured, v.n,
            ctx.scale, why_not_here(ctx.scale, claim, v) or "—")) + " |")
    archived = sum(ctx.archived.values())
    where = f"`{ctx.results / ctx.scale}`" + (f" and {archived} archived cells that are not under it (figures/{ctx.scale}/cells)"
                                              if archived else "")
    lines[2] = f"Scale: **{scale_note}**. Results: {where}. {generated}".rstrip()
    return "\n".join(lines) + "\n"


def write_report(out: str | Path, results: str | Path, scale: str, paper_files: list[str | Path],
                 expected: dict | None = None, generated: str | None = None, artefacts: dict | None = None,
                 archive: tuple[str | Path, dict] | None = None) -> str:
    """Render the report from what is under `results` now and write it atomically to `out`. `artefacts`: the
    pipeline config's `artefacts:` (each gets a section, "not run" where nothing exists). `archive`:
    (repository root, pipeline config) to read the committed cells of figures/<scale>/cells too."""
    docs = [papers.load(p) for p in paper_files]
    if generated is None:
        commit, dirty = provenance.git_state()
        generated = (f"Generated {_dt.datetime.now().isoformat(timespec='seconds')} at commit {commit[:12]}"
                     + (" (config/ modified)" if dirty else "") + ".")
    ctx = Context(results, scale, docs, expected, artefacts, archive)
    figure = z_figure(ctx, z_figure_path(out))
    text = render(ctx, generated, figure.name)
    atomic_write_text(out, text)
    return text


def z_figure_path(out: str | Path) -> Path:
    """Where the report's z-score figure goes: beside the report, `<name>_z.png`."""
    return Path(out).with_name(Path(out).stem + "_z.png")


def pipeline_config(root: str | Path, scale: str, with_config: bool = False) -> tuple:
    """(cells per experiment, the `artefacts:` block[, the whole config]) of the pipeline's config at `scale`
    (torch-free)."""
    from ..config import experiment, load_pipeline_config

    cfg = load_pipeline_config(root, {"scale": scale})
    cells = {name: sum(1 for _ in experiment(cfg, name, scale).cells()) for name in cfg["experiments"]}
    return (cells, dict(cfg.get("artefacts") or {})) + ((cfg,) if with_config else ())


def expected_cells(root: str | Path, scale: str) -> dict[str, int]:
    """Cells per experiment of the pipeline's config at `scale` (torch-free)."""
    return pipeline_config(root, scale)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reprokit.report.reproduction", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="quick", choices=sorted(SCALE_NOTE))
    parser.add_argument("--results", default="results")
    parser.add_argument("--out", default="figures/reproduction.md")
    parser.add_argument("--papers", nargs="*", default=None, help="paper files (default: config/papers/*.yaml)")
    parser.add_argument("--root", default=".", help="repository root: its config gives the cells expected per "
                        "experiment (partial experiments); '' to skip")
    parser.add_argument("--no-archive", action="store_true", help="read results/ only, not the committed cells "
                        "of <root>/figures/<scale>/cells")
    parser.add_argument("--expected", default=None, help="JSON {experiment: cells in its grid} (the pipeline's "
                        "report rule hands it over; default: from --root's config)")
    parser.add_argument("--artefacts", default=None, help="JSON: the config's artefacts: (with --expected)")
    args = parser.parse_args(argv)
    files = args.papers or sorted(glob.glob(str(Path(args.root or ".") / "config" / "papers" / "*.yaml")))
    if not files:
        print("error: no paper files (config/papers/*.yaml)", file=sys.stderr)
        return 2
    if args.expected is not None:
        expected, artefacts, cfg = json.loads(args.expected), json.loads(args.artefacts or "null"), None
    else:
        expected, artefacts, cfg = pipeline_config(args.root, args.scale, True) if args.root else (None, None, None)
    archive = None if args.no_archive or cfg is None else (args.root, cfg)
    write_report(args.out, args.results, args.scale, files, expected, artefacts=artefacts, archive=archive)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
