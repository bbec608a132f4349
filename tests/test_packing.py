"""Packing cells into SLURM jobs (reprokit.packing): the plan, and the runner without SLURM
(a packed SLURM job on the real single-node cluster: tests/test_slurm.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprokit import packing
from reprokit.budget import cell_costs, slurm_plan
from reprokit.config import grid_of, load_pipeline_config
from reprokit.job import cell_job
from reprokit.packing import CellCost, PackingSettings, pack_jobs

REPO = Path(__file__).resolve().parents[1]


def cost(i, minutes, device="gpu", experiment="e", shared=None):
    return CellCost(f"paper/{experiment}/c~{i}", experiment, device, minutes * 60, minutes * 60, 100.0, shared or {})


def test_long_cells_stay_alone_and_short_ones_fill_jobs_of_30_to_120_minutes():
    costs = [cost(0, 300), cost(1, 45)] + [cost(i, 2.5) for i in range(2, 202)]  # 200 x 2.5 min
    jobs = pack_jobs(costs, PackingSettings(cells_per_gpu=4))
    alone = [j for j in jobs if j.alone]
    assert sorted(j.cells[0] for j in alone) == ["paper/e/c~0", "paper/e/c~1"]
    packed = [j for j in jobs if not j.alone]
    assert sum(len(j.cells) for j in packed) == 200 and all(j.at_once == 4 for j in packed)
    # no measured sharing rows: 4 at once run no faster than one after another (+ Snakemake's start per cell)
    total = sum(j.wall_s for j in packed) / 60
    assert total == pytest.approx(200 * (2.5 + packing.CELL_OVERHEAD_S / 60))
    assert all(30 <= j.wall_s / 60 <= 120 for j in packed), [j.wall_s / 60 for j in packed]
    assert len(packed) == round(total / 60)
    # each cell's SLURM minutes add up to the job's wall time with the margin and the extra 10 minutes
    for j in packed:
        assert j.runtime >= packing.MARGIN * j.wall_s / 60 + packing.EXTRA_MINUTES
        assert j.runtime <= packing.MARGIN * j.wall_s / 60 + packing.EXTRA_MINUTES + len(j.cells)
    assert len({j.id for j in packed}) == len(packed) and all(j.id.startswith("pack_gpu") for j in packed)
    assert alone[0].runtime == packing.single_minutes(300 * 60)


def test_gpu_and_cpu_cells_never_share_a_job_and_cpu_cells_run_side_by_side():
    costs = [cost(i, 3, "gpu") for i in range(20)] + [cost(i, 3, "cpu", "u") for i in range(20, 100)]
    jobs = pack_jobs(costs, PackingSettings(cells_per_gpu=4, cells_per_cpu_job=8))
    by_rel = {c.rel_dir: c.device for c in costs}
    for j in jobs:
        assert {by_rel[r] for r in j.cells} == {j.device}
    cpu = [j for j in jobs if j.device == "cpu"]
    assert sum(j.wall_s for j in cpu) / 60 == pytest.approx(80 * (3 / 8 + packing.CELL_OVERHEAD_S / 60))
    assert all(j.at_once == 8 for j in cpu)
    # 20 GPU cells of 3 min are one hour: one job
    assert [len(j.cells) for j in jobs if j.device == "gpu"] == [20]


def test_measured_sharing_rows_shorten_a_gpu_job():
    plain = pack_jobs([cost(i, 3) for i in range(20)], PackingSettings(cells_per_gpu=4))
    shared = pack_jobs(
        [cost(i, 3, shared={4: 6 * 60}) for i in range(20)], PackingSettings(cells_per_gpu=4)
    )  # 4 at once: 6 min each
    assert sum(j.wall_s for j in shared) == pytest.approx(sum(j.wall_s for j in plain) - 20 * 1.5 * 60)


def test_a_little_work_is_one_job_and_a_single_short_cell_runs_alone():
    jobs = pack_jobs([cost(0, 1), cost(1, 1, "cpu")], PackingSettings())
    assert [j.alone for j in jobs] == [True, True]
    jobs = pack_jobs([cost(i, 1) for i in range(5)], PackingSettings())
    assert len(jobs) == 1 and len(jobs[0].cells) == 5 and jobs[0].wall_s < 30 * 60


def test_paper_scale_plans_at_most_450_jobs_none_short_unless_a_single_long_cell():
    config = load_pipeline_config(REPO, {"scale": "paper"})
    jobs, costs = slurm_plan(config)
    assert len(costs) > 2000 and len(jobs) <= 450, len(jobs)  # 400 before BALI Tables 1 / 7 gained VADAM and PBP
    for j in jobs:
        if j.alone:
            continue
        assert j.wall_s >= PackingSettings().min_minutes * 60, (j.id, j.wall_s / 60)
        assert j.wall_s <= PackingSettings().max_minutes * 60, (j.id, j.wall_s / 60)
    short_alone = [j for j in jobs if j.alone and j.wall_s < PackingSettings().long_minutes * 60]
    assert len(short_alone) <= 2, [j.cells for j in short_alone]  # at most the odd cell of a device


def test_device_is_decided_from_measured_step_costs(monkeypatch):
    """BALI's UCI MLPs and Fig. 2's input-selection MLPs run as fast on a CPU core as the fastest step ever
    measured on the H100; the MNIST CNN and BALI's image MLPs are many times faster there."""
    monkeypatch.delenv("REPROKIT_COST_PROFILE", raising=False)
    config = load_pipeline_config(REPO, {"scale": "paper"})

    def devices(name):
        cells = list(grid_of(config, name, "paper").cells())
        return {c.device for c in cell_costs(cells, config)}

    assert devices("bali_uci") == {"cpu"}
    assert devices("fig2a") == {"cpu"}
    assert devices("fig3a") == {"gpu"}
    assert devices("bali_cls_image") == {"gpu"}
    assert devices("table4_cifar") == {"gpu"}


