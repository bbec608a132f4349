"""Table 8: the update_timing experiment kind (one cell = standard vs partitioned, Augerino and Diff. Laplace
updates, timed) and its notebook (ratios from the cells' repetitions, the paper's values quoted apart, a
measured Diff. Laplace out-of-memory printed as OOM)."""

import json
import runpy
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from reprokit.builders import update_timing
from reprokit.builders.update_timing import UpdateTiming, summarize
from reprokit.config import ConfigError, grid_of, load_pipeline_config
from reprokit.plan import kind
from reprokit.plan.update_timing import UpdateTimingSettings
from reprokit.report.store.stats import median_ci

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def tiny_settings(**kw) -> UpdateTimingSettings:
    s = {
        "model": "mnist_cnn",
        "seed": 0,
        "batch_size": 3,
        "n_aug_samples": 2,
        "input_shape": [1, 28, 28],
        "n_classes": 10,
        "chunk_proportions": [0.8, 0.1, 0.1],
        "augmentation": "schwobel",
        "augmentation_init": 0.1,
        "optimizer": "adam",
        "lr": 1e-3,
        "weight_decay": 0.0,
        "n_warmup": 1,
        "n_repeats": 3,
        "diff_laplace": {"n_repeats": 1},
    }
    s.update(kw)
    return UpdateTimingSettings.from_dict(s)


def test_kind_is_registered_and_needs_no_variants():
    plan = kind("update_timing")
    assert plan.build_target == "reprokit.builders.update_timing:build"
    assert plan.required_variants(None) == {}


def test_cell_reports_positive_ratios_and_per_repetition_times():
    curve, metrics = UpdateTiming(tiny_settings()).measure()  # a measurement, not a training loop
    assert metrics["n_repeats"] == 3  # the warm-up repetition is not counted
    for key in (
        "param_ratio",
        "hyper_ratio",
        "param_ratio_cpu",
        "hyper_ratio_wall",
        "standard_ms",
        "augerino_ratio",
        "dl_param_ratio",
        "dl_hyper_ratio",
        "dl_hyper_ms",
    ):
        assert np.isfinite(metrics[key]) and metrics[key] > 0, key
    # the curve gets one row per repetition with every update's time
    rows = [r for r in curve if "standard_cpu_s" in r]
    assert len(rows) == 4 and rows[0]["warmup"] and not rows[-1]["warmup"]
    assert all(r[f"{k}_wall_s"] > 0 for r in rows for k in ("standard", "param", "hyper", "augerino", "dl_param"))
    # ... and the reported ratios are the quartiles of exactly those repetitions' ratios, warm-up left out
    ratios = [r["param_cpu_s"] / r["standard_cpu_s"] for r in rows[1:]]
    q25, q50, q75 = np.quantile(ratios, [0.25, 0.5, 0.75])
    assert (metrics["param_ratio_q25"], metrics["param_ratio"], metrics["param_ratio_q75"]) == pytest.approx(
        (q25, q50, q75)
    )


def test_diff_laplace_hyper_update_is_measured_in_its_own_repetitions():
    """Timed in the last diff_laplace.n_warmup warm-up and the first diff_laplace.n_repeats timed repetitions; its ratio is the
    median of those repetitions' (Diff. Laplace / standard) times, not a number from elsewhere."""
    m = UpdateTiming(tiny_settings(n_warmup=2, n_repeats=4, diff_laplace={"n_warmup": 1, "n_repeats": 2}))
    psi0, prec0 = [p.detach().clone() for p in m.psi], m.log_prior_prec.detach().clone()
    curve, metrics = m.measure()
    has_dl = [r["step"] for r in curve if "dl_hyper_cpu_s" in r]
    assert has_dl == [2, 3, 4]  # repetitions 1 (warm-up), 2, 3 (timed); step = rep + 1
    timed = [r for r in curve if not r["warmup"] and "dl_hyper_cpu_s" in r]
    ratios = [r["dl_hyper_cpu_s"] / r["standard_cpu_s"] for r in timed]
    assert metrics["dl_hyper_n"] == 2 and metrics["dl_hyper_ratio"] == pytest.approx(float(np.median(ratios)))
    assert metrics["dl_hyper_outcome"] == "measured" and metrics["dl_hyper_error"] == ""
    assert all(np.isfinite(r["dl_hyper_loss"]) for r in timed)  # the marginal likelihood / N
    assert not torch.equal(m.log_prior_prec.detach(), prec0)  # the prior precision and psi stepped
    assert any(not torch.equal(p, q) for p, q in zip(m.psi, psi0))
    off = UpdateTiming(tiny_settings(diff_laplace={"n_warmup": 0, "n_repeats": 0})).measure()[1]
    assert off["dl_hyper_outcome"] == "not measured" and off["dl_hyper_n"] == 0 and np.isnan(off["dl_hyper_ratio"])


