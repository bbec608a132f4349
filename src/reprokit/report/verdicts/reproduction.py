"""The reproduction report: which of the papers' numbers and claims reproduce, at which scale.

For every artefact with numbers in config/papers/<paper>.yaml: each number the paper states next to ours
(mean ± s.e., n seeds / splits, scale, device), the difference in units of the paper's s.e.
(z_paper = (ours - paper) / se_paper) and of the combined s.e. (z_comb = (ours - paper) /
sqrt(se_paper² + se_ours²)); then every claim the paper makes in words with its verdict (holds / does not
hold / not run), computed by reprokit/report/verdicts/claims.py from the results.

Results are read as they are now: the cells' metrics.json under results/<scale>/<experiment>/ (so cells
still running show as a partial experiment with the n that finished), else the tidy CSV
results/<scale>/<experiment>.csv; an experiment with neither is "not run". With an archive (the command line
reads figures/<scale>/cells/, reprokit/report/store/archive.py), archived cells that are not under results/ count
too, each checked against the config's settings for it now; the report says how many came from there and
names any it did not use. Nothing here knows Snakemake, and nothing here draws: this module makes the report's
text (`render`); reprokit.report.render.reproduction writes it with its z-score figure, and the command line is

    python -m reprokit.report.commands.reproduction --scale quick --results results --out figures/reproduction.md
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pandas as pd

from ...config import grid_of, load_pipeline_config
from ..store.cells import GET_DATA, SCALE_NOTE
from . import claims as claim_checks
from . import decide, papers
from .results import Context, Ours, fill_numbers, finished_cells, matches  # noqa: F401 (the report's results reader, re-exported)

PAPER_NAMES = {
    "partitioned": "Partitioned networks (Mlodozeniec et al., ICLR 2023)",
    "bali": "BALI (Kurle, Klushyn, Herbrich)",
}
SHORT_NAMES = {"partitioned": "Partitioned networks", "bali": "BALI"}
GLANCE_TAG = "glance"  # the report's machine-readable summary line per paper: <!-- glance: {...} -->


def _words(claim) -> str:
    """The claim's words, marked when it is re-checked under another reading (a variant, not counted), followed by
    how the check reads them (its `reading`), where the paper file states it."""
    words = f"[variant, not counted: {claim.variant}] {claim.words}" if claim.variant else claim.words
    return f"{words} (read as: {claim.reading})" if claim.reading else words


def _f(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}" if x is not None and math.isfinite(x) else "—"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def artefact_section(ctx: Context, doc: dict, name: str, verdicts: list | None = None) -> list[str]:
    """One artefact: the paper's numbers next to ours, the notes of its config entry (`artefacts.<name>.notes`:
    how it was built, the choices and what its entries mean, which its table's footnotes point to), then its
    claims' verdicts. An artefact the paper file does not list (or lists without numbers) still gets its section:
    the pipeline's experiments for it and "the paper prints no number"."""
    spec = doc["artefacts"].get(name) or {}
    pipeline = ctx.artefacts.get(name) or {}
    rows, cols = spec.get("rows") or {}, spec.get("columns") or {}
    exps = sorted(
        (
            {v.get("experiment") for v in [*rows.values(), *cols.values(), spec.get("ours") or {}]}
            | set(pipeline.get("experiments") or [])
        )
        - {None}
    )
    caption = spec.get("caption") or pipeline.get("caption") or ""
    lines = [f"### {name}" + (f": {caption}" if caption else ""), ""]
    if spec.get("unit"):
        lines.append(f"Unit: {spec['unit']}.")
    lines += [
        "Our experiments: "
        + ("; ".join(f"`{e}` {ctx.state(e)}" for e in exps) or "none (rendered from the library or a data file)")
        + ".",
        "",
    ]
    missing = list(dict.fromkeys(n for e in exps for n in ctx.missing(e)))
    if missing:
        lines += [
            "Missing data (its cells are n/a; how to get it: Missing datasets, above): " + "; ".join(missing) + ".",
            "",
        ]
    nums = papers.numbers(doc, name) if name in doc["artefacts"] else []
    if spec.get("transcribed"):
        lines += [
            (
                f"Transcribed from the paper, not measured: {len(nums)} entries ({spec['transcribed']}), rendered "
                f"as `figures/{name}.*` from config/papers/{doc['paper']}.yaml; nothing of ours to compare."
            ),
            "",
        ]
    elif not nums:
        lines += [
            ("The paper prints no number for this artefact (a figure, or a table of settings rendered from what ran)."),
            "",
        ]
    else:
        lines += [
            "| row | column | paper | ours | n | scale | device | z_paper | z_comb | note |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        extra = spec.get("ours_columns") or {}
        for i, num in enumerate(nums):
            lines.append(_number_line(ctx, name, num, rows, cols))
            if extra and (i + 1 == len(nums) or nums[i + 1].row != num.row):  # the row's columns of ours only
                lines += [
                    _number_line(
                        ctx,
                        name,
                        papers.PaperNumber(name, num.row, str(col), None, None, "not in the paper", False, "ours only"),
                        rows,
                        extra,
                    )
                    for col in extra
                ]
        lines.append("")
    notes = pipeline.get("notes") or []
    if notes:  # the explanation the artefact's own caption and footnotes leave to the report (they point here)
        lines += [f"Notes on `figures/{name}.*` (the artefact points here):", ""]
        lines += [f"- {fill_numbers(ctx, ' '.join(str(note).split()))}" for note in notes] + [""]
    mine = [(c, v) for c, v in verdicts or [] if c.artefact == name]
    if mine:
        lines += [
            "Claims: "
            + "; ".join(
                f"`{c.id}`{' (about a baseline)' if c.about == 'baseline' else ''} **{v.label}** (n {v.n})"
                + (f", on a subset ({v.subset})" if v.subset else "")
                for c, v in mine
            )
            + ".",
            "",
        ]
        lines += [f"- `{c.id}` at {ctx.scale} scale: {why}" for c, v in mine if (why := why_not_here(ctx, c, v))]
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
        ours_text = (
            f"{_f(ours.mean)} (all {ours.n} the same)"
            if ours.same and ours.n > 1
            else f"{_f(ours.mean)} ± {_f(ours.se, 2)}"
            if ours.n > 1
            else _f(ours.mean)
        )
    else:
        ours_text = "OOM" if ours.note == "OOM" else ("NaN" if ours.n else "—")
    z_p = z_c = math.nan
    if num.mean is not None and ours.n and math.isfinite(ours.mean):
        z_p, z_c = papers.z_scores(ours.mean, ours.se if ours.n > 1 else math.nan, num.mean, num.se)
    note = "; ".join(filter(None, [ours.note, num.note, "n = 1: no s.e." if ours.n == 1 else ""]))
    return (
        "| "
        + " | ".join(
            _cell(v)
            for v in (
                row_label,
                col_label,
                paper_text,
                ours_text,
                ours.n,
                ctx.scale if ours.n else "—",
                ours.device or "—",
                _f(z_p, 3),
                _f(z_c, 3),
                note,
            )
        )
        + " |"
    )


WITHIN_Z = 2.0  # the summary counts a number as reproduced when |z_paper| <= this


def lower_is_better(doc: dict, artefact: str) -> bool:
    """Whether a smaller number is better in `artefact`'s table: its caption says "lower is better", or its unit
    is an error, a calibration error, a negative log-likelihood or a time."""
    spec = doc["artefacts"].get(artefact) or {}
    text = f"{spec.get('caption', '')} {spec.get('unit', '')}".lower()
    if "lower is better" in text:
        return True
    if "higher is better" in text:
        return False
    return any(w in text for w in ("rmse", "error", "ece", "nll", "time"))


def z_rows(ctx: Context, doc: dict, with_missing: bool = False) -> list[dict]:
    """Every number of the paper's own runs (not quoted) with a printed s.e. that we also measured: artefact, row,
    column, z_paper (ours - paper in units of the paper's s.e.) and z_better (the same, signed so that positive is
    better than the paper). `with_missing`: also those we did not measure (z NaN, `why` says why)."""
    out = []
    for num in papers.numbers(doc):
        if num.quoted or num.mean is None or not num.se:
            continue
        ours = ctx.ours(num.artefact, num.row, num.column)
        spec = doc["artefacts"].get(num.artefact) or {}
        row = {
            "paper": doc["paper"],
            "artefact": num.artefact,
            "row": num.row,
            "column": num.column,
            "label": (
                f"{((spec.get('rows') or {}).get(num.row) or {}).get('label', num.row)}, "
                f"{((spec.get('columns') or {}).get(num.column) or {}).get('label', num.column)}"
            ),
            "metric": (spec.get("unit") or num.artefact).split(" (")[0],
            "role": papers.role(doc, num),
        }
        if ours.n and math.isfinite(ours.mean):
            z_p, _ = papers.z_scores(ours.mean, ours.se if ours.n > 1 else math.nan, num.mean, num.se)
            sign = -1.0 if lower_is_better(doc, num.artefact) else 1.0
            out.append({**row, "z_paper": z_p, "z_better": sign * z_p, "n": ours.n, "why": ""})
        elif with_missing:
            out.append({**row, "z_paper": math.nan, "z_better": math.nan, "n": 0, "why": ours.note or "not run"})
    return out


ROLE_WORDS = {"method": "the paper's method", "baseline": "its baselines"}


def method_name(doc: dict) -> str:
    """The paper's own method as the paper writes it (the file's `method_name`)."""
    return str(doc.get("method_name") or SHORT_NAMES.get(doc["paper"], doc["paper"]))


def summary_lines(ctx: Context, doc: dict, verdicts: list) -> list[str]:
    """The table a reader sees first: per artefact, the numbers within WITHIN_Z paper s.e. of the paper's (of those
    compared), the paper's method's apart from its baselines', and the claims per verdict, those about the method
    apart from those about baselines."""
    zs = pd.DataFrame(z_rows(ctx, doc), columns=["artefact", "z_paper", "role"])
    statuses = decide.STATUSES
    name = method_name(doc)
    lines = [
        f"| artefact | {name}: numbers within {WITHIN_Z:g} paper s.e. / compared | baselines: numbers within / "
        f"compared | claims about {name}: " + " | ".join(statuses) + " | claims about baselines |",
        "|---|---|---|" + "---|" * len(statuses) + "---|",
    ]
    totals = [0, 0, 0, 0] + [0] * len(statuses)
    base_total: dict[str, int] = {}
    for art in _artefact_order(ctx, doc):
        z = zs[zs["artefact"] == art]
        zm, zb = z.loc[z["role"] == "method", "z_paper"], z.loc[z["role"] == "baseline", "z_paper"]
        own = [(c, v) for c, v in verdicts if c.artefact == art and c.paper == doc["paper"] and not c.variant]
        mine = [v.status for c, v in own if c.about == "method"]
        base = [v.label for c, v in own if c.about == "baseline"]
        row = [int((zm.abs() <= WITHIN_Z).sum()), len(zm), int((zb.abs() <= WITHIN_Z).sum()), len(zb)]
        row += [mine.count(st) for st in statuses]
        if row[1] == 0 and row[3] == 0 and not own:
            continue
        totals = [a + b for a, b in zip(totals, row)]
        for label in base:
            base_total[label] = base_total.get(label, 0) + 1
        lines.append(
            f"| {art} | {row[0]} / {row[1]} | {row[2]} / {row[3]} | "
            + " | ".join(map(str, row[4:]))
            + f" | {_tally(base) or '—'} |"
        )
    lines.append(
        f"| **all** | **{totals[0]} / {totals[1]}** | **{totals[2]} / {totals[3]}** | "
        + " | ".join(f"**{t}**" for t in totals[4:])
        + f" | **{_tally([k for k, n in base_total.items() for _ in range(n)]) or '—'}** |"
    )
    return lines


def _tally(labels: list[str]) -> str:
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in counts.items())


