"""Collect cells' metrics.json (and curves) into one tidy CSV per experiment.

Every grid cell gets a row, also those that did not run because their dataset is unavailable
(status 'unavailable', a note naming the dataset) so tables can show n/a with a footnote instead of
silently dropping them.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pandas as pd

from ..io import atomic_write_text


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


def unavailable_note(missing_datasets: list[str], reasons: dict | None = None) -> str:
    """'dataset unavailable: mnist (download failed: ...)': each missing dataset with why, where known."""
    reasons = reasons or {}
    return "dataset unavailable: " + ", ".join(f"{d} ({reasons[d]})" if reasons.get(d) else d for d in missing_datasets)


def _row(cell, record: dict | None, missing_datasets: list[str], reasons: dict | None = None) -> dict:
    row = {"scale": cell.scale, "experiment": cell.experiment, **cell.coord_dict}
    if record is None:
        row["status"] = "unavailable"
        row["note"] = unavailable_note(missing_datasets, reasons)
        return row
    row["status"] = record["status"]
    row["note"] = ""
    for key, value in record["metrics"].items():
        row[key] = value
    row["steps"] = record.get("steps")
    if device_of(record):
        row["device"] = device_of(record)
    for key, value in (record.get("info") or {}).items():
        row[key] = value
    return row


def aggregate(
    cells: list,
    results_dir: str | Path,
    unavailable: dict | None = None,
    reasons: dict | None = None,
    axes: list | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`cells`: every Cell of the experiment; `unavailable`: {cell.rel_dir: [dataset, ...]}; `reasons`:
    {dataset: why it is unavailable} (e.g. "download failed: ..."), shown in those rows' note; `axes`: the
    grid's axes, the columns of an experiment with no cell at this scale (e.g. "paper scale only").

    Returns (metrics table, curves table). A cell that should have run but has no metrics.json is
    an error: nothing is silently skipped. Without any curve (e.g. every dataset unavailable) the curves
    table has no rows but still the grid's axes as columns, so its CSV reads as an empty table.
    """
    unavailable = unavailable or {}
    rows, curves = [], []
    for cell in cells:
        folder = Path(results_dir) / cell.rel_dir
        if cell.rel_dir in unavailable:
            rows.append(_row(cell, None, unavailable[cell.rel_dir], reasons))
            continue
        metrics_path = folder / "metrics.json"
        if not metrics_path.exists():
            raise FileNotFoundError(f"cell {cell.rel_dir} has no metrics.json at {metrics_path}")
        rows.append(_row(cell, json.loads(metrics_path.read_text()), []))
        curve_path = folder / "curve.csv"
        if curve_path.exists() and curve_path.stat().st_size > 1:
            curves.append(with_coords(pd.read_csv(curve_path), cell))
    return tidy(rows, curves, cells, axes)


def with_coords(curve: pd.DataFrame, cell) -> pd.DataFrame:
    """A cell's learning curve with its grid coordinates as leading columns (list values joined with '-')."""
    for axis, value in cell.coord_dict.items():
        curve.insert(0, axis, value if not isinstance(value, list) else "-".join(map(str, value)))
    return curve


def tidy(rows: list[dict], curves: list[pd.DataFrame], cells: list, axes: list | None = None):
    """(metrics table, curves table) from per-cell rows and curves; without any, the columns they would lead with."""
    table = (
        pd.DataFrame(rows) if rows else pd.DataFrame(columns=["scale", "experiment", *(axes or []), "status", "note"])
    )
    if curves:
        curve_table = pd.concat(curves, ignore_index=True)
    else:  # the columns a curve would lead with (each axis is inserted first, so the last axis leads)
        names = list(dict.fromkeys(axis for cell in cells for axis in cell.coord_dict)) or list(axes or [])
        curve_table = pd.DataFrame(columns=names[::-1])
    return table, curve_table


def write_aggregate(
    cells: list,
    results_dir,
    out_csv,
    out_curves_csv,
    unavailable: dict | None = None,
    reasons: dict | None = None,
    axes: list | None = None,
) -> None:
    table, curves = aggregate(cells, results_dir, unavailable, reasons, axes)
    atomic_write_text(out_csv, table.to_csv(index=False))
    atomic_write_text(out_curves_csv, curves.to_csv(index=False))


def main(argv: list[str] | None = None) -> int:
    """`python -m reprokit.report.aggregate`: the aggregate rule's command (a process of its own that
    reads no config file: the rule hands over the experiment's spec and which cells are n/a)."""
    import argparse

    from ..config import ExperimentGrid

    p = argparse.ArgumentParser(prog="python -m reprokit.report.aggregate", description=main.__doc__)
    p.add_argument("--experiment", required=True)
    p.add_argument("--scale", required=True)
    p.add_argument("--spec", required=True, help="JSON: the experiment's config entry (kind, grid, settings, scales)")
    p.add_argument("--results", required=True, help="results folder (cells under <results>/<scale>/<experiment>/)")
    p.add_argument("--unavailable", default="{}", help="JSON {cell rel_dir: [dataset, ...]} of cells not run")
    p.add_argument("--reasons", default="{}", help="JSON {dataset: why it is unavailable}")
    p.add_argument("--table", required=True)
    p.add_argument("--curves", required=True)
    args = p.parse_args(argv)
    grid = ExperimentGrid(args.experiment, json.loads(args.spec), args.scale)
    write_aggregate(
        list(grid.cells()),
        args.results,
        args.table,
        args.curves,
        json.loads(args.unavailable),
        reasons=json.loads(args.reasons),
        axes=list(grid.axes),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


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
