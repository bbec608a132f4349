"""Checks of the papers' claims in words, computed from our results, never typed in.

Each claim in config/papers/<paper>.yaml names one function of :data:`CHECKS` and its arguments. A check
gets the report's results context `ctx` (reprokit.report.verdicts.reproduction.Context) and returns a
:class:`Verdict`: "holds", "inconclusive" (inside the noise band below), "does not hold", "not comparable", or
"not run" (the cells it needs have not run at this scale, or only some of them and those that ran do not yet
decide it), with the measured quantity and n (the
fewest seeds / splits behind any number it compared). `ctx.cells(experiment, where)` gives the cells that
ran (completed / diverged / out of memory) with the coordinates `where`; `ctx.curves(experiment, where)` their
learning curves (one row per cell and evaluation step); `ctx.ours(artefact, row, column)` our mean ± s.e. of
one of the paper's numbers (reprokit.report.verdicts.reproduction.Ours).

Vague words get a numeric reading, stated in the yaml next to the claim (e.g. "similar": within `tol` in the
metric's unit, or within `z` combined standard errors when that is wider).

Every check that compares a measured number with another or with a bound has a noise band, one rule for every
kind (:data:`NOISE_RULE`, printed in the report): a two-sided Student-t interval at noise.LEVEL.

- an ordering ("A beats B", "peaks at K", "the gap is larger", "still improving") holds only when its effect
  exceeds t x its standard error: over the seeds / splits both sides ran, paired (t with k - 1 degrees of freedom)
  where they share them, else Welch's (:func:`noise_band`); with a single seed / split on a side (no s.e.) the
  measured seed spread of one cell of the claim's family (report.verdicts.noise, t with that spread's degrees of
  freedom; no spread measured: the band is infinite and the claim not testable at the scale);
- a best-of-k comparison (:func:`vs_best_of`) is an ordering against the best reference cell, a single value;
- a threshold (:func:`threshold`, :func:`spread_at_most`, inputs_kept, :func:`peak` among the values above `at`)
  is an ordering against a fixed bound with the same band;
- a similarity ("similar", "within tol") is an ordering of the margin tol - |difference| against the same band:
  it holds when the difference is inside the tolerance by more than the band, does not hold when it is outside
  by more than the band, and is inconclusive in between;
- a correlation (:func:`correlation`) holds when the whole :data:`CI_LEVEL` percentile-bootstrap interval of the
  coefficient over the configurations (report.stats.correlation_ci) lies on the claimed side of its bound, does not
  hold when the whole interval lies on the other side, and is inconclusive when it straddles the bound.

An inconclusive outcome records which way its point estimate leans (with the paper or against it), so the
verdict says it; a reversal is called one only outside the band. A curve-speed comparison whose evaluations
cannot order the crossings (:func:`converges_faster`: crossings within one evaluation of each other order nothing)
is not testable at that scale (the evaluation grid is coarser than the effect), not inconclusive; where it orders
them on some sets only, it is decided on those and says which.

A table comparison whose baseline entry is itself far from the paper's number for it (:func:`baseline_far`) is
"not comparable" unless it clearly fails. all_have_status (statuses), smooth_predictive and
underfits_and_overconfident (shape readings of single predictives) decide without a band. :func:`verdict` then
applies what the claim's cells must cover before it counts as tested (the whole grid of its experiments at the
scale, or the subset its words allow; the settings its words need) and labels a check true by construction as
such.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...predictive_shape import SHAPE, explained, shape_text, uncertainty_grows
from ...predictive_shape import meets as meets_shape
from ...predictive_shape import recorded as predictive_shape
from ..cells import metric_values, norm
from ..stats import correlation_ci, mean_se
from . import noise
from .noise import LEVEL, n1_fraction, t_quantile, welch_df

HOLDS, FAILS, NOT_RUN = "holds", "does not hold", "not run"
INCONCLUSIVE, NOT_COMPARABLE, NOT_TESTABLE = "inconclusive", "not comparable", "not testable"
BY_CONSTRUCTION = "by construction"  # the check cannot fail whatever was trained: shown, never counted as evidence
STATUSES = (HOLDS, INCONCLUSIVE, FAILS, NOT_COMPARABLE, BY_CONSTRUCTION, NOT_TESTABLE, NOT_RUN)  # the report's order
TESTED = (HOLDS, INCONCLUSIVE, FAILS, NOT_COMPARABLE)  # the statuses of a claim its cells tested
UNRESOLVED = "unresolved"  # one comparison's outcome: the cells cannot resolve it (evaluation grid too coarse)
LEANS_WITH, LEANS_AGAINST = "leans with the paper", "leans against the paper"

# A baseline entry is "far" from the paper's number for it when it is off by more than BASELINE_REL of the paper's
# value AND by more than BASELINE_Z of the paper's s.e. (when printed): the comparison then is not comparable.
BASELINE_REL, BASELINE_Z = 0.5, 5.0
CI_LEVEL = LEVEL  # a correlation's percentile-bootstrap interval over the configurations
NOISE_RULE = (
    f"one rule for every check: an effect counts only outside a two-sided {LEVEL:.0%} Student-t band, t x the "
    "standard error of the difference (paired over the seeds / splits both sides ran, t with k - 1 degrees of "
    "freedom; else Welch's), or, where a side has one seed (no s.e.), t x sqrt 2 x one cell's relative sd measured "
    "on at least 3 seeds of cells of the claim's own family (its experiments, else every experiment of the same kind "
    "at this scale; t with that spread's degrees of freedom; an accuracy's never below its test set's binomial "
    "s.e.); with no such spread a single value orders nothing and the claim is not testable at this scale. "
    "Orderings, thresholds (a mean against a fixed bound), best-of-k comparisons, spreads and similarities (the "
    "margin tol - |difference|) hold outside the band on the paper's side, do not hold outside it on the other "
    "side, and are inconclusive inside it, leaning one way or the other; a correlation holds when its "
    f"{LEVEL:.0%} bootstrap interval over the configurations lies beyond its bound, does not hold when it lies "
    "wholly on the other side, and is inconclusive when it straddles the bound; a table comparison whose baseline "
    f"entry is off its paper number by more than {BASELINE_REL:.0%} and {BASELINE_Z:g} paper s.e. is not comparable "
    "unless it clearly fails. A claim counts as tested only where its cells cover its words (every cell of its "
    "experiments at this scale, or the subset its words allow, the settings its words need, curves fine enough to "
    "order what it orders); a check true whatever was trained is labelled by construction and not counted"
)


@dataclass(frozen=True)
class Verdict:
    status: str  # one of STATUSES
    measured: str  # what was measured, in words and numbers
    n: int = 0  # the fewest seeds / splits behind any compared number (0: nothing ran)
    lean: str = ""  # an inconclusive verdict: LEANS_WITH, LEANS_AGAINST or "leans both ways" (its point estimates)
    subset: str = ""  # the part of the paper's grid the verdict rests on, where the claim's words allow a subset

    @property
    def label(self) -> str:
        """The status as a reader sees it: an inconclusive one with its direction."""
        return f"{self.status} ({self.lean})" if self.status == INCONCLUSIVE and self.lean else self.status


def _means(rows: pd.DataFrame, by: str, metric: str) -> pd.DataFrame:
    """Mean, s.e. and n of `metric` per value of `by` over the rows with a finite value."""
    out = []
    for key, g in rows.groupby(by) if by in rows else []:
        v = pd.to_numeric(g[metric], errors="coerce").dropna() if metric in g else pd.Series(dtype=float)
        if len(v):
            m, se, n = mean_se(v)
            out.append((key, m, se, n))
    return pd.DataFrame(out, columns=[by, "mean", "se", "n"]).sort_values(by)


def _stat(rows: pd.DataFrame, metric: str) -> tuple[float, float, int]:
    v = metric_values(rows, metric)
    if v is None or len(v) == 0:
        return math.nan, math.nan, 0
    return mean_se(v)


def noise_band(a: float, se_a: float, n_a: int, b: float, se_b: float, n_b: int) -> float:
    """The size an effect between a (mean ± se_a over n_a) and b must exceed to count: t (Welch's degrees of
    freedom) x the combined s.e., or, where a side has a single value (no s.e.), the measured n = 1 band of the
    claim's family (noise.n1_fraction: inf where none was measured) x the larger |value|."""
    if n_a > 1 and n_b > 1 and math.isfinite(se_a) and math.isfinite(se_b):
        return t_quantile(welch_df(se_a, n_a, se_b, n_b)) * math.hypot(se_a, se_b)
    return n1_fraction(pair=True) * max(abs(a), abs(b))


