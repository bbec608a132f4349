"""Collect cells' metrics.json (and curves) into one tidy CSV per experiment.

Every grid cell gets a row, also those that did not run because their dataset is unavailable
(status 'unavailable', a note naming the dataset) so tables can show n/a with a footnote instead of
silently dropping them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...atomic import atomic_write_text
from . import cells


def aggregate(
    grid_cells: list,
    results_dir: str | Path,
    unavailable: dict | None = None,
    reasons: dict | None = None,
    axes: list | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`grid_cells`: every Cell of the experiment; `unavailable`: {cell.rel_dir: [dataset, ...]}; `reasons`:
    {dataset: why it is unavailable} (e.g. "download failed: ..."), shown in those rows' note; `axes`: the
    grid's axes, the columns of an experiment with no cell at this scale (e.g. "paper scale only").

    Returns (metrics table, curves table). A cell that should have run but has no metrics.json is
    an error: nothing is silently skipped. Without any curve (e.g. every dataset unavailable) the curves
    table has no rows but still the grid's axes as columns, so its CSV reads as an empty table.
    """
    unavailable = unavailable or {}
    rows, curves = [], []
    for cell in grid_cells:
        folder = Path(results_dir) / cell.rel_dir
        if cell.rel_dir in unavailable:
            rows.append(unavailable_row(cell, unavailable[cell.rel_dir], reasons))
            continue
        metrics_path = folder / "metrics.json"
        if not metrics_path.exists():
            raise FileNotFoundError(f"cell {cell.rel_dir} has no metrics.json at {metrics_path}")
        record = cells.read_record(metrics_path, require=("status", "metrics"))
        rows.append(cells.row({**record, "scale": cell.scale, "experiment": cell.experiment}, cell.coord_dict))
        curve = cells.curve(folder)
        if curve is not None:
            curves.append(with_coords(curve, cell))
    return tidy(rows, curves, grid_cells, axes)


def unavailable_row(cell, datasets: list[str], reasons: dict | None = None) -> dict:
    """The row of a cell that did not run because `datasets` are unavailable (`reasons`: {dataset: why})."""
    note = cells.unavailable_note(datasets, reasons)
    return {
        "scale": cell.scale,
        "experiment": cell.experiment,
        **cell.coord_dict,
        "status": "unavailable",
        "note": note,
    }


def with_coords(curve: pd.DataFrame, cell) -> pd.DataFrame:
    """A cell's learning curve with its grid coordinates as leading columns (list values joined with '-')."""
    for axis, value in cell.coord_dict.items():
        curve.insert(0, axis, value if not isinstance(value, list) else "-".join(map(str, value)))
    return curve


def tidy(rows: list[dict], curves: list[pd.DataFrame], grid_cells: list, axes: list | None = None):
    """(metrics table, curves table) from per-cell rows and curves; without any, the columns they would lead with."""
    table = (
        pd.DataFrame(rows) if rows else pd.DataFrame(columns=["scale", "experiment", *(axes or []), "status", "note"])
    )
    if curves:
        curve_table = pd.concat(curves, ignore_index=True)
    else:  # the columns a curve would lead with (each axis is inserted first, so the last axis leads)
        names = list(dict.fromkeys(axis for cell in grid_cells for axis in cell.coord_dict)) or list(axes or [])
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