def _raise_oom(*args, **kwargs):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


def test_out_of_memory_in_the_diff_laplace_update_is_recorded_and_the_rest_measured():
    m = UpdateTiming(tiny_settings())
    m._dl_hyper_update = _raise_oom  # as torch raises it on the device
    curve, metrics = m.measure()
    assert metrics["dl_hyper_outcome"] == "oom" and "out of memory" in metrics["dl_hyper_error"]
    assert metrics["dl_hyper_n"] == 0 and np.isnan(metrics["dl_hyper_ratio"])
    assert [r.get("dl_hyper_oom", False) for r in curve] == [True, False, False, False]  # tried once, not again
    assert np.isfinite(metrics["param_ratio"]) and np.isfinite(metrics["augerino_ratio"])  # the others measured
    # anywhere else, out of memory is the cell's outcome (cell.py maps it to status "oom")
    m = UpdateTiming(tiny_settings())
    m.update_standard = _raise_oom
    with pytest.raises(torch.OutOfMemoryError):
        m.measure()


def test_a_cpu_allocation_beyond_memory_in_the_diff_laplace_update_is_recorded_not_killed(monkeypatch):
    """On a CPU the update runs under runtime.cpu_memory_guard: an allocation past it (here a guard of 64 MiB
    against a 512 MiB tensor; on the machine, ResNet-8's marginal likelihood past 24 GB) is the same "oom"
    outcome as a GPU's, and the other updates are measured."""
    real_guard = update_timing.cpu_memory_guard
    monkeypatch.setattr(update_timing, "cpu_memory_guard", lambda device: real_guard(device, headroom_bytes=64 * 2**20))

    def too_big(*args, **kwargs):
        return torch.empty(512 * 2**20, dtype=torch.uint8).fill_(1).sum()

    m = UpdateTiming(tiny_settings())
    m._dl_hyper_update = too_big
    curve, metrics = m.measure()
    assert metrics["dl_hyper_outcome"] == "oom" and "can't allocate memory" in metrics["dl_hyper_error"]
    assert [r.get("dl_hyper_oom", False) for r in curve] == [True, False, False, False]
    assert np.isfinite(metrics["param_ratio"]) and np.isfinite(metrics["dl_param_ratio"])


def test_all_updates_use_the_same_batch():
    m = UpdateTiming(tiny_settings())
    seen = {}

    def recorder(name):
        def hook(module, args):
            seen.setdefault(name, []).append(args[0])

        return hook

    m.standard_net.register_forward_pre_hook(recorder("standard"))
    m.partitioned_net.register_forward_pre_hook(recorder("partitioned"))
    m.aug.register_forward_pre_hook(recorder("augmentation"))
    m.repetition(0)  # the warm-up repetition: every update, Diff. Laplace's included
    assert len(seen["standard"]) == 3  # standard, Augerino, Diff. Laplace param update
    assert len(seen["partitioned"]) == 2  # param + hyper update
    assert len(seen["augmentation"]) == 6  # ... and the Diff. Laplace hyper update augments the batch itself
    for x in seen["standard"] + seen["partitioned"] + seen["augmentation"]:
        assert x is m.x  # one fixed batch tensor, not a copy or a fresh draw
    assert tuple(m.x.shape) == (3, 1, 28, 28)


