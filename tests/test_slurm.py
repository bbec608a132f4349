"""`snakemake --profile slurm` end to end, on a single-node SLURM on loopback.

The cluster comes from `.ci/slurm-up.sh` (CI calls it from .ci/run; this module
calls it itself when SLURM is not up yet and it may: root with apt). Where it
cannot be brought up the SLURM tests skip with the reason, unless
REPROKIT_REQUIRE_SLURM=1, which turns that into a failure (for CI).

What is checked:
  * the profile in slurm/ is what `--profile slurm` resolves to from the repo
    root: placeholder account and GPU / CPU partitions, packing on, and the rule
    `cell` sets wall time, CPUs, GPU and partition per cell (no SLURM needed);
  * a run with `--profile slurm` plus an overlay profile (local account/partitions,
    squeue polling, resources clamped to this node, `--config scale=test`) builds
    the target; every `cell` job went through sbatch (job ids in the log, the jobs
    COMPLETED in squeue, with a GPU in their TRES exactly where the cost model sends
    the cell to a GPU, and their SLURM logs show the rule ran there), and every other
    rule ran locally ("localrule"). Once with packing off (a SLURM job per cell), once
    packed: at most a quarter as many SLURM jobs as cells, and every cell's metrics
    equal the unpacked run's;
  * a packed job requeued mid-run (`scontrol requeue`) resumes each interrupted cell
    from its own checkpoint.

REAL_TARGET selects the repo's own workflow; while it is None only a throwaway
workflow (3 cells + a local aggregate) written to tmp_path is run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from reprokit.config import grid_of, load_pipeline_config

# under pytest-xdist (-n 2 --dist loadgroup) every SLURM test runs on one worker: one cluster, brought up once
pytestmark = pytest.mark.xdist_group("slurm")

REPO = Path(__file__).resolve().parents[1]
PROFILE_NAME = "slurm"  # `snakemake --profile slurm` from the repo root
PROFILE = REPO / PROFILE_NAME / "config.yaml"
SLURM_UP = REPO / ".ci" / "slurm-up.sh"

# Target of the run through the repo's own Snakefile (a path relative to the repo
# root), e.g. "figures/fig2.pdf" built from cells under results/test/fig2a/.
# None: only the throwaway workflow runs. REPROKIT_SLURM_TARGET overrides it.
REAL_TARGET: str | None = os.environ.get("REPROKIT_SLURM_TARGET", "figures/fig2.pdf") or None
# More targets of the real runs, so that the packed run has cells of both kinds of job: with REAL_TARGET's,
# 15 CPU cells (fig2a, fig2b and their +-1 variants: small MLPs) and 2 GPU cells (MNIST CNNs) at test scale.
MORE_TARGETS = ["results/test/sens_mnist_c2.csv"]
# Rule whose jobs must go to SLURM; every other rule must be a localrule.
CELL_RULE = "cell"
# Extra --config for the runs.
CONFIG = ["scale=test"]
# Wall-clock limit of one snakemake run (passed to `timeout -k 10`): a safety net, not a
# target (the throwaway run takes ~35 s; the real target's 17 cells 2-4 min on 2 busy cores).
RUN_TIMEOUT_S = int(os.environ.get("REPROKIT_SLURM_TIMEOUT", "600"))
# The node and partition that .ci/slurm-up.sh creates; the tests refuse to submit
# anywhere else (e.g. on a real cluster's login node).
LOCAL_NODE = "localhost"
LOCAL_PARTITION = "local"
PLACEHOLDER = "CHANGE_ME"


# ----------------------------------------------------------------- helpers


def _sh(cmd: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
    # generous: slurmctld answers slowly when the 2 cores are busy
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _local_controller_running() -> bool:
    # The test cluster runs on loopback; without a local slurmctld, sinfo would
    # only block ~10 s trying to reach one.
    return shutil.which("pgrep") is not None and _sh(["pgrep", "-x", "slurmctld"]).returncode == 0


def _local_node_state() -> str:
    if shutil.which("sinfo") is None or not _local_controller_running():
        return ""
    try:
        r = _sh(["sinfo", "-h", "-N", "-n", LOCAL_NODE, "-p", LOCAL_PARTITION, "-o", "%T"], timeout=60)
    except subprocess.TimeoutExpired:
        return ""
    return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""


def _is_up() -> bool:
    return _local_node_state().rstrip("*~#!%$@^-").startswith(("idle", "mixed", "allocated", "completing"))


def _skip_or_fail(reason: str):
    if os.environ.get("REPROKIT_REQUIRE_SLURM") == "1":
        pytest.fail(f"REPROKIT_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


def _node_info() -> dict:
    r = _sh(["scontrol", "show", "node", LOCAL_NODE])
    text = r.stdout

    def grab(key, default):
        m = re.search(rf"\b{key}=(\d+)", text)
        return int(m.group(1)) if m else default

    gpus = re.search(r"\bGres=gpu(?::[^:\s,]+)?:(\d+)", text)
    return {
        "cpus": grab("CPUTot", 1),
        "mem_mb": grab("RealMemory", 2000),
        "gpus": int(gpus.group(1)) if gpus else 0,
    }


def _clamp_resources(res: dict, node: dict) -> dict:
    """Keep the profile's resource requests but fit them into the one test node."""
    out = dict(res)
    wants_gpu = "gpu" in out or "gpu" in str(out.get("gres", ""))
    # GPU jobs share the node's cores between its fake GPUs, so that they run side by side
    max_cpus = max(1, node["cpus"] // max(1, node["gpus"])) if wants_gpu else node["cpus"]
    if "cpus_per_task" in out:
        out["cpus_per_task"] = max(1, min(int(out["cpus_per_task"]), max_cpus))
    if "cpus_per_gpu" in out:
        out["cpus_per_gpu"] = max(1, min(int(out["cpus_per_gpu"]), max_cpus))
    for key in ("mem_mb", "mem_mb_per_cpu"):
        if key in out:
            out[key] = max(100, min(int(out[key]), node["mem_mb"] // 4))
    if "mem" in out:  # human-readable form, e.g. "32G": replace by mem_mb
        del out["mem"]
        out["mem_mb"] = node["mem_mb"] // 4
    if "gpu" in out:
        out["gpu"] = 1
    if "gres" in out:
        out["gres"] = re.sub(r"^gpu(?::[A-Za-z0-9_.]+)?(?::\d+)?$", "gpu:1", str(out["gres"]))
    out.pop("gpu_model", None)  # the fake GPU has no type
    out.pop("constraint", None)
    out.pop("qos", None)
    if "runtime" in out:
        out["runtime"] = min(int(out["runtime"]), 60) if str(out["runtime"]).isdigit() else 60
    return out


def _write_overlay(path: Path, node: dict, packed: bool = True) -> Path:
    """Overlay profile given after `--profile slurm`: each key here replaces that key of slurm/.
    Both partitions become the local one; packed, as many cells run at once as the node has CPUs."""
    prof = yaml.safe_load(PROFILE.read_text())
    default = _clamp_resources(prof.get("default-resources") or {}, node)
    default["slurm_account"] = "ci"  # no accounting here: any account name is accepted
    default["slurm_partition"] = LOCAL_PARTITION  # rules other than `cell` (the throwaway workflow's)
    set_resources = {rule: _clamp_resources(res, node) for rule, res in (prof.get("set-resources") or {}).items()}
    cell = set_resources.setdefault(CELL_RULE, {})
    for key in ("gpu_partition", "cpu_partition"):
        cell[key] = LOCAL_PARTITION
    for key in ("cells_per_gpu", "cells_per_cpu_job"):
        if packed:
            cell[key] = max(1, min(int(cell.get(key, 2)), node["cpus"]))
        else:
            cell.pop(key, None)  # packing off: a SLURM job per cell
    overlay = {
        "default-resources": default,
        "set-resources": set_resources,
        # No slurmdbd: sacct cannot answer, squeue must be used (MinJobAge=600 in slurm.conf
        # is >= 3 x init-seconds, else the plugin silently switches back to sacct).
        "slurm-status-command": "squeue",
        "slurm-init-seconds-before-status-checks": 2,
        "seconds-between-status-checks": 2,
        "slurm-keep-successful-logs": True,
        "latency-wait": 5,
        "retries": 0,
    }
    path.write_text(yaml.safe_dump(overlay, sort_keys=False))
    return path


THROWAWAY_SNAKEFILE = r"""
# Throwaway stand-in for the real workflow: cells go to SLURM, the rest is local.
localrules: all, aggregate

CELLS = ["a", "b", "c"]

rule all:
    input: "figures/toy.txt"

rule cell:
    output: "results/test/toy/{cell}.txt"
    resources: gpu=1
    shell:
        "echo \"cell={wildcards.cell} slurm_job=${{SLURM_JOB_ID:-none}} scale={config[scale]}\" > {output}"

rule aggregate:
    input: expand("results/test/toy/{cell}.txt", cell=CELLS)
    output: "figures/toy.txt"
    shell:
        "cat {input} > {output}; echo \"aggregate slurm_job=${{SLURM_JOB_ID:-none}}\" >> {output}"
"""


def _copy_repo(dst: Path) -> None:
    """Copy the repo's tracked and untracked-but-not-ignored files (no results, no .snakemake)."""
    r = _sh(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    if r.returncode == 0 and r.stdout:
        files = [f for f in r.stdout.split("\0") if f]
    else:
        skip = {".git", ".snakemake", "results", "checkpoints", "logs", "data", ".venv", "__pycache__"}
        files = [
            str(p.relative_to(REPO))
            for p in REPO.rglob("*")
            if p.is_file() and not skip.intersection(p.relative_to(REPO).parts)
        ]
    for f in files:
        src = REPO / f
        if not src.is_file():
            continue  # deleted in the work tree
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / f)
    shared = REPO.parent / "shared"
    if shared.exists() and not (dst.parent / "shared").exists():
        (dst.parent / "shared").symlink_to(shared)  # keeps ../shared/... paths working


def _snakemake_cmd(targets: list[str], overlay: Path, extra: tuple[str, ...] = ()) -> list[str]:
    snakemake = shutil.which("snakemake")
    exe = [snakemake] if snakemake else [sys.executable, "-m", "snakemake"]
    return [
        "timeout", "-k", "10", str(RUN_TIMEOUT_S),
        *exe, *targets, "--profile", PROFILE_NAME, "--profile", str(overlay), *extra,
        "--nocolor", "--config", *CONFIG,  # last: --config takes every word after it
    ]  # fmt: skip


def _snakemake_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env.pop("SNAKEMAKE_SLURM_PARTITIONS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_snakemake(workdir: Path, overlay: Path, targets: list[str], log_path: Path) -> tuple[int, str]:
    cmd = _snakemake_cmd(targets, overlay)
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        rc = subprocess.run(cmd, cwd=workdir, env=_snakemake_env(), stdout=log, stderr=subprocess.STDOUT).returncode
    if rc < 0:  # timeout re-raises the signal that killed the command (-k: SIGKILL)
        rc = 128 - rc
    return rc, log_path.read_text()


def _job_cells(slurm_log: str) -> list[str]:
    """rel_dirs (<scale>/<experiment>/<coords>) of the cells a SLURM job's log shows it running."""
    text = Path(slurm_log).read_text() if Path(slurm_log).is_file() else ""
    found = re.findall(r"wildcards: scale=(\S+), experiment=(\S+), coords=(\S+)", text)
    return sorted({f"{a}/{b}/{c}" for a, b, c in found})


def _check_slurm_run(rc: int, log: str, wants_gpu=lambda cells: True) -> dict[str, str]:
    """Assertions shared by the runs; returns {slurm job id: slurm log path}. `wants_gpu(cells)`: whether
    the SLURM job that ran these cells (rel_dirs) must have a GPU."""
    tail = log[-6000:]
    run_id = re.search(r"SLURM run ID: (\S+)", log)
    try:
        assert rc == 0, f"snakemake exited {rc}{' (timeout)' if rc in (124, 137) else ''}:\n{tail}"
        assert "Using profiles slurm and" in log, f"--profile {PROFILE_NAME} was not picked up:\n{tail}"
        assert run_id, f"no 'SLURM run ID' line: the slurm executor did not run:\n{tail}"

        submitted = dict(re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+?)\)\.?$", log, re.M))
        remote_rules = re.findall(r"^\s*rule (\S+):$", log, re.M)
        local_rules = re.findall(r"^localrule (\S+):$", log, re.M)
        groups = re.findall(r"Group job (\S+) \(jobs", log)
        assert remote_rules, f"no job was sent to SLURM:\n{tail}"
        assert set(remote_rules) == {CELL_RULE}, f"rules sent to SLURM besides {CELL_RULE!r}: {set(remote_rules)}"
        assert CELL_RULE not in local_rules, f"{CELL_RULE!r} ran locally"
        assert local_rules, "no rule ran locally (aggregation/plotting should be localrules)"
        n_alone = len(re.findall(r"^rule \S+:$", log, re.M))
        assert len(submitted) == n_alone + len(groups), (
            f"{n_alone} single {CELL_RULE} jobs and {len(groups)} group jobs but {len(submitted)} sbatch "
            f"submissions:\n{tail}"
        )
        for jobid, slurm_log in submitted.items():
            assert re.search(rf"/(rule_{CELL_RULE}|group_\S+_{CELL_RULE})/", slurm_log), (
                f"SLURM job {jobid} is not a {CELL_RULE} job: {slurm_log}"
            )
            text = Path(slurm_log).read_text() if Path(slurm_log).is_file() else ""
            assert f"rule {CELL_RULE}:" in text and "--mode remote" in text, (
                f"SLURM log {slurm_log} does not show {CELL_RULE} running inside the job:\n{text[-3000:]}"
            )

        # The jobs themselves, as SLURM saw them (MinJobAge keeps finished jobs in squeue).
        sq = _sh(["squeue", "--states=all", "--noheader", "--format=%i|%T", "--name", run_id.group(1)])
        states = dict(line.split("|", 1) for line in sq.stdout.split() if "|" in line)
        for jobid, slurm_log in submitted.items():
            assert states.get(jobid) == "COMPLETED", f"SLURM job {jobid}: {states.get(jobid)!r} ({sq.stdout!r})"
            show = _sh(["scontrol", "show", "job", jobid]).stdout
            has_gpu = bool(re.search(r"Tres(PerJob|PerNode|PerTask)=\S*gpu", show))
            cells = _job_cells(slurm_log)
            assert has_gpu == wants_gpu(cells), (
                f"job {jobid} ({cells}) {'got' if has_gpu else 'did not get'} a GPU:\n{show}"
            )
        return submitted
    except BaseException:
        if run_id:  # never leave jobs of a failed run behind
            try:
                _sh(["scancel", "--name", run_id.group(1)], timeout=30)
            except Exception:
                pass
        raise


def _devices() -> dict[str, str]:
    """{rel_dir: "gpu" | "cpu"} of every test-scale cell: where the cost model sends it."""
    from reprokit.budget import cell_costs

    config = load_pipeline_config(REPO, {"scale": "test"})
    cells = [c for name in sorted(config["experiments"]) for c in grid_of(config, name, "test").cells()]
    return {c.rel_dir: c.device for c in cell_costs(cells, config)}


def _wants_gpu(devices: dict[str, str]):
    def wants(cells):
        kinds = {devices[c] for c in cells}
        assert len(kinds) == 1, f"a SLURM job ran cells of both kinds: {cells}"
        return kinds == {"gpu"}

    return wants


def _metrics(work: Path) -> dict[str, dict]:
    """{rel_dir: metrics} of every cell under work/results."""
    out = {}
    for path in (work / "results").rglob("metrics.json"):
        out[str(path.parent.relative_to(work / "results"))] = json.loads(path.read_text())
    return out


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def slurm_node():
    """The local test cluster's node; brings SLURM up with .ci/slurm-up.sh if needed.

    slurm-up.sh refuses to overwrite a slurm.conf it did not write, so on a real
    cluster's machine this skips instead of reconfiguring it.
    """
    if not _is_up():
        if os.geteuid() != 0:
            _skip_or_fail("SLURM is not up and .ci/slurm-up.sh needs root")
        if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
            _skip_or_fail("SLURM is not up and neither slurmctld nor apt-get is available")
        try:
            r = _sh(["bash", str(SLURM_UP)], timeout=600)
        except subprocess.TimeoutExpired:
            _skip_or_fail(".ci/slurm-up.sh timed out after 600 s")
        if r.returncode != 0 or not _is_up():
            _skip_or_fail(f".ci/slurm-up.sh could not bring SLURM up (rc={r.returncode}):\n{r.stderr[-2000:]}")
    return _node_info()


# ----------------------------------------------------------------- tests


def test_profile_resolves_from_repo_root(monkeypatch):
    """`--profile slurm` typed in the repo root finds slurm/config.yaml (no SLURM needed)."""
    cli = pytest.importorskip("snakemake.cli")  # the same lookup `snakemake --profile` does

    monkeypatch.chdir(REPO)
    found = cli.get_profile_dir(PROFILE_NAME)
    assert found is not None, "snakemake does not resolve --profile slurm from the repo root"
    assert Path(found[1]).resolve() == PROFILE.resolve()

    prof = yaml.safe_load(PROFILE.read_text())
    assert prof["executor"] == "slurm"
    assert PLACEHOLDER in str(prof["default-resources"]["slurm_account"]), "the account should be a placeholder"
    cell = prof["set-resources"][CELL_RULE]
    for key in ("gpu_partition", "cpu_partition"):  # both partitions, for users to set
        assert PLACEHOLDER in str(cell[key]), f"set-resources.{CELL_RULE}.{key} should be a {PLACEHOLDER} placeholder"
    assert "mem_mb" in cell, f"set-resources.{CELL_RULE} lacks mem_mb"
    # wall time, CPUs, GPU and partition come per cell from the rule (cost model, threads, packing); a
    # profile value would replace them for every cell
    for key in ("runtime", "cpus_per_task", "gpu", "gres", "slurm_partition"):
        assert key not in cell, f"set-resources.{CELL_RULE}.{key} replaces the rule's per-cell value"
    # packing on, the way Snakemake packs (workflow/rules/cells.smk)
    assert int(cell["cells_per_gpu"]) >= 1 and int(cell["cells_per_cpu_job"]) >= 1
    assert "cells=100000" in prof["group-components"]
    assert "pack_slot=1" in prof["resources"] and "pack_slot=local" in prof["set-resource-scopes"]
    rule = (REPO / "workflow" / "rules" / "cells.smk").read_text()
    for text in ("runtime=cell_runtime", "cpus_per_task=cell_cpus", "**cell_slurm_resources()", "cell_group"):
        assert text in rule, f"rule {CELL_RULE} lacks {text}"
    assert int(prof.get("retries", 0)) >= 1


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_throwaway_workflow(slurm_node, tmp_path):
    """Cells of a throwaway workflow go through sbatch; the aggregate runs locally."""
    work = tmp_path / "wf"
    work.mkdir()
    shutil.copytree(REPO / PROFILE_NAME, work / PROFILE_NAME)
    (work / "Snakefile").write_text(THROWAWAY_SNAKEFILE)
    overlay = _write_overlay(tmp_path / "overlay.yaml", slurm_node)

    rc, log = _run_snakemake(work, overlay, ["all"], tmp_path / "snakemake.log")
    submitted = _check_slurm_run(rc, log)

    assert len(submitted) == 3
    cell_jobs = set()
    for c in "abc":
        text = (work / "results/test/toy" / f"{c}.txt").read_text()
        m = re.search(r"slurm_job=(\S+) scale=(\S+)", text)
        assert m and m.group(2) == "test", text
        cell_jobs.add(m.group(1))
    assert cell_jobs == set(submitted), f"cells ran in {cell_jobs}, submitted {set(submitted)}"
    agg = (work / "figures/toy.txt").read_text()
    assert "aggregate slurm_job=none" in agg, f"aggregate ran inside a SLURM job:\n{agg}"


@pytest.fixture(scope="module")
def unpacked_run(slurm_node, tmp_path_factory):
    """The repo's workflow at test scale with packing off: a SLURM job per cell. (workdir, log, submitted)."""
    tmp = tmp_path_factory.mktemp("unpacked")
    work = tmp / "repo"
    work.mkdir()
    _copy_repo(work)
    overlay = _write_overlay(tmp / "overlay.yaml", slurm_node, packed=False)
    rc, log = _run_snakemake(work, overlay, [REAL_TARGET, *MORE_TARGETS], tmp / "snakemake.log")
    submitted = _check_slurm_run(rc, log, _wants_gpu(_devices()))
    return work, log, submitted


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.skipif(REAL_TARGET is None, reason="REAL_TARGET not set yet (tests/test_slurm.py)")
def test_slurm_real_target(unpacked_run):
    """The repo's workflow at test scale: cells via SLURM (one job each, a GPU only for the cells the cost
    model sends to one), figures locally, target built."""
    work, log, submitted = unpacked_run
    assert "Group job" not in log, "packing is off, yet Snakemake made group jobs"
    assert len(submitted) == len(_metrics(work)) >= 12
    target = work / REAL_TARGET
    assert target.is_file() and target.stat().st_size > 0, f"{REAL_TARGET} was not built"


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.skipif(REAL_TARGET is None, reason="REAL_TARGET not set yet (tests/test_slurm.py)")
def test_slurm_packed_target(unpacked_run, slurm_node, tmp_path):
    """Packed: at least 12 cells in at most a quarter as many SLURM jobs, GPU cells and CPU cells in jobs of
    their own kind, several at once, and every cell's metrics equal to the unpacked run's."""
    work = tmp_path / "repo"
    work.mkdir()
    _copy_repo(work)
    overlay = _write_overlay(tmp_path / "overlay.yaml", slurm_node, packed=True)
    targets = [t for t in [REAL_TARGET, *MORE_TARGETS] if t.endswith(".csv")] or [REAL_TARGET]
    # REAL_TARGET's cells (Fig. 2 draws the +-1 variants beside fig2a and fig2b)
    targets += [f"results/test/{e}.csv" for e in ("fig2a", "fig2a_pm1", "fig2b", "fig2b_pm1", "fig2b_text")]
    rc, log = _run_snakemake(work, overlay, targets, tmp_path / "snakemake.log")
    devices = _devices()
    submitted = _check_slurm_run(rc, log, _wants_gpu(devices))

    packed, unpacked = _metrics(work), _metrics(unpacked_run[0])
    assert len(packed) >= 12 and set(packed) == set(unpacked), (sorted(packed), sorted(unpacked))
    assert len(submitted) * 4 <= len(packed), f"{len(submitted)} SLURM jobs for {len(packed)} cells"
    assert {devices[c] for c in packed} == {"gpu", "cpu"}, "the target should have cells of both kinds"
    for rel, record in packed.items():
        assert record["status"] == unpacked[rel]["status"] == "completed", rel
        assert record["metrics"] == unpacked[rel]["metrics"], (
            f"{rel}: packed {record['metrics']} != {unpacked[rel]['metrics']}"
        )
    # the first cell of each job ran the others of its group, two at a time; they only installed their results
    logs = "".join(p.read_text() for p in (work / "logs" / "test").rglob("*.log"))
    assert "more of its group, 2 at a time" in logs, logs[-3000:]
    assert "finished earlier in SLURM job" in logs and "of this run" in logs


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.skipif(REAL_TARGET is None, reason="REAL_TARGET not set yet (tests/test_slurm.py)")
def test_slurm_requeued_packed_job_resumes_each_cell(slurm_node, tmp_path):
    """A packed job requeued mid-run (`scontrol requeue`, as after a preemption or a node failure) starts
    again and each of its cells resumes from its own checkpoint; what finished before stays finished."""
    work = tmp_path / "repo"
    work.mkdir()
    _copy_repo(work)
    overlay = _write_overlay(tmp_path / "overlay.yaml", slurm_node, packed=True)
    # fig2a's four Laplace/partitioned cells at 1 and 15 inputs, long enough (1500 steps) to be caught
    # mid-run, checkpointing every 100 steps
    (work / "slow.yaml").write_text(
        yaml.safe_dump(
            {
                "run": {"checkpoint_every": 100},
                "experiments": {"fig2a": {"scales": {"test": {"settings": {"n_steps": 1500, "eval_every": 500}}}}},
            }
        )
    )
    targets = [
        f"results/test/fig2a/method~{m}/n_inputs~{n}/seed~0/metrics.json"
        for m in ("laplace", "partitioned")
        for n in (1, 15)
    ]
    cmd = _snakemake_cmd(targets, overlay, ("--configfile", "slow.yaml"))
    log_path = tmp_path / "snakemake.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=_snakemake_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            checkpoints = []
            deadline = time.monotonic() + RUN_TIMEOUT_S / 2
            while time.monotonic() < deadline and proc.poll() is None:
                checkpoints = list((work / "checkpoints" / "test" / "fig2a").rglob("checkpoint.pt"))
                if checkpoints:
                    break
                time.sleep(0.5)
            assert checkpoints, f"no cell wrote a checkpoint:\n{log_path.read_text()[-4000:]}"
            jobid = re.search(r"submitted with SLURM jobid (\d+)", log_path.read_text()).group(1)
            assert _sh(["scontrol", "requeue", jobid]).returncode == 0
            # SLURM holds a requeued job for 2 minutes before it may start again; not here
            for _ in range(60):
                if "JobState=PENDING" in _sh(["scontrol", "show", "job", jobid]).stdout:
                    _sh(["scontrol", "update", f"jobid={jobid}", "StartTime=now"])
                    break
                time.sleep(0.5)
            rc = proc.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    log = log_path.read_text()
    submitted = _check_slurm_run(rc, log, _wants_gpu(_devices()))
    assert len(submitted) == 1, f"4 cells should make one packed SLURM job: {submitted}"
    show = _sh(["scontrol", "show", "job", jobid]).stdout
    assert re.search(r"Restarts=[1-9]", show), f"job {jobid} was not requeued:\n{show}"
    records = {rel: m for rel, m in _metrics(work).items() if rel.startswith("test/fig2a/")}
    assert len(records) == 4 and all(r["status"] == "completed" and r["steps"] == 1500 for r in records.values())
    resumed = {rel: r["resumed_from_step"] for rel, r in records.items() if r["resumed_from_step"]}
    # the cells that were running when SIGTERM came checkpointed then, and went on from there
    assert resumed, f"no cell resumed from its checkpoint: {records}"
    assert all(0 < step < 1500 for step in resumed.values()), resumed
