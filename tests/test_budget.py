"""Cost model (reprokit.budget): per-cell estimates from the measured step-cost table, the labelled
fallbacks, the SLURM runtime derived from them, the CLI, and that none of it imports torch."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reprokit import budget
from reprokit.budget import CostTable, estimate, read_costs, runtime_minutes, write_costs
from reprokit.config import grid_of, load_pipeline_config
from reprokit.plan.costs import Part

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def paper_config():
    return load_pipeline_config(REPO, {"scale": "paper"})


def first_cell(config, name, **coords):
    for cell in grid_of(config, name, config["scale"]).cells():
        if all(cell.coord_dict.get(k) == v for k, v in coords.items()):
            return cell
    raise AssertionError(f"no cell {coords} in {name}")


def with_settings(cell, **changes):
    return dataclasses.replace(cell, settings={**cell.settings, **changes})


def h100():
    return CostTable(read_costs(), "h100")


def test_import_and_estimates_run_no_torch():
    code = (
        "import sys\nimport reprokit.budget as b\nassert 'torch' not in sys.modules, 'import'\n"
        "from reprokit.config import load_pipeline_config\n"
        "cfg = load_pipeline_config('.', {'scale': 'paper'})\n"
        "rows = b.budget(cfg, b.CostTable(b.read_costs(), 'h100'))\n"
        "print('TORCH_EXECUTED', 'torch._C' in sys.modules, len(rows))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "TORCH_EXECUTED False" in res.stdout


def test_estimate_scales_with_n_steps(paper_config):
    table = h100()
    startup = table.startup_seconds([])
    cell = first_cell(paper_config, "bali_uci", method="dropout")
    m = cell.settings["dropout"]
    double = with_settings(cell, dropout={**m, "epochs": 2 * int(m["epochs"])})  # Gal's protocol: steps follow epochs
    one, two = estimate(cell, table).seconds - startup, estimate(double, table).seconds - startup
    assert one > 0
    assert two == pytest.approx(2 * one, rel=1e-9)
    img = first_cell(paper_config, "fig3a", method="partitioned", n_train=1000)
    longer = with_settings(img, n_steps=4 * int(img.settings["n_steps"]))
    assert estimate(longer, table).seconds - startup > 3.5 * (estimate(img, table).seconds - startup)


def test_measured_h100_row_prices_a_partitioned_mnist_cell(paper_config):
    cell = first_cell(paper_config, "fig3a", method="partitioned", n_train=1000, rotated=False)
    est = estimate(cell, h100())
    # 5000 steps x ~17-19 ms (the H100 standard + hyper update, 200 x 20 images) is the bulk of it
    assert 5000 * 0.017 < est.seconds < 5000 * 0.017 * 1.5 + 60
    assert not est.fallback


def test_steps_scale_linearly_with_images():
    table = h100()
    one = table.price(Part("fixup_resnet8", "plain", 5000, 1), "fp32", [])[0]
    two = table.price(Part("fixup_resnet8", "plain", 10000, 1), "fp32", [])[0]
    assert one > 0 and two == pytest.approx(2 * one)


def test_bf16_uses_bf16_rows_and_missing_precision_falls_back_to_fp32_labelled():
    table = h100()
    notes = []
    plain = Part("fixup_resnet14", "plain", 5000, 1)
    fp32, bf16 = (table.price(plain, p, notes)[0] for p in ("fp32", "bf16"))
    assert 0 < bf16 < fp32 and not notes  # both rows measured (the H100's bf16 step is faster)
    lila = Part("mnist_cnn", "lila_hyper", 4000, 1)  # measured in fp32 only
    assert table.price(lila, "tf32", notes)[0] == pytest.approx(table.price(lila, "fp32", [])[0])
    assert any("no tf32 row, fp32 used" in n for n in notes)


def test_unknown_model_and_unknown_kind_report_the_fallback(paper_config):
    # a model the settings allow (an unknown one fails at config load) but no step_costs.tsv row prices
    cell = with_settings(first_cell(paper_config, "fig3a"), model="wrn")
    est = estimate(cell, h100())
    assert est.fallback
    assert any(n.startswith("FALLBACK wrn") for n in est.notes)
    odd = dataclasses.replace(cell, kind="no_such_kind")
    est = estimate(odd, h100())
    assert est.fallback and any("FALLBACK kind no_such_kind" in n for n in est.notes)


def test_every_priced_step_of_the_cpu_profile_was_measured(paper_config):
    """A new kind, model or method without a measured row shows up here (resnet50_gn: Fig. 3c)."""
    rows = budget.budget(paper_config, CostTable(read_costs(), "cpu"))
    missing = {r["experiment"]: r["notes"] for r in rows if r["fallback_cells"]}
    assert not missing, missing


# The quick build's cells on a 2-core CPU, CIFAR-10 included (its ~0.6 h of cells do not run offline here;
# README gives the timed build without them). 3.5 until BALI Fig. 3 gained its wishart_n n_eff quick cell
# (9018571), 3.6 until Figs. 5-8 were sized to their targets (1200 / 1500 iterations instead of 50,
# 2026-11-26: +0.3 h after the cuts that paid for most of it, README), 3.95 until the cuts after the timed build of
# d0d7ebb (2 h 26 min) was split (README), 3.6 until the quick grid gained seeds 1-2 of one deciding configuration
# per family (2026-12-07, +0.45 h: the families' seed spreads, docs/verdicts.md); the model's CNN rows predate the
# retained-memory fix (paper-batch CNN steps measured 1.6-1.9x faster, docs/lab-notes.md); 4.1 until Tables 1 / 7
# gained our VADAM and PBP cells (+0.23 h), 4.3 until Figs. 5-8's quick cells took 4 augmentation samples (psi's
# averaged objective; docs/choices.md, +1.2 h after the cuts that paid for part of it). The quick build as the README
# runs it (no CIFAR-10 / Tiny ImageNet offline) is held to 2.5 hours on 2 cores, 5.0 CPU-hours; with every dataset
# present 5.6.
QUICK_BUDGET_CPU_HOURS = 5.6
QUICK_BUILD_OFFLINE_CPU_HOURS = 5.0
IMAGE_DATASETS_NOT_HERE = ("cifar10", "tinyimagenet")  # a researcher with internet downloads them and runs these


@pytest.fixture(scope="module")
def quick_config():
    return load_pipeline_config(REPO, {"scale": "quick"})


def quick_cpu_hours(config) -> tuple[float, list[dict]]:
    """The cost model's total over every cell of the quick grid of every experiment the main job builds (those an
    artefact reads; an experiment no artefact reads runs only when its cells are asked for), with the cpu profile.
    The cells are counted whatever data is on disk (budget() never asks which datasets are available)."""
    built = {e for spec in config["artefacts"].values() for e in spec["experiments"]}
    rows = [r for r in budget.budget(config, CostTable(read_costs(), "cpu")) if r["experiment"] in built]
    return sum(r["device_hours"] for r in rows), rows


def test_quick_scale_fits_the_cpu_budget_with_every_dataset_present(quick_config):
    """A cost-model assertion, not a timed run: the quick scale with CIFAR-10 and TinyImageNet on disk fits."""
    total, rows = quick_cpu_hours(quick_config)
    for r in rows:  # every grid cell is priced, none left out (absent data included)
        assert r["cells"] == len(list(grid_of(quick_config, r["experiment"], "quick").cells())), r["experiment"]
        assert not r["fallback_cells"], (r["experiment"], r["notes"])
    image_cells = [
        c
        for name in quick_config["experiments"]
        for c in grid_of(quick_config, name, "quick").cells()
        if set(c.datasets) & set(IMAGE_DATASETS_NOT_HERE)
    ]
    assert image_cells, "the quick grid has no CIFAR-10 / TinyImageNet cell: the budget would not cover them"
    costly = ", ".join(
        f"{r['experiment']} {r['device_hours']:.2f}" for r in sorted(rows, key=lambda r: -r["device_hours"])[:8]
    )
    assert total <= QUICK_BUDGET_CPU_HOURS, (
        f"quick scale costs {total:.2f} CPU-hours (cpu profile, every dataset present), more than "
        f"{QUICK_BUDGET_CPU_HOURS}: {costly} (python -m reprokit.budget --config scale=quick --profile cpu)"
    )
    image_only = {
        name
        for name in quick_config["experiments"]
        if all(set(c.datasets) & set(IMAGE_DATASETS_NOT_HERE) for c in grid_of(quick_config, name, "quick").cells())
    }
    offline = sum(r["device_hours"] for r in rows if r["experiment"] not in image_only)
    assert offline <= QUICK_BUILD_OFFLINE_CPU_HOURS, (
        f"the quick build without CIFAR-10 / Tiny ImageNet costs {offline:.2f} CPU-hours, more than "
        f"{QUICK_BUILD_OFFLINE_CPU_HOURS} (2.5 hours on 2 cores)"
    )


def test_quick_budget_check_fails_when_a_quick_cell_is_made_long(quick_config):
    """The check above is live: Fig. 3b's quick 1k cells at 5000 iterations (CIFAR-10, absent here) break it,
    and so do Fig. 3c's ResNet-50 cells back in the quick grid (its exclude removed)."""
    total, _ = quick_cpu_hours(quick_config)
    assert total <= QUICK_BUDGET_CPU_HOURS

    def with_quick(name, **changes):  # a new config, new dicts along the changed path (anchors are shared)
        spec = quick_config["experiments"][name]
        quick = {**spec["scales"]["quick"], **changes}
        return {
            **quick_config,
            "experiments": {
                **quick_config["experiments"],
                name: {**spec, "scales": {**spec["scales"], "quick": quick}},
            },
        }

    fig3b = quick_config["experiments"]["fig3b"]["scales"]["quick"]["settings"]
    long_steps = with_quick("fig3b", settings={**fig3b, "per_n_train": {"1000": {"n_steps": 5000}}})
    assert quick_cpu_hours(long_steps)[0] > QUICK_BUDGET_CPU_HOURS
    assert quick_cpu_hours(with_quick("fig3c", exclude=[]))[0] > QUICK_BUDGET_CPU_HOURS
    assert quick_cpu_hours(quick_config)[0] == pytest.approx(total)  # the original config is untouched