def test_networks_start_equal_and_each_update_changes_only_its_own_parameters():
    m = UpdateTiming(tiny_settings(seed=1))
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad(), m.pmodel.subnetwork(m.pmodel.num_partitions):
        assert torch.equal(m.standard_net.model(x), m.pmodel(x))  # same initial weights

    before = {name: p.detach().clone() for name, p, _ in m.pmodel.named_partitioned_parameters()}
    psi_before = [p.detach().clone() for p in m.psi]
    m.update_param(2)
    for name, p, a in m.pmodel.named_partitioned_parameters():
        changed = p.detach() != before[name]
        assert not changed[a != 2].any(), f"{name}: entries outside partition 2 moved"
    assert all(torch.equal(p, q) for p, q in zip(m.psi, psi_before))  # psi fixed in a parameter update

    after_param = {name: p.detach().clone() for name, p, _ in m.pmodel.named_partitioned_parameters()}
    m.update_hyper(3)
    assert any(not torch.equal(p, q) for p, q in zip(m.psi, psi_before))
    for name, p, _ in m.pmodel.named_partitioned_parameters():
        assert torch.equal(p.detach(), after_param[name]), f"{name} moved in a hyperparameter update"


@pytest.mark.parametrize("backward,net_grads", [("minimal", False), ("full", True)])
def test_backward_mode_of_the_hyper_update(backward, net_grads):
    m = UpdateTiming(tiny_settings(backward=backward))
    m.update_hyper(2)
    assert all(p.grad is not None for p in m.psi)
    grads = [p.grad is not None for p, _ in m.pmodel.partitioned_parameters()]
    assert all(grads) if net_grads else not any(grads)


def test_summary_is_median_of_per_repetition_ratios_without_warmup():
    rows = []
    std = [1.0, 2.0, 1.0, 4.0, 1.0]
    par = [9.0, 2.2, 1.1, 4.8, 1.3]  # ratios 9 (warm-up), 1.1, 1.1, 1.2, 1.3
    for i, (s, p) in enumerate(zip(std, par)):
        rows.append(
            {
                "rep": i,
                "warmup": i == 0,
                "k_param": 1 + i % 2,
                "subnet_hyper": 1,
                "standard_cpu_s": s,
                "param_cpu_s": p,
                "hyper_cpu_s": s / 2,
                "standard_wall_s": 2 * s,
                "param_wall_s": 2 * p,
                "hyper_wall_s": s,
            }
        )
    out = summarize(rows, "cpu")
    assert out["n_repeats"] == 4
    assert out["param_ratio"] == pytest.approx(np.median([1.1, 1.1, 1.2, 1.3]))
    assert out["hyper_ratio"] == pytest.approx(0.5)
    assert out["param_ratio_wall"] == pytest.approx(out["param_ratio"])
    assert out["standard_ms"] == pytest.approx(1000 * np.median([2.0, 1.0, 4.0, 1.0]))
    assert out["param_ratio_k1_n"] + out["param_ratio_k2_n"] == 4
    assert out["param_ratio_of_minima"] == pytest.approx(1.1)  # fastest param 1.1 s / fastest standard 1.0 s
    # quartiles of [1.1, 1.1, 1.2, 1.3] (linear interpolation): 1.1 + 0.75 * 0 and 1.2 + 0.25 * 0.1
    assert (out["param_ratio_q25"], out["param_ratio_q75"]) == pytest.approx((1.1, 1.225))
    assert (out["param_ratio_ci_lo"], out["param_ratio_ci_hi"]) == median_ci([1.1, 1.1, 1.2, 1.3])


def test_quartiles_hand_example():
    assert update_timing._quantiles([5.0, 1.0, 4.0, 2.0, 3.0]) == (2.0, 3.0, 4.0)  # order does not matter
    assert update_timing._quantiles([1.0, 2.0]) == pytest.approx((1.25, 1.5, 1.75))
    assert all(np.isnan(update_timing._quantiles([])))


