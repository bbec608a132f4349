"""End to end through Snakemake on a copy of the workflow: DAG speed, config errors, Fig. 2 at test
scale (checked on the whole test-scale build of tests/test_artefacts_build.py), the report, one-cell re-runs,
and SIGTERM/resume of a real cell through the CLI."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def make_workdir(tmp_path: Path, **overrides) -> Path:
    work = tmp_path / "wf"
    work.mkdir()
    shutil.copy(REPO / "Snakefile", work / "Snakefile")
    shutil.copytree(REPO / "workflow", work / "workflow", ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
    shutil.copytree(REPO / "config", work / "config")
    cfg = yaml.safe_load((work / "config" / "config.yaml").read_text())
    cfg["data"]["mirrors"] = [str(SHARED_DATA)]
    cfg["data"]["download"] = False  # tests never reach the internet; the download tests serve a mirror
    for key, value in overrides.items():
        if key == "data":  # merged: a test names only the data keys it changes
            cfg["data"].update(value)
        else:
            cfg[key] = value
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return work


FIG2_CONFIG = Path("config") / "experiments" / "fig2_input_selection.yaml"


def edit_fig2_config(work: Path, edit) -> dict:
    path = work / FIG2_CONFIG
    cfg = yaml.safe_load(path.read_text())
    edit(cfg)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return cfg


def snakemake(work: Path, *args, timeout=900, env=None):
    """Run snakemake; its messages (stdout and stderr together) are in `.stdout`."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        env=env,
    )


def env_without_slurm_probe_wait(tmp_path: Path) -> dict | None:
    """An environment for timing snakemake's start-up when `scontrol` is installed but no controller answers.

    The SLURM executor plugin runs `scontrol show config` (10 s timeout) whenever snakemake starts, to
    read MinJobAge; with a client and no reachable controller that is ~9 s of waiting that has nothing to
    do with our DAG. Then a stub `scontrol` that fails at once goes first on PATH (the plugin falls back to
    its default, as it does without SLURM). None: SLURM absent or answering, nothing to change.
    """
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return None
    try:
        subprocess.run([scontrol, "show", "config"], capture_output=True, timeout=3, check=True)
        return None
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
        stub = tmp_path / "no-slurm-controller"
        stub.mkdir(exist_ok=True)
        (stub / "scontrol").write_text("#!/bin/sh\nexit 1\n")
        (stub / "scontrol").chmod(0o755)
        return {**os.environ, "PATH": f"{stub}{os.pathsep}{os.environ.get('PATH', '')}"}


# Runs `snakemake -n --config scale=paper` in this child process with counters around the planning
# functions the rules call, then prints what it did as JSON: CPU time (not wall time, which measures
# whatever else runs on the machine), per-call-site counts, and whether torch was executed.
_PLAN_PROBE = r"""
import collections, json, runpy, sys
import reprokit.config as config
import reprokit.plan as plan
from reprokit.data import mirrors

calls = collections.Counter()

def counted(owner, name, key=lambda *a, **k: ()):
    fn = getattr(owner, name)
    def wrapper(*args, **kwargs):
        calls[json.dumps([name, *key(*args, **kwargs)])] += 1
        return fn(*args, **kwargs)
    setattr(owner, name, wrapper)

counted(config, "validate_config")
counted(config.ExperimentGrid, "__init__", lambda self, name, spec, scale: (name, scale))
counted(config.ExperimentGrid, "parse", lambda self, coords: (self.name, self.scale, coords))
counted(mirrors, "is_available", lambda name, *a, **k: (name,))
_from_dict = plan.Settings.from_dict.__func__
def _typed(cls, values, where="settings"):  # typed settings built per cell: the plans' cache keeps it to one
    cell_key = json.dumps({k: v for k, v in sorted(values.items()) if not k.startswith("_")}, default=str)
    calls[json.dumps(["from_dict", where, cell_key])] += 1
    return _from_dict(cls, values, where)
plan.Settings.from_dict = classmethod(_typed)
sys.argv = ["snakemake", "-n", "--quiet", "--config", "scale=paper"]
try:
    runpy.run_module("snakemake", run_name="__main__")
except SystemExit as e:
    code = e.code
print("PROBE" + json.dumps({"exit": code, "torch_executed": "torch._C" in sys.modules,
                            "calls": [[json.loads(k), n] for k, n in calls.items()]}))
"""


