"""benchmarks/run_cells.py (cells without Snakemake, on a lent GPU box) skips the cells that completed."""

from __future__ import annotations

import importlib.util
import json
import math
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


def _settings_now(rel_dir: str) -> dict:
    from reprokit.config import grid_of, load_pipeline_config
    from reprokit.plan import kind as plan_of_kind

    cfg = load_pipeline_config(REPO, {"scale": "test"})
    (cell,) = [c for c in grid_of(cfg, "bali_uci", "test").cells() if c.rel_dir == rel_dir]
    return json.loads(json.dumps(plan_of_kind(cell.kind).resolved_settings(cell)))


def _finished(tmp_path, rel_dir: str, settings: dict | None) -> None:
    """FAKE: a cell folder as a finished run leaves it (metrics.json completed, config.json with settings)."""
    out = tmp_path / "results" / rel_dir
    out.mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps({"status": "completed"}))
    if settings is not None:
        (out / "config.json").write_text(json.dumps({"settings": settings}))


def _skipped_until_rerun(run_cells, args, capsys, skipped: str, runs: str, counted: str) -> None:
    """`args` lists only `runs` (the `skipped` cell counted as `counted`, e.g. "1 already completed"); with
    --rerun both, and the count falls to 0."""
    assert run_cells.main(args) == 0
    head, cells = _listed(capsys)
    assert cells == [runs] and f"1 {counted}" in head
    assert run_cells.main(args + ["--rerun"]) == 0
    head, cells = _listed(capsys)
    assert sorted(cells) == sorted([skipped, runs]) and f"0 {counted}" in head


def test_completed_cells_are_skipped_unless_rerun(run_cells, tmp_path, capsys):
    args = ["--experiment", "bali_uci", "--scale", "test", "--where", "method=dropout", "--dry-run"]
    assert run_cells.main(args) == 0
    head, cells = _listed(capsys)
    assert len(cells) == 2 and head.startswith("2 cells") and "0 already completed" in head
    done, stopped = cells
    _finished(tmp_path, done, _settings_now(done))
    (tmp_path / "results" / stopped).mkdir(parents=True)  # FAKE: a cell that wrote no metrics.json yet
    (tmp_path / "results" / stopped / "metrics.json.tmp").write_text("{}")

    _skipped_until_rerun(run_cells, args, capsys, skipped=done, runs=stopped, counted="already completed")


def test_a_cell_completed_with_other_settings_runs_again(run_cells, tmp_path, capsys):
    args = ["--experiment", "bali_uci", "--scale", "test", "--where", "method=dropout", "--dry-run"]
    assert run_cells.main(args) == 0
    _, (a, b) = _listed(capsys)
    old = _settings_now(a)
    old["dropout"] = {**old["dropout"], "epochs": old["dropout"]["epochs"] + 1}  # the config changed since
    _finished(tmp_path, a, old)
    _finished(tmp_path, b, None)  # no config.json: what it ran with is unknown
    assert run_cells.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"{a}: completed with other settings (dropout differ from the config): running it again" in out
    assert f"{b}: completed with other settings (no readable config.json): running it again" in out
    head = next(ln for ln in out if " cells of " in ln)
    assert head.startswith("2 cells") and "(2 completed with other settings)" in head and "0 already completed" in head


