"""Checks that compare one side with another: cells against cells (`compare`, `paired_gap`, `vs_best_of`) and our
table entries against each other (`compare_entries`, `gap_shrinks`), each an ordering or a similarity against the
noise band of the difference (reprokit.report.verdicts.decide).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..store.stats import mean_se
from . import noise
from .decide import (
    BASELINE_REL,
    BASELINE_Z,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_RUN,
    Verdict,
    decide,
    mark,
    noise_band,
    ordering,
    paired_band,
)
from .noise import n1_fraction, t_quantile
from .sides import LABEL, config_means, coord_key, mean_se_of, metric_of_row, side_coords, side_words


def compare_entries(
    ctx,
    artefact: str,
    a: str,
    b,
    over: list[str],
    axis: str = "columns",
    relation: str = "above",
    lower_is_better: bool = False,
    max_gap: float | None = None,
    tol: float | None = None,
    z: float | None = None,
) -> Verdict:
    """Our entry `a` of the artefact's table against each of `b` (a name or a list) at every entry of `over`; axis
    "columns": a and b are columns and `over` rows, "rows": the other way round. relation "above": a beats b (gap
    a - b, or b - a when `lower_is_better`, above 0 beyond the noise; by at most `max_gap` in the table's unit when
    given: "slightly"), paired over the seeds / splits both entries ran where there are two or more, and "not
    comparable" where b's entry is far from the paper's own number for it (:func:`baseline_far`); "similar":
    |a - b| <= `tol` (the table's unit) or <= `z` combined s.e., whichever is wider (the cells' compare)."""
    if relation not in ("above", "similar"):
        raise ValueError(f"compare_entries: relation '{relation}' is neither 'above' nor 'similar'")
    results, parts, ns = [], [], []

    def entry(o, name):
        return ctx.ours(artefact, o, name) if axis == "columns" else ctx.ours(artefact, name, o)

    for o in over:
        x = entry(o, a)
        for w in [b] if isinstance(b, str) else b:
            y = entry(o, w)
            if y.n == 0 and _prints_none(ctx, artefact, *((o, w) if axis == "columns" else (w, o))):
                parts.append(f"{o}: no {w} (the paper prints '-')")  # not a gap: the table has no such entry
                continue
            if x.n == 0 or y.n == 0 or not (math.isfinite(x.mean) and math.isfinite(y.mean)):
                results.append(None)
                parts.append(f"{o}: {w} or {a} not run")
                continue
            ns.append(min(x.n, y.n))
            if relation == "similar":
                outcome, band = _similar(x.mean, x.se, x.n, y.mean, y.se, y.n, tol, z)
                results.append(outcome)
                parts.append(
                    f"{o}: {x.mean:.4g} vs {w} {y.mean:.4g} (noise band {band:.2g}){mark(outcome, ' (not similar)')}"
                )
                continue
            gap = (y.mean - x.mean) if lower_is_better else (x.mean - y.mean)
            with noise.entry(
                *((metric_of_row(ctx, artefact, a), metric_of_row(ctx, artefact, w)) if axis == "rows" else ())
            ):
                band, how = noise_band(x.mean, x.se, x.n, y.mean, y.se, y.n), ""
            d = ctx.paired(artefact, *(((o, a), (o, w)) if axis == "columns" else ((a, o), (w, o))))
            if len(d) > 1:  # the same seeds / splits on both sides: the paired difference's s.e.
                m, se, k = mean_se(d)
                gap, band, how = (-m if lower_is_better else m), paired_band(se, k), f", paired over {k}"
            outcome = ordering(gap, band, 0.0, max_gap)
            far = baseline_far(ctx, artefact, *((o, w) if axis == "columns" else (w, o)), y)
            if outcome is not False and far:
                outcome = NOT_COMPARABLE
            results.append(outcome)
            parts.append(
                f"{o}: {x.mean:.4g} vs {w} {y.mean:.4g} (gap {gap:.3g}, noise band {band:.2g}{how})"
                f"{mark(outcome)}" + (f" [{far}]" if far else "")
            )
    if relation == "similar":
        reading = ", ".join(
            x
            for x in (
                f"|diff| <= {tol:g}" if tol is not None else "",
                f"<= {z:g} combined s.e." if z is not None else "",
            )
            if x
        )
        head = f"{a} similar ({reading})"
    else:
        head = a + (f" (by at most {max_gap:g})" if max_gap is not None else "")
    return decide(results, f"{head}: " + "; ".join(parts), min(ns, default=0))


def _prints_none(ctx, artefact: str, row: str, column: str) -> bool:
    """Whether the paper's table holds "-" at (row, column): the method has no number there in the paper either
    (VADAM on protein), so a comparison with it is absent, not pending."""
    paper = ctx.paper_number(artefact, row, column)
    return paper is not None and paper.mean is None and paper.text == "-"


def baseline_far(ctx, artefact: str, row: str, column: str, ours) -> str:
    """Why our baseline entry (row, column) cannot stand for the paper's baseline: it is off the paper's number
    for it by more than BASELINE_REL of that number and BASELINE_Z of its printed s.e.; "" when it is close, or
    when the paper prints no number there."""
    paper = ctx.paper_number(artefact, row, column)
    if paper is None or paper.mean is None or not math.isfinite(ours.mean):
        return ""
    off = abs(ours.mean - paper.mean)
    if off <= BASELINE_REL * abs(paper.mean) or (paper.se and off <= BASELINE_Z * paper.se):
        return ""
    return f"baseline {ours.mean:.4g} vs the paper's {paper.mean:.4g}"


def _similar(ma: float, sa: float, na: int, mb: float, sb: float, nb: int, tol, z) -> tuple:
    """(outcome, band) of "a is similar to b": the margin tol - |a - b| (tol in the metric's unit, or `z` combined
    s.e. when that is wider: the claim's reading of the word) ordered against the noise band of the difference
    (:func:`noise_band`): inside the tolerance by more than the band holds, outside it by more than the band does
    not hold, inconclusive in between."""
    comb = math.hypot(sa, sb) if na > 1 and nb > 1 and math.isfinite(sa) and math.isfinite(sb) else math.nan
    bound = max(tol if tol is not None else 0.0, z * comb if z is not None and math.isfinite(comb) else 0.0)
    band = noise_band(ma, sa, na, mb, sb, nb)
    return ordering(bound - abs(ma - mb), band), band


def gap_shrinks(ctx, artefact: str, a: str, b: str, at: str, than: str, axis: str = "rows") -> Verdict:
    """The gap a - b of our table entries is smaller at `at` than at `than` (axis "rows": a, b are rows and
    at/than columns), by more than :func:`noise_band` of the two gaps."""

    def get(name, where):
        return ctx.ours(artefact, name, where) if axis == "rows" else ctx.ours(artefact, where, name)

    entries = [get(a, at), get(b, at), get(a, than), get(b, than)]
    if any(e.n == 0 or not math.isfinite(e.mean) for e in entries):
        return Verdict(NOT_RUN, "not every entry ran", min((e.n for e in entries), default=0))
    g_at, g_than = entries[0].mean - entries[1].mean, entries[2].mean - entries[3].mean
    se_at, se_than = math.hypot(entries[0].se, entries[1].se), math.hypot(entries[2].se, entries[3].se)
    n_at, n_than = min(entries[0].n, entries[1].n), min(entries[2].n, entries[3].n)
    band = noise_band(g_at, se_at, n_at, g_than, se_than, n_than)
    outcome = ordering(g_than - g_at, band)
    return decide(
        [outcome],
        f"{a} - {b}: {g_at:.3g} at {at} vs {g_than:.3g} at {than} (noise band {band:.2g}){mark(outcome)}",
        min(e.n for e in entries),
    )


def _cells(ctx, experiments, where: dict) -> pd.DataFrame:
    exps = [experiments] if isinstance(experiments, str) else list(experiments)
    frames = [ctx.cells(e, where) for e in exps]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _axis_values(a: pd.DataFrame, b: pd.DataFrame, by: str | None, at: str) -> list:
    if by is None:
        return [None]
    if by not in a or by not in b:
        return []
    if at == "either":  # every value either side ran: one the other lacks is "not run" (still pending)
        return sorted(set(a[by].map(coord_key)) | set(b[by].map(coord_key)))
    common = sorted(set(a[by].map(coord_key)) & set(b[by].map(coord_key)))
    if at == "smallest":
        return common[:1]
    if at == "largest":
        return common[-1:]
    return common


def _at(rows: pd.DataFrame, by: str | None, value) -> pd.DataFrame:
    return rows if by is None else rows[rows[by].map(coord_key) == value]


def compare(
    ctx,
    experiments=None,
    metric: str = "",
    a: dict | None = None,
    b=None,
    by: str | None = None,
    groups: list[dict] | None = None,
    at: str = "all",
    min_values: int = 1,
    relation: str = "above",
    min_gap: float = 0.0,
    max_gap: float | None = None,
    tol: float | None = None,
    z: float | None = None,
    lower_is_better: bool = False,
    at_least: int | None = None,
) -> Verdict:
    """Cells `a` against each of `b` (a dict or a list of dicts) on the mean of `metric`, per group and per value
    of `by` both ran (`at`: "all", "smallest" or "largest" of them, or "either": every value either side ran, one
    that only one side ran counting as not run yet; fewer than `min_values` common values:
    not run, e.g. "low-data vs large-data regime" needs two sizes). relation "above": gap = a - b (b - a when
    `lower_is_better`) with min_gap < gap (<= max_gap when given); "similar": |a - b| <= tol or <= z combined
    s.e. Holds when every comparison holds (at least `at_least` of them when given). A side that names its own
    `experiment` (a key of a / b) reads that experiment's cells instead of `experiments`, and its `label` (e.g.
    "BALI-L") names it in the measured text; `metric` may be a difference of two metrics, "high - low" (e.g.
    "test_nll - train_nll": the overfitting gap)."""
    worse = [b] if isinstance(b, dict) else list(b)
    results, parts, ns = [], [], []

    def side(where: dict, group: dict) -> pd.DataFrame:
        coords = {k: v for k, v in side_coords(where).items() if k != "experiment"}
        if where.get("experiment", experiments) is None:
            raise ValueError(f"compare: no experiment for the side {where} (give `experiments` or its `experiment`)")
        return _cells(ctx, where.get("experiment", experiments), {**group, **coords})

    for group in groups or [{}]:
        for w in worse:
            ra, rb = side(a, group), side(w, group)
            # the b side is named per comparison only where there are several
            named = [f"{k}={v}" for k, v in group.items()]
            if len(worse) > 1:
                named += [w[LABEL]] if w.get(LABEL) else [f"{k}={v}" for k, v in w.items()]
            label = ", ".join(named)
            values = _axis_values(ra, rb, by, "all") if len(ra) and len(rb) else []
            if len(values) < min_values:
                results.append(None)
                parts.append(f"{label or 'all'}: {len(values)} common {by or 'value'}(s) ran, {min_values} needed")
                continue
            values = _axis_values(ra, rb, by, at)
            for v in values:
                (ma, sa, na), (mb, sb, nb) = mean_se_of(_at(ra, by, v), metric), mean_se_of(_at(rb, by, v), metric)
                at_v = (f"{by}={v:g}" if isinstance(v, float) else f"{by}={v}") if by else ""
                where = ", ".join(x for x in (label, at_v) if x) or "all cells"
                if na == 0 or nb == 0 or not (math.isfinite(ma) and math.isfinite(mb)):
                    results.append(None)
                    parts.append(f"{where}: not run")
                    continue
                if relation == "similar":
                    ok, _ = _similar(ma, sa, na, mb, sb, nb, tol, z)
                else:
                    gap = (mb - ma) if lower_is_better else (ma - mb)
                    ok = ordering(gap, noise_band(ma, sa, na, mb, sb, nb), min_gap, max_gap)
                results.append(ok)
                ns.append(min(na, nb))
                parts.append(f"{where}: {ma:.4g} vs {mb:.4g}{mark(ok)}")
    head = f"{metric}, {side_words(a)} vs {' / '.join(side_words(w) for w in worse)}: "
    if at_least is not None:
        wins = sum(r is True for r in results)
        pending = sum(r is None for r in results)
        unsure = sum(r == INCONCLUSIVE for r in results)
        status = (
            HOLDS
            if wins >= at_least
            else FAILS
            if wins + pending + unsure < at_least
            else NOT_RUN
            if pending
            else INCONCLUSIVE
        )
        return Verdict(
            status, head + f"{wins} of {len(results)} hold (need {at_least}); " + "; ".join(parts), min(ns, default=0)
        )
    return decide(results, head + "; ".join(parts), min(ns, default=0))


def paired_gap(
    ctx,
    pairs: list[list[str]],
    metric: str,
    min_gap: float,
    where_a: dict | None = None,
    where_b: dict | None = None,
    on: tuple = ("param_proportions", "chunk_proportions"),
) -> Verdict:
    """Over the configurations (`on`) both experiments of each [a, b] pair ran, the mean of (a - b) in `metric`
    is at least `min_gap` (e.g. standard networks retrained on the found hyperparameters vs the partitioned
    runs that found them)."""
    diffs, ns, sizes = [], [], []
    for ea, eb in pairs:
        ma = config_means(ctx.cells(ea, where_a or {}), list(on), metric)
        mb = config_means(ctx.cells(eb, where_b or {}), list(on), metric)
        both = ma.merge(mb, on=list(on), suffixes=("_a", "_b"))
        diffs += list(both["mean_a"] - both["mean_b"])
        ns += list(np.minimum(both["n_a"], both["n_b"]).astype(int))
        sizes += list(np.maximum(both["mean_a"].abs(), both["mean_b"].abs()))
    if not diffs:
        return Verdict(NOT_RUN, "no configuration ran in both experiments of a pair")
    d, se, k = mean_se(diffs)
    band = t_quantile(k - 1) * se if k > 1 else n1_fraction(pair=True) * float(sizes[0])  # one configuration: n = 1
    outcome = ordering(d, band, min_gap)
    return decide(
        [outcome],
        f"mean {metric} difference over {len(diffs)} configurations = {d:.4g} ± {se:.2g} "
        f"(bound >= {min_gap:g}; noise band {band:.2g}){mark(outcome)}",
        min(ns),
    )


def vs_best_of(
    ctx,
    experiment: str,
    metric: str,
    reference: dict,
    min_gap: float = 0.0,
    where: dict | None = None,
    largest: str | None = None,
    every: bool = False,
) -> Verdict:
    """Our cells reach the best of the `reference` cells ({experiment, where}): mean (or, with `every`, each
    cell) - best reference >= `min_gap`, an ordering with :func:`noise_band`'s n = 1 band (the best reference is
    a single cell): inconclusive within the family's n = 1 band of `min_gap`."""
    rows = ctx.cells(experiment, where or {})
    if largest and len(rows) and largest in rows:
        rows = rows[rows[largest] == rows[largest].max()]
    ref = ctx.cells(reference["experiment"], reference.get("where") or {})
    vals = pd.to_numeric(rows[metric], errors="coerce").dropna() if metric in rows else pd.Series(dtype=float)
    rvals = pd.to_numeric(ref[metric], errors="coerce").dropna() if metric in ref else pd.Series(dtype=float)
    if vals.empty or rvals.empty:
        return Verdict(NOT_RUN, "not run" if vals.empty else "reference not run", min(len(vals), len(rvals)))
    best = float(rvals.max())
    if every:  # the worst of our cells, a single value
        ours, se, n, what = float(vals.min()), math.nan, 1, "worst cell"
    else:
        (ours, se, n), what = mean_se(vals), "mean"
    band = noise_band(ours, se, n, best, math.nan, 1)  # the best of k is one cell: no s.e.
    outcome = ordering(ours - best, band, min_gap)
    return decide(
        [outcome],
        f"{metric}: {what} {ours:.4g} (n {len(vals)}) vs best of {len(rvals)} reference cells "
        f"{best:.4g} (difference {ours - best:.3g}, bound >= {min_gap:g}, noise band {band:.2g})"
        f"{mark(outcome, '')}",
        len(vals),
    )


CHECKS = (compare, compare_entries, gap_shrinks, paired_gap, vs_best_of)
