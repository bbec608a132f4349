"""The noise band of a single value, measured: how far one cell's result moves between seeds.

A claim decided on one seed (or split) a side has no standard error. Its band used to be a fixed fraction of the
value (``REL_TOL_N1``), which the machine alone can exceed: the same cell on another CPU moved test accuracy by a
median 0.55 % and test log-likelihood by 2.1 % (a quick build re-run on a second machine, figures/README.md). Seeds
move a cell at least as much as the order of floating-point reductions does (both perturb training from the first
step), so the band of a single value is measured from the seeds the archive already holds:

* :func:`own_spread`: over the cells of the claim's experiments that ran at least two seeds (or splits) with all
  other coordinates equal, the median relative standard deviation of the metric, sd / |mean|; where the claim's
  own experiments ran one seed everywhere, :func:`pooled`, the median over every experiment of that scale that ran
  more (the same metric), measured by ``python -m reprokit.report.records.seed_spread --scale <scale>`` into
  figures/<scale>/seed_spread.json, or the machine spread benchmarks/verdict_stability.py measured (cells re-run
  under another thread count), whichever is larger;
* :func:`measured` sets it for one claim's check; :func:`n1_fraction` is what the checks' n = 1 rules read:
  ``Z_NOISE`` standard deviations (of a difference of two single values: sqrt(2) of them), never below the fixed
  ``REL_TOL_N1``;
* the list :func:`measured` yields says whether the check needed it, so the report states the band and where it
  came from only where a single value decided something.
"""

from __future__ import annotations

import contextlib
import json
import math
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...io import atomic_write_text

Z_NOISE = 2.0  # an effect must exceed this many combined standard errors ...
REL_TOL_N1 = 0.01  # ... or, with one seed a side and no measured spread, this fraction of the larger |value|
SEED_AXES = ("seed",)
MIN_GROUPS = 3  # groups (or re-run pairs) a measured spread needs
# the metrics whose spread is pooled across experiments: a model's scores, not its learned hyperparameters,
# settings, counts or timings
POOLED_PREFIXES = ("test_", "train_", "ood_", "val_")
POOLED_METRICS = {"lml", "marglik", "noise_sd"}


def is_score(metric: str) -> bool:
    return metric.startswith(POOLED_PREFIXES) or metric in POOLED_METRICS


@dataclass(frozen=True)
class Spread:
    rel_sd: float  # median sd / |mean| over the groups
    groups: int  # groups of cells (all coordinates but the seed equal) with >= 2 seeds
    source: str  # where it was measured, in words

    def text(self, pair: bool = True) -> str:
        return (
            f"n = 1 band {n1_fraction_of(self, pair):.1%} of the value (spread of one cell measured: median "
            f"relative sd {self.rel_sd:.2%} over {self.groups} groups of {self.source})"
        )


# the claim's single-value spread: one Spread, or {metric: Spread | None} where its table entries read several
# metrics (Table 8's rows), of which :func:`entry` picks the current entry's
_CURRENT: ContextVar[Spread | dict | None] = ContextVar("n1_spread", default=None)
_USED: ContextVar[list | None] = ContextVar("n1_used", default=None)
_ENTRY: ContextVar[tuple] = ContextVar("n1_entry", default=())


def n1_fraction_of(spread: Spread | None, pair: bool) -> float:
    if spread is None or not math.isfinite(spread.rel_sd):
        return REL_TOL_N1
    sd = spread.rel_sd * (math.sqrt(2.0) if pair else 1.0)
    return max(REL_TOL_N1, Z_NOISE * sd)


def n1_fraction(pair: bool = True) -> float:
    """The band of a single value as a fraction of it: measured for the claim being checked (:func:`measured`),
    else REL_TOL_N1. `pair`: two single values compared (their difference has sqrt(2) of one's sd)."""
    used = _USED.get()
    if used is not None:
        used.append(pair)
    return n1_fraction_of(_pick(_CURRENT.get(), _ENTRY.get()), pair)


def _pick(spread: Spread | dict | None, metrics: tuple) -> Spread | None:
    """One Spread as is; of a {metric: Spread} the widest among `metrics` (the current entry's), or among all."""
    if not isinstance(spread, dict):
        return spread
    found = [sp for m, sp in spread.items() if sp and (not metrics or m in metrics)]
    return max(found, key=lambda sp: sp.rel_sd, default=None)


def text(spread: Spread | dict, pair: bool = True) -> str:
    """The band's words for the report: one Spread's, or each metric's of a {metric: Spread}."""
    if not isinstance(spread, dict):
        return spread.text(pair)
    return "; ".join(
        f"{m}: " + (sp.text(pair) if sp else f"n = 1 band {REL_TOL_N1:.0%} of the value (fixed: none measured)")
        for m, sp in spread.items()
    )