# ------------------------------------------------------------------------------------------------ the runner


def _jobs(n):
    config = load_pipeline_config(REPO, {"scale": "test"})
    cells = [c for c in grid_of(config, "fig2a", "test").cells() if c.coord_dict["method"] == "laplace"][:n]
    return [cell_job(c, config) for c in cells]


def _in(tmp, job):
    """The job's argv (after `run`) with results and checkpoints under tmp."""
    argv = job.argv(1)[1:]
    out, ck = str(tmp / job.out), str(tmp / job.checkpoint)
    argv[argv.index("--out") + 1] = out
    argv[argv.index("--checkpoint") + 1] = ck
    return argv, out, ck


def _runner(argv, pack, env):
    return subprocess.run(
        [sys.executable, "-m", "reprokit.packing", "run", "--pack", pack, *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_runner_in_a_slurm_job_runs_the_group_and_the_others_install_their_results(tmp_path):
    jobs = _jobs(3)
    entries = []
    for job in jobs:
        argv, out, ck = _in(tmp_path, job)
        entries.append({"out": out, "checkpoint": ck, "argv": argv, "inputs": list(job.variants.values())})
    manifest = tmp_path / "pack.json"
    packing.write_manifest(manifest, "pack_test_cpu000", 2, entries, run="run-1")
    env = {**os.environ, "SLURM_JOB_ID": "4242"}

    first = _runner(entries[0]["argv"], str(manifest), env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "this cell and 2 more of its group, 2 at a time" in first.stderr
    assert Path(entries[0]["out"], "metrics.json").exists()
    for e in entries[1:]:  # run, waiting in their staging folders, not installed yet
        assert not Path(e["out"], "metrics.json").exists()
        assert Path(e["checkpoint"]).parent.joinpath("packed", "metrics.json").exists()
    second = _runner(entries[1]["argv"], str(manifest), env)
    assert second.returncode == 0 and "finished earlier in SLURM job 4242 of this run" in second.stderr, second.stderr[
        -2000:
    ]
    got = json.loads(Path(entries[1]["out"], "metrics.json").read_text())
    # the same cell run on its own gives the same metrics
    alone = subprocess.run(
        [sys.executable, "-m", "reprokit.cell", "run", *_in(tmp_path / "alone", jobs[1])[0]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert alone.returncode == 0, alone.stderr[-2000:]
    ref = json.loads(Path(_in(tmp_path / "alone", jobs[1])[1], "metrics.json").read_text())
    assert got["metrics"] == ref["metrics"]
    # a retried job of the same run (another SLURM job) takes it too
    packing.write_manifest(manifest, "pack_test_cpu000", 2, entries, run="run-1")
    again = _runner(entries[2]["argv"], str(manifest), {**os.environ, "SLURM_JOB_ID": "4343"})
    assert again.returncode == 0 and "finished earlier in SLURM job 4242" in again.stderr
    # a later Snakemake run does not take a result staged by an earlier one: it runs the cell again
    Path(entries[2]["out"], "metrics.json").unlink()
    packing.write_manifest(manifest, "pack_test_cpu000", 2, entries, run="run-2")
    third = _runner(entries[2]["argv"], str(manifest), {**os.environ, "SLURM_JOB_ID": "4444"})
    assert third.returncode == 0 and "finished earlier" not in third.stderr
    assert "this cell and 0 more" in third.stderr


def test_runner_outside_slurm_or_alone_is_the_plain_cell_command(tmp_path):
    argv, out, _ = _in(tmp_path, _jobs(1)[0])
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    res = _runner(argv, "none", env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "reprokit.packing" not in res.stderr and Path(out, "metrics.json").exists()


def test_packing_imports_no_torch():
    res = subprocess.run(
        [sys.executable, "-c", "import sys, reprokit.packing; print('torch' in sys.modules)"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr[-1000:]
