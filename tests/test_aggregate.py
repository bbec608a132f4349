"""Aggregation keeps every grid cell: unavailable datasets become n/a rows with a note, tables show
n/a with a footnote naming the dataset, and a missing result is an error rather than a silent gap."""

import json

import pandas as pd
import pytest

from reprokit.config import ExperimentGrid, unavailable_cells
from reprokit.report.render.tables import write_table
from reprokit.report.store.aggregate import aggregate

SPEC = {
    "kind": "input_selection",
    "grid": {"dataset": ["mnist", "cifar10"], "method": ["baseline"], "seed": [0, 1]},
    "settings": {},
}


def _write(results, cell, acc):
    folder = results / cell.rel_dir
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"status": "completed", "metrics": {"test_acc": acc}, "steps": 5}))
    pd.DataFrame({"step": [0, 5], "loss": [1.0, 0.5]}).to_csv(folder / "curve.csv", index=False)


def test_unavailable_dataset_becomes_na_row_and_footnote(tmp_path):
    grid = ExperimentGrid("t1", SPEC, "test")
    missing = unavailable_cells(grid, lambda name: name != "cifar10")
    assert sorted(missing) == sorted(c.rel_dir for c in grid.cells() if c.coord_dict["dataset"] == "cifar10")
    for cell in grid.cells():
        if cell.rel_dir not in missing:
            _write(tmp_path, cell, 0.9 + cell.coord_dict["seed"] / 100)
    table, curves = aggregate(list(grid.cells()), tmp_path, missing)
    assert len(table) == 4 and len(curves) == 4
    na = table[table.dataset == "cifar10"]
    assert set(na.status) == {"unavailable"} and na.test_acc.isna().all()
    assert "cifar10" in na.note.iloc[0]
    summary = table.groupby("dataset", sort=False)["test_acc"].mean().reset_index()
    out = tmp_path / "t.tex"
    write_table(summary, out, "demo", "test", "note", footnotes=["n/a: dataset cifar10 unavailable here"])
    tex = out.read_text()
    assert "n/a" in tex and "cifar10 unavailable" in tex and "TEST DATA" in tex


def test_missing_result_is_an_error(tmp_path):
    grid = ExperimentGrid("t1", SPEC, "test")
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        aggregate(list(grid.cells()), tmp_path, {})


def _cell_record(root, dataset, method, seed, rmse, ll, scale="paper"):
    folder = root / f"method~{method}" / f"dataset~{dataset}" / f"seed~{seed}"
    folder.mkdir(parents=True)
    record = {
        "scale": scale,
        "status": "completed",
        "coords": {"dataset": dataset, "method": method, "seed": seed},
        "metrics": {"test_rmse": rmse, "test_ll": ll},
    }
    (folder / "metrics.json").write_text(json.dumps(record))


def test_reasons_reach_the_note_and_an_experiment_without_cells_reads_as_an_empty_table(tmp_path):
    from reprokit.report.store.aggregate import write_aggregate

    grid = ExperimentGrid("t1", SPEC, "test")
    missing = unavailable_cells(grid, lambda name: False)
    table, curves = aggregate(
        list(grid.cells()), tmp_path, missing, reasons={"cifar10": "download failed: HTTP 404 Not Found"}
    )
    assert table[table.dataset == "cifar10"].note.str.contains("cifar10 (download failed: HTTP 404", regex=False).all()
    assert table[table.dataset == "mnist"].note.eq("dataset unavailable: mnist").all()
    # a grid with no cell at this scale (every point excluded: "paper scale only") still has columns
    write_aggregate([], tmp_path, tmp_path / "e.csv", tmp_path / "e_curves.csv", axes=list(grid.axes))
    empty = pd.read_csv(tmp_path / "e.csv")
    assert empty.empty and {"dataset", "method", "seed", "status", "note"} <= set(empty.columns)
    assert pd.read_csv(tmp_path / "e_curves.csv").empty
