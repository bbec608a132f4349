"""Checks of learning curves: one method makes a share of its improvement in fewer iterations than another
(`converges_faster`, each crossing known only between two evaluations) and training has not converged yet
(`still_improving`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..store.stats import mean_se
from .decide import (
    FAILS,
    HOLDS,
    NOT_RUN,
    NOT_TESTABLE,
    UNRESOLVED,
    Verdict,
    decide,
    mark,
    ordering,
    paired_band,
    subset_allowed,
)
from .noise import n1_fraction
from .sides import side_coords, side_words


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
        cf, ef = ctx.curves(f_exp, side_coords(fast)), first_iterations(f_exp, side_coords(fast))
        for w in slow:
            cs, es = ctx.curves(exp, side_coords(w)), first_iterations(exp, side_coords(w))
            keys = sorted(set(cf[by]) & set(cs[by])) if by in cf and by in cs else []
            if not keys:
                sides = ((f_exp, fast, cf), (exp, w, cs))
                absent = [f"{e} {side_words(c)}" for e, c, df in sides if df.empty or by not in df]
                missing.append(
                    f"{' and '.join(absent)}: no curves"
                    if absent
                    else f"{side_words(fast)} ({f_exp}) and {side_words(w)} ({exp}): no common {by} with curves"
                )
                continue
            for k in keys:
                (a, ea, na), (b, eb, nb) = _with_early(cf, ef, by, k, metric), _with_early(cs, es, by, k, metric)
                if len(a) < 2 or len(b) < 2:
                    sets.setdefault((exp, k), []).append((None, f"{side_words(w)}: too few evaluations"))
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
                    (outcome, f"{side_words(fast)} {pa:g}-{ta:g} vs {side_words(w)} {pb:g}-{tb:g}{why}")
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
    if subset_allowed() and any(r is not None for r in results):  # decided on the sets that ran
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
    return decide(
        [outcome],
        f"{metric}{label}: last {w} evaluations {last:.4g} vs {before:.4g} at {1 - tail:.0%} of "
        f"training (noise band {band:.2g}{how}){mark(outcome)}",
        n,
    )


CHECKS = (converges_faster, still_improving)
