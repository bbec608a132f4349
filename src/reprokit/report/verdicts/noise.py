"""The noise band of a single value, measured from seeds of the claim's own experiment family.

A claim decided on one seed (or split) on a side has no standard error. Its band is the seed spread of one cell,
measured, never assumed:

* a *family* is an experiment kind (`kind:` in config/experiments/*.yaml: input_selection, affine_invariance,
  federated, bali_classification, ...): the same model, data pipeline and training loop, so one cell's seed
  spread carries over between its experiments, and never from one family to another;
* :func:`own_spread` measures it on groups of cells equal but for the seed that ran at least ``MIN_SEEDS`` (3)
  seeds: the pooled relative variance sum((k - 1) (sd / |mean|)^2) / sum(k - 1) over those groups, with
  sum(k - 1) degrees of freedom. The claim's own experiments come first; where they ran fewer seeds, the family's
  (every experiment of its kind at this scale), measured by ``python -m reprokit.report.commands.seed_spread`` into
  figures/<scale>/seed_spread.json so a notebook finds the band the report finds (:func:`family`);
* a band is a Student-t interval at ``LEVEL`` (two-sided) with the spread's degrees of freedom
  (:func:`t_quantile`); an accuracy's spread is never below the binomial s.e. of its test set (the Context
  applies :func:`binomial_floor`);
* with no spread measured in the family the band is infinite: the check cannot order a single value, and the
  verdict says "not testable at this scale" with the seeds it needs (claims.verdict);
* the machine spread (cells re-run under another thread count or CPU, benchmarks/verdict_stability.py) is
  reported beside the band as what it is (:func:`own_machine`), never used as a seed spread.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import atomic_write_text

LEVEL = 0.95  # every band: a two-sided Student-t interval at this level
SEED_AXES = ("seed",)
MIN_SEEDS = 3  # seeds a group of cells needs before its spread counts
# the metrics whose spread a family pools across its experiments: a model's scores, not its learned
# hyperparameters, settings, counts or timings
POOLED_PREFIXES = ("test_", "train_", "ood_", "val_")
POOLED_METRICS = {"lml", "marglik", "noise_sd"}


def is_score(metric: str) -> bool:
    return metric.startswith(POOLED_PREFIXES) or metric in POOLED_METRICS


@functools.lru_cache(maxsize=256)
def t_quantile(df: float) -> float:
    """The two-sided Student-t critical value at LEVEL with `df` degrees of freedom (inf: the normal's); inf where
    there is no degree of freedom (nothing to estimate a spread from)."""
    if df is None or not df > 0:
        return math.inf
    from scipy.stats import t

    return float(t.ppf(0.5 + LEVEL / 2, df)) if math.isfinite(df) else float(t.ppf(0.5 + LEVEL / 2, 1e9))


def welch_df(se_a: float, n_a: int, se_b: float, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two means (s.e. se_a over n_a, se_b over n_b)."""
    va, vb = se_a**2, se_b**2
    den = (va**2 / (n_a - 1) if n_a > 1 else 0.0) + (vb**2 / (n_b - 1) if n_b > 1 else 0.0)
    if den <= 0:
        return float(max(n_a + n_b - 2, 1))
    return (va + vb) ** 2 / den


@dataclass(frozen=True)
class Spread:
    rel_sd: float  # one cell's relative sd, pooled over the groups
    groups: int  # groups of cells (all coordinates but the seed equal) with >= MIN_SEEDS seeds
    source: str  # where it was measured, in words
    df: float = math.inf  # degrees of freedom: sum over the groups of (seeds - 1)
    seeds: int = 0  # cells behind it
    floor: str = ""  # a floor applied (the binomial s.e. of an accuracy), in words

    def text(self, pair: bool = True) -> str:
        floor = f"; floored at {self.floor}" if self.floor else ""
        return (
            f"n = 1 band {n1_fraction_of(self, pair):.1%} of the value (t {t_quantile(self.df):.2f} at "
            f"{self.df:g} df x one cell's relative sd {self.rel_sd:.2%}{' x sqrt 2' if pair else ''}, measured on "
            f"{self.seeds} cells in {self.groups} groups of >= {MIN_SEEDS} seeds of {self.source}{floor})"
        )


# the claim's single-value spread: one Spread, or {metric: Spread | None} where its table entries read several
# metrics (Table 8's rows), of which :func:`entry` picks the current entry's
_CURRENT: ContextVar[Spread | dict | None] = ContextVar("n1_spread", default=None)
_USED: ContextVar[list | None] = ContextVar("n1_used", default=None)
_ENTRY: ContextVar[tuple] = ContextVar("n1_entry", default=())


def n1_fraction_of(spread: Spread | None, pair: bool) -> float:
    """t x one cell's relative sd (x sqrt 2 for a difference of two single values); inf without a spread."""
    if spread is None or not math.isfinite(spread.rel_sd):
        return math.inf
    return t_quantile(spread.df) * spread.rel_sd * (math.sqrt(2.0) if pair else 1.0)


def n1_fraction(pair: bool = True) -> float:
    """The band of a single value as a fraction of it: measured for the claim being checked (:func:`measured`),
    else inf (no seed spread: a single value orders nothing). `pair`: two single values compared (their
    difference has sqrt(2) of one's sd)."""
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
        f"{m}: " + (sp.text(pair) if sp else "no seed spread measured in its family") for m, sp in spread.items()
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


def binomial_floor(spread: Spread | None, p: float, n_test: float) -> Spread | None:
    """`spread` of an accuracy p measured on n_test examples, its relative sd never below the binomial s.e.'s,
    sqrt(p (1 - p) / n_test) / p (the test set's own sampling noise, which the seeds of one test set cannot
    show)."""
    if spread is None or not (0 < p < 1) or not n_test or not math.isfinite(n_test):
        return spread
    rel = math.sqrt(p * (1 - p) / n_test) / p
    if rel <= spread.rel_sd:
        return spread
    return Spread(
        rel,
        spread.groups,
        spread.source,
        spread.df,
        spread.seeds,
        f"the binomial s.e. of an accuracy {p:.3f} on {int(n_test)} test examples ({rel:.2%}; seeds gave "
        f"{spread.rel_sd:.2%})",
    )


def _groups(df: pd.DataFrame, axes: list[str], metric: str) -> list[tuple[int, float]]:
    """(seeds, sd / |mean|) of `metric` per group of cells equal on `axes` but the seed, over the groups with at
    least MIN_SEEDS finite values."""
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
        k = int(g["seed"].nunique())
        if k < MIN_SEEDS:
            continue
        m, sd = float(g["_v"].mean()), float(g["_v"].std(ddof=1))
        if abs(m) > 1e-12 and math.isfinite(sd):
            out.append((len(g), sd / abs(m)))
    return out


def _pool(groups: list[tuple[int, float]]) -> tuple[float, float, int]:
    """(pooled relative sd, degrees of freedom, cells) of (seeds, relative sd) groups."""
    df = sum(k - 1 for k, _ in groups)
    return math.sqrt(sum((k - 1) * r * r for k, r in groups) / df), float(df), sum(k for k, _ in groups)


def own_spread(tables: dict[str, pd.DataFrame | None], axes: dict[str, list[str]], metric: str) -> Spread | None:
    """The :class:`Spread` of `metric` over the cells in `tables` ({experiment: its cells}; `axes`: {experiment: its
    grid axes}) that ran >= MIN_SEEDS seeds with all else equal; None when no group did."""
    groups = [g for e, df in tables.items() for g in _groups(df, axes.get(e, []), metric)]
    if not groups:
        return None
    rel, df, cells = _pool(groups)
    return Spread(rel, len(groups), ", ".join(tables), df, cells)


def difference_spread(tables: dict, axes: dict, metric: str, scale: str, kinds: list[str]) -> Spread | None:
    """The :class:`Spread` of a per-cell difference of two metrics, `metric` = "high - low" (e.g. test - train NLL):
    measured on the difference itself where the claim's cells ran seeds (:func:`own_spread`), else from the two
    metrics' own spreads (each the claim's own or its family's, :func:`family`) taken as independent errors, per
    cell sqrt((r_high high)^2 + (r_low low)^2) / |high - low|, the median over the cells. A relative band of the
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
    s_high = own_spread(tables, axes, high) or family(scale, kinds, high)
    s_low = own_spread(tables, axes, low) or family(scale, kinds, low)
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
        min(s_high.groups, s_low.groups),
        f"the spreads of {high} ({s_high.rel_sd:.2%}) and {low} ({s_low.rel_sd:.2%}) as independent errors, "
        f"measured on {sources}",
        min(s_high.df, s_low.df),
        min(s_high.seeds, s_low.seeds),
    )


def pooled_path(scale: str) -> Path:
    """figures/<scale>/seed_spread.json: each family's spread per metric over its experiments at the scale
    (committed with the figures, so a notebook that reads only its own experiments' cells finds the same band as
    the report)."""
    return Path(__file__).resolve().parents[4] / "figures" / scale / "seed_spread.json"


def family(scale: str, kinds: list[str], metric: str) -> Spread | None:
    """The committed spread of `metric` (a model's score) in the family of the claim's experiments (their kinds;
    the widest where they span several); None where no family measured it: a learned hyperparameter such as
    aug_rotation is never pooled (it drifts freely where the data do not pin it), and no other family's spread
    stands in."""
    if not is_score(metric):
        return None
    path = pooled_path(scale)
    if not path.exists():
        return None
    fams = json.loads(path.read_text()).get("families") or {}
    found = []
    for kind in kinds:
        rec = (fams.get(kind) or {}).get(metric)
        if rec:
            found.append(
                Spread(
                    rec["rel_sd"],
                    rec["groups"],
                    f"the {kind} family ({', '.join(rec['experiments'])}; {path.name}, {rec['date']})",
                    rec["df"],
                    rec["cells"],
                )
            )
    return max(found, key=lambda sp: sp.rel_sd) if found else None


def own_machine(scale: str, experiments: list[str], metric: str) -> Spread | None:
    """The machine spread of `metric` measured on the claim's own experiments (benchmarks/verdict_stability.py:
    their cells re-run under another thread count or CPU): reported beside a band, never used as one (it is not
    a seed spread). None where nothing was re-run."""
    path = pooled_path(scale).with_name("verdict_stability.json")
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    spread = rec.get("machine_spread") or {}
    parts = [spread[e][metric] for e in experiments if metric in spread.get(e, {})]
    if not parts:
        return None
    weighted = np.repeat([p["rel_sd"] for p in parts], [p["pairs"] for p in parts])
    return Spread(
        float(np.median(weighted)),
        sum(p["pairs"] for p in parts),
        f"the claim's own cells re-run under another thread count ({path.name}, {rec['date']})",
    )


def write_families(ctx, experiments: dict[str, str], date: str, out: Path) -> dict:
    """Measure every score's spread per family ({experiment: its kind}) over a results Context `ctx` of the scale,
    and write it."""
    found: dict[str, dict[str, list]] = {}
    for name, kind in sorted(experiments.items()):
        df, axes = ctx.table(name), ctx.axes(name)
        if df is None:
            continue
        for column in df.columns:
            if not (is_score(column) and pd.api.types.is_numeric_dtype(df[column])):
                continue
            groups = _groups(df, axes, column)
            if groups:
                found.setdefault(kind, {}).setdefault(column, []).append((name, groups))
    families = {}
    for kind, metrics in sorted(found.items()):
        for metric, parts in sorted(metrics.items()):
            rel, dof, cells = _pool([g for _, gs in parts for g in gs])
            families.setdefault(kind, {})[metric] = {
                "rel_sd": rel,
                "df": dof,
                "groups": sum(len(gs) for _, gs in parts),
                "cells": cells,
                "experiments": sorted(name for name, _ in parts),
                "date": date,
            }
    rec = {
        "scale": ctx.scale,
        "what": (
            f"one cell's relative sd (sd / |mean|) over seeds, pooled over the groups of cells equal but for the seed "
            f"that ran >= {MIN_SEEDS} seeds, per experiment family (kind) and score, with its degrees of freedom: the "
            "n = 1 noise band of a claim whose own experiments ran fewer seeds (report.verdicts.noise)"
        ),
        "families": families,
    }
    atomic_write_text(out, json.dumps(rec, indent=1, sort_keys=True) + "\n")
    return rec
