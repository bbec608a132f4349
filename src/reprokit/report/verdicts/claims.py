"""Checks of the papers' claims in words, computed from our results, never typed in.

The checks live in one module per family, all deciding by the one rule of `decide` (statuses, :class:`Verdict`,
noise bands, orderings): `comparisons` (one side against another), `bounds` (a value against a fixed bound),
`trends` (along an axis: a peak, a correlation), `convergence` (learning curves) and `readings` (decided without a
band: statuses, the shape of single predictives); `coverage` says what a claim's cells cover. This module gathers
them in :data:`CHECKS` and gives a claim its verdict (:func:`verdict`).

Each claim in config/papers/<paper>.yaml names one function of :data:`CHECKS` and its arguments. A check
gets the report's results context `ctx` (reprokit.report.verdicts.results.Context) and returns a
:class:`Verdict`: "holds", "inconclusive" (inside the noise band below), "does not hold", "not comparable", or
"not run" (the cells it needs have not run at this scale, or only some of them and those that ran do not yet
decide it), with the measured quantity and n (the
fewest seeds / splits behind any number it compared). `ctx.cells(experiment, where)` gives the cells that
ran (completed / diverged / out of memory) with the coordinates `where`; `ctx.curves(experiment, where)` their
learning curves (one row per cell and evaluation step); `ctx.ours(artefact, row, column)` our mean ± s.e. of
one of the paper's numbers (reprokit.report.verdicts.results.Ours).

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
  coefficient over the configurations (report.store.stats.correlation_ci) lies on the claimed side of its bound,
  does not hold when the whole interval lies on the other side, and is inconclusive when it straddles the bound.

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

from dataclasses import replace

from . import bounds, comparisons, convergence, noise, readings, trends
from .coverage import coverage, entry_metrics, scope, short_of
from .decide import (
    BY_CONSTRUCTION,
    INCONCLUSIVE,
    LEANS_AGAINST,
    LEANS_WITH,
    NOT_COMPARABLE,
    NOT_RUN,
    NOT_TESTABLE,
    TESTED,
    Verdict,
    checking,
)

# every check a claim may name (its `check:` in config/papers/<paper>.yaml), by family
CHECKS = {f.__name__: f for family in (comparisons, bounds, trends, convergence, readings) for f in family.CHECKS}


def check(ctx, name: str, args: dict) -> Verdict:
    if name not in CHECKS:
        raise KeyError(f"no claim check '{name}' (known: {', '.join(sorted(CHECKS))})")
    return CHECKS[name](ctx, **args)


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
    with checking(bool(claim.subset)) as leans, noise.measured(spread) as used:
        v = check(ctx, claim.check, claim.args)
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