def test_runtime_minutes_covers_the_estimate(paper_config):
    table = h100()
    for name in ("fig3a", "fig2a", "bali_cls_image", "bali_uci", "table8_timing", "bali_bbb_synthetic"):
        for cell in list(grid_of(paper_config, name, "paper").cells())[:5]:
            minutes = runtime_minutes(cell, paper_config, table)
            est_min = estimate(cell, table).seconds / 60
            assert minutes >= min(budget.MAX_MINUTES, est_min * budget.MARGIN + budget.EXTRA_MINUTES)
            assert minutes <= budget.MAX_MINUTES and minutes % 5 == 0
    # a cell far beyond the cap gets the cap (it resumes from its checkpoint on retry)
    huge = with_settings(first_cell(paper_config, "fig3a"), n_steps=10**8)
    assert runtime_minutes(huge, paper_config, table) == budget.MAX_MINUTES


def test_runtime_profile_follows_the_environment(paper_config, monkeypatch):
    cell = first_cell(paper_config, "bali_cls_image", method="bali")
    monkeypatch.setenv(budget.PROFILE_ENV, "cpu")
    on_cpu = runtime_minutes(cell, paper_config)
    monkeypatch.setenv(budget.PROFILE_ENV, "h100")
    assert runtime_minutes(cell, paper_config) <= on_cpu