@contextlib.contextmanager
def entry(*metrics: str):
    """Within it, a claim whose spread is per metric reads that of `metrics` (the table entries compared now;
    the widest of them)."""
    token = _ENTRY.set(tuple(m for m in metrics if m))
    try:
        yield
    finally:
        _ENTRY.reset(token)


@contextlib.contextmanager
def measured(spread: Spread | dict | None):
    """Check one claim with `spread` as its single values' noise (a Spread, or {metric: Spread | None} read
    per table entry through :func:`entry`); yields the list :func:`n1_fraction` appends to (empty when no single
    value needed a band)."""
    used: list = []
    t1, t2 = _CURRENT.set(spread), _USED.set(used)
    try:
        yield used
    finally:
        _CURRENT.reset(t1)
        _USED.reset(t2)


def _groups(df: pd.DataFrame, axes: list[str], metric: str) -> list[float]:
    """sd / |mean| of `metric` per group of cells equal on `axes` but the seed, over groups with >= 2 values."""
    if df is None or metric not in df or "seed" not in df:
        return []
    if not axes:  # the grid is unknown: cells of different settings must not be pooled as seeds
        return []
    by = [a for a in axes if a in df and a not in SEED_AXES]
    keep = [*by, "seed", *(["status"] if "status" in df else [])]
    df = df[keep].assign(_v=pd.to_numeric(df[metric], errors="coerce"))  # only the columns it reads
    if "status" in df:
        df = df[df["status"].isin(("completed", "diverged"))]
    df = df[np.isfinite(df["_v"])]
    df = df.assign(**{a: df[a].map(str) for a in by})  # list-valued coordinates ([8, 1]) group by their text
    out = []
    for _, g in df.groupby(by, dropna=False) if by else [(None, df)]:
        if g["seed"].nunique() < 2:
            continue
        m, sd = float(g["_v"].mean()), float(g["_v"].std(ddof=1))
        if abs(m) > 1e-12 and math.isfinite(sd):
            out.append(sd / abs(m))
    return out


def own_spread(tables: dict[str, pd.DataFrame | None], axes: dict[str, list[str]], metric: str) -> Spread | None:
    """The :class:`Spread` of `metric` over the cells in `tables` ({experiment: its cells}; `axes`: {experiment: its
    grid axes}) that ran >= 2 seeds with all else equal; None when fewer than MIN_GROUPS groups did (one pair of
    seeds is too few to measure a spread by)."""
    rel = [r for e, df in tables.items() for r in _groups(df, axes.get(e, []), metric)]
    return Spread(float(np.median(rel)), len(rel), ", ".join(tables)) if len(rel) >= MIN_GROUPS else None


def difference_spread(
    tables: dict[str, pd.DataFrame | None], axes: dict[str, list[str]], metric: str, scale: str
) -> Spread | None:
    """The :class:`Spread` of a per-cell difference of two metrics, `metric` = "high - low" (e.g. test - train NLL):
    measured on the difference itself where the claim's cells ran seeds (:func:`own_spread`), else from the two
    metrics' own spreads (each :func:`own_spread` or :func:`pooled`) taken as independent errors, per cell
    sqrt((r_high high)^2 + (r_low low)^2) / |high - low|, the median over the cells. A relative band of the
    difference alone would vanish where the two are close; independence overstates the noise of two metrics that
    move together (a test and a train NLL), so this band errs wide. None where a part has no measured spread."""
    high, low = (m.strip() for m in metric.split(" - "))
    parts = {e: df for e, df in tables.items() if df is not None and high in df and low in df}
    values = {
        e: (pd.to_numeric(df[high], errors="coerce"), pd.to_numeric(df[low], errors="coerce"))
        for e, df in parts.items()
    }
    own = own_spread({e: parts[e].assign(**{metric: h - lo}) for e, (h, lo) in values.items()}, axes, metric)
    if own is not None:
        return own
    s_high = own_spread(tables, axes, high) or pooled(scale, high)
    s_low = own_spread(tables, axes, low) or pooled(scale, low)
    if s_high is None or s_low is None:
        return None
    rel = []
    for h, lo in values.values():
        gap = (h - lo).abs()
        ok = np.isfinite(gap) & (gap > 1e-12)
        rel += [float(v) for v in np.hypot(s_high.rel_sd * h[ok], s_low.rel_sd * lo[ok]) / gap[ok]]
    if not rel:
        return None
    sources = s_high.source if s_high.source == s_low.source else f"{s_high.source}; {s_low.source}"
    return Spread(
        float(np.median(rel)),
        len(rel),
        f"cells, from the spreads of {high} ({s_high.rel_sd:.2%}) and {low} ({s_low.rel_sd:.2%}) as independent "
        f"errors, measured on {sources}",
    )


