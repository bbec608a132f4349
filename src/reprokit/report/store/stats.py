"""Mean ± standard error over seeds / splits: the one computation every table and figure uses.

s.e. = std(ddof=1) / sqrt(n), and 0 for a single value (nothing to estimate a spread from). A NaN value
(a diverged cell) makes mean and s.e. NaN (the papers' convention); `grouped_mean_se` drops NaNs first
(the figures average what completed).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def bootstrap_ci(
    samples,
    statistic,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    paired: bool = False,
    vectorized: bool = True,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of `statistic` over `samples` (a tuple of arrays; `paired`:
    resample their entries together, e.g. the (x, y) points of a correlation). scipy.stats.bootstrap with a fixed
    seed: reproducible. Resamples whose statistic is not finite (e.g. a correlation of a resample whose x are
    all equal) are left out of the percentiles; none finite: (NaN, NaN)."""
    import warnings

    from scipy.stats import bootstrap

    data = tuple(np.asarray(s, dtype=float) for s in samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-finite resamples: left out below
        with np.errstate(all="ignore"):
            res = bootstrap(
                data,
                statistic,
                confidence_level=level,
                n_resamples=n_boot,
                method="percentile",
                rng=np.random.default_rng(seed),
                vectorized=vectorized,
                paired=paired,
            )
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    if np.all(np.isfinite(dist)):
        return float(res.confidence_interval.low), float(res.confidence_interval.high)
    dist = dist[np.isfinite(dist)]
    if dist.size == 0:
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, hi = np.percentile(dist, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi)


def median_ci(values, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median (`bootstrap_ci`; fixed seed: reproducible)."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return (math.nan, math.nan)
    if np.all(a == a[0]):  # a degenerate sample: every resample has this median
        return (float(a[0]), float(a[0]))
    return bootstrap_ci((a,), np.median, level, n_boot, seed)


def _pearson(x, y, axis: int = -1):
    x = x - x.mean(axis=axis, keepdims=True)
    y = y - y.mean(axis=axis, keepdims=True)
    with np.errstate(all="ignore"):  # a constant side: NaN
        return (x * y).sum(axis=axis) / np.sqrt((x * x).sum(axis=axis) * (y * y).sum(axis=axis))


def _spearman(x, y, axis: int = -1):
    from scipy.stats import rankdata

    return _pearson(rankdata(x, axis=axis), rankdata(y, axis=axis), axis=axis)


def correlation_ci(
    x, y, method: str = "pearson", level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(r, lo, hi): the Pearson (or Spearman: Pearson of the ranks, ties averaged) correlation of the points
    (x, y) and its percentile-bootstrap interval over the points (`bootstrap_ci`, the points resampled whole;
    resamples with a constant side left out)."""
    stat = {"pearson": _pearson, "spearman": _spearman}[method]
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    r = float(stat(x, y))
    lo, hi = bootstrap_ci((x, y), stat, level, n_boot, seed, paired=True)
    return r, lo, hi


def mean_se(values) -> tuple[float, float, int]:
    """(mean, s.e., n) of `values`; NaN propagates; no values: (NaN, NaN, 0)."""
    v = np.asarray(list(values), dtype=np.float64)
    if v.size == 0:
        return math.nan, math.nan, 0
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    return float(v.mean()), se, int(v.size)


def grouped_mean_se(df: pd.DataFrame, by, column: str) -> pd.DataFrame:
    """Columns `by`, mean, se, n: `mean_se` of the non-NaN values of `column` per group (sorted by key)."""
    keys = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, values in df.groupby(keys)[column]:
        m, se, n = mean_se(values.dropna())
        rows.append((*key, m, se if n else 0.0, n))
    return pd.DataFrame(rows, columns=[*keys, "mean", "se", "n"])


def _num(x: float, digits: int) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "NaN"


def format_pm(mean: float, se: float, digits: int = 3) -> str:
    """'m ± se'; a non-finite mean reads 'NaN'."""
    if mean is None or not math.isfinite(mean):
        return "NaN"
    return f"{_num(mean, digits)} ± {_num(se, digits)}"


def format_mean_se(values, digits: int = 3) -> str:
    """A table entry over seeds: 'm ± se'; one value 'm' (no ±); any NaN 'NaN'; no values 'n/a'."""
    m, se, n = mean_se(values)
    if n == 0:
        return "n/a"
    if math.isnan(m):
        return "NaN"
    return _num(m, digits) if n == 1 else format_pm(m, se, digits)