def _values(ctx: Context, experiment: str, t: dict) -> pd.Series:
    cells = ctx.cells(experiment, t.get("where") or {})
    return pd.to_numeric(cells[t["metric"]], errors="coerce") if t["metric"] in cells else pd.Series(dtype=float)


def _bound(ctx: Context, experiment: str, t: dict) -> tuple[float, bool, str]:
    """(bound, whether it is a lower bound, why). A bound relative to the paper scale (`at_most_paper_times`,
    `at_least_paper_times`) is that factor times the mean of the same cells at paper scale (archived or under
    results/), NaN when none ran there; its why says which mean."""
    lower = "at_least" in t or "at_least_paper_times" in t
    factor = t.get("at_least_paper_times" if lower else "at_most_paper_times")
    if factor is None:
        return float(t["at_least"] if lower else t["at_most"]), lower, t["why"]
    ref = _values(ctx.at_scale("paper"), experiment, t).dropna()
    side = "at least" if lower else "within"
    if ref.empty:
        return math.nan, lower, f"{side} {factor:g}x the paper-scale mean: no paper-scale cell yet"
    mean = float(ref.mean())
    why = f"{side} {factor:g}x the paper-scale mean {mean:.4g} ({len(ref)} cells)"
    return factor * mean, lower, why + (f"; {t['why']}" if t.get("why") else "")


