"""Checks of how a metric runs along an axis or over configurations: where it peaks (`peak`) and how it correlates
with another metric or a quantity of the coordinates (`correlation`, a bootstrap interval against its bound).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store.stats import correlation_ci, mean_se
from .decide import CI_LEVEL, HOLDS, NOT_RUN, Verdict, decide, interval_side, mark, noise_band, ordering, paired_band
from .sides import config_means, coord_key


def _means(rows: pd.DataFrame, by: str, metric: str) -> pd.DataFrame:
    """Mean, s.e. and n of `metric` per value of `by` over the rows with a finite value."""
    out = []
    for key, g in rows.groupby(by) if by in rows else []:
        v = pd.to_numeric(g[metric], errors="coerce").dropna() if metric in g else pd.Series(dtype=float)
        if len(v):
            m, se, n = mean_se(v)
            out.append((key, m, se, n))
    return pd.DataFrame(out, columns=[by, "mean", "se", "n"]).sort_values(by)


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
            f"{rival[axis]:g}): {gap:.4g}, noise band {band:.3g} ({how}){mark(outcome)}"
        )
    else:  # reached counts even inside the band; short of it by less than the band is inconclusive
        outcome = ordering(-gap, band) if gap > 0 else True
        measured = (
            f"{metric} at {axis} = {at:g}: {here['mean']:.4g}; best above ({axis} = {rival[axis]:g}): "
            f"{rival['mean']:.4g} (noise band {band:.2g}, {how}){mark(outcome, '')}"
        )
    return decide([outcome], measured, n)


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


def _later_share(value) -> float:
    """Share of the total in every entry but the first of an unnormalised proportion list."""
    v = [float(x) for x in coord_key(value)]
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
    (report.store.stats.correlation_ci) lies beyond the bound; wholly on the other side does not hold; straddling it is
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
        my = config_means(rows, keys, y)
        if derived is not None:
            xs += [derived[1](r) for _, r in my.iterrows()]
            ys += list(my["mean"])
            ns += [int(k) for k in my["n"]]
        else:
            both = config_means(rows, keys, x).merge(my, on=keys, suffixes=("_x", "_y"))
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
    return decide(
        [outcome],
        f"{symbol}({x}, {y}) over {len(xs)} {what} = {r:.3f}, {CI_LEVEL:.0%} bootstrap interval "
        f"[{lo:.2f}, {hi:.2f}] (bound {'>=' if above else '<='} {bound:g}){mark(outcome, '')}",
        min(ns),
    )


CHECKS = (peak, correlation)