@pytest.fixture(scope="module")
def paper_dag_plan(tmp_path_factory):
    """One paper-scale dry run over every experiment, instrumented (see _PLAN_PROBE)."""
    tmp_path = tmp_path_factory.mktemp("paper_dag")
    work = make_workdir(tmp_path)
    res = subprocess.run(
        [sys.executable, "-c", _PLAN_PROBE],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env=env_without_slurm_probe_wait(tmp_path),
    )
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("PROBE")), None)
    assert line is not None, res.stdout[-3000:]
    plan = json.loads(line[len("PROBE") :])
    assert plan["exit"] == 0, res.stdout[-3000:]
    return plan


@pytest.mark.xdist_group("paper_dag")  # one worker builds the module fixture once
def test_paper_scale_dag_plans_each_cell_once(paper_dag_plan, shared_data):
    """The work behind the DAG, counted: the config validated once, each grid built at most once per
    place that needs it, each cell path parsed at most twice (as a job and as another cell's upstream),
    each kind and each dataset looked up once. Losing one of the rule-side caches multiplies a count.
    Needs the data mirror: without it the plans leave out the cells of unavailable datasets."""
    by_name = {}
    for (name, *key), n in paper_dag_plan["calls"]:
        by_name.setdefault(name, {})[tuple(key)] = n
    assert by_name["validate_config"] == {(): 1}
    parses = by_name["parse"]
    assert len(parses) > 1000, len(parses)  # every paper-scale cell of every experiment was planned
    assert max(parses.values()) <= 2, max(parses.items(), key=lambda kv: kv[1])
    assert {n for (_, scale), n in by_name["__init__"].items()} <= {1, 2}  # validation + the rules' cache
    assert {scale for _, scale in by_name["__init__"]} == {"paper"}
    assert set(by_name["is_available"].values()) == {1}
    # each cell's settings typed once (by the check of every cell before the DAG; the DAG reuses them). Nested
    # blocks ("<experiment> (<kind>).bali") are typed with their cell, so equal blocks of many cells repeat.
    typed = {key: n for key, n in by_name["from_dict"].items() if key[0].endswith(")")}
    assert len(typed) > 1000 and set(typed.values()) == {1}, max(typed.items(), key=lambda kv: kv[1])


@pytest.mark.xdist_group("paper_dag")  # one worker builds the module fixture once
def test_dag_building_runs_no_torch(paper_dag_plan):
    """Planning every paper-scale cell (config, grids, dataset availability, variants, cell settings) must
    not execute torch: it is ~2 s of every snakemake call (the package imports it lazily, plans and rules import no torch-using module)."""
    assert paper_dag_plan["torch_executed"] is False


def test_misspelled_key_fails_before_any_job(tmp_path):
    work = make_workdir(tmp_path)
    edit_fig2_config(work, lambda cfg: cfg["experiments"]["fig2a"]["settings"].__setitem__("bach_size", 3))
    res = snakemake(work, "-n", "--config", "scale=test")
    assert res.returncode != 0
    assert "bach_size" in res.stdout
    assert not (work / "results").exists()


def test_cell_outside_grid_is_named(tmp_path):
    work = make_workdir(tmp_path)
    res = snakemake(
        work, "-n", "results/test/fig2a/method~partitioned/n_inputs~7/seed~0/metrics.json", "--config", "scale=test"
    )
    assert res.returncode != 0
    assert "n_inputs='7'" in res.stdout