def test_median_ci_is_the_percentile_interval_of_bootstrap_medians():
    # Two values: a resample's median is 0 (p = 1/4), 0.5 (1/2) or 1 (1/4). The 95% interval's ends
    # (2.5% and 97.5% quantiles) are 0 and 1; a 40% interval (30% .. 70%) holds only the middle value.
    assert median_ci([0.0, 1.0]) == (0.0, 1.0)
    assert median_ci([0.0, 1.0], level=0.4) == (0.5, 0.5)
    # Three values 0, 0, 1: a resample's median is 1 with p = 7/27 (two or three 1s), else 0, so the 40%..60%
    # interval is (0, 0); bootstrapping the mean instead would give (1/3, 1/3).
    assert median_ci([0.0, 0.0, 1.0], level=0.2) == (0.0, 0.0)
    assert median_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    # a wider level gives an interval that holds the narrower one, and both hold the sample's median
    x = np.random.default_rng(3).normal(size=41)
    (lo50, hi50), (lo95, hi95) = median_ci(x, level=0.5), median_ci(x, level=0.95)
    assert lo95 <= lo50 <= float(np.median(x)) <= hi50 <= hi95 and lo95 < lo50 and hi50 < hi95


def test_cpu_model_is_named():
    name = update_timing.device_description(torch.device("cpu"), 1)
    assert name and "unknown" not in name and "1 intra-op thread" in name


def config(scale="test"):
    return load_pipeline_config(REPO, {"scale": scale})


def test_each_model_cell_builds_with_its_own_settings():
    """Cells built from the config (test scale, per_model blocks merged) time updates on batches of their
    own batch size and input shape, with their number of augmentation samples and repetitions."""
    from reprokit.builders import CellContext

    threads = torch.get_num_threads()
    try:
        for cell in grid_of(config(), "table8_timing", "test").cells():
            s = cell.settings
            run = update_timing.build(cell, CellContext(mirrors=[], cache_dir=None, variants_dir="unused"))
            timer = run.measure.__self__  # the UpdateTiming the Measurement runs
            assert tuple(timer.x.shape) == (s["batch_size"], *s["input_shape"]), cell.rel_dir
            assert timer.standard_net.n_samples == s["n_aug_samples"], cell.rel_dir
            assert run.n_steps == s["n_warmup"] + s["n_repeats"] and torch.get_num_threads() == s["num_threads"]
    finally:
        torch.set_num_threads(threads)


def test_misspelled_per_model_setting_is_named():
    cfg = config()
    cfg["experiments"]["table8_timing"]["settings"]["per_model"]["mnist_cnn"]["bach_size"] = 3
    from reprokit.config import validate_config

    with pytest.raises(ConfigError, match="bach_size"):
        validate_config(cfg, SCHEMA)


def test_test_scale_cell_runs_through_the_cell_entry_point(tmp_path):
    from reprokit.builders import CellContext
    from reprokit.cell import run_cell

    grid = grid_of(config(), "table8_timing", "test")
    cell = grid.parse("model~mnist_cnn/seed~0")
    record = run_cell(
        cell, CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path / "v")), tmp_path / "out", None
    )
    assert record["status"] == "completed"
    assert record["metrics"]["param_ratio"] > 0 and record["metrics"]["hyper_ratio"] > 0
    assert record["metrics"]["dl_hyper_outcome"] == "measured" and record["metrics"]["dl_hyper_ratio"] > 1
    assert (
        record["metrics"]["dl_hyper_n"] == cell.settings["diff_laplace"]["n_repeats"]
        and record["metrics"]["augerino_ratio"] > 0
    )
    assert record["info"]["batch_size"] == cell.settings["batch_size"]
    assert record["info"]["device"] == "cpu" and record["info"]["num_threads"] == 1
    curve = pd.read_csv(tmp_path / "out" / "curve.csv")
    assert (curve["warmup"].astype(str) == "False").sum() == cell.settings["n_repeats"]
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["steps"] == (
        cell.settings["n_warmup"] + cell.settings["n_repeats"]
    )