def target_rows(ctx: Context) -> list[dict]:
    """Each target of the config's `artefacts.<name>.targets.<scale>` at this scale: met (every cell it names
    reaches the bound, or with `of: mean` their mean does), missed, or not run (no such cell ran, or the paper-scale
    cells a relative bound needs did not), with the worst and the mean cell value."""
    rows = []
    for name in sorted(ctx.artefacts):
        for t in (ctx.artefacts[name].get("targets") or {}).get(ctx.scale) or []:
            for exp in t["experiments"]:
                vals = _values(ctx, exp, t)
                of = t.get("of", "every")
                bound, lower, why = _bound(ctx, exp, t)
                if vals.isna().all() or math.isnan(bound):  # also: no cell
                    status, worst, mean = "not run", math.nan, math.nan
                else:
                    worst = float(vals.min() if lower else vals.max())  # a NaN cell (diverged) misses the bound
                    mean = float(vals.mean())
                    value = mean if of == "mean" else worst
                    ok = bool(vals.notna().all()) and (value >= bound if lower else value <= bound)
                    status = "met" if ok else "missed"
                rows.append(
                    {
                        "artefact": name,
                        "experiment": exp,
                        "where": t.get("where") or {},
                        "metric": t["metric"],
                        "bound": f"{'mean' if of == 'mean' else 'each'} {'>=' if lower else '<='} {bound:g}",
                        "worst": worst,
                        "mean": mean,
                        "n": int(vals.notna().sum()),
                        "status": status,
                        "why": why,
                    }
                )
    return rows