def check_fig2_end_to_end(work: Path) -> None:
    """Fig. 2 built at test scale in `work` (tests/test_artefacts_build.py's whole build calls this on its
    workdir instead of building the same synthetic cells a second time): the figure and its table, one cell's
    metrics and the cell rule's benchmark, a one-cell re-run giving identical metrics, and the HTML report."""
    assert (work / "figures" / "fig2.pdf").stat().st_size > 1000
    assert (work / "figures" / "fig2.png").stat().st_size > 1000
    table = (work / "results" / "test" / "fig2a.csv").read_text().splitlines()
    assert len(table) == 1 + 2 * 3  # header + methods x n_inputs at test scale
    metrics = json.loads((work / "results/test/fig2a/method~partitioned/n_inputs~15/seed~0/metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["scale"] == "test"
    assert {"lml", "train_acc", "test_acc", "train_ll", "test_ll"} <= set(metrics["metrics"])
    # the cell rule's benchmark: Snakemake's measurement of the job (wall time, memory) beside its log
    bench = pd.read_csv(work / "logs/benchmarks/test/fig2a/method~partitioned/n_inputs~15/seed~0.tsv", sep="\t")
    assert len(bench) == 1 and bench["s"].iloc[0] > 0 and "max_rss" in bench
    # re-running one cell: ask for its file
    cell = "results/test/fig2a/method~laplace/n_inputs~1/seed~0/metrics.json"
    before = json.loads((work / cell).read_text())
    res = snakemake(
        work, "--cores", "1", "--forcerun", "cell", "--allowed-rules", "cell", "--config", "scale=test", "--", cell
    )
    assert res.returncode == 0, res.stdout[-3000:]
    assert "1 of 1 steps" in res.stdout or "(100%) done" in res.stdout
    after = json.loads((work / cell).read_text())
    assert after["metrics"] == before["metrics"]  # the same cell run twice gives identical metrics
    # the report holds the figure
    res = snakemake(work, "--report", "report.html", "figures/fig2.pdf", "--config", "scale=test")
    assert res.returncode == 0, res.stdout[-3000:]
    assert (work / "report.html").stat().st_size > 10000


def _cell_args(work: Path, out: Path, ckpt: Path, n_steps: int):
    sys.path.insert(0, str(REPO / "src"))
    from reprokit.config import grid_of

    cfg = edit_fig2_config(
        work, lambda c: c["experiments"]["fig2a"]["scales"]["test"]["settings"].__setitem__("n_steps", n_steps)
    )
    cell = grid_of(cfg, "fig2a", "test").parse("method~partitioned/n_inputs~15/seed~0")
    from reprokit.data.variant_names import variant_path
    from reprokit.plan import kind

    ctx = {"mirrors": [str(SHARED_DATA)], "cache_dir": None, "variants_dir": str(work / "variants"), "download": False}
    paths = {
        name: str(variant_path(work / "variants", ds, fn))
        for name, (ds, fn) in kind(cell.kind).required_variants(cell).items()
    }  # what the rule passes the cell
    return [
        "run",
        "--cell",
        json.dumps(cell.to_dict()),
        "--context",
        json.dumps(ctx),
        "--variants",
        json.dumps(paths),
        "--out",
        str(out),
        "--checkpoint",
        str(ckpt),
        "--checkpoint-every",
        "25",
    ], cell


@pytest.mark.slow
def test_sigterm_then_restart_gives_bit_identical_metrics(tmp_path):
    from reprokit.data import variants

    work = make_workdir(tmp_path)
    ref_out, ckpt = tmp_path / "ref", tmp_path / "ckpt" / "c.pt"
    args, cell = _cell_args(work, ref_out, ckpt, n_steps=1500)
    dataset, filename = (
        "input_selection",
        variants.variant_filename(
            "chunks", n=cell.settings["n_train"], proportions=cell.settings["chunk_proportions"], seed=0
        ),
    )
    vpath = work / "variants" / dataset / filename
    variants.build_variant(dataset, filename, vpath, [str(SHARED_DATA)])
    # the reference in a process of its own, as the killed and resumed runs: `python -m reprokit.cell` pins
    # run.cpu_isa before torch loads, which this process cannot (an AVX-512 CPU would round them apart)
    ref_run = subprocess.run(
        [sys.executable, "-m", "reprokit.cell", *args], capture_output=True, text=True, timeout=300
    )
    assert ref_run.returncode == 0, ref_run.stderr[-2000:]
    ref = json.loads((ref_out / "metrics.json").read_text())

    out = tmp_path / "killed"
    args, _ = _cell_args(work, out, ckpt, n_steps=1500)
    proc = subprocess.Popen([sys.executable, "-m", "reprokit.cell", *args], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ckpt.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ckpt.exists(), "no checkpoint appeared"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert not (out / "metrics.json").exists()
    assert ckpt.exists()
    res = subprocess.run([sys.executable, "-m", "reprokit.cell", *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:]
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["resumed_from_step"] > 0
    assert resumed["metrics"] == ref["metrics"]
    assert (out / "curve.csv").read_text() == (ref_out / "curve.csv").read_text()
    assert not ckpt.exists()
