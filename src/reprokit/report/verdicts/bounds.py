"""Checks of a value against a fixed bound: a mean of cells or table entries at least, at most or near a bound
(`threshold`), the spread over configurations (`spread_at_most`) and which inputs a learned mask keeps
(`inputs_kept`), each an ordering against the bound with its noise band (reprokit.report.verdicts.decide).
"""

from __future__ import annotations

import math

import pandas as pd

from ..store.stats import mean_se
from . import noise
from .decide import INCONCLUSIVE, NOT_RUN, Verdict, bound_band, decide, mark, noise_band, ordering, paired_band
from .noise import n1_fraction
from .sides import config_means, mean_se_of, metric_of_row


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
        values.append((f"{metric}{size}", *mean_se_of(cells, metric), metric))
    else:
        for r in rows or []:
            for c in columns or []:
                s = ctx.ours(artefact, r, c)
                values.append((f"{r} / {c}", s.mean, s.se, s.n, metric_of_row(ctx, artefact, r)))
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
        parts.append(f"{label} = {value} (noise band {band:.2g}){mark(outcome, ' (outside the bound)')}")
    return decide(results, f"{goal}: " + "; ".join(parts), min(ns, default=0))


def _pm(m: float, se: float, n: int, digits: int) -> str:
    """ "mean ± s.e." over n > 1 cells; one cell has no s.e., and says so."""
    return f"{m:.{digits}f} ± {se:.{digits}f}" if n > 1 else f"{m:.{digits}f} (one cell, no s.e.)"


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
    return decide(results, text, len(rows))


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
    return decide(
        [outcome],
        f"the {first} most kept inputs (mean keep-probability over the cells): {_ranges(sorted(top))}; lowest of the "
        f"first {first} (input {cols.index(low) + 1}) {means[low]:.3f} minus highest of the rest (input "
        f"{cols.index(high) + 1}) {means[high]:.3f} = {gap:.3f}, noise band {band:.3g} ({how}){mark(outcome)}",
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
        m = config_means(ctx.cells(e, where or {}), list(configs), metric)
        means += list(zip(m["mean"], m["se"], m["n"]))
    if len(means) < 2:
        return Verdict(NOT_RUN, f"{len(means)} configuration(s) ran", min((n for *_, n in means), default=0))
    hi, lo = max(means, key=lambda t: t[0]), min(means, key=lambda t: t[0])
    spread = hi[0] - lo[0]
    band = noise_band(hi[0], hi[1], int(hi[2]), lo[0], lo[1], int(lo[2]))  # the highest vs the lowest configuration
    outcome = ordering(bound - spread, band)
    return decide(
        [outcome],
        f"{metric} over {len(means)} configurations: {lo[0]:.4g}-{hi[0]:.4g} (spread "
        f"{spread:.3g}, bound {bound:g}, noise band {band:.2g}){mark(outcome, '')}",
        min(int(n) for *_, n in means),
    )


CHECKS = (threshold, inputs_kept, spread_at_most)