# -- the notebook ---------------------------------------------------------------------------------


def fake_results(tmp_path, dl_oom=("fixup_resnet14",)):
    """Aggregated CSVs as the pipeline writes them, with known per-repetition ratios; the Diff. Laplace hyper
    update ran in the first two timed repetitions (out of memory for the models in `dl_oom`)."""
    cells, curves = [], []
    ratios = {"mnist_cnn": [1.02, 1.04, 1.10], "fixup_resnet8": [1.2, 1.3, 1.1], "fixup_resnet14": [0.9, 1.0, 1.1]}
    dl = {"mnist_cnn": [12.0, 14.0], "fixup_resnet8": [16.0, 18.0], "fixup_resnet14": [20.0, 24.0]}
    for model, rs in ratios.items():
        oom = model in dl_oom
        cells.append(
            {
                "scale": "quick",
                "experiment": "table8_timing",
                "model": model,
                "seed": 0,
                "status": "completed",
                "timer": "cpu",
                "device_name": "Test CPU, 1 intra-op thread",
                "num_threads": 1,
                "batch_size": 20,
                "n_aug_samples": 20,
                "backward": "minimal",
                "param_ratio": np.median(rs),
                "dl_hyper_outcome": "oom" if oom else "measured",
                "dl_hyper_error": "CUDA out of memory. Tried to allocate 20.00 GiB" if oom else "",
            }
        )
        curves.append({"model": model, "seed": 0, "step": 0})
        curves.append(
            {
                "model": model,
                "seed": 0,
                "step": 1,
                "warmup": True,
                "standard_cpu_s": 1.0,
                "param_cpu_s": 50.0,
                "hyper_cpu_s": 50.0,
                "augerino_cpu_s": 50.0,
                "dl_param_cpu_s": 50.0,
                **({} if oom else {"dl_hyper_cpu_s": 500.0}),
            }
        )
        for i, r in enumerate(rs):
            row = {
                "model": model,
                "seed": 0,
                "step": i + 2,
                "warmup": False,
                "standard_cpu_s": 0.5,
                "param_cpu_s": 0.5 * r,
                "hyper_cpu_s": 0.4,
                "augerino_cpu_s": 0.55,
                "dl_param_cpu_s": 0.5,
            }
            if i < 2 and not oom:
                row["dl_hyper_cpu_s"] = 0.5 * dl[model][i]
            curves.append(row)
    paths = {"table8_timing": tmp_path / "t.csv", "table8_timing_curves": tmp_path / "c.csv"}
    pd.DataFrame(cells).to_csv(paths["table8_timing"], index=False)
    pd.DataFrame(curves).to_csv(paths["table8_timing_curves"], index=False)
    return {k: str(v) for k, v in paths.items()}


def run_notebook(name, inputs, outputs, scale):
    fake = types.SimpleNamespace(input=inputs, output=outputs, config={"scale": scale})
    return runpy.run_path(str(REPO / "workflow" / "notebooks" / name), init_globals={"snakemake": fake})


MEASURED, PAPER = "measured\n", "paper\n"  # each header goes on (a line below) with its device and batch


def entry(table, method: str, update: str, model: str, column: str) -> str:
    rows = table[table[("", "Update")] == f"{method}\n{update}"]  # method over update, in one key column
    assert len(rows) == 1, (method, update)
    (key,) = [c for c in table.columns if c[0] == model and c[1].startswith(column)]
    return rows.iloc[0][key]