def target_lines(ctx: Context) -> list[str]:
    rows = target_rows(ctx)
    if not rows:
        return []
    met = sum(r["status"] == "met" for r in rows)
    lines = [
        f"### Targets at {ctx.scale} scale: {met} of {len(rows)} met",
        "",
        (
            "What each artefact's cells must reach to speak to its claims (config: `artefacts.<name>.targets."
            f"{ctx.scale}`): each cell named, or their mean, must reach the bound."
        ),
        "",
        "| artefact | experiment | cells | metric | target | worst cell | mean | n | status | why |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        where = ", ".join(f"{k} = {v}" for k, v in r["where"].items()) or "all"
        lines.append(
            "| "
            + " | ".join(
                _cell(str(x))
                for x in (
                    r["artefact"],
                    r["experiment"],
                    where,
                    r["metric"],
                    r["bound"],
                    _f(r["worst"]),
                    _f(r["mean"]),
                    r["n"],
                    f"**{r['status']}**",
                    r["why"],
                )
            )
            + " |"
        )
    return lines + [""]


def why_not_here(ctx: Context, claim, verdict) -> str:
    """Why `claim` does not hold (or did not run) at `scale`: its `below_paper_scale` note below paper scale,
    what its `at_paper_scale` note found at paper scale (marked as a paper-scale finding, not a scale effect),
    or a flag when a claim fails with no recorded reason (a discrepancy to look into). Empty where it holds. A
    reason's {{experiment metric axis=value}} numbers are filled in from the cells (results.fill_numbers)."""
    return fill_numbers(ctx, _why(ctx.scale, claim, verdict))


def _why(scale: str, claim, verdict) -> str:
    if verdict.status in (decide.HOLDS, decide.NOT_RUN):  # a claim that has not run has no finding yet
        return ""
    if scale != "paper" and claim.below_paper_scale:
        return claim.below_paper_scale
    if verdict.status == decide.NOT_TESTABLE:
        if scale == "paper" and claim.at_paper_scale:  # the quick-scale note would describe other cells
            return f"Not testable at paper scale; looked into: {claim.at_paper_scale}"
        return claim.below_paper_scale or f"Not testable at {scale} scale: {verdict.measured.split(';')[0]}."
    if verdict.status == decide.BY_CONSTRUCTION:
        return f"Holds by construction, so it is no evidence: {claim.by_construction}"
    if verdict.status == decide.INCONCLUSIVE:
        lean = f"; it {verdict.lean}" if verdict.lean else ""
        return f"The effect is inside the noise (see measured){lean}." + (
            f" Looked into at paper scale: {claim.at_paper_scale}" if scale == "paper" and claim.at_paper_scale else ""
        )
    if verdict.status == decide.NOT_COMPARABLE:
        return "A baseline entry is far from the paper's own number for it at this scale (see measured)." + (
            f" Looked into at paper scale: {claim.at_paper_scale}" if scale == "paper" and claim.at_paper_scale else ""
        )
    if scale == "paper" and verdict.status == decide.FAILS and claim.at_paper_scale:
        return f"Does not reproduce at paper scale; looked into: {claim.at_paper_scale}"
    if verdict.status == decide.FAILS:
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


def _testable_why(measured: str) -> str:
    """The kind of gap that leaves a claim not testable, in a few words, from its verdict's text."""
    if measured.startswith("partial grid"):
        return "part of its grid has not run"
    if measured.startswith("a single cell decides it"):
        return "one seed and no seed spread in its family"
    if measured.startswith("the cells cannot resolve it"):
        return "evaluations too coarse for what it orders"
    if measured.startswith("testable at"):
        return "its words need the paper's settings"
    if measured.startswith("its cells run"):
        return "its cells run shorter than its words need"
    return "see the report"


_DATASET = re.compile(r"(?:^dataset unavailable: |, )([A-Za-z0-9_]+)(?= \(|,|$)")


def not_run_reason(ctx: Context, claim, verdict) -> str:
    """Why a claim did not run at this scale, in a few words: the datasets this machine lacks, no cell of its
    experiments in this scale's grid, or its cells not run yet."""
    if verdict.status == decide.NOT_TESTABLE:
        return f"not testable at {ctx.scale} scale: " + _testable_why(verdict.measured)
    known = (
        set(ctx.expected)
        | set(ctx._tables)
        | {e for spec in ctx.artefacts.values() for e in spec.get("experiments") or []}
    )
    doc = next((d for d in ctx.docs if d["paper"] == claim.paper), None)
    exps = papers.claim_experiments(claim, known, doc)
    datasets = sorted({d for e in exps for note in ctx.missing(e) for d in _DATASET.findall(note)})
    if datasets:
        return "needs data this machine lacks (" + ", ".join(datasets) + ")"
    if exps and ctx.expected and all(ctx.expected.get(e, 1) == 0 for e in exps):
        return f"no cells at {ctx.scale} scale (paper scale only)"
    if ctx.scale == "paper":
        return "cells not run yet at paper scale"
    if exps and all(ctx.state(e).split(" ")[0].isdigit() for e in exps):  # every cell of its experiments ran
        return f"the cells it compares are not in the {ctx.scale} grid (paper scale only)"
    return f"cells not run at {ctx.scale} scale"


def glance(ctx: Context, doc: dict, verdicts: list) -> dict:
    """One paper's results at this scale, as counted for the README: the claims about the paper's method per
    verdict and those about its baselines apart, the numbers within WITHIN_Z paper s.e. of those compared (the
    method's and the baselines'), why the claims that were not tested were not, and the headline claims by verdict
    (with their one-line reasons) for the bottom line in words."""
    own = [(c, v) for c, v in verdicts if c.paper == doc["paper"] and not c.variant]  # the paper's own claims
    mine = [(c, v) for c, v in own if c.about == "method"]
    base = [(c, v) for c, v in own if c.about == "baseline"]
    zs = z_rows(ctx, doc)
    reasons: dict[str, int] = {}
    for c, v in mine:
        if v.status in (decide.NOT_RUN, decide.NOT_TESTABLE):
            key = not_run_reason(ctx, c, v)
            reasons[key] = reasons.get(key, 0) + 1

    def named(status):
        return [c for c, v in mine if v.status == status and c.headline]

    def within(role):
        part = [abs(r["z_paper"]) for r in zs if r["role"] == role]
        return sum(z <= WITHIN_Z for z in part), len(part)

    (w_m, n_m), (w_b, n_b) = within("method"), within("baseline")
    return {
        "paper": doc["paper"],
        "scale": ctx.scale,
        "method": method_name(doc),
        "claims": len(mine),
        "counts": {s: sum(v.status == s for _, v in mine) for s in decide.STATUSES},
        "baseline_claims": len(base),
        "baseline_counts": {s: sum(v.status == s for _, v in base) for s in decide.STATUSES},
        "within": w_m,
        "compared": n_m,
        "baseline_within": w_b,
        "baseline_compared": n_b,
        "not_run": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "holds": [c.headline for c in named(decide.HOLDS)],
        "fails": [[c.headline, c.gist] for c in named(decide.FAILS)],
        "inconclusive": [[c.headline, v.lean] for c, v in mine if v.status == decide.INCONCLUSIVE and c.headline],
    }


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _counts_text(c: dict) -> str:
    """The tested verdicts' counts in words (a check true by construction is not among them)."""
    parts = [
        _plural(c[decide.HOLDS], "holds", "hold"),
        f"{c[decide.INCONCLUSIVE]} inconclusive",
        _plural(c[decide.FAILS], "does not hold", "do not hold"),
    ]
    parts += [f"{c[decide.NOT_COMPARABLE]} not comparable"] if c.get(decide.NOT_COMPARABLE) else []
    text = ", ".join(parts)
    if c.get(decide.BY_CONSTRUCTION):
        n = c[decide.BY_CONSTRUCTION]
        text += f"; {n} more {'holds' if n == 1 else 'hold'} by construction, no evidence"
    return text


def _possessive(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


def bottom_line(g: dict) -> str:
    """A bottom line in words on one paper at one scale, from `glance`: what was tested of the claims about the
    paper's method (its baselines' apart), the headline claims that hold, those that do not with their one-line
    reason, those inside the noise and which way they lean, the numbers, and what was not tested and why."""
    c, n = g["counts"], g["claims"]
    tested = sum(c[s] for s in decide.TESTED)
    name, method = SHORT_NAMES.get(g["paper"], g["paper"]), g.get("method", "")
    out = []
    if tested == 0:
        out.append(f"**{name}** at {g['scale']} scale: none of its {n} claims about {method} could be tested.")
    else:
        out.append(
            f"**{name}** at {g['scale']} scale: {tested} of its {n} claims about {method} were tested "
            f"({_counts_text(c)})."
        )
    if g.get("baseline_claims"):
        bc = g["baseline_counts"]
        b_tested = sum(bc[s] for s in decide.TESTED)
        out[-1] = out[-1][:-1] + (
            f"; its {_plural(g['baseline_claims'], 'claim', 'claims')} about the baselines it compares against "
            f"{'is' if g['baseline_claims'] == 1 else 'are'} counted apart ("
            + (f"{b_tested} tested: {_counts_text(bc)}" if b_tested else "none tested at this scale")
            + ")."
        )
    if g.get("holds"):
        out.append("Reproduced: " + "; ".join(g["holds"]) + ".")
    if g.get("fails"):
        out.append("Not reproduced: " + "; ".join(f"{h} ({why})" if why else h for h, why in g["fails"]) + ".")
    if g.get("inconclusive"):
        out.append(
            "Inside the noise: " + "; ".join(f"{h} ({lean})" if lean else h for h, lean in g["inconclusive"]) + "."
        )
    if g["compared"] or g.get("baseline_compared"):
        out.append(
            f"Of the numbers it prints with a standard error, ours are within {WITHIN_Z:g} of its standard errors "
            f"for {g['within']} of {g['compared']} of {_possessive(method)} and {g.get('baseline_within', 0)} of "
            f"{g.get('baseline_compared', 0)} of its baselines'."
        )
    else:
        out.append("None of the numbers it prints with a standard error was compared at this scale.")
    if g["not_run"]:
        untested = c[decide.NOT_RUN] + c[decide.NOT_TESTABLE]
        out.append(f"Not tested: {untested} (" + "; ".join(f"{k}: {v}" for k, v in g["not_run"].items()) + ").")
    return " ".join(out)


def render(ctx: Context, generated: str = "", z_image: str = "") -> str:
    """The report's markdown; `z_image`: the z-score figure's path relative to the report (linked if given)."""
    scale_note = SCALE_NOTE.get(ctx.scale, ctx.scale)
    lines = [
        f"# Reproduction report: {ctx.scale} scale",
        "",
        "",  # the results line: set once the body has read every experiment (archived cells counted)
        'Paper numbers from config/papers/<paper>.yaml ("(quoted)": a literature value the paper only cites, '
        "not the paper's own run). Ours: mean ± s.e. over the n seeds / splits that ran. "
        "z_paper = (ours − paper) / s.e.(paper); z_comb = (ours − paper) / sqrt(s.e.(paper)² + s.e.(ours)²); "
        "— where the paper prints no s.e. or one of ours did not run. "
        + ("" if ctx.scale == "paper" else f"These are {ctx.scale}-scale numbers: not paper-scale numbers. "),
        "",
    ]
    verdicts = []
    for doc in ctx.docs:
        for claim in papers.claims(doc):
            verdicts.append((claim, claim_checks.verdict(ctx, claim)))
    own = [(c, v) for c, v in verdicts if not c.variant]  # variants (another reading) are shown, not counted
    for about, words in (("method", "about the papers' own methods"), ("baseline", "about their baselines")):
        part = [(c, v) for c, v in own if c.about == about]
        counts = {s: sum(v.status == s for _, v in part) for s in decide.STATUSES}
        unexplained = sum(why_not_here(ctx, c, v).startswith("UNEXPLAINED") for c, v in part)
        lines += [
            f"Claims {words} at {ctx.scale} scale: "
            + ", ".join(f"{n} {s}" for s, n in counts.items())
            + (
                f" ({counts[decide.FAILS] - unexplained} of those that do not hold with the reason "
                f"recorded below the claim, {unexplained} unexplained)"
                if counts[decide.FAILS]
                else ""
            )
            + ".",
            "",
        ]
    lines += [f"Verdict rule: {decide.NOISE_RULE}.", ""]
    lines += [stability_line(ctx.scale, {c.id for c, _ in verdicts}), ""]
    for doc in ctx.docs:
        lines += [f"### Summary: {PAPER_NAMES.get(doc['paper'], doc['paper'])}", ""]
        lines += summary_lines(ctx, doc, verdicts) + [""]
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
            [
                "## Missing datasets",
                "",
                (
                    f"These datasets were unavailable to this {ctx.scale}-scale build, so the cells that need them are n/a "
                    f"(the artefacts build without them and say so). {GET_DATA}."
                ),
                "",
            ]
            + [f"- {note}: " + ", ".join(f"`{e}`" for e in exps) for note, exps in missing.items()]
            + [""]
        )
    if ctx.stale:
        lines += [
            "## Archived cells not used",
            "",
            (
                f"These cells of figures/{ctx.scale}/cells ran with settings the config no longer gives them "
                "(re-run them: `benchmarks/run_cells.py` or snakemake; then `python -m reprokit.report.commands.archive`):"
            ),
            "",
        ]
        lines += [f"- `{e}`: {why}" for e, whys in sorted(ctx.stale.items()) for why in whys] + [""]
    lines += [
        "## Claims",
        "",
        (
            f"Each verdict is computed from the results at {ctx.scale} scale (reprokit/report/verdicts/claims.py; the check "
            "and its arguments are in config/papers/<paper>.yaml)."
        ),
        "",
        "| paper | claim | about | artefact | the paper's words | verdict | measured | n | scale | why not here |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for claim, v in verdicts:
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    claim.paper,
                    claim.id,
                    claim.about,
                    claim.artefact,
                    _words(claim),
                    f"**{v.label}**",
                    v.measured + (f" [on a subset: {v.subset}]" if v.subset else ""),
                    v.n,
                    ctx.scale,
                    why_not_here(ctx, claim, v) or "—",
                )
            )
            + " |"
        )
    lines += [""] + target_lines(ctx)
    # the bottom line, now that every experiment has been read: under the title, before the summary tables
    glances = [glance(ctx, doc, verdicts) for doc in ctx.docs]
    top = ["", "## Bottom line", ""]
    for g in glances:
        top += [bottom_line(g), "", f"<!-- {GLANCE_TAG}: {json.dumps(g, sort_keys=True)} -->", ""]
    lines[3:3] = top
    archived = sum(ctx.archived.values())
    if not (ctx.results / ctx.scale).is_dir():  # built from the committed archive alone
        where = f"the {archived} archived cells (figures/{ctx.scale}/cells) only"
    else:
        where = f"`{ctx.results / ctx.scale}`" + (
            f" and {archived} archived cells that are not under it (figures/{ctx.scale}/cells)" if archived else ""
        )
    lines[2] = f"Scale: **{scale_note}**. Results: {where}. {generated}".rstrip()
    return "\n".join(lines) + "\n"


