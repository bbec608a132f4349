"""Mean ± standard error over seeds / splits: the one computation every table and figure uses.

s.e. = std(ddof=1) / sqrt(n), and 0 for a single value (nothing to estimate a spread from). A NaN value
(a diverged cell) makes mean and s.e. NaN (the papers' convention); `grouped_mean_se` drops NaNs first
(the figures average what completed).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def median_ci(values, level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median (scipy.stats.bootstrap; fixed seed: reproducible)."""
    from scipy.stats import bootstrap

    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return (math.nan, math.nan)
    if np.all(a == a[0]):  # a degenerate sample: every resample has this median
        return (float(a[0]), float(a[0]))
    ci = bootstrap((a,), np.median, confidence_level=level, n_resamples=n_boot, method="percentile",
                   rng=np.random.default_rng(seed), vectorized=True).confidence_interval
    return float(ci.low), float(ci.high)


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