def test_a_cell_archived_with_these_settings_is_not_run_again(run_cells, tmp_path, capsys, monkeypatch):
    """A cell whose archive line (figures/<scale>/cells/) holds the config's settings, run on another machine and
    absent from results/, is skipped unless --rerun; one archived with other settings runs."""
    args = ["--experiment", "bali_uci", "--scale", "test", "--where", "method=dropout", "--dry-run"]
    assert run_cells.main(args) == 0
    _, (a, b) = _listed(capsys)
    other = _settings_now(b)
    other["dropout"] = {**other["dropout"], "epochs": other["dropout"]["epochs"] + 1}
    cells_dir = tmp_path / "figures" / "test" / "cells"
    cells_dir.mkdir(parents=True)
    lines = [  # FAKE: archive lines as `reprokit archive` writes them
        {"cell": cell, "settings": settings, "status": "completed", "coords": {}, "metrics": {}}
        for cell, settings in ((a, _settings_now(a)), (b, other))
    ]
    (cells_dir / "bali_uci.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.setattr(run_cells, "ARCHIVE_ROOT", tmp_path)
    _skipped_until_rerun(run_cells, args, capsys, skipped=a, runs=b, counted="archived only")


def test_a_cell_both_completed_and_archived_is_counted_once_as_completed_and_archived(
    run_cells, tmp_path, capsys, monkeypatch
):
    """The opening line counts a cell completed under results/ and archived as completed, "also archived"; not as
    "archived only"."""
    args = ["--experiment", "bali_uci", "--scale", "test", "--where", "method=dropout", "--dry-run"]
    assert run_cells.main(args) == 0
    _, (a, b) = _listed(capsys)
    _finished(tmp_path, a, _settings_now(a))
    cells_dir = tmp_path / "figures" / "test" / "cells"
    cells_dir.mkdir(parents=True)
    line = {"cell": a, "settings": _settings_now(a), "status": "completed", "coords": {}, "metrics": {}}  # FAKE
    (cells_dir / "bali_uci.jsonl").write_text(json.dumps(line) + "\n")
    monkeypatch.setattr(run_cells, "ARCHIVE_ROOT", tmp_path)
    assert run_cells.main(args) == 0
    head, cells = _listed(capsys)
    assert cells == [b]
    assert "1 already completed under results/ with these settings (1 of them also archived)" in head
    assert "0 archived only" in head


def _size_cells():
    spec = importlib.util.spec_from_file_location("size_cells", REPO / "benchmarks" / "size_cells.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.xdist_group("size_cells")
def test_size_cells_runs_a_cell_with_changed_settings_into_its_scratch_folder(shared_data, tmp_path, capsys):
    """benchmarks/size_cells.py: the override reaches the cell (its step count and curve), the cell writes only
    under --out, and a bad override fails before any cell runs, naming the key."""
    mod = _size_cells()
    mod.main(
        [
            "--experiment",
            "bali_cls_uci",
            "--scale",
            "test",
            "--where",
            "method=map",
            "dataset=spambase",
            "--set",
            "n_steps=4",
            "eval_every=2",
            "--metric",
            "test_nll",
            "--out",
            str(tmp_path / "scratch"),
        ]
    )
    out = capsys.readouterr().out
    metrics = list((tmp_path / "scratch" / "results").rglob("metrics.json"))
    assert len(metrics) == 1 and json.loads(metrics[0].read_text())["steps"] == 4
    assert "rc 0" in out and "final test_nll" in out
    curve = [ln.split() for ln in out.splitlines() if len(ln.split()) == 2 and ln.split()[0].isdigit()]
    assert [step for step, _ in curve] == ["0", "2", "4"]  # the curve, evaluated every 2 of 4 steps
    with pytest.raises(Exception, match="n_stepz"):
        mod.main(
            [
                "--experiment",
                "bali_cls_uci",
                "--scale",
                "test",
                "--where",
                "method=map",
                "dataset=spambase",
                "--set",
                "n_stepz=4",
                "--out",
                str(tmp_path / "scratch2"),
            ]
        )
    assert not (tmp_path / "scratch2" / "results").exists()


def test_a_signal_stops_the_running_cells_and_the_queued_ones(run_cells, tmp_path):
    """A `timeout` or Ctrl-C on run_cells.py must not leave its cell processes running unseen."""
    import sys
    import threading
    import time

    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    started = []
    worker = threading.Thread(target=lambda: started.append(run_cells._run(sleeper, tmp_path / "a.log")))
    worker.start()
    deadline = time.time() + 30
    while not run_cells._LIVE and time.time() < deadline:
        time.sleep(0.05)
    (proc,) = run_cells._LIVE
    try:
        with pytest.raises(SystemExit) as stop:
            run_cells.stop_cells(15)
        assert stop.value.code == 128 + 15
        worker.join(timeout=30)
        assert proc.poll() is not None and started and started[0][0] != 0  # the cell process is gone
        rc, _ = run_cells._run(sleeper, tmp_path / "b.log")  # a queued cell does not start afterwards
        assert rc != 0 and not run_cells._LIVE
    finally:
        if proc.poll() is None:
            proc.kill()
        run_cells._STOPPING.clear()


def test_a_cell_reading_upstream_cells_waits_for_them_then_runs(run_cells, tmp_path, capsys):
    """A retrain cell reads the hyperparameters its partitioned cell found: refused, naming that cell's
    metrics.json, until it completed under the same results folder; then listed to run."""
    args = ["--experiment", "retrain_mnist_c2", "--scale", "test", "--dry-run"]
    with pytest.raises(SystemExit, match=r"sens_mnist_c2/.*metrics\.json \(run their experiment first"):
        run_cells.main(args)
    assert run_cells.main(["--experiment", "sens_mnist_c2", "--scale", "test", "--dry-run"]) == 0
    _, upstream = _listed(capsys)
    for rel in upstream:
        _finished(tmp_path, rel, None)  # FAKE: the partitioned cells completed
    assert run_cells.main(args) == 0
    head, cells = _listed(capsys)
    assert (
        cells and all(c.startswith("test/retrain_mnist_c2/") for c in cells) and head.startswith(f"{len(cells)} cells")
    )


def test_the_quoted_baselines_run_end_to_end_at_test_scale(run_cells, tmp_path, capsys):
    """VADAM and PBP (BALI Tables 1 / 7) through `python -m reprokit.cell`, as the pipeline runs them."""
    args = ["--experiment", "bali_uci", "--scale", "test", "--where", "method=pbp,vadam", "dataset=uci_yacht"]
    assert run_cells.main([*args, "--threads", "1"]) == 0
    for method in ("pbp", "vadam"):
        out = tmp_path / "results" / "test" / "bali_uci" / f"method~{method}" / "dataset~uci_yacht" / "seed~0"
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["status"] == "completed", metrics
        assert all(math.isfinite(metrics["metrics"][k]) for k in ("test_rmse", "test_ll", "noise_sd"))