# (method, update, model, column, expected: a prefix "median [" of a measured ratio, else the exact text)
EXPECTED_TABLE8 = [
    # medians of the per-repetition ratios (warm-up excluded), 95% CI of the median in brackets
    ("Partitioned", "Param.", "MNIST CNN", MEASURED, "1.04\n["),
    ("Partitioned", "Param.", "fixup ResNet-8", MEASURED, "1.20\n["),
    ("Partitioned", "Hyperparam.", "fixup ResNet-14", MEASURED, "0.80\n["),
    ("Augerino", "Param. + hyperparam.", "MNIST CNN", MEASURED, "1.10\n["),
    ("Diff. Laplace", "Param.", "MNIST CNN", MEASURED, "1.00\n["),
    # Diff. Laplace: measured from the repetitions that ran it (median of 12, 14 and of 16, 18), not copied ...
    ("Diff. Laplace", "Hyperparam.", "MNIST CNN", MEASURED, "13.00\n["),
    ("Diff. Laplace", "Hyperparam.", "fixup ResNet-8", MEASURED, "17.00\n["),
    # ... and out of memory where the cell recorded it
    ("Diff. Laplace", "Hyperparam.", "fixup ResNet-14", MEASURED, "OOM [b]"),
    # the paper's numbers only in the quoted column, the ones the paper cites from Immer et al. marked
    ("Partitioned", "Param.", "MNIST CNN", PAPER, "1.08"),
    ("Partitioned", "Param.", "fixup ResNet-14", PAPER, "1.21"),
    ("Augerino", "Param. + hyperparam.", "MNIST CNN", PAPER, "1"),
    ("Diff. Laplace", "Hyperparam.", "MNIST CNN", PAPER, "2015.6"),
    ("Diff. Laplace", "Hyperparam.", "fixup ResNet-8", PAPER, "18.2 [a]"),
    ("Diff. Laplace", "Hyperparam.", "fixup ResNet-14", PAPER, "OOM [a]"),
]


def test_table8_notebook_reports_measured_ratios_and_quotes_the_paper_apart(tmp_path):
    inputs = fake_results(tmp_path) | {"paper_numbers": str(REPO / "config" / "papers" / "partitioned.yaml")}
    out = tmp_path / "table8.tex"
    table = run_notebook("table8.py", inputs, {"tex": str(out)}, "quick")["table"]
    tex = out.read_text()
    for method, update, model, column, want in EXPECTED_TABLE8:
        got = entry(table, method, update, model, column)
        assert got.startswith(want) if want.endswith("[") else got == want, (method, update, model, column, got)
    assert "Immer et al." in tex and "fixup ResNet-14 seed 0" in tex and "Measured out of memory" in tex
    assert "quoted" in tex and "not re-measured" in tex and "TEST DATA" not in tex
    assert "not implemented" not in tex
    # each column names its device and batch: ours as measured, the paper's as App. D.2 states it (250 MNIST, 200
    # CIFAR10), and the footnote gives the same paper batch per model
    headers = {c[1] for c in table.columns if c[0] == "MNIST CNN"}
    assert "paper\n(RTX 3080,\nbatch 250)" in headers, headers
    assert "paper\n(RTX 3080,\nbatch 200)" in {c[1] for c in table.columns if c[0] == "fixup ResNet-8"}
    assert any(h.startswith("measured\n(") and "batch" in h for h in headers), headers
    assert "MNIST CNN 250, fixup ResNet-8 200, fixup ResNet-14 200 x 20, as App. D.2 states it" in tex


def test_table8_notebook_without_out_of_memory(tmp_path):
    inputs = fake_results(tmp_path, dl_oom=()) | {"paper_numbers": str(REPO / "config" / "papers" / "partitioned.yaml")}
    out = tmp_path / "table8.tex"
    table = run_notebook("table8.py", inputs, {"tex": str(out)}, "quick")["table"]
    assert entry(table, "Diff. Laplace", "Hyperparam.", "fixup ResNet-14", MEASURED).startswith("22.00\n[")
    assert "out of memory" not in out.read_text().replace("out of memory on the 10 GB", "")  # only the paper's [a]


def test_table8_notebook_marks_test_scale(tmp_path):
    inputs = fake_results(tmp_path)
    df = pd.read_csv(inputs["table8_timing"])
    df["scale"] = "test"
    df.to_csv(inputs["table8_timing"], index=False)
    inputs["paper_numbers"] = str(REPO / "config" / "papers" / "partitioned.yaml")
    out = tmp_path / "table8.tex"
    run_notebook("table8.py", inputs, {"tex": str(out)}, "test")
    assert "TEST DATA" in out.read_text()
