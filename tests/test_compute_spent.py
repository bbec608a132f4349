"""The compute table: a resumed cell counts all its steps at its last run's pace, devices stay apart, untimed
lines are counted, not dropped."""

import json
from pathlib import Path

import pytest

from reprokit.report.commands import compute


def _line(cell, device, name, pace=None, steps=None, ran=None, threads=None):
    prov = {"device": device, "device_name": name}
    if threads:
        prov["threads"] = threads
    line = {"cell": cell, "settings": {}, "status": "completed", "coords": {}, "metrics": {}, "provenance": prov}
    if pace is not None:
        line.update(seconds_per_step=pace, steps=steps)
    if ran is not None:
        line["seconds_this_run"] = ran
    return line


def _write(tmp_path, experiment, lines):
    d = tmp_path / "figures" / "paper" / "cells"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{experiment}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_resumed_cell_counts_every_step_and_devices_stay_apart(tmp_path):
    _write(
        tmp_path,
        "exp_a",
        [
            # resumed at step 900: this run took 0.2 s x 29100 steps, the whole cell ~ 0.2 x 30000
            _line("paper/exp_a/seed~0", "cpu", "AMD EPYC", pace=0.2, steps=30000, ran=5820.0, threads=1),
            _line("paper/exp_a/seed~1", "cpu", "AMD EPYC", pace=0.1, steps=30000, ran=3000.0, threads=1),
            _line("paper/exp_a/seed~2", "cuda:0", "NVIDIA H200", pace=0.004, steps=30000, ran=120.0),
        ],
    )
    _write(tmp_path, "exp_b", [_line("paper/exp_b/seed~0", "cpu", "x86_64")])
    rows = {(r.experiment, r.device): r for r in compute.spent(tmp_path / "figures" / "paper" / "cells")}
    cpu = rows[("exp_a", "cpu (AMD EPYC), 1 thread")]
    assert cpu.hours == pytest.approx((6000 + 3000) / 3600)
    assert rows[("exp_a", "cuda:0 (NVIDIA H200)")].hours == pytest.approx(120 / 3600)
    assert rows[("exp_b", "cpu (x86_64)")].untimed == 1
    assert rows[("exp_b", "cpu (x86_64)")].seconds == []

    text = compute.markdown(list(rows.values()), "paper")
    assert "| exp_b | cpu (x86_64) | 1 (1 untimed) | 0.00 | n/a |" in text
    assert "Total: cpu 2.5 h, cuda 0.0 h." in text


def test_seconds_this_run_when_no_pace():
    assert compute.cell_seconds({"seconds_this_run": 42.0, "seconds_per_step": None, "steps": 10}) == 42.0
    assert compute.cell_seconds({}) is None


@pytest.mark.parametrize("scale", ["paper", "quick"])
def test_committed_tables_match_the_archive(scale):
    repo = Path(__file__).resolve().parents[1]
    committed = repo / "figures" / scale / "compute.md"
    assert committed.exists(), (
        f"{committed} missing: python -m reprokit.report.commands.compute --scale {scale} --out {committed}"
    )
    assert committed.read_text() == compute.markdown(compute.spent(repo / "figures" / scale / "cells"), scale), (
        f"{committed} is stale: python -m reprokit.report.commands.provenance --scale {scale} (or .compute --out)"
    )
