"""Checks of the papers' claims in words, computed from our results, never typed in.

Each claim in config/papers/<paper>.yaml names one function of :data:`CHECKS` and its arguments. A check
gets the report's results context `ctx` (reprokit.report.reproduction.Context) and returns a
:class:`Verdict`: "holds", "does not hold", or "not run" (the cells it needs have not run at this scale,
or only some of them and those that ran do not yet decide it), with the measured quantity and n (the
fewest seeds / splits behind any number it compared). `ctx.cells(experiment, where)` gives the cells that
ran (completed / diverged / out of memory) with the coordinates `where`; `ctx.ours(artefact, row, column)`
our mean ± s.e. of one of the paper's numbers (reprokit.report.reproduction.Ours).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .stats import mean_se

HOLDS, FAILS, NOT_RUN = "holds", "does not hold", "not run"


@dataclass(frozen=True)
class Verdict:
    status: str  # HOLDS, FAILS or NOT_RUN
    measured: str  # what was measured, in words and numbers
    n: int = 0  # the fewest seeds / splits behind any compared number (0: nothing ran)


def _means(rows: pd.DataFrame, by: str, metric: str) -> pd.DataFrame:
    """Mean, s.e. and n of `metric` per value of `by` over the rows with a finite value."""
    out = []
    for key, g in (rows.groupby(by) if by in rows else []):
        v = pd.to_numeric(g[metric], errors="coerce").dropna() if metric in g else pd.Series(dtype=float)
        if len(v):
            m, se, n = mean_se(v)
            out.append((key, m, se, n))
    return pd.DataFrame(out, columns=[by, "mean", "se", "n"]).sort_values(by)


def _stat(rows: pd.DataFrame, metric: str) -> tuple[float, float, int]:
    if metric not in rows:
        return math.nan, math.nan, 0
    v = pd.to_numeric(rows[metric], errors="coerce")
    if len(v) == 0:
        return math.nan, math.nan, 0
    return mean_se(v)


def _decide(results: list[bool | None], measured: str, n: int) -> Verdict:
    """results: True (holds), False (fails), None (not run) per comparison."""
    if any(r is False for r in results):
        return Verdict(FAILS, measured, n)
    if results and all(r is True for r in results):
        return Verdict(HOLDS, measured, n)
    return Verdict(NOT_RUN, measured or "no cell ran", n)


def peak_at(ctx, experiment: str, axis: str, metric: str, expected, where: dict | None = None) -> Verdict:
    """The mean of `metric` over seeds peaks at `axis` = `expected` (e.g. LML at K = 15 inputs)."""
    rows = ctx.cells(experiment, where or {})
    means = _means(rows, axis, metric)
    if means.empty:
        return Verdict(NOT_RUN, "no cell ran")
    best = means.iloc[int(np.nanargmax(means["mean"].to_numpy()))]
    n = int(means["n"].min())
    measured = (f"{metric} peaks at {axis} = {best[axis]:g} ({best['mean']:.4g}), over {len(means)} values of {axis} "
                f"({means[axis].min():g}-{means[axis].max():g})")
    expected_present = float(expected) in set(means[axis].astype(float))
    if not expected_present:
        return Verdict(NOT_RUN, measured + f"; {axis} = {expected} has not run", n)
    return Verdict(HOLDS if float(best[axis]) == float(expected) else FAILS, measured, n)


def inputs_kept(ctx, experiment: str, prefix: str, expected_first: int, threshold: float = 0.5,
                where: dict | None = None) -> Verdict:
    """The inputs whose mean keep-probability exceeds `threshold` are exactly the first `expected_first`."""
    rows = ctx.cells(experiment, where or {})
    cols = sorted(c for c in rows.columns if c.startswith(prefix))
    if rows.empty or not cols:
        return Verdict(NOT_RUN, "no cell ran")
    probs = rows[cols].apply(pd.to_numeric, errors="coerce").mean()
    kept = [i + 1 for i, p in enumerate(probs) if p > threshold]
    ok = kept == list(range(1, expected_first + 1))
    text = f"inputs kept (mean p > {threshold:g}): {_ranges(kept) or 'none'} of {len(cols)}"
    return Verdict(HOLDS if ok else FAILS, text, len(rows))


def _ranges(idx: list[int]) -> str:
    parts, start = [], None
    for i, v in enumerate(idx):
        if start is None:
            start = v
        if i + 1 == len(idx) or idx[i + 1] != v + 1:
            parts.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(parts)


def better_at_smallest(ctx, experiment: str, metric: str, better: dict, worse: dict, groups: list[dict],
                       axis: str | None = None) -> Verdict:
    """In every group, the mean of `metric` of the `better` cells exceeds the `worse` cells' (at the smallest
    value of `axis` both ran, when given: the low-data regime)."""
    results, parts, ns = [], [], []
    for group in groups:
        a = ctx.cells(experiment, {**group, **better})
        b = ctx.cells(experiment, {**group, **worse})
        label = ", ".join(f"{k}={v}" for k, v in group.items())
        if axis is not None and len(a) and len(b):
            common = sorted(set(a[axis]) & set(b[axis]))
            if common:
                a, b = a[a[axis] == common[0]], b[b[axis] == common[0]]
                label += f", {axis}={common[0]}"
        (ma, _, na), (mb, _, nb) = _stat(a, metric), _stat(b, metric)
        if na == 0 or nb == 0 or not (math.isfinite(ma) and math.isfinite(mb)):
            results.append(None)
            parts.append(f"{label}: not run")
            continue
        results.append(ma > mb)
        ns.append(min(na, nb))
        parts.append(f"{label}: {ma:.4g} vs {mb:.4g}")
    return _decide(results, f"{metric}, {_words(better)} vs {_words(worse)}: " + "; ".join(parts), min(ns, default=0))


def _words(where: dict) -> str:
    return "/".join(str(v) for v in where.values())


def near_value(ctx, experiment: str, metric: str, target: float, rel_tol: float, where: dict | None = None,
               largest: str | None = None) -> Verdict:
    """The mean of `metric` lies within `rel_tol` x |target| of `target`."""
    rows = ctx.cells(experiment, where or {})
    if largest and len(rows):
        rows = rows[rows[largest] == rows[largest].max()]
    m, se, n = _stat(rows, metric)
    if n == 0 or not math.isfinite(m):
        return Verdict(NOT_RUN, "no cell ran", n)
    ok = abs(m - target) <= rel_tol * abs(target)
    size = f" at {largest} = {rows[largest].max():g}" if largest else ""
    return Verdict(HOLDS if ok else FAILS, f"{metric}{size} = {m:.3f} ± {se:.3f} (target {target:.3f} ± {rel_tol:.0%})", n)


def metric_at_least(ctx, experiment: str, metric: str, bound: float, where: dict | None = None) -> Verdict:
    """The mean of `metric` over the cells `where` is at least `bound`."""
    m, se, n = _stat(ctx.cells(experiment, where or {}), metric)
    if n == 0 or not math.isfinite(m):
        return Verdict(NOT_RUN, "no cell ran", n)
    return Verdict(HOLDS if m >= bound else FAILS, f"{metric} = {m:.4f} ± {se:.4f} (bound >= {bound:g})", n)


def better_in_at_least(ctx, experiments: list[str], metric: str, by: str, better: dict, worse: dict,
                       at_least: int, lower_is_better: bool = False) -> Verdict:
    """`better` beats `worse` on `metric` for at least `at_least` values of `by` (e.g. datasets)."""
    wins, compared, ns, parts = 0, 0, [], []
    keys = []
    for exp in experiments:
        a_all, b_all = ctx.cells(exp, better), ctx.cells(exp, worse)
        for key in sorted(set(a_all[by]) | set(b_all[by])) if by in a_all and by in b_all else []:
            keys.append(key)
            (ma, _, na), (mb, _, nb) = _stat(a_all[a_all[by] == key], metric), _stat(b_all[b_all[by] == key], metric)
            if na == 0 or nb == 0 or not (math.isfinite(ma) and math.isfinite(mb)):
                continue
            compared += 1
            win = ma < mb if lower_is_better else ma > mb
            wins += win
            ns.append(min(na, nb))
            parts.append(f"{key} {ma:.4g} vs {mb:.4g}")
    measured = f"{_words(better)} better on {metric} in {wins} of {compared} compared ({'; '.join(parts)})"
    if wins >= at_least:
        return Verdict(HOLDS, measured, min(ns))
    if compared == 0:
        return Verdict(NOT_RUN, "no cell ran")
    # the ones not compared yet could still make it
    missing = max(len(set(keys)) - compared, 0)
    return Verdict(FAILS if wins + missing < at_least else NOT_RUN, measured, min(ns))


def beats(ctx, artefact: str, better: str, worse: list[str], over: list[str], axis: str = "columns",
          lower_is_better: bool = False) -> Verdict:
    """In the artefact's table, our `better` entry beats each `worse` one at every entry of `over`.
    axis "columns": better/worse are columns and `over` rows; "rows": better/worse are rows, `over` columns."""
    results, parts, ns = [], [], []
    def entry(o, name):
        return ctx.ours(artefact, o, name) if axis == "columns" else ctx.ours(artefact, name, o)

    for o in over:
        a = entry(o, better)
        for w in worse:
            b = entry(o, w)
            if a.n == 0 or b.n == 0 or not (math.isfinite(a.mean) and math.isfinite(b.mean)):
                results.append(None)
                parts.append(f"{o}: {w} or {better} not run")
                continue
            results.append(a.mean < b.mean if lower_is_better else a.mean > b.mean)
            ns.append(min(a.n, b.n))
            parts.append(f"{o}: {a.mean:.4g} vs {w} {b.mean:.4g}")
    return _decide(results, f"{better}: " + "; ".join(parts), min(ns, default=0))


def at_most(ctx, artefact: str, rows: list[str], columns: list[str], bound: float) -> Verdict:
    """Every one of our entries (rows x columns) of the artefact is at most `bound`."""
    results, parts, ns = [], [], []
    for r in rows:
        for c in columns:
            s = ctx.ours(artefact, r, c)
            if s.n == 0 or not math.isfinite(s.mean):
                results.append(None)
                parts.append(f"{r} / {c}: not run")
                continue
            results.append(s.mean <= bound)
            ns.append(s.n)
            parts.append(f"{r} / {c}: {s.mean:.3g}")
    return _decide(results, f"bound {bound:g}: " + "; ".join(parts), min(ns, default=0))


CHECKS = {f.__name__: f for f in (peak_at, inputs_kept, better_at_smallest, near_value, metric_at_least,
                                  better_in_at_least, beats, at_most)}


def check(ctx, name: str, args: dict) -> Verdict:
    if name not in CHECKS:
        raise KeyError(f"no claim check '{name}' (known: {', '.join(sorted(CHECKS))})")
    return CHECKS[name](ctx, **args)
