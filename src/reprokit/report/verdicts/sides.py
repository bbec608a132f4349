"""What the checks share about the cells they read: a side of a comparison (its coordinates and its `label`, how it
is named), a coordinate as comparable, mean ± s.e. of a metric over cells or per configuration, whether cells meet a
selector, and the metric a table row shows.
"""

from __future__ import annotations

import math

import pandas as pd

from ..store.cells import metric_values, norm
from ..store.stats import mean_se

LABEL = "label"  # a side's name as the paper writes it ("BALI-L"), not a coordinate: never used to select cells


def side_words(where: dict) -> str:
    """A side of a comparison in words: its `label` where it has one, else its coordinates' values."""
    if where.get(LABEL):
        return str(where[LABEL])
    return "/".join(str(v) for k, v in where.items() if k != LABEL)


def side_coords(where: dict) -> dict:
    """A side's coordinates, without its `label`."""
    return {k: v for k, v in where.items() if k != LABEL}


def coord_key(v):
    v = norm(v)
    return v if not isinstance(v, list) else tuple(v)


def mean_se_of(rows: pd.DataFrame, metric: str) -> tuple[float, float, int]:
    v = metric_values(rows, metric)
    if v is None or len(v) == 0:
        return math.nan, math.nan, 0
    return mean_se(v)


def config_means(rows: pd.DataFrame, keys: list[str], metric: str) -> pd.DataFrame:
    if rows.empty or any(k not in rows for k in keys) or metric not in rows:
        return pd.DataFrame(columns=[*keys, "mean", "se", "n"])
    rows = rows.assign(
        **{
            k: rows[k].map(lambda v: str(list(coord_key(v))) if isinstance(coord_key(v), tuple) else str(coord_key(v)))
            for k in keys
        }
    )
    out = []
    for key, g in rows.groupby(keys):
        m, se, n = mean_se_of(g, metric)
        if n and math.isfinite(m):
            out.append((*(key if isinstance(key, tuple) else (key,)), m, se, n))
    return pd.DataFrame(out, columns=[*keys, "mean", "se", "n"])


def fits(coords: dict, where: dict) -> bool:
    """Whether cell coordinates meet a claim's selector (a value or a list of either), keys it lacks ignored."""
    for key, value in where.items():
        if key == "experiment" or key not in coords:
            continue
        options = value if isinstance(value, (list, tuple)) and not isinstance(coords[key], (list, tuple)) else [value]
        if not any(norm(coords[key]) == norm(v) or str(norm(coords[key])) == str(norm(v)) for v in options):
            return False
    return True


def metric_of_row(ctx, artefact: str, row: str) -> str | None:
    """The metric a row of the artefact's table shows, where its spec names one (Table 8's timing ratios)."""
    spec = ((getattr(ctx, "arts", {}).get(artefact) or {}).get("rows") or {}).get(row)
    return spec.get("metric") if isinstance(spec, dict) else None
