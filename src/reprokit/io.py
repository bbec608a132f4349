"""Atomic file writes: a reader (or Snakemake) never sees a half-written file."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n")


def atomic_save_torch(obj: Any, path: str | os.PathLike) -> None:
    import torch  # here: the rest of this module is used while Snakemake builds the DAG

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def rows_to_csv(rows: list[dict]) -> str:
    """`pandas.DataFrame(rows).to_csv(index=False)`, byte for byte, without importing pandas (~0.3 s of a
    cell's start-up). Columns in order of first appearance; a column of ints without gaps prints as ints,
    a numeric column with gaps or floats as float64 (numpy's shortest repr, so `20.0`, `1e-05`), missing
    values as empty fields; anything else (str, bool, mixed) as `str(value)`; rows holding numpy scalars
    other than float64/int64 go to pandas itself. Used for curve.csv."""
    import csv

    import numpy as np

    columns: list = []
    seen: set = set()
    for row in rows:
        for key in row:
            if key not in seen:
                seen.add(key)
                columns.append(key)
    if not columns:
        return "\n" * (1 + len(rows))
    if any(isinstance(v, np.generic) and not isinstance(v, (np.float64, np.int64)) for row in rows for v in row.values()):
        import pandas as pd  # numpy scalars of other widths (float32, ...) keep their own dtype in pandas

        return pd.DataFrame(rows).to_csv(index=False)
    text_columns = []
    for col in columns:
        values = [row.get(col) for row in rows]
        present = [v for v in values if not _is_missing(v)]
        numeric = all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                      for v in present)
        if numeric and present and len(present) == len(values) and all(isinstance(v, (int, np.integer)) for v in present):
            text_columns.append([str(int(v)) for v in values])
        elif numeric:
            arr = np.array([np.nan if _is_missing(v) else v for v in values], dtype=np.float64)
            text = arr.astype(str)
            text_columns.append(["" if np.isnan(x) else s for x, s in zip(arr, text)])
        else:
            text_columns.append(["" if _is_missing(v) else str(v) for v in values])
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([str(c) for c in columns])
    writer.writerows(zip(*text_columns))
    return buf.getvalue()