def pooled_path(scale: str) -> Path:
    """figures/<scale>/seed_spread.json: each metric's spread over every experiment of the scale (committed with
    the figures, so a notebook that reads only its own experiments' cells finds the same band as the report)."""
    return Path(__file__).resolve().parents[4] / "figures" / scale / "seed_spread.json"


def _machine(scale: str, metric: str) -> Spread | None:
    """The machine spread of `metric` that benchmarks/verdict_stability.py measured at `scale` (re-runs under
    another thread count against the archive; figures/<scale>/verdict_stability.json): each experiment's median,
    then their median."""
    path = pooled_path(scale).with_name("verdict_stability.json")
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    parts = {e: m[metric] for e, m in (rec.get("machine_spread") or {}).items() if metric in m}
    if sum(p["pairs"] for p in parts.values()) < MIN_GROUPS:
        return None
    return Spread(
        float(np.median([p["rel_sd"] for p in parts.values()])),
        sum(p["pairs"] for p in parts.values()),
        f"cells re-run under another thread count, {len(parts)} experiments ({path.name}, {rec['date']}; the "
        "claim's own ran one seed)",
    )


def own_machine(scale: str, experiments: list[str], metric: str) -> Spread | None:
    """The machine spread of `metric` measured on the claim's own experiments (benchmarks/verdict_stability.py:
    their cells re-run under another thread count), any metric, a learned hyperparameter too: it is these cells'
    own noise, not another experiment's. None where fewer than MIN_GROUPS re-run pairs measured it."""
    path = pooled_path(scale).with_name("verdict_stability.json")
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    spread = rec.get("machine_spread") or {}
    parts = [spread[e][metric] for e in experiments if metric in spread.get(e, {})]
    if sum(p["pairs"] for p in parts) < MIN_GROUPS:
        return None
    # each re-run pair counts once: an experiment's median weighs as many pairs as it summarises, so one pair of
    # a one-cell experiment does not outvote another experiment's four
    weighted = np.repeat([p["rel_sd"] for p in parts], [p["pairs"] for p in parts])
    return Spread(
        float(np.median(weighted)),
        sum(p["pairs"] for p in parts),
        f"the claim's own cells re-run under another thread count ({path.name}, {rec['date']})",
    )


def pooled(scale: str, metric: str) -> Spread | None:
    """The committed spread of `metric` over every experiment of `scale`: the seeds' (:func:`pooled_path`) or the
    machines' (:func:`_machine`), the larger where both were measured; None when neither was, and for a metric
    that is not a model's score (a learned hyperparameter such as aug_rotation drifts freely where the data do
    not pin it and not at all where a search fixes it: another experiment's spread says nothing about it)."""
    if not is_score(metric):
        return None
    found = []
    path = pooled_path(scale)
    rec = json.loads(path.read_text()).get("metrics", {}).get(metric) if path.exists() else None
    if rec:
        found.append(
            Spread(
                rec["rel_sd"],
                rec["groups"],
                f"{len(rec['experiments'])} experiments of this scale ({path.name}, {rec['date']}; the claim's own "
                "ran one seed)",
            )
        )
    machine = _machine(scale, metric)
    if machine is not None:
        found.append(machine)
    return max(found, key=lambda sp: sp.rel_sd) if found else None


def write_pooled(ctx, experiments: list[str], date: str, out: Path) -> dict:
    """Measure every metric's spread over `experiments` (a results Context `ctx` of the scale) and write it."""
    metrics: dict[str, list] = {}
    for name in experiments:
        df, axes = ctx.table(name), ctx.axes(name)
        if df is None:
            continue
        for column in df.columns:
            rel = _groups(df, axes, column) if is_score(column) and pd.api.types.is_numeric_dtype(df[column]) else []
            if rel:
                metrics.setdefault(column, []).append((name, rel))
    rec = {
        "scale": ctx.scale,
        "what": "relative sd (sd / |mean|) of one cell's metric over seeds, per group of cells equal but for the "
        "seed: each experiment's median, and the median over experiments; the n = 1 noise band of a claim whose own "
        "experiments ran one seed (report.verdicts.noise)",
        "metrics": {
            m: {
                # each experiment's median, then their median: an experiment with many groups does not outvote
                "rel_sd": float(np.median([np.median(rs) for _, rs in parts])),
                "groups": sum(len(rs) for _, rs in parts),
                "experiments": sorted(name for name, _ in parts),
                "date": date,
            }
            for m, parts in sorted(metrics.items())
            if sum(len(rs) for _, rs in parts) >= MIN_GROUPS
        },
    }
    atomic_write_text(out, json.dumps(rec, indent=1, sort_keys=True) + "\n")
    return rec