def bound_band(m: float, se: float, n: int, bound: float) -> float:
    """The noise band of a mean m (± se over n) against a fixed `bound` (no noise of its own): t (n - 1 degrees of
    freedom) x se over n > 1 values, else the family's n = 1 band x the larger of |m| and |bound|."""
    if n > 1 and math.isfinite(se):
        return t_quantile(n - 1) * se
    return n1_fraction(pair=False) * max(abs(m), abs(bound))


def paired_band(se: float, k: int) -> float:
    """t (k - 1 degrees of freedom) x the s.e. of k paired differences."""
    return t_quantile(k - 1) * se


_LEANS: ContextVar[list | None] = ContextVar("leans", default=None)
# set while a claim whose words allow a subset of its grid is checked: entries that have not run are left out
_SUBSET_OK: ContextVar[bool] = ContextVar("subset_ok", default=False)


def _lean(with_paper: bool) -> None:
    """Record which way an inconclusive comparison's point estimate leans (for the claim being checked)."""
    found = _LEANS.get()
    if found is not None:
        found.append(with_paper)


def interval_side(lo: float, hi: float, bound: float, above: bool = True):
    """A coefficient's interval [lo, hi] against `bound`: True when it lies wholly above (`above`; below
    otherwise), False when wholly on the other side, INCONCLUSIVE when it straddles the bound (or is NaN)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return INCONCLUSIVE
    if (lo > bound) if above else (hi < bound):
        return True
    if (hi < bound) if above else (lo > bound):
        return False
    _lean(((lo + hi) / 2 > bound) if above else ((lo + hi) / 2 < bound))
    return INCONCLUSIVE


def ordering(gap: float, band: float, min_gap: float = 0.0, max_gap: float | None = None):
    """One comparison's outcome: True (gap clearly above `min_gap`, and not clearly above `max_gap`), False
    (clearly below `min_gap`, or clearly above `max_gap`), INCONCLUSIVE (inside the noise band of a bound)."""
    if gap < min_gap - band or (max_gap is not None and gap > max_gap + band):
        return False
    if gap > min_gap + band and (max_gap is None or gap <= max_gap):
        return True
    _lean(gap > min_gap and (max_gap is None or gap <= max_gap))
    return INCONCLUSIVE


def _decide(results: list, measured: str, n: int) -> Verdict:
    """results per comparison: True (holds), False (fails), None (not run), INCONCLUSIVE (inside the noise),
    NOT_COMPARABLE (its baseline is far from the paper's own number). One clear failure fails the claim."""
    if any(r is False for r in results):
        return Verdict(FAILS, measured, n)
    if _SUBSET_OK.get() and any(r is not None for r in results):  # decided on the entries that ran
        results = [r for r in results if r is not None]
    if results and all(r is True for r in results):
        return Verdict(HOLDS, measured, n)
    if not results or any(r is None for r in results):
        return Verdict(NOT_RUN, measured or "no cell ran", n)
    if any(r == UNRESOLVED for r in results):
        return Verdict(NOT_TESTABLE, f"the cells cannot resolve it: {measured}", n)
    if any(r == NOT_COMPARABLE for r in results):
        return Verdict(NOT_COMPARABLE, measured, n)
    return Verdict(INCONCLUSIVE, measured, n)


def _mark(outcome, reversed_: str = " (reversed)") -> str:
    return {
        True: "",
        False: reversed_,
        INCONCLUSIVE: " (inside the noise)",
        UNRESOLVED: " (not resolved by the evaluations)",
        NOT_COMPARABLE: " (baseline far from the paper's)",
    }.get(outcome, "")


def peak(ctx, experiment: str, axis: str, metric: str, at, among: str = "all", where: dict | None = None) -> Verdict:
    """Where the mean of `metric` over seeds peaks along `axis`, against the value at `axis` = `at`.

    among "all": it peaks at `at` (e.g. LML at K = 15 inputs): the mean there beats the best other value by more
    than their noise band (paired over the seeds both ran, :func:`_paired_gap`), inconclusive inside it.
    among "above": `at` is matched from above (so `metric` alone cannot single it out; e.g. training accuracy at
    K = 15 inputs vs more): the best value above `at` reaches at least the mean there; short of it by less than
    their noise band is inconclusive."""
    if among not in ("all", "above"):
        raise ValueError(f"peak: among must be 'all' or 'above', not {among!r}")
    rows = ctx.cells(experiment, where or {})
    means = _means(rows, axis, metric)
    if means.empty:
        return Verdict(NOT_RUN, "no cell ran")
    n = int(means["n"].min())
    values = means[axis].astype(float)
    if float(at) not in set(values):
        return Verdict(NOT_RUN, f"{axis} = {at:g} has not run", n)
    here = means[values == float(at)].iloc[0]
    others = means[values > float(at)] if among == "above" else means[values != float(at)]
    if others.empty:
        if among == "above":
            return Verdict(NOT_RUN, f"no {axis} above {at:g} has run", n)
        return Verdict(HOLDS, f"{metric} at {axis} = {at:g}: {here['mean']:.4g}, the only value of {axis} run", n)
    rival = others.iloc[int(np.nanargmax(others["mean"].to_numpy()))]  # the best value other than `at`
    gap, band, how = _paired_gap(rows, axis, metric, float(at), float(rival[axis]), here, rival)
    if among == "all":
        best = means.iloc[int(np.nanargmax(means["mean"].to_numpy()))]
        outcome = ordering(gap, band)
        measured = (
            f"{metric} peaks at {axis} = {best[axis]:g} ({best['mean']:.4g}), over {len(means)} values of {axis} "
            f"({values.min():g}-{values.max():g}); {axis} = {at:g} minus the best other ({axis} = "
            f"{rival[axis]:g}): {gap:.4g}, noise band {band:.3g} ({how}){_mark(outcome)}"
        )
    else:  # reached counts even inside the band; short of it by less than the band is inconclusive
        outcome = ordering(-gap, band) if gap > 0 else True
        measured = (
            f"{metric} at {axis} = {at:g}: {here['mean']:.4g}; best above ({axis} = {rival[axis]:g}): "
            f"{rival['mean']:.4g} (noise band {band:.2g}, {how}){_mark(outcome, '')}"
        )
    return _decide([outcome], measured, n)


def _paired_gap(rows: pd.DataFrame, axis: str, metric: str, a, b, stat_a, stat_b) -> tuple[float, float, str]:
    """(mean gap a - b of `metric` between axis values a and b, its noise band, how it was paired): paired over
    the seeds both ran when there are two or more, else from the two means' s.e."""
    if "seed" in rows:
        va = rows[rows[axis].astype(float) == a].groupby("seed")[metric].mean()
        vb = rows[rows[axis].astype(float) == b].groupby("seed")[metric].mean()
        d = (pd.to_numeric(va, errors="coerce") - pd.to_numeric(vb, errors="coerce")).dropna()
        if len(d) > 1:
            m, se, k = mean_se(d)
            return m, paired_band(se, k), f"t x s.e. of the {k} paired seed differences ({k - 1} df)"
    band = noise_band(stat_a["mean"], stat_a["se"], int(stat_a["n"]), stat_b["mean"], stat_b["se"], int(stat_b["n"]))
    return float(stat_a["mean"] - stat_b["mean"]), band, "unpaired"


def inputs_kept(
    ctx,
    experiment: str,
    prefix: str,
    expected_first: int,
    threshold: float = 0.5,
    where: dict | None = None,
    reading: str = "threshold",
) -> Verdict:
    """The learned mask identifies the first `expected_first` inputs. reading "threshold": the inputs whose mean
    keep-probability exceeds `threshold` are exactly those: each input's mean over the cells against `threshold` with
    :func:`bound_band`; an input inside its band is neither kept nor pruned yet, so the claim is inconclusive unless
    another input clearly contradicts it. reading "rank": the first `expected_first` are the most kept: the lowest
    of their mean keep-probabilities above the highest of the others', by more than the noise band of those two
    inputs (paired over the seeds, :func:`_paired_gap`'s rule, or :func:`noise_band`)."""
    if reading not in ("threshold", "rank"):
        raise ValueError(f"inputs_kept: reading must be 'threshold' or 'rank', not {reading!r}")
    rows = ctx.cells(experiment, where or {})
    cols = sorted(c for c in rows.columns if c.startswith(prefix))  # zero-padded: p_keep_01 ... p_keep_30
    if rows.empty or not cols:
        return Verdict(NOT_RUN, "no cell ran")
    values = rows[cols].apply(pd.to_numeric, errors="coerce")
    if reading == "rank":
        return _ranked(values, cols, expected_first, len(rows))
    kept, unsure, results = [], [], []
    for i, col in enumerate(cols, 1):
        m, se, n = mean_se(values[col].dropna())
        expected = i <= expected_first
        side = None
        if n:
            band = bound_band(m, se, n, threshold)
            side = ordering(m - threshold, band) if expected else ordering(threshold - m, band)
            side = side if expected or side == INCONCLUSIVE else not side  # kept (True) / pruned (False)
        if side is True:
            kept.append(i)
        elif side == INCONCLUSIVE:
            unsure.append(i)
        results.append(
            None if side is None else side if expected else (INCONCLUSIVE if side == INCONCLUSIVE else not side)
        )
    text = f"inputs kept (mean p > {threshold:g} beyond the noise): {_ranges(kept) or 'none'} of {len(cols)}"
    if unsure:
        text += f"; within the noise of {threshold:g}: {_ranges(unsure)}"
    return _decide(results, text, len(rows))


def _ranked(values: pd.DataFrame, cols: list[str], first: int, n_cells: int) -> Verdict:
    """inputs_kept's "rank" reading: the weakest of the first `first` inputs against the strongest of the rest."""
    means = values.mean()
    inside, outside = means[cols[:first]], means[cols[first:]]
    low, high = inside.idxmin(), outside.idxmax()
    d = (values[low] - values[high]).dropna()
    if len(d) > 1:
        gap, se, k = mean_se(d)
        band, how = paired_band(se, k), f"t x s.e. of the {k} paired seed differences ({k - 1} df)"
    else:
        gap, band, how = float(means[low] - means[high]), n1_fraction(pair=True) * float(means[low]), "one cell"
    outcome = ordering(gap, band)
    top = sorted(range(1, len(cols) + 1), key=lambda i: -means[cols[i - 1]])[:first]
    return _decide(
        [outcome],
        f"the {first} most kept inputs (mean keep-probability over the cells): {_ranges(sorted(top))}; lowest of the "
        f"first {first} (input {cols.index(low) + 1}) {means[low]:.3f} minus highest of the rest (input "
        f"{cols.index(high) + 1}) {means[high]:.3f} = {gap:.3f}, noise band {band:.3g} ({how}){_mark(outcome)}",
        n_cells,
    )


def _ranges(idx: list[int]) -> str:
    parts, start = [], None
    for i, v in enumerate(idx):
        if start is None:
            start = v
        if i + 1 == len(idx) or idx[i + 1] != v + 1:
            parts.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(parts)


LABEL = "label"  # a side's name as the paper writes it ("BALI-L"), not a coordinate: never used to select cells


def _words(where: dict) -> str:
    """A side of a comparison in words: its `label` where it has one, else its coordinates' values."""
    if where.get(LABEL):
        return str(where[LABEL])
    return "/".join(str(v) for k, v in where.items() if k != LABEL)


def _coords(where: dict) -> dict:
    """A side's coordinates, without its `label`."""
    return {k: v for k, v in where.items() if k != LABEL}


def threshold(
    ctx,
    at_least: float | None = None,
    at_most: float | None = None,
    near: float | None = None,
    rel_tol: float | None = None,
    metric: str | None = None,
    experiment: str | None = None,
    where: dict | None = None,
    largest: str | None = None,
    artefact: str | None = None,
    rows: list[str] | None = None,
    columns: list[str] | None = None,
) -> Verdict:
    """A value against a fixed bound: `at_least` / `at_most` it, or `near` it (within `rel_tol` x |near|); an
    ordering against the bound with :func:`bound_band` (inconclusive within the noise band of the bound, or of the
    tolerance's edge). The value is the mean of `metric` over the cells of `experiment` with the coordinates
    `where` (at the largest value of the axis `largest` when given), or each of our entries `rows` x `columns` of
    the artefact's table."""
    if sum(x is not None for x in (at_least, at_most, near)) != 1 or (near is not None) != (rel_tol is not None):
        raise ValueError("threshold: give one of at_least, at_most, or near with rel_tol")
    if (experiment is None) == (artefact is None) or (experiment is not None and metric is None):
        raise ValueError("threshold: give experiment with metric (cells), or artefact with rows and columns")
    values = []  # (label, mean, se, n); n == 0: not run
    if experiment is not None:
        cells = ctx.cells(experiment, where or {})
        if largest and len(cells):
            cells = cells[cells[largest] == cells[largest].max()]
        size = f" at {largest} = {cells[largest].max():g}" if largest and len(cells) else ""
        values.append((f"{metric}{size}", *_stat(cells, metric), metric))
    else:
        for r in rows or []:
            for c in columns or []:
                s = ctx.ours(artefact, r, c)
                values.append((f"{r} / {c}", s.mean, s.se, s.n, _row_metric(ctx, artefact, r)))
    if near is not None:
        bound, goal = near, f"target {near:.3f} ± {rel_tol:.0%}"
    else:
        bound, goal = (
            (at_least, f"bound >= {at_least:g}") if at_least is not None else (at_most, f"bound <= {at_most:g}")
        )
    results, parts, ns = [], [], []
    for label, m, se, n, row_metric in values:
        if n == 0 or not math.isfinite(m):
            results.append(None)
            parts.append(f"{label}: not run")
            continue
        with noise.entry(row_metric):
            band = bound_band(m, se, n, bound)
        margin = (
            rel_tol * abs(near) - abs(m - near)
            if near is not None
            else (m - bound if at_least is not None else bound - m)
        )
        outcome = ordering(margin, band)
        results.append(outcome)
        ns.append(n)
        value = _pm(m, se, n, 4) if experiment is not None else f"{m:.4g}"
        parts.append(f"{label} = {value} (noise band {band:.2g}){_mark(outcome, ' (outside the bound)')}")
    return _decide(results, f"{goal}: " + "; ".join(parts), min(ns, default=0))


def _pm(m: float, se: float, n: int, digits: int) -> str:
    """ "mean ± s.e." over n > 1 cells; one cell has no s.e., and says so."""
    return f"{m:.{digits}f} ± {se:.{digits}f}" if n > 1 else f"{m:.{digits}f} (one cell, no s.e.)"


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
            if x.n == 0 or y.n == 0 or not (math.isfinite(x.mean) and math.isfinite(y.mean)):
                results.append(None)
                parts.append(f"{o}: {w} or {a} not run")
                continue
            ns.append(min(x.n, y.n))
            if relation == "similar":
                outcome, band = _similar(x.mean, x.se, x.n, y.mean, y.se, y.n, tol, z)
                results.append(outcome)
                parts.append(
                    f"{o}: {x.mean:.4g} vs {w} {y.mean:.4g} (noise band {band:.2g}){_mark(outcome, ' (not similar)')}"
                )
                continue
            gap = (y.mean - x.mean) if lower_is_better else (x.mean - y.mean)
            with noise.entry(
                *((_row_metric(ctx, artefact, a), _row_metric(ctx, artefact, w)) if axis == "rows" else ())
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
                f"{_mark(outcome)}" + (f" [{far}]" if far else "")
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
    return _decide(results, f"{head}: " + "; ".join(parts), min(ns, default=0))


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


# -- table entries ------------------------------------------------------------------------------------------


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
    return _decide(
        [outcome],
        f"{a} - {b}: {g_at:.3g} at {at} vs {g_than:.3g} at {than} (noise band {band:.2g}){_mark(outcome)}",
        min(e.n for e in entries),
    )


# -- cells ----------------------------------------------------------------------------------------------------


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
        return sorted(set(a[by].map(_key)) | set(b[by].map(_key)))
    common = sorted(set(a[by].map(_key)) & set(b[by].map(_key)))
    if at == "smallest":
        return common[:1]
    if at == "largest":
        return common[-1:]
    return common


def _key(v):
    v = norm(v)
    return v if not isinstance(v, list) else tuple(v)


def _at(rows: pd.DataFrame, by: str | None, value) -> pd.DataFrame:
    return rows if by is None else rows[rows[by].map(_key) == value]


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
        coords = {k: v for k, v in _coords(where).items() if k != "experiment"}
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
                (ma, sa, na), (mb, sb, nb) = _stat(_at(ra, by, v), metric), _stat(_at(rb, by, v), metric)
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
                parts.append(f"{where}: {ma:.4g} vs {mb:.4g}{_mark(ok)}")
    head = f"{metric}, {_words(a)} vs {' / '.join(_words(w) for w in worse)}: "
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
    return _decide(results, head + "; ".join(parts), min(ns, default=0))


def _config_means(rows: pd.DataFrame, keys: list[str], metric: str) -> pd.DataFrame:
    if rows.empty or any(k not in rows for k in keys) or metric not in rows:
        return pd.DataFrame(columns=[*keys, "mean", "se", "n"])
    rows = rows.assign(
        **{k: rows[k].map(lambda v: str(list(_key(v))) if isinstance(_key(v), tuple) else str(_key(v))) for k in keys}
    )
    out = []
    for key, g in rows.groupby(keys):
        m, se, n = _stat(g, metric)
        if n and math.isfinite(m):
            out.append((*(key if isinstance(key, tuple) else (key,)), m, se, n))
    return pd.DataFrame(out, columns=[*keys, "mean", "se", "n"])


def spread_at_most(
    ctx,
    experiments: list[str],
    metric: str,
    bound: float,
    where: dict | None = None,
    configs: tuple = ("param_proportions", "chunk_proportions"),
) -> Verdict:
    """Over every configuration (`configs` coordinates) of the experiments, the per-configuration means of
    `metric` lie within `bound` of each other (max - min <= bound; inconclusive when the spread is within the
    noise band of the highest vs the lowest configuration, :func:`noise_band`, of the bound)."""
    means = []
    for e in experiments:
        m = _config_means(ctx.cells(e, where or {}), list(configs), metric)
        means += list(zip(m["mean"], m["se"], m["n"]))
    if len(means) < 2:
        return Verdict(NOT_RUN, f"{len(means)} configuration(s) ran", min((n for *_, n in means), default=0))
    hi, lo = max(means, key=lambda t: t[0]), min(means, key=lambda t: t[0])
    spread = hi[0] - lo[0]
    band = noise_band(hi[0], hi[1], int(hi[2]), lo[0], lo[1], int(lo[2]))  # the highest vs the lowest configuration
    outcome = ordering(bound - spread, band)
    return _decide(
        [outcome],
        f"{metric} over {len(means)} configurations: {lo[0]:.4g}-{hi[0]:.4g} (spread "
        f"{spread:.3g}, bound {bound:g}, noise band {band:.2g}){_mark(outcome, '')}",
        min(int(n) for *_, n in means),
    )


def _later_share(value) -> float:
    """Share of the total in every entry but the first of an unnormalised proportion list."""
    v = [float(x) for x in _key(value)]
    return sum(v[1:]) / sum(v)


# Quantities of a configuration computed from its coordinates, for :func:`correlation`'s `x`.
DERIVED_X = {
    # the parameter share of partitions 2..C minus the data share of chunks 2..C: positive where the later
    # partitions hold more parameters than their chunks hold data (Figs. 5-6's imbalance)
    "imbalance": (
        ("param_proportions", "chunk_proportions"),
        lambda r: _later_share(r["param_proportions"]) - _later_share(r["chunk_proportions"]),
    ),
}


def correlation(
    ctx,
    experiments,
    x: str,
    y: str,
    over,
    method: str = "spearman",
    at_least: float | None = None,
    at_most: float | None = None,
    where: dict | None = None,
) -> Verdict:
    """The `method` ("spearman" or "pearson") correlation of `x` with `y` over the configurations `over` (an axis
    or a list of coordinates), each configuration's mean over seeds, is at least `at_least` (or at most
    `at_most`): its :data:`CI_LEVEL` percentile-bootstrap interval over the configurations
    (report.stats.correlation_ci) lies beyond the bound; wholly on the other side does not hold; straddling it is
    inconclusive. `x` is a metric or a quantity of the coordinates (:data:`DERIVED_X`, e.g. "imbalance")."""
    if (at_least is None) == (at_most is None):
        raise ValueError("correlation: give exactly one of at_least and at_most")
    keys = [over] if isinstance(over, str) else list(over)
    derived = DERIVED_X.get(x)
    if derived is not None and not set(derived[0]) <= set(keys):
        raise ValueError(f"correlation: x = {x} needs the configurations over {list(derived[0])}, not {keys}")
    xs, ys, ns = [], [], []
    for e in [experiments] if isinstance(experiments, str) else experiments:
        rows = ctx.cells(e, where or {})
        my = _config_means(rows, keys, y)
        if derived is not None:
            xs += [derived[1](r) for _, r in my.iterrows()]
            ys += list(my["mean"])
            ns += [int(k) for k in my["n"]]
        else:
            both = _config_means(rows, keys, x).merge(my, on=keys, suffixes=("_x", "_y"))
            xs += list(both["mean_x"])
            ys += list(both["mean_y"])
            ns += [int(min(a, b)) for a, b in zip(both["n_x"], both["n_y"])]
    what = "configurations" if len(keys) > 1 else f"values of {keys[0]}"
    if len({round(float(v), 9) for v in xs}) < 3:
        return Verdict(NOT_RUN, f"{len(set(xs))} distinct value(s) of {x} ran (3 needed)", min(ns, default=0))
    bound, above = (at_least, True) if at_least is not None else (at_most, False)
    r, lo, hi = correlation_ci(xs, ys, method, CI_LEVEL)
    outcome = interval_side(lo, hi, bound, above=above)
    symbol = {"spearman": "Spearman rho", "pearson": "Pearson r"}.get(method, method)
    return _decide(
        [outcome],
        f"{symbol}({x}, {y}) over {len(xs)} {what} = {r:.3f}, {CI_LEVEL:.0%} bootstrap interval "
        f"[{lo:.2f}, {hi:.2f}] (bound {'>=' if above else '<='} {bound:g}){_mark(outcome, '')}",
        min(ns),
    )


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
        ma = _config_means(ctx.cells(ea, where_a or {}), list(on), metric)
        mb = _config_means(ctx.cells(eb, where_b or {}), list(on), metric)
        both = ma.merge(mb, on=list(on), suffixes=("_a", "_b"))
        diffs += list(both["mean_a"] - both["mean_b"])
        ns += list(np.minimum(both["n_a"], both["n_b"]).astype(int))
        sizes += list(np.maximum(both["mean_a"].abs(), both["mean_b"].abs()))
    if not diffs:
        return Verdict(NOT_RUN, "no configuration ran in both experiments of a pair")
    d, se, k = mean_se(diffs)
    band = t_quantile(k - 1) * se if k > 1 else n1_fraction(pair=True) * float(sizes[0])  # one configuration: n = 1
    outcome = ordering(d, band, min_gap)
    return _decide(
        [outcome],
        f"mean {metric} difference over {len(diffs)} configurations = {d:.4g} ± {se:.2g} "
        f"(bound >= {min_gap:g}; noise band {band:.2g}){_mark(outcome)}",
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
    return _decide(
        [outcome],
        f"{metric}: {what} {ours:.4g} (n {len(vals)}) vs best of {len(rvals)} reference cells "
        f"{best:.4g} (difference {ours - best:.3g}, bound >= {min_gap:g}, noise band {band:.2g})"
        f"{_mark(outcome, '')}",
        len(vals),
    )


# -- curves ---------------------------------------------------------------------------------------------------


def _mean_curve(curves: pd.DataFrame, metric: str) -> pd.Series:
    if curves.empty or metric not in curves or "step" not in curves:
        return pd.Series(dtype=float)
    c = curves.assign(**{metric: pd.to_numeric(curves[metric], errors="coerce")}).dropna(subset=[metric])
    return c.groupby("step")[metric].mean().sort_index()


def _time_to(
    curve: pd.Series, fraction: float, lower_is_better: bool, early: pd.Series | None = None
) -> tuple[float, float]:
    """(last evaluated step before, first evaluated step at) which the curve has made `fraction` of its total
    improvement (first value -> best): the crossing lies between the two (both 0 if it starts there). With `early`
    (the same runs' first iterations again, evaluated more often): the improvement is still the whole curve's, the
    crossing is looked for in `early` first, and only past its last step in the whole curve."""
    v = -curve if lower_is_better else curve
    start, best = float(v.iloc[0]), float(v.max())
    target = start + fraction * (best - start)
    if early is not None and len(early):
        e = -early if lower_is_better else early
        hit = e.to_numpy() >= target - 1e-12
        if hit.any():
            i = int(np.argmax(hit))
            return (float(e.index[i - 1]) if i else 0.0), float(e.index[i])
        end, v = float(e.index[-1]), v[v.index > e.index[-1]]
        if not (v.to_numpy() >= target - 1e-12).any():  # the rest of the curve never gets there again
            return end, float(curve.index[-1])
        i = int(np.argmax(v.to_numpy() >= target - 1e-12))
        return (float(v.index[i - 1]) if i else end), float(v.index[i])
    i = int(np.argmax(v.to_numpy() >= target - 1e-12))
    return float(v.index[max(i - 1, 0)]), float(v.index[i])


def _with_early(full: pd.DataFrame, early: pd.DataFrame, by: str, key, metric: str):
    """(whole mean curve, early mean curve or None, seeds) of one value `key` of `by`: where the early experiment has
    curves for it, both means over the seeds it shares with the whole curves (improvement and crossing from the same
    runs); else the whole curves over all their seeds."""
    f = full[full[by] == key]
    e = early[early[by] == key] if by in early and len(early) else early.iloc[0:0]
    if len(e) and "seed" in f and "seed" in e:
        seeds = set(f["seed"].astype(str)) & set(e["seed"].astype(str))
        f, e = (
            (f[f["seed"].astype(str).isin(seeds)], e[e["seed"].astype(str).isin(seeds)]) if seeds else (f, e.iloc[0:0])
        )
    n = int(f["seed"].nunique()) if "seed" in f else 1
    return _mean_curve(f, metric), (_mean_curve(e, metric) if len(e) else None), n


def _faster(a: tuple[float, float], b: tuple[float, float], ratio: float):
    """Is crossing a below `ratio` x crossing b, each known only between two evaluations ((before, at] steps)?
    Decided only where the two intervals are apart, neither overlapping nor touching: a mean curve's crossing moves
    by an evaluation with its seeds, so crossings within one evaluation of each other (or both at the first) order
    nothing. Then True / False where every pair of times in the intervals agrees, else UNRESOLVED (the curves'
    spacing decides, not the methods)."""
    (pa, ta), (pb, tb) = a, b
    if not (ta < pb or tb < pa):
        return UNRESOLVED
    if pb > 0 and ta / pb <= ratio:  # a's latest possible time against b's earliest
        return True
    if pa / tb >= ratio:
        return False
    return UNRESOLVED


def _set_outcome(outcomes: list):
    """One set's outcome over its comparisons (the fast curve against each slow one): False where one is clearly
    not faster, True where every one is faster, None where one has not run, else UNRESOLVED."""
    if any(o is False for o in outcomes):
        return False
    if outcomes and all(o is True for o in outcomes):
        return True
    if any(o is None for o in outcomes):
        return None
    return UNRESOLVED


def converges_faster(
    ctx,
    experiments: list[str],
    fast: dict,
    slow: list[dict],
    by: str = "dataset",
    metric: str = "test_nll",
    fraction: float = 0.9,
    ratio: float = 1.0,
    lower_is_better: bool = True,
    fast_experiments: list[str] | None = None,
    early: dict[str, str] | None = None,
) -> Verdict:
    """Per value of `by` (a set), the mean learning curve (over seeds) of the `fast` cells makes `fraction` of its
    total improvement in fewer than `ratio` x the iterations each `slow` one needs (curves: ctx.curves). A curve's
    crossing is known only between two evaluations, so each comparison is faster, not faster, or unresolved
    (:func:`_faster`); a set is faster when it is against every slow side, not faster when it clearly is not
    against one, else unresolved. The claim is decided per set on the sets the evaluations resolve, named in the
    verdict: it does not hold where one resolved set is not faster, holds where every resolved set is, and is not
    testable where none resolves. A side's `label` names it ("BALI-L"). `early`: {experiment: the experiment of its
    cells' first iterations evaluated more densely}; where those ran, a crossing is read from them (over the seeds
    they ran) and the improvement still from the whole curves."""
    sets: dict[tuple, list] = {}  # (experiment, set) -> [(outcome, text)] over the slow sides
    missing, ns = [], []

    def first_iterations(experiment: str, where: dict) -> pd.DataFrame:
        name = (early or {}).get(experiment)
        return ctx.curves(name, where) if name else pd.DataFrame()

    for i, exp in enumerate(experiments):
        f_exp = (fast_experiments or experiments)[i]
        cf, ef = ctx.curves(f_exp, _coords(fast)), first_iterations(f_exp, _coords(fast))
        for w in slow:
            cs, es = ctx.curves(exp, _coords(w)), first_iterations(exp, _coords(w))
            keys = sorted(set(cf[by]) & set(cs[by])) if by in cf and by in cs else []
            if not keys:
                sides = ((f_exp, fast, cf), (exp, w, cs))
                absent = [f"{e} {_words(c)}" for e, c, df in sides if df.empty or by not in df]
                missing.append(
                    f"{' and '.join(absent)}: no curves"
                    if absent
                    else f"{_words(fast)} ({f_exp}) and {_words(w)} ({exp}): no common {by} with curves"
                )
                continue
            for k in keys:
                (a, ea, na), (b, eb, nb) = _with_early(cf, ef, by, k, metric), _with_early(cs, es, by, k, metric)
                if len(a) < 2 or len(b) < 2:
                    sets.setdefault((exp, k), []).append((None, f"{_words(w)}: too few evaluations"))
                    continue
                (pa, ta), (pb, tb) = crossings = (
                    _time_to(a, fraction, lower_is_better, ea),
                    _time_to(b, fraction, lower_is_better, eb),
                )
                outcome = _faster(*crossings, ratio)
                ns.append(min(na, nb))
                why = ""
                if outcome == UNRESOLVED:
                    why = (
                        " (both at the first evaluation: below the curves' resolution)"
                        if pa == pb == 0
                        else " (within one evaluation of each other: below the curves' resolution)"
                        if not (ta < pb or tb < pa)
                        else f" (crossings between evaluations: ratio in ({pa / tb:.2g}, "
                        f"{ta / pb if pb else float('inf'):.2g}), below the curves' resolution)"
                    )
                dense = [
                    f"{early[x]} ({n} seed{'s' * (n > 1)})"
                    for x, e, n in ((f_exp, ea, na), (exp, eb, nb))
                    if e is not None
                ]
                if dense:
                    why += f" [crossing{'s' * (len(dense) > 1)} from {' and '.join(dense)}]"
                sets.setdefault((exp, k), []).append(
                    (outcome, f"{_words(fast)} {pa:g}-{ta:g} vs {_words(w)} {pb:g}-{tb:g}{why}")
                )
    results, parts, resolved, unresolved = [], [], [], []
    for (_, k), found in sets.items():
        outcome = _set_outcome([o for o, _ in found])
        results.append(outcome)
        word = {True: "faster", False: "not faster", UNRESOLVED: "not resolved", None: "not run"}[outcome]
        parts.append(f"{k} {word} ({'; '.join(t for _, t in found)})")
        if outcome is True or outcome is False:
            resolved.append(str(k))
        elif outcome == UNRESOLVED:
            unresolved.append(str(k))
    results += [None] * len(missing)
    measured = (
        f"iterations to {fraction:.0%} of the {metric} improvement, each crossing between the two evaluations "
        f"given (bound: < {ratio:g} x), per set: " + "; ".join(parts + missing)
    )
    n = min(ns, default=0)
    if any(r is False for r in results):
        return Verdict(FAILS, measured, n)
    if _SUBSET_OK.get() and any(r is not None for r in results):  # decided on the sets that ran
        results = [r for r in results if r is not None]
    if not results or any(r is None for r in results):
        return Verdict(NOT_RUN, measured if parts or missing else "no cell ran", n)
    if not resolved:
        return Verdict(NOT_TESTABLE, f"the cells cannot resolve it: {measured}", n)
    subset = (
        f"decided on {', '.join(resolved)}, the sets whose evaluations resolve the crossings; not resolved: "
        + ", ".join(unresolved)
        if unresolved
        else ""
    )
    return Verdict(HOLDS, measured, n, subset=subset)


def still_improving(
    ctx,
    experiment: str,
    metric: str,
    where: dict | None = None,
    by: str | None = None,
    at: str = "smallest",
    window: int = 10,
    tail: float = 0.25,
) -> Verdict:
    """At the smallest (largest) value of `by`, the mean curve's last `window` evaluations average above the
    `window` evaluations ending at (1 - tail) of training by more than the noise (t x s.e. of the per-seed
    differences, or the family's n = 1 band with one seed): training has not converged yet."""
    curves = ctx.curves(experiment, where or {})
    if curves.empty:
        return Verdict(NOT_RUN, "no curves")
    label = ""
    if by is not None and by in curves:
        values = sorted(set(curves[by]))
        v = values[0] if at == "smallest" else values[-1]
        curves, label = curves[curves[by] == v], f" at {by} = {v}"
    c = _mean_curve(curves, metric)
    c = c[c.index > 0]
    if len(c) < 4:
        return Verdict(NOT_RUN, f"{len(c)} evaluations{label}")
    w = max(1, min(window, len(c) // 4))
    cut = c[c.index <= (1 - tail) * c.index.max()]
    before, last = float(cut.iloc[-w:].mean()), float(c.iloc[-w:].mean())
    n = int(curves["seed"].nunique()) if "seed" in curves else 1
    band, how = n1_fraction(pair=True) * max(abs(last), abs(before)), ""
    if n > 1:  # per seed, the same two windows: the paired differences' s.e.
        steps_last, steps_before = set(c.index[-w:]), set(cut.index[-w:])
        d = []
        for _, g in curves.groupby("seed"):
            g = g.assign(**{metric: pd.to_numeric(g[metric], errors="coerce")})
            a, b = g[g["step"].isin(steps_last)][metric].mean(), g[g["step"].isin(steps_before)][metric].mean()
            if math.isfinite(a) and math.isfinite(b):
                d.append(a - b)
        if len(d) > 1:
            band, how = paired_band(mean_se(d)[1], len(d)), f", paired over {len(d)} seeds"
    outcome = ordering(last - before, band)
    return _decide(
        [outcome],
        f"{metric}{label}: last {w} evaluations {last:.4g} vs {before:.4g} at {1 - tail:.0%} of "
        f"training (noise band {band:.2g}{how}){_mark(outcome)}",
        n,
    )


def all_have_status(ctx, experiment: str, status: str, where: dict | None = None) -> Verdict:
    """Every cell of `experiment` (with the coordinates `where`) that ran ended with `status` (e.g. every
    Augerino run without the safe switch 'diverged': a non-finite loss)."""
    rows = ctx.cells(experiment, where or {})
    if rows.empty:
        return Verdict(NOT_RUN, "no cell ran")
    counts = rows["status"].value_counts()
    measured = f"{experiment} {_words(where or {})}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
    return Verdict(HOLDS if set(counts.index) == {status} else FAILS, measured, len(rows))


def smooth_predictive(
    ctx, experiment: str, where: dict | None = None, by: str = "dataset", entropy_far_min: float | None = None
) -> Verdict:
    """Every cell's predictive meets the numeric reading of "excellent and smooth fit, small uncertainty close to
    the data, increased further away" (reprokit.predictive_shape.SHAPE, decided by reprokit.predictive_shape.meets), per value of `by`:
    from the numbers each cell recorded (its shape_<name> metrics); a cell that recorded none counts as not run.
    Classification's "increased" is relative (entropy far from the data over close to it); `entropy_far_min` (nats)
    adds an absolute floor far from the data, a reading of ours shown as a variant."""

    rows = ctx.cells(experiment, where or {})
    if rows.empty or by not in rows:
        return Verdict(NOT_RUN, "no cell ran")
    results, parts = [], []
    for value, g in rows.groupby(by, sort=True):
        shapes = [predictive_shape(r) for _, r in g.iterrows()]
        shapes = [sh for sh in shapes if sh]
        if not shapes:
            results.append(None)
            continue
        ok = [meets_shape(sh, entropy_far_min) for sh in shapes]
        results.append(all(ok))
        parts.append(
            f"{value}: "
            + "; ".join(shape_text(sh) + ("" if good else " (short of the reading)") for sh, good in zip(shapes, ok))
        )
    return _decide(results, " | ".join(parts), min((len(g) for _, g in rows.groupby(by)), default=0))


def underfits_and_overconfident(
    ctx, experiment: str, large: dict, small: dict, where: dict | None = None, by: str = "dataset"
) -> Verdict:
    """Both halves of "underfitting if the KL down-weighting factor is large and overconfidence if the factor is
    small" (BALI App. I.2), per value of `by`, from the shape numbers each cell recorded (reprokit.predictive_shape):
    underfitting, the cells at `large` explain under SHAPE's `underfit_explained_max` of their training targets
    against the best constant prediction (reprokit.predictive_shape.explained) where those at `small` explain at least that
    much; overconfidence, the cells at `small` lack Fig. 1's "increased predictive uncertainty further away"
    (reprokit.predictive_shape.uncertainty_grows: their uncertainty far from the data under 2x that close to it). A shape
    reading of single predictives, decided on its numbers without a band, as :func:`smooth_predictive`. A side's
    `label` names it ("KL factor 1")."""
    bound = SHAPE["underfit_explained_max"]
    rows = ctx.cells(experiment, where or {})
    if rows.empty or by not in rows:
        return Verdict(NOT_RUN, "no cell ran")
    results, parts, ns = [], [], []
    for value, g in rows.groupby(by, sort=True):
        at_large = g[[_fits(dict(r), _coords(large)) for _, r in g.iterrows()]]
        at_small = g[[_fits(dict(r), _coords(small)) for _, r in g.iterrows()]]
        fit_large = [explained(r) for _, r in at_large.iterrows()]
        fit_small = [explained(r) for _, r in at_small.iterrows()]
        shapes = [predictive_shape(r) for _, r in at_small.iterrows()]
        if not fit_large or not fit_small or any(x is None for x in fit_large + fit_small) or not all(shapes):
            results.append(None)
            parts.append(f"{value}: not run")
            continue
        ns.append(min(len(at_large), len(at_small)))
        underfit = max(fit_large) < bound <= min(fit_small)
        confident = not any(uncertainty_grows(sh) for sh in shapes)
        results.append(underfit and confident)
        classification = "entropy_far" in shapes[0]
        what = "training fit (1 - NLL / label entropy)" if classification else "training fit R^2"
        grows = "; ".join(
            f"entropy far from the data {sh['entropy_far']:.3g} nats, {sh['far_over_near']:.3g}x that near it"
            if classification
            else f"predictive sd far from the data {sh['far_over_near']:.2f}x that near it"
            for sh in shapes
        )
        limit = f"under {SHAPE['far_over_near_min']:g}x" + (
            f", or under {SHAPE['entropy_resolution']:g} nats far away" if classification else ""
        )
        parts.append(
            f"{value}: underfitting at {_words(large)}: {what} {', '.join(f'{x:.3g}' for x in fit_large)} against "
            f"{', '.join(f'{x:.3g}' for x in fit_small)} at {_words(small)} (bound: below {bound:g} at "
            f"{_words(large)}, at least {bound:g} at {_words(small)}){'' if underfit else ' (not underfit)'}; "
            f"overconfidence at {_words(small)}: {grows} "
            f"(bound: {limit}){'' if confident else ' (not overconfident: it grows)'}"
        )
    return _decide(results, " | ".join(parts), min(ns, default=0))


CHECKS = {
    f.__name__: f
    for f in (
        peak,
        inputs_kept,
        threshold,
        compare_entries,
        gap_shrinks,
        compare,
        correlation,
        spread_at_most,
        paired_gap,
        vs_best_of,
        converges_faster,
        still_improving,
        all_have_status,
        smooth_predictive,
        underfits_and_overconfident,
    )
}


def check(ctx, name: str, args: dict) -> Verdict:
    if name not in CHECKS:
        raise KeyError(f"no claim check '{name}' (known: {', '.join(sorted(CHECKS))})")
    return CHECKS[name](ctx, **args)


def _sides(args: dict) -> tuple:
    """A check's `a` and each of its `b` (one or a list): rows or columns of a table, or {experiment, where}."""
    b = args.get("b")
    return (args.get("a"), *(b if isinstance(b, list) else [b]))


def scope(ctx, claim) -> tuple[list[str], str | None]:
    """(the experiments a claim reads, the metric it compares): its args' `experiment(s)` or its artefact's
    experiments; its args' `metric` or its artefact's `ours.metric`."""
    args = claim.args
    named = args.get("experiments") or args.get("experiment") or []
    experiments = [named] if isinstance(named, str) else list(named)
    for side in (*_sides(args), args.get("reference")):
        if isinstance(side, dict) and side.get("experiment") and side["experiment"] not in experiments:
            experiments.append(side["experiment"])  # compare's sides, vs_best_of's reference: their own experiment
    for pair in args.get("pairs") or []:  # paired_gap's [a, b] experiments
        experiments += [e for e in pair if e not in experiments]
    table = (getattr(ctx, "arts", {}) or {}).get(args.get("artefact", "")) if args.get("artefact") else None
    if table and not experiments:  # a table check: the experiments its entries read (ours, rows, columns)
        specs = [table.get("ours") or {}, *(table.get("rows") or {}).values(), *(table.get("columns") or {}).values()]
        experiments = list(dict.fromkeys(x["experiment"] for x in specs if isinstance(x, dict) and x.get("experiment")))
    if not experiments:
        experiments = list((getattr(ctx, "artefacts", {}).get(claim.artefact) or {}).get("experiments") or [])
    if not experiments:
        experiments = sorted(
            {
                r["experiment"]
                for r in ctx.arts.get(args.get("artefact", claim.artefact), {}).get("rows", {}).values()
                if isinstance(r, dict) and r.get("experiment")
            }
        )
    metric = args.get("metric") or (ctx.arts.get(args.get("artefact", claim.artefact)) or {}).get("ours", {}).get(
        "metric"
    )
    return experiments, metric


def _row_metric(ctx, artefact: str, row: str) -> str | None:
    """The metric a row of the artefact's table shows, where its spec names one (Table 8's timing ratios)."""
    spec = ((getattr(ctx, "arts", {}).get(artefact) or {}).get("rows") or {}).get(row)
    return spec.get("metric") if isinstance(spec, dict) else None


def entry_metrics(ctx, claim) -> list[str]:
    """The metrics of the table rows a table-entry claim compares (its args' `rows`, or `a` / `b` with
    `axis: rows`), each row's `metric` in its artefact's spec (Table 8: a timing ratio per row)."""
    args = claim.args
    named = list(args.get("rows") or []) + (list(_sides(args)) if args.get("axis") == "rows" else [])
    found = [_row_metric(ctx, args.get("artefact", claim.artefact), r) for r in named if isinstance(r, str)]
    return list(dict.fromkeys(m for m in found if m))


def _grid(ctx, experiment: str) -> list[dict] | None:
    """The coordinates of every cell of `experiment` in the scale's grid (the pipeline config at hand), None where
    no config is at hand."""
    grid = getattr(ctx, "grid", None)
    return grid(experiment) if grid is not None else None


def _fits(coords: dict, where: dict) -> bool:
    """Whether cell coordinates meet a claim's selector (a value or a list of either), keys it lacks ignored."""
    for key, value in where.items():
        if key == "experiment" or key not in coords:
            continue
        options = value if isinstance(value, (list, tuple)) and not isinstance(coords[key], (list, tuple)) else [value]
        if not any(norm(coords[key]) == norm(v) or str(norm(coords[key])) == str(norm(v)) for v in options):
            return False
    return True


def selectors(ctx, claim, experiment: str) -> list[dict]:
    """The coordinate selectors of the cells of `experiment` the claim reads: its `where` with each side (`a`, `b`,
    `fast`, `slow`, `reference`) and group, or each table entry's where for a table check; [{}] for all."""
    args = claim.args
    base = dict(args.get("where") or {})
    if args.get("artefact") and hasattr(ctx, "_entry"):
        entries = []
        rows, cols = list(args.get("rows") or []), list(args.get("columns") or [])
        if args.get("over") is not None:
            sides = [args.get("a"), *(args["b"] if isinstance(args.get("b"), list) else [args.get("b")])]
            pairs = [(o, x) for o in args["over"] for x in sides if x is not None]
            entries = pairs if args.get("axis", "columns") == "columns" else [(x, o) for o, x in pairs]
        elif rows and cols:
            entries = [(r, c) for r in rows for c in cols]
        out = []
        for row, col in entries:
            found = ctx._entry(args.get("artefact", claim.artefact), row, col)
            if isinstance(found, tuple) and found[0] == experiment:
                out.append(found[3])
        return out or [{}]
    sides = []
    for key in ("a", "fast", "reference"):
        side = args.get(key)
        if isinstance(side, dict):
            sides.append(side.get("where", side) if key == "reference" else side)
    for key in ("b", "slow"):
        side = args.get(key)
        sides += [x for x in ([side] if isinstance(side, dict) else side or []) if isinstance(x, dict)]
    sides = [x for x in sides if x.get("experiment", experiment) == experiment] or [{}]
    groups = args.get("groups") or [{}]
    return [{**base, **g, **x} for x in sides for g in groups]


def coverage(ctx, claim, experiments: list[str]) -> str:
    """What the claim's cells miss of the grid its words need at this scale: "" when every cell it reads ran (or is
    n/a for want of data), else how many of which experiment did not, with an example of what is missing."""
    missing = []
    for experiment in experiments:
        grid = _grid(ctx, experiment)
        if not grid:
            continue
        sel = selectors(ctx, claim, experiment)
        needed = [c for c in grid if any(_fits(c, w) for w in sel)]
        # the seeds are the rule's business (its s.e. or its family's spread), not the words': a configuration
        # counts as covered when any of its seeds ran (or is n/a for want of data)
        axes = [a for a in grid[0] if a not in noise.SEED_AXES]

        def key(coords, axes=axes) -> tuple:
            return tuple(str(norm(coords.get(a))) for a in axes)

        df = ctx.table(experiment) if hasattr(ctx, "table") else None
        ran = df[df["status"].isin(("completed", "diverged", "oom", "unavailable"))] if df is not None else []
        done = {key(r) for _, r in ran.iterrows()} if len(ran) else set()
        configurations = {key(c): c for c in needed}
        lacking = [c for k, c in configurations.items() if k not in done]
        total = len(configurations)
        if lacking:
            example = ", ".join(f"{k}={v}" for k, v in lacking[0].items() if k not in noise.SEED_AXES)
            missing.append(
                f"{total - len(lacking)} of {total} configurations of {experiment} ran (missing e.g. {example or 'all'})"
            )
    return "; ".join(missing)


# What a `requires` key means in the verdict's words (a setting's own name otherwise)
REQUIRED_WORDS = {
    "partition_updates": "updates of their least-updated partition",
    "steps": "iterations",
}


def _read(ctx, claim, experiments: list[str], key: str) -> list[tuple[dict, float]]:
    """(coordinates, value of `key`) of every cell in ctx's grid the claim reads."""
    values = getattr(ctx, "cell_values", None)
    found = []
    for experiment in experiments:
        for coords, settings in (values(experiment) if values else []) or []:
            if any(_fits(coords, w) for w in selectors(ctx, claim, experiment)) and key in settings:
                value = settings[key]
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found.append(({**coords, "experiment": experiment}, float(value)))
    return found


def short_of(ctx, claim, experiments: list[str]) -> str:
    """Where the claim's cells run with less than its words need (`requires`: {setting: minimum}): "" when every
    cell it reads meets each minimum, else which setting falls short and by how much. A minimum of "paper" asks
    each cell for at least what the same configuration runs at paper scale (its seed aside): e.g. every partition
    updated as often as the paper's schedule updates it."""
    if not claim.requires:
        return ""
    out = []
    for key, minimum in claim.requires.items():
        words = REQUIRED_WORDS.get(key, key)
        found = _read(ctx, claim, experiments, key)
        if not found:
            continue
        if minimum != "paper":
            least = min(v for _, v in found)
            if least < minimum:
                out.append(f"its cells run {key} = {least:g}, its words need at least {minimum:g}")
            continue
        if ctx.scale == "paper" or not hasattr(ctx, "at_scale"):
            continue
        paper = {_config(c): v for c, v in _read(ctx.at_scale("paper"), claim, experiments, key)}
        ratios = [(v / paper[_config(c)], v, paper[_config(c)]) for c, v in found if paper.get(_config(c))]
        if ratios and min(ratios)[0] < 1:
            ratio, value, at_paper = min(ratios)
            out.append(
                f"its cells run as few as {value:g} {words} where the paper's schedule gives the same configuration "
                f"{at_paper:g} ({ratio:.0%} of it)"
            )
    return "; ".join(out)


def _config(coords: dict) -> tuple:
    return tuple(sorted((k, _key(v)) for k, v in coords.items() if k != "seed"))


def _leaning(leans: list) -> str:
    if not leans:
        return ""
    if all(leans):
        return LEANS_WITH
    if not any(leans):
        return LEANS_AGAINST
    return "leans both ways"


def verdict(ctx, claim) -> Verdict:
    """The claim's verdict at ctx.scale: its check's, then what its cells cover: "not testable" where its
    `testable_at` scales exclude this one, where a single value decided it and its family has no seed spread,
    where its cells miss part of the grid its words need (unless its `subset` allows deciding on what ran, which
    the verdict then states), or where they run with less than its `requires`; "by construction" where its check
    holds whatever was trained. What the cells measured is always shown. An inconclusive verdict states which way it
    leans."""
    experiments, metric = scope(ctx, claim)
    names = [metric] if metric else entry_metrics(ctx, claim)
    measure = experiments and hasattr(ctx, "spread")
    spreads = {m: ctx.spread(experiments, m) for m in names} if measure else {}
    # one metric: its Spread; several (table rows of their own metric): each entry reads its own (noise.entry)
    spread = spreads.get(metric) if metric else (spreads if any(spreads.values()) else None)
    metric = metric or ", ".join(names) or None
    leans: list = []
    token, subset_token = _LEANS.set(leans), _SUBSET_OK.set(bool(claim.subset))
    try:
        with noise.measured(spread) as used:
            v = check(ctx, claim.check, claim.args)
    finally:
        _LEANS.reset(token)
        _SUBSET_OK.reset(subset_token)
    if v.status == INCONCLUSIVE:
        v = replace(v, lean=_leaning(leans))
    if used and v.status != NOT_RUN:
        if spread:
            band = noise.text(spread, pair=any(used))
            machine = ctx.machine(experiments, metric) if hasattr(ctx, "machine") and metric else None
            if machine is not None:
                band += (
                    f"; beside it, not part of the band: machine spread {machine.rel_sd:.2%} over {machine.groups} "
                    f"re-run pairs ({machine.source})"
                )
            v = replace(v, measured=f"{v.measured} [{band}]")
        elif v.status in (INCONCLUSIVE, NOT_COMPARABLE):  # a single value, no spread: nothing was ordered
            v = Verdict(
                NOT_TESTABLE,
                f"a single cell decides it and its family has no seed spread at this scale (a cell of it with "
                f"{noise.MIN_SEEDS} seeds is needed); measured: {v.measured}",
                v.n,
            )
    if claim.by_construction and v.status not in (NOT_RUN,):  # whatever the cells say, it is no evidence
        v = Verdict(BY_CONSTRUCTION, f"{claim.by_construction}; measured: {v.measured} ({v.label})", v.n)
    tested = v.status in TESTED
    missing = coverage(ctx, claim, experiments) if tested else ""
    if missing and claim.subset:
        v = replace(v, subset=f"{claim.subset}: {missing}")
    elif missing:
        v = Verdict(
            NOT_TESTABLE,
            f"partial grid: {missing}; on the cells that ran: {v.measured} ({v.label} by the check's reading)",
            v.n,
        )
    short = short_of(ctx, claim, experiments) if v.status in TESTED else ""
    if short:
        v = Verdict(NOT_TESTABLE, f"{short}; measured: {v.measured} ({v.label} by the check's reading)", v.n)
    if claim.testable_at and ctx.scale not in claim.testable_at:
        return Verdict(
            NOT_TESTABLE,
            f"testable at {', '.join(claim.testable_at)} scale only; measured here: "
            f"{v.measured} ({v.label} by the check's reading)",
            v.n,
        )
    return v