def test_cli_prints_every_paper_experiment(paper_config):
    res = subprocess.run(
        [sys.executable, "-m", "reprokit.budget", "--config", "scale=paper"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    assert "NVIDIA H100" in lines[0]
    for name in paper_config["experiments"]:
        row = next((ln for ln in lines if ln.split()[:1] == [name]), None)
        assert row is not None, f"{name} missing:\n{res.stdout}"
        cells = len(list(grid_of(paper_config, name, "paper").cells()))
        assert int(row.split()[2]) == cells
    assert any(ln.startswith("total") for ln in lines)


def test_cli_says_fallback_for_cells_without_measured_costs(tmp_path):
    only_h100 = tmp_path / "costs.tsv"
    write_costs([r for r in read_costs() if r["profile"] == "h100"], only_h100)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "reprokit.budget",
            "--config",
            "scale=paper",
            "--costs",
            str(only_h100),
            "--experiment",
            "bali_uci",
            "--experiment",
            "fig3a",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    uci = next(ln for ln in res.stdout.splitlines() if ln.startswith("bali_uci"))
    fig3a = next(ln for ln in res.stdout.splitlines() if ln.startswith("fig3a"))
    assert "FALLBACK for 840 cells" in uci and "FALLBACK" not in fig3a
    assert "FALLBACK mlp50/uci_yacht bali_w: no measured cost anywhere" in res.stdout


def test_cli_filters_and_rejects_unknown_names():
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "reprokit.budget",
            "--config",
            "scale=quick",
            "--profile",
            "cpu",
            "--experiment",
            "fig2a",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    body = [ln.split()[0] for ln in res.stdout.splitlines()[2:] if ln.strip()]
    assert "fig2a" in body and "fig2b" not in body and "bali_uci" not in body
    bad = subprocess.run(
        [sys.executable, "-m", "reprokit.budget", "--profile", "tpu-v9"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "tpu-v9" in bad.stderr


def test_write_costs_replaces_rows_of_the_same_key(tmp_path):
    path = tmp_path / "costs.tsv"
    path.write_text("# header comment\n")
    row = {
        "profile": "p",
        "device": "d",
        "model": "m",
        "step": "plain",
        "precision": "fp32",
        "images": 10,
        "ms_per_step": 5.0,
        "source": "s",
        "date": "x",
    }
    write_costs([row], path)
    write_costs([{**row, "ms_per_step": 7.0}, {**row, "step": "standard"}], path)
    rows = read_costs(path)
    assert path.read_text().startswith("# header comment\n")
    assert sorted((r["step"], r["ms_per_step"]) for r in rows) == [("plain", 7.0), ("standard", 5.0)]


def test_snakemake_gives_each_cell_its_estimated_runtime(paper_config, tmp_path):
    """Rule `cell` asks SLURM for runtime_minutes(cell) and for the cell's threads (dry run, no SLURM)."""
    cell = first_cell(paper_config, "fig3a", method="partitioned", n_train=1000, rotated=False)
    target = f"results/{cell.rel_dir}/metrics.json"
    env = {**os.environ, budget.PROFILE_ENV: "h100"}
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--config", "scale=paper", "--", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    expected = runtime_minutes(cell, paper_config, h100())
    assert f"runtime={expected}, cpus_per_task={paper_config['run'].get('threads_per_cell', 1)}" in res.stdout


def test_cli_prints_the_slurm_plan_per_experiment_and_in_total(paper_config):
    """SLURM jobs, GPU-hours allocated with one cell per job and packed, CPU-hours (packing, 8c8ac38)."""
    res = subprocess.run(
        [sys.executable, "-m", "reprokit.budget", "--config", "scale=paper"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    block = res.stdout[res.stdout.index("SLURM (--profile slurm)") :].splitlines()
    assert "jobs 1/cell" in block[1] and "GPU-h packed" in block[1] and "CPU-h packed" in block[1]
    rows = {
        ln.split()[0]: ln.split()[1:] for ln in block[2:] if ln.split() and ln.split()[0] in paper_config["experiments"]
    }
    assert set(rows) == set(paper_config["experiments"])
    assert rows["bali_uci"][1] == "0" and float(rows["bali_uci"][6]) > 0  # no cell on a GPU; CPU-hours
    assert float(rows["fig3a"][5]) > 0 and float(rows["fig3a"][6]) == 0
    total = next(ln.split() for ln in block if ln.startswith("total"))
    cells, jobs_single, jobs_packed = int(total[1]), int(total[3]), int(total[4])
    assert jobs_single == cells > 2000 and jobs_packed <= 450  # 400 before the VADAM and PBP cells (+245)
    gpu_single, gpu_packed = float(total[5]), float(total[6])
    assert gpu_packed < gpu_single
    assert any(ln.startswith(f"SLURM jobs: {cells} with one cell per job; {jobs_packed} with packing") for ln in block)


def test_the_slurm_docs_counts_are_the_configs(paper_config, tmp_path):
    """docs/slurm.md's cells and SLURM jobs are generated (`--write-doc`), never typed: they match the config and
    step_costs.tsv, and writing them changes only the block."""
    words = budget.plan_in_words(paper_config)
    total = sum(1 for name in paper_config["experiments"] for _ in grid_of(paper_config, name, "paper").cells())
    assert words.startswith(f"At paper scale the config has {total} cells: ")
    doc = (REPO / "docs" / "slurm.md").read_text()
    assert budget.doc_block(doc) == words, (
        "docs/slurm.md's counts are stale: python -m reprokit.budget --config scale=paper --write-doc docs/slurm.md"
    )
    copy = tmp_path / "slurm.md"
    copy.write_text(doc.replace(words, "FAKE stale counts"))
    budget.write_doc(copy, words)
    assert copy.read_text() == doc
