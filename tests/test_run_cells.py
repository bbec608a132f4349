"""benchmarks/run_cells.py (cells without Snakemake, on a lent GPU box) skips the cells that completed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_cells(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("run_cells", REPO / "benchmarks" / "run_cells.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    real = mod.load_pipeline_config

    def in_tmp(root, overrides):  # the same config, its results/logs/checkpoints under tmp_path
        cfg = real(root, overrides)
        cfg["paths"] = {k: str(tmp_path / v) for k, v in cfg["paths"].items()}
        return cfg

    monkeypatch.setattr(mod, "load_pipeline_config", in_tmp)
    return mod


def _listed(capsys) -> tuple[str, list[str]]:
    out = capsys.readouterr().out.splitlines()
    return out[0], [ln.strip() for ln in out[1:]]


def test_completed_cells_are_skipped_unless_rerun(run_cells, tmp_path, capsys):
    args = ["--experiment", "bali_uci", "--scale", "test", "--where", "method=dropout", "--dry-run"]
    assert run_cells.main(args) == 0
    head, cells = _listed(capsys)
    assert len(cells) == 2 and head.startswith("2 cells") and "0 already completed" in head
    done, stopped = cells
    (tmp_path / "results" / done).mkdir(parents=True)
    (tmp_path / "results" / done / "metrics.json").write_text(json.dumps({"status": "completed"}))
    (tmp_path / "results" / stopped).mkdir(parents=True)  # FAKE: a cell that wrote no metrics.json yet
    (tmp_path / "results" / stopped / "metrics.json.tmp").write_text("{}")

    assert run_cells.main(args) == 0
    head, cells = _listed(capsys)
    assert cells == [stopped] and "1 already completed" in head
    assert run_cells.main(args + ["--rerun"]) == 0
    head, cells = _listed(capsys)
    assert sorted(cells) == sorted([done, stopped]) and "0 already completed" in head
