"""reprokit.report.commands.build_partial: an artefact built from the cells of its grid that ran (results/ and the
archive), saying so. Cells are real cells of the paper-scale `bali_fig1_sweep` grid (27 cells) with SYNTHETIC
predictives (watermarked "FAKE" in their info), in temporary folders."""

import json
from pathlib import Path

import numpy as np
import pytest

from reprokit import predictive_shape
from reprokit.config import grid_of, load_pipeline_config
from reprokit.data import registry
from reprokit.plan import kind
from reprokit.report.commands import build_partial
from reprokit.report.render import notebook
from reprokit.report.store import archive

REPO = Path(__file__).resolve().parents[1]
EXP = "bali_fig1_sweep"


@pytest.fixture(scope="module")
def cells():
    cfg = load_pipeline_config(REPO, {"scale": "paper"})
    return {
        (c.coord_dict["dataset"], c.coord_dict["bali.alpha"]): c
        for c in grid_of(cfg, EXP, "paper").cells()
        if c.coord_dict["bali.beta"] == 0.2 and c.coord_dict["n_steps"] == 10000
    }


def _fmt(a) -> str:
    return " ".join(f"{v:.6g}" for v in np.asarray(a).ravel())


def write_cell(results: Path, cell, settings=None) -> None:
    """A completed sines-trend cell whose predictive is the true function with the data's noise as its sd."""
    b = registry.load("sines_trend", seed=0)
    fg = b.meta["f_grid"].numpy().ravel()
    folder = results / cell.rel_dir
    folder.mkdir(parents=True, exist_ok=True)
    settings = settings or kind(cell.kind).resolved_settings(cell)
    (folder / "config.json").write_text(json.dumps({**cell.to_dict(), "settings": settings}))
    metrics = {
        "test_nll": -1.0,
        "noise_sd": 0.02,
        "grid_mean": _fmt(fg),
        "grid_sd": _fmt(np.full_like(fg, 0.02)),
        "grid_sd_epistemic": _fmt(np.full_like(fg, 0.01)),
    }
    # the shape reading a finished cell records (builders/synthetic_predictive.py)
    row = {**metrics, "status": "completed", "dataset": "sines_trend", "data_kwargs": json.dumps({"seed": 0})}
    metrics.update(predictive_shape.as_metrics(predictive_shape.of_cell(row)))
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "coords": cell.coord_dict,
                "scale": "paper",
                "status": "completed",
                "experiment": EXP,
                "steps": 10,
                "metrics": metrics,
                "info": {
                    "note": "FAKE synthetic test data",
                    "data_kwargs": json.dumps({"seed": 0}),
                    "n_train": 32,
                    "dataset_name": "sines_trend",
                    "task": "regression",
                    "n_steps": 10,
                    "final_samples": 4,
                },
                "provenance": {"device": "cpu", "device_name": "FAKE CPU"},
            }
        )
    )
    (folder / "curve.csv").write_text("step,test_nll\n5,0.1\n10,-1.0\n")


def test_partial_note_names_only_the_short_experiments():
    assert notebook.partial_note({"fig2a": [72, 180], "fig2b": [3, 3]}) == "PARTIAL GRID: fig2a 72 of 180 cells"
    assert notebook.partial_note({"fig2b": [3, 3]}) == "" and notebook.partial_note(None) == ""


def test_builds_from_results_and_the_archive_and_says_how_much_ran(tmp_path, cells):
    results, out = tmp_path / "results", tmp_path / "figures"
    out.mkdir()
    write_cell(results, cells[("sines_trend", 0.05)])
    # a second cell only in the archive (its results/ gone), and a stale one (other settings): not used
    other = tmp_path / "other"
    write_cell(other, cells[("sines_trend", 0.3)])
    stale = dict(kind("synthetic_predictive").resolved_settings(cells[("two_moons", 0.05)]), n_steps=999)
    write_cell(other, cells[("two_moons", 0.05)], settings=stale)
    target = archive.path_of(tmp_path, "paper", EXP)
    target.parent.mkdir(parents=True)
    archive.write(target, archive.from_results(other, "paper", EXP))

    rec = build_partial.build(EXP, "paper", results=results, root=REPO, out_dir=out, archive_root=tmp_path)
    assert rec["partial"] == {EXP: [2, 27]} and rec["scale"] == "paper"
    assert json.loads((out / f"{EXP}.provenance.json").read_text())["partial"] == {EXP: [2, 27]}
    tex = (out / f"{EXP}.tex").read_text()
    assert r"PARTIAL GRID: bali\_fig1\_sweep 2 of 27 cells" in tex
    assert f"PARTIAL GRID: {EXP} 2 of 27 cells" in (out / f"{EXP}.html").read_text()
    assert tex.count("sines-trend & ") == 2 and "two moons & " not in tex  # the stale cell is not a row
    assert "curve" in archive.load(target)[cells[("sines_trend", 0.3)].rel_dir]  # the archive keeps curves
    assert notebook.with_partial("note") == "note"  # the statement does not leak into later artefacts


def test_no_cell_at_all_is_an_error_naming_the_experiment(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no cell of experiment\\(s\\) {EXP} ran at scale paper"):
        build_partial.build(EXP, "paper", results=tmp_path / "none", root=REPO, out_dir=tmp_path, archive_root=tmp_path)