def stability_line(scale: str, claim_ids: set[str] | None = None, figures: Path | None = None) -> str:
    """What benchmarks/verdict_stability.py found at this scale (figures/<scale>/verdict_stability.json): which
    verdicts stay the same when their cells run again with another thread count, a stand-in for another machine.
    Given `claim_ids` (the claims the papers' YAML has now), a recorded claim that is no longer among them
    (renamed or removed since the record) is named and left out of the count. `figures`: the folder of the
    scales' records (default: the repository's figures/)."""
    path = (figures or Path(__file__).resolve().parents[4] / "figures") / scale / "verdict_stability.json"
    if not path.exists():
        return (
            f"Verdicts stable under another machine: not measured at {scale} scale "
            "(benchmarks/verdict_stability.py re-runs a claim's cells with another thread count)."
        )
    rec = json.loads(path.read_text())
    rows = rec["claims"]
    gone = sorted(r["claim"] for r in rows if claim_ids is not None and r["claim"] not in claim_ids)
    rows = [r for r in rows if r["claim"] not in gone]
    changed = [f"{r['claim']} ({r['archive']} -> {r['rerun']})" for r in rows if not r["stable"]]
    return (
        f"Verdicts stable under another machine (benchmarks/verdict_stability.py, {rec['date']}; the cells of "
        f"{', '.join(rec['experiments'])} re-run with {rec['rerun']}): {sum(bool(r['stable']) for r in rows)} of "
        f"{len(rows)} verdicts unchanged"
        + (f"; changed: {'; '.join(changed)}" if changed else "")
        + (f"; recorded for claims that no longer exist (left out): {', '.join(gone)}" if gone else "")
        + ". The other claims: not measured."
    )


def pipeline_config(root: str | Path, scale: str, with_config: bool = False) -> tuple:
    """(cells per experiment, the `artefacts:` block[, the whole config]) of the pipeline's config at `scale`
    (torch-free)."""
    cfg = load_pipeline_config(root, {"scale": scale})
    cells = {name: sum(1 for _ in grid_of(cfg, name, scale).cells()) for name in cfg["experiments"]}
    return (cells, dict(cfg.get("artefacts") or {})) + ((cfg,) if with_config else ())


def expected_cells(root: str | Path, scale: str) -> dict[str, int]:
    """Cells per experiment of the pipeline's config at `scale` (torch-free)."""
    return pipeline_config(root, scale)[0]


if __name__ == "__main__":  # the command moved: fail loudly rather than exit 0 having written nothing
    sys.exit("the report's command is python -m reprokit.report.commands.reproduction (or: reprokit report)")
