"""The one reader of a cell's results, and the words every part of the report uses about them.

A finished cell leaves `metrics.json` (its record: status, scale, experiment, coordinates, metrics, info,
provenance), `config.json` (the settings it ran with) and `curve.csv` (its learning curve) in its folder under
`results/<scale>/<experiment>/`. The aggregate step (report/store/aggregate.py), the verdict engine
(report/verdicts/results.py) and the archive (report/store/archive.py) all read them here, and all turn a
record into a table row with `row`, so a cell reads the same whichever way it reaches a table.

Torch-free and free of plotting.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

# Statuses that count as "ran" for a table (their NaN metrics are part of the mean): cell.py's statuses.
RAN_STATUSES = ("completed", "diverged", "oom")
RECORD_KEYS = {"coords", "status", "metrics", "scale"}  # what makes a JSON file a cell's metrics.json

SCALE_NOTE = {
    "paper": "paper scale",
    "quick": "quick scale (reduced iterations/seeds; not paper-scale numbers)",
    "test": "TEST scale (tiny CI run; numbers meaningless)",
}

# How to get a dataset that is not in the mirrors: said next to every n/a that a missing dataset causes.
GET_DATA = (
    "To get a missing dataset: set data.download: true in config/config.yaml (fetches it from its official "
    "URL into data.cache_dir), or add a folder holding it in its original layout to data.mirrors"
)


# ------------------------------------------------------------------------------------------ reading a cell
def read_record(path: str | Path, require=RECORD_KEYS) -> dict:
    """A cell's metrics.json; an error naming the file when it lacks a key of `require` (the aggregate step,
    which knows the cell's scale and coordinates from the grid, needs only its status and metrics)."""
    record = json.loads(Path(path).read_text())
    missing = set(require) - set(record)
    if missing:
        raise ValueError(f"{path} lacks {sorted(missing)}: not a cell's metrics.json")
    return record


def records(experiment_dir: str | Path) -> Iterator[tuple[Path, dict]]:
    """(cell folder, record) of every finished cell (a metrics.json) under `experiment_dir`, in path order;
    nothing when the folder does not exist."""
    folder = Path(experiment_dir)
    for path in sorted(folder.rglob("metrics.json")) if folder.is_dir() else []:
        yield path.parent, read_record(path)


def resolved_settings(cell_dir: str | Path) -> dict:
    """The settings a cell ran with (its config.json); an error naming the file when it is missing."""
    path = Path(cell_dir) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing beside metrics.json; cannot record the cell's settings")
    return json.loads(path.read_text())["settings"]


def curve(cell_dir: str | Path) -> pd.DataFrame | None:
    """A cell's learning curve (curve.csv), None when it wrote none (or an empty one)."""
    path = Path(cell_dir) / "curve.csv"
    return pd.read_csv(path) if path.exists() and path.stat().st_size > 1 else None


def device_of(record: dict) -> str | None:
    """Where a cell ran, from its metrics.json: "cuda (NVIDIA H100 80GB HBM3)", "cpu (AMD EPYC 7B13)" (the CPU
    model its provenance records, reprokit.runtime.machine), or for a cell recorded before that "cpu (x86_64)"
    (its device_name); None if unrecorded."""
    prov = record.get("provenance") or {}
    if not prov.get("device"):
        return None
    device = str(prov["device"])
    name = prov.get("gpu_model") if device.startswith("cuda") else prov.get("cpu_model")
    name = name or prov.get("device_name")
    return device + (f" ({name})" if name and name != device else "")


def row(record: dict, coords: dict | None = None) -> dict:
    """A cell's record (metrics.json, or its archived line) as one table row: scale, experiment, coordinates
    (`coords`, else the record's), status, note, metrics, steps, device, then the recorded info."""
    out = {
        "scale": record["scale"],
        "experiment": record.get("experiment"),
        **(record["coords"] if coords is None else coords),
        "status": record["status"],
        "note": "",
        **record["metrics"],
        "steps": record.get("steps"),
    }
    if device_of(record):
        out["device"] = device_of(record)
    out.update(record.get("info") or {})
    return out


def unavailable_note(missing_datasets: list[str], reasons: dict | None = None) -> str:
    """'dataset unavailable: mnist (download failed: ...)': each missing dataset with why, where known."""
    reasons = reasons or {}
    return "dataset unavailable: " + ", ".join(f"{d} ({reasons[d]})" if reasons.get(d) else d for d in missing_datasets)


# ------------------------------------------------------------------------------------------ reading a table
def read_csv(path) -> pd.DataFrame:
    """An experiment's tidy CSV or curves CSV (report/store/aggregate.py); a file without even a header (a curves CSV of
    an experiment none of whose cells ran, as older aggregations wrote it) reads as an empty frame."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def outcome_text(statuses) -> str | None:
    """'OOM' if any cell ran out of memory, 'NaN' if any diverged, None when every cell completed (how a table
    entry reads when a cell did not produce numbers: both papers' conventions)."""
    statuses = set(statuses)
    if "oom" in statuses:
        return "OOM"
    if "diverged" in statuses:
        return "NaN"
    return None


def unavailable_notes(*frames) -> list[str]:
    """The `note` of every cell that did not run because its dataset is unavailable (status 'unavailable'), each
    once, in order and as written ("dataset unavailable: mnist (...)")."""
    notes = []
    for df in frames:
        if df is None or "status" not in df or "note" not in df:
            continue
        notes += [str(n) for n in df.loc[df["status"] == "unavailable", "note"].dropna() if str(n).strip()]
    return list(dict.fromkeys(notes))


def norm(value):
    """A coordinate as comparable: lists (also written "[0.3, 0.7]") -> tuples of floats, "true" -> True,
    numbers -> float."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        if text.startswith("["):
            return norm(ast.literal_eval(text))
        try:
            return float(text)
        except ValueError:
            return text
    if isinstance(value, (list, tuple)):
        return tuple(norm(v) for v in value)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def metric_values(rows: pd.DataFrame, metric: str) -> pd.Series | None:
    """The values of `metric` per cell, numeric; "high - low" (or "high-low": e.g. "test_nll - train_nll", an
    overfitting gap) is the per-cell difference of two metrics, NaN where either is missing. None when a metric is
    not there."""
    names = [m.strip() for m in metric.split("-")]
    if any(m not in rows for m in names):
        return None
    v = [pd.to_numeric(rows[m], errors="coerce") for m in names]
    return v[0] - v[1] if len(v) == 2 else v[0]


def matches(column: pd.Series, value) -> pd.Series:
    """Which entries of `column` equal the coordinate `value` after `norm` (element by element, so a list-valued
    coordinate such as a partition ratio [0.3, 0.7] is one value, never an operand of the same length)."""
    target = norm(value)
    return column.map(lambda entry: norm(entry) == target).astype(bool)
