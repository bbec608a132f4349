"""The reproduction report: which of the papers' numbers and claims reproduce, at which scale.

For every artefact with numbers in config/papers/<paper>.yaml: each number the paper states next to ours
(mean ± s.e., n seeds / splits, scale, device), the difference in units of the paper's s.e.
(z_paper = (ours - paper) / se_paper) and of the combined s.e. (z_comb = (ours - paper) /
sqrt(se_paper² + se_ours²)); then every claim the paper makes in words with its verdict (holds / does not
hold / not run), computed by reprokit/report/claims.py from the results.

Results are read as they are now: the cells' metrics.json under results/<scale>/<experiment>/ (so cells
still running show as a partial experiment with the n that finished), else the tidy CSV
results/<scale>/<experiment>.csv; an experiment with neither is "not run". Nothing here knows Snakemake.

    python -m reprokit.report.reproduction --scale quick --results results --out figures/reproduction.md
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import glob
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..io import atomic_write_text
from . import claims as claim_checks
from . import papers
from .aggregate import device_of
from .stats import mean_se
from .style import RAN_STATUSES, SCALE_NOTE

PAPER_NAMES = {"partitioned": "Partitioned networks (Mlodozeniec et al., ICLR 2023)",
               "bali": "BALI (Kurle, Klushyn, Herbrich)"}


def norm(value):
    """A coordinate as comparable: lists (also written "[0.3, 0.7]") -> tuples of floats, "true" -> True,
    numbers -> float."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        if text.startswith("["):
            return norm(ast.literal_eval(text))
        try:
            return float(text)
        except ValueError:
            return text
    if isinstance(value, (list, tuple)):
        return tuple(norm(v) for v in value)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def finished_cells(experiment_dir: str | Path) -> pd.DataFrame:
    """One row per metrics.json under `experiment_dir`: coordinates, scale, status, metrics, the recorded
    info and the device it ran on. Empty when none has finished."""
    rows = []
    for path in sorted(Path(experiment_dir).rglob("metrics.json")):
        record = json.loads(path.read_text())
        missing = {"coords", "status", "metrics", "scale"} - set(record)
        if missing:
            raise ValueError(f"{path} lacks {sorted(missing)}: not a cell's metrics.json")
        rows.append({**(record.get("info") or {}), "scale": record["scale"], **record["coords"],
                     "status": record["status"], **record["metrics"], "device": device_of(record)})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Ours:
    """Our mean ± s.e. of one of the paper's numbers, over `n` seeds / splits that ran."""

    mean: float = math.nan
    se: float = math.nan
    n: int = 0
    device: str = ""
    note: str = ""  # "not run", "dataset unavailable", "OOM", "no run of ours (quoted)", "partial"...


class Context:
    """The results of one scale, read once per experiment, and the papers' row/column specs."""

    def __init__(self, results: str | Path, scale: str, docs: list[dict], expected: dict | None = None):
        self.results, self.scale, self.docs = Path(results), scale, docs
        self.expected = expected or {}
        self._tables: dict[str, pd.DataFrame | None] = {}
        self.arts = {name: spec for doc in docs for name, spec in doc["artefacts"].items()}

    def table(self, experiment: str) -> pd.DataFrame | None:
        """Every cell of the experiment found (ran or unavailable), None when nothing is there."""
        if experiment not in self._tables:
            folder = self.results / self.scale / experiment
            csv = self.results / self.scale / f"{experiment}.csv"
            df = finished_cells(folder) if folder.is_dir() else pd.DataFrame()
            if csv.exists():
                agg = pd.read_csv(csv)
                if df.empty:
                    df = agg
                elif "status" in agg:
                    df = pd.concat([df, agg[agg["status"] == "unavailable"]], ignore_index=True)
            self._tables[experiment] = None if df.empty else df
        return self._tables[experiment]

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
            return f"partial: {ran} of {expected} cells ran" + (f", {unavailable} unavailable" if unavailable else "")
        return text

    def cells(self, experiment: str, where: dict) -> pd.DataFrame:
        """The cells of `experiment` that ran with the coordinates `where`."""
        df = self.table(experiment)
        if df is None:
            return pd.DataFrame()
        df = df[df["status"].isin(RAN_STATUSES)]
        for key, value in where.items():
            if key not in df:
                return df.iloc[0:0]
            df = df[df[key].map(norm) == norm(value)]
        return df

    def ours(self, artefact: str, row: str, column: str) -> Ours:
        spec = self.arts[artefact]
        base, r, c = spec.get("ours") or {}, (spec.get("rows") or {}).get(row) or {}, \
            (spec.get("columns") or {}).get(column) or {}

        def pick(key, default=None):
            return r.get(key, c.get(key, base.get(key, default)))

        if "where" not in c and c.get("quoted"):
            return Ours(note="quoted; not run by us")
        experiment, metric, factor = pick("experiment"), pick("metric"), float(pick("factor", 1))
        if experiment is None or metric is None:
            return Ours(note="no run of ours")
        df = self.table(experiment)
        if df is None:
            return Ours(note="not run")
        where = {**(base.get("where") or {}), **(r.get("where") or {}), **(c.get("where") or {})}
        rows = self.cells(experiment, where)
        largest = pick("largest")
        if largest and len(rows):
            rows = rows[rows[largest] == rows[largest].max()]
        if rows.empty:
            unavailable = df[df["status"] == "unavailable"]
            for key, value in where.items():
                if key in unavailable:
                    unavailable = unavailable[unavailable[key].map(norm) == norm(value)]
            return Ours(note="dataset unavailable" if len(unavailable) else "not run at this scale")
        device = ", ".join(sorted(set(rows["device"].dropna().astype(str)))) if "device" in rows else ""
        if "oom" in set(rows["status"]):
            return Ours(n=len(rows), device=device, note="OOM")
        values = pd.to_numeric(rows[metric], errors="coerce") * factor if metric in rows else [math.nan] * len(rows)
        m, se, n = mean_se(values)
        note = "diverged (NaN)" if "diverged" in set(rows["status"]) else ""
        if self.state(experiment).startswith("partial"):
            note = ", ".join(filter(None, [note, "partial"]))
        return Ours(m, se, n, device or "not recorded", note)


def _f(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}" if x is not None and math.isfinite(x) else "—"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def artefact_section(ctx: Context, doc: dict, name: str) -> list[str]:
    spec = doc["artefacts"][name]
    rows, cols = spec.get("rows") or {}, spec.get("columns") or {}
    exps = sorted({v.get("experiment") for v in [*rows.values(), *cols.values(), spec.get("ours") or {}]} - {None})
    lines = [f"### {name}: {spec.get('caption', '')}", ""]
    if spec.get("unit"):
        lines.append(f"Unit: {spec['unit']}.")
    lines += ["Our experiments: " + ("; ".join(f"`{e}` {ctx.state(e)}" for e in exps) or "none") + ".", "",
              "| row | column | paper | ours | n | scale | device | z_paper | z_comb | note |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for num in papers.numbers(doc, name):
        ours = ctx.ours(name, num.row, num.column)
        row_label = (rows.get(num.row) or {}).get("label", num.row)
        col_label = (cols.get(num.column) or {}).get("label", num.column)
        paper_text = num.shown() + (" (quoted)" if num.quoted else "")
        if ours.n and math.isfinite(ours.mean):
            ours_text = f"{_f(ours.mean)} ± {_f(ours.se, 2)}" if ours.n > 1 else _f(ours.mean)
        else:
            ours_text = "OOM" if ours.note == "OOM" else ("NaN" if ours.n else "—")
        z_p = z_c = math.nan
        if num.mean is not None and ours.n and math.isfinite(ours.mean):
            z_p, z_c = papers.z_scores(ours.mean, ours.se if ours.n > 1 else math.nan, num.mean, num.se)
        note = "; ".join(filter(None, [ours.note, num.note, "n = 1: no s.e." if ours.n == 1 else ""]))
        lines.append("| " + " | ".join(_cell(v) for v in (
            row_label, col_label, paper_text, ours_text, ours.n, ctx.scale if ours.n else "—",
            ours.device or "—", _f(z_p, 3), _f(z_c, 3), note)) + " |")
    return lines + [""]


def render(ctx: Context, generated: str = "") -> str:
    scale_note = SCALE_NOTE.get(ctx.scale, ctx.scale)
    lines = [f"# Reproduction report: {ctx.scale} scale", "",
             f"Scale: **{scale_note}**. Results: `{ctx.results / ctx.scale}`. {generated}".rstrip(), "",
             "Paper numbers from config/papers/<paper>.yaml (\"(quoted)\": a literature value the paper only cites, "
             "not the paper's own run). Ours: mean ± s.e. over the n seeds / splits that ran. "
             "z_paper = (ours − paper) / s.e.(paper); z_comb = (ours − paper) / sqrt(s.e.(paper)² + s.e.(ours)²); "
             "— where the paper prints no s.e. or one of ours did not run. "
             + ("" if ctx.scale == "paper" else f"These are {ctx.scale}-scale numbers: not paper-scale numbers. "),
             ""]
    verdicts = []
    for doc in ctx.docs:
        for claim in papers.claims(doc):
            verdicts.append((claim, claim_checks.check(ctx, claim.check, claim.args)))
    counts = {s: sum(v.status == s for _, v in verdicts) for s in (claim_checks.HOLDS, claim_checks.FAILS,
                                                                   claim_checks.NOT_RUN)}
    lines += [f"Claims at {ctx.scale} scale: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ".", ""]
    for doc in ctx.docs:
        lines += [f"## {PAPER_NAMES.get(doc['paper'], doc['paper'])}: numbers", ""]
        for name in doc["artefacts"]:
            lines += artefact_section(ctx, doc, name)
    lines += ["## Claims", "",
              (f"Each verdict is computed from the results at {ctx.scale} scale (reprokit/report/claims.py; the check "
               "and its arguments are in config/papers/<paper>.yaml)."), "",
              "| paper | claim | artefact | the paper's words | verdict | measured | n | scale |",
              "|---|---|---|---|---|---|---|---|"]
    for claim, v in verdicts:
        lines.append("| " + " | ".join(_cell(x) for x in (
            claim.paper, claim.id, claim.artefact, claim.words, f"**{v.status}**", v.measured, v.n,
            ctx.scale)) + " |")
    return "\n".join(lines) + "\n"


def write_report(out: str | Path, results: str | Path, scale: str, paper_files: list[str | Path],
                 expected: dict | None = None, generated: str | None = None) -> str:
    """Render the report from what is under `results` now and write it atomically to `out`."""
    docs = [papers.load(p) for p in paper_files]
    if generated is None:
        generated = f"Generated {_dt.datetime.now().isoformat(timespec='seconds')}."
    text = render(Context(results, scale, docs, expected), generated)
    atomic_write_text(out, text)
    return text


def expected_cells(root: str | Path, scale: str) -> dict[str, int]:
    """Cells per experiment of the pipeline's config at `scale` (torch-free)."""
    from ..budget import load_pipeline_config
    from ..config import experiment

    cfg = load_pipeline_config(root, {"scale": scale})
    return {name: sum(1 for _ in experiment(cfg, name, scale).cells()) for name in cfg["experiments"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reprokit.report.reproduction", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="quick", choices=sorted(SCALE_NOTE))
    parser.add_argument("--results", default="results")
    parser.add_argument("--out", default="figures/reproduction.md")
    parser.add_argument("--papers", nargs="*", default=None, help="paper files (default: config/papers/*.yaml)")
    parser.add_argument("--root", default=".", help="repository root: its config gives the cells expected per "
                        "experiment (partial experiments); '' to skip")
    args = parser.parse_args(argv)
    files = args.papers or sorted(glob.glob(str(Path(args.root or ".") / "config" / "papers" / "*.yaml")))
    if not files:
        print("error: no paper files (config/papers/*.yaml)", file=sys.stderr)
        return 2
    expected = expected_cells(args.root, args.scale) if args.root else None
    write_report(args.out, args.results, args.scale, files, expected)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
