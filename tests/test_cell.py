"""The cell entry point: a diverged run ends with status 'diverged', NaN metrics and exit code 0;
outputs are written (metrics.json last); logs show progress off a terminal; the package never
imports snakemake; figures carry their provenance and the test watermark."""

import dataclasses
import json
import logging
import math
import types
from pathlib import Path

import pytest
import torch

from reprokit import cell as cell_mod
from reprokit.builders import CellContext, Run
from reprokit.config import Cell
from reprokit.loop import LoopConfig, run_loop

REPO = Path(__file__).resolve().parents[1]


class Exploding:
    """Loss grows geometrically and overflows to inf after a few steps."""

    def __init__(self):
        self.w = torch.tensor(10.0)

    def train_step(self, step):
        self.w = self.w**2
        return {"loss": float(self.w)}

    def evaluate(self, step):
        return {"test_acc": 0.5, "test_ll": -float(self.w)}

    def final_metrics(self):
        return {"test_acc": 0.5, "test_ll": -float(self.w)}

    def state_dict(self):
        return {"w": self.w}

    def load_state_dict(self, s):
        self.w = s["w"]


@pytest.fixture
def exploding_kind(monkeypatch):
    mod = types.ModuleType("reprokit.builders.exploding")
    mod.required_variants = lambda cell: {}
    mod.build = lambda cell, ctx: Run(Exploding(), n_steps=100, eval_every=2)
    monkeypatch.setattr(cell_mod, "kind", lambda kind: mod)
    return mod


def test_diverged_cell_writes_nan_metrics_and_exits_zero(tmp_path, exploding_kind):
    cell = Cell(scale="test", experiment="boom", coords=(("seed", 0),), settings={}, kind="exploding")
    ctx = {"mirrors": [], "cache_dir": None, "variants_dir": str(tmp_path / "v")}
    args = [
        "run",
        "--cell",
        json.dumps(cell.to_dict()),
        "--context",
        json.dumps(ctx),
        "--out",
        str(tmp_path / "out"),
        "--checkpoint",
        str(tmp_path / "ckpt" / "c.pt"),
    ]
    assert cell_mod.main(args) == 0
    record = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert record["status"] == "diverged"
    assert math.isnan(record["metrics"]["test_acc"]) and math.isnan(record["metrics"]["test_ll"])
    assert record["steps"] < 100
    assert (tmp_path / "out" / "config.json").exists() and (tmp_path / "out" / "curve.csv").exists()
    assert not (tmp_path / "ckpt" / "c.pt").exists()


def test_progress_is_logged_when_not_on_a_terminal(caplog):
    class Slow(Exploding):
        def train_step(self, step):
            return {"loss": 1.0}

    with caplog.at_level(logging.INFO, logger="reprokit.loop"):
        run_loop(Slow(), LoopConfig(n_steps=5, eval_every=0, log_every_seconds=0.0, label="demo"))
    assert any("demo: step" in r.getMessage() for r in caplog.records)


def test_package_never_imports_snakemake():
    for path in (REPO / "src" / "reprokit").rglob("*.py"):
        text = path.read_text()
        assert "import snakemake" not in text and "from snakemake" not in text, path


def test_test_scale_figures_are_watermarked():
    import matplotlib.pyplot as plt

    from reprokit.report.render.style import annotate_figure

    for scale, marked in (("test", True), ("quick", False)):
        fig = plt.figure()
        annotate_figure(fig, scale, f"{scale} scale; 1 seed(s); data: demo")
        texts = [t.get_text() for t in fig.texts]
        assert ("TEST DATA" in texts) == marked
        assert any("1 seed(s)" in t for t in texts)
        plt.close(fig)


def test_the_cells_evaluation_makes_the_curve_and_the_final_metrics(tmp_path, monkeypatch):
    """Run.evaluation is the one seam for metrics: its curve rows and final metrics are what the cell
    writes, not the method's own evaluate / final_metrics."""
    from reprokit.builders import Evaluation

    class Quiet(Exploding):
        def train_step(self, step):
            return {"loss": 1.0}

    method = Quiet()
    extra = Evaluation.of(method, extra_curve=lambda: {"mask_p": 0.25}, extra_final=lambda: {"n_kept": 3})
    mod = types.ModuleType("reprokit.builders.quiet")
    mod.required_variants = lambda cell: {}
    mod.build = lambda cell, ctx: Run(method, n_steps=4, eval_every=2, evaluation=extra)
    monkeypatch.setattr(cell_mod, "kind", lambda kind: mod)
    cell = Cell(scale="test", experiment="q", coords=(("seed", 0),), settings={}, kind="quiet")
    record = cell_mod.run_cell(
        cell, CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path)), tmp_path / "o", None
    )
    assert record["metrics"] == {"test_acc": 0.5, "test_ll": -10.0, "n_kept": 3}
    curve = (tmp_path / "o" / "curve.csv").read_text().splitlines()
    assert "mask_p" in curve[0].split(",") and len(curve) == 1 + 3  # steps 0, 2, 4
    assert Run(method, 1, 1).evaluation.final() == method.final_metrics()  # default: the method's own


class Counter:
    """Counts steps; its state is the count, so a resumed run's first step shows where it resumed."""

    def __init__(self):
        self.n = 0

    def train_step(self, step):
        self.n += 1
        return {"loss": 1.0}

    def evaluate(self, step):
        return {}

    def final_metrics(self):
        return {"n": float(self.n)}

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, s):
        self.n = s["n"]


@pytest.mark.parametrize("same_settings", [True, False])
def test_a_checkpoint_resumes_only_the_cell_that_wrote_it(tmp_path, monkeypatch, caplog, same_settings):
    """A killed run's checkpoint is resumed by the same cell; after a settings change it is dropped."""
    from reprokit.loop import save_checkpoint

    mod = types.ModuleType("reprokit.builders.counting")
    mod.build = lambda cell, ctx: Run(Counter(), n_steps=10, eval_every=0)
    monkeypatch.setattr(cell_mod, "kind", lambda kind: mod)
    ctx = CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path / "v"))
    ckpt = tmp_path / "ckpt" / "c.pt"
    first = Cell(scale="test", experiment="count", coords=(("seed", 0),), settings={"lr": 0.1}, kind="counting")
    cell_mod._guard_checkpoint(first, ckpt)  # what run_cell does before training, then the run is killed at 4
    killed = Counter()
    killed.n = 4
    save_checkpoint(ckpt, 4, killed, [])
    again = (
        first
        if same_settings
        else Cell(scale="test", experiment="count", coords=(("seed", 0),), settings={"lr": 0.2}, kind="counting")
    )
    with caplog.at_level(logging.WARNING):
        record = cell_mod.run_cell(again, ctx, tmp_path / "out", ckpt)
    assert record["resumed_from_step"] == (4 if same_settings else 0)
    assert record["metrics"]["n"] == 10.0  # 4 restored + 6 more, or 10 from scratch
    assert ("starting afresh" in caplog.text) == (not same_settings)
    assert not ckpt.exists() and not Path(str(ckpt) + ".cell").exists()


def test_a_rerun_with_other_settings_never_sits_beside_the_earlier_runs_record(tmp_path, monkeypatch):
    """A cell run again with other settings (benchmarks/run_cells.py re-runs it in place; Snakemake would delete
    its outputs first) drops the earlier run's metrics.json and curve.csv when it writes its config.json, so
    while it runs (here: it fails at its first step) nothing pairs the new settings with the old result."""

    class Failing(Counter):
        def train_step(self, step):
            raise RuntimeError("killed")

    mod = types.ModuleType("reprokit.builders.counting")
    mod.build = lambda cell, ctx: Run(Counter() if cell.settings["lr"] == 0.1 else Failing(), n_steps=3, eval_every=0)
    monkeypatch.setattr(cell_mod, "kind", lambda kind: mod)
    ctx = CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path / "v"))
    out = tmp_path / "out"
    cell = Cell(scale="test", experiment="count", coords=(("seed", 0),), settings={"lr": 0.1}, kind="counting")
    cell_mod.run_cell(cell, ctx, out, None)
    assert (out / "metrics.json").exists()
    with pytest.raises(RuntimeError, match="killed"):
        cell_mod.run_cell(dataclasses.replace(cell, settings={"lr": 0.2}), ctx, out, None)
    assert json.loads((out / "config.json").read_text())["settings"] == {"lr": 0.2}
    assert not (out / "metrics.json").exists() and not (out / "curve.csv").exists()


def _fig2a_test_cell(tmp_path):
    """A real test-scale cell (Fig. 2a, partitioned, 60 steps, under a second) and its context as JSON."""

    from reprokit.config import grid_of, load_pipeline_config
    from reprokit.data import variants
    from reprokit.data.variants import variant_path

    cfg = load_pipeline_config(REPO)
    cell = next(c for c in grid_of(cfg, "fig2a", "test").cells() if c.coord_dict["method"] == "partitioned")
    paths = {}
    for name, (ds, fn) in cell_mod.kind(cell.kind).required_variants(cell).items():
        paths[name] = str(variant_path(tmp_path / "variants", ds, fn))
        variants.build_variant(ds, fn, paths[name], [])  # generated data: no mirror needed
    ctx = {"mirrors": [], "cache_dir": None, "variants_dir": str(tmp_path / "variants"), "run": {"device": "cpu"}}
    return cell, ctx, paths


def test_an_unreadable_checkpoint_is_moved_aside_and_the_cell_completes_afresh(tmp_path):
    """A checkpoint cut short (e.g. on a shared filesystem) must not fail every retry of its cell: the
    cell moves it aside, names it in its log, starts afresh and ends with a clean run's metrics."""
    import subprocess
    import sys

    from reprokit.loop import save_checkpoint

    cell, ctx, paths = _fig2a_test_cell(tmp_path)

    def args(out, ckpt):
        a = [
            "run",
            "--cell",
            json.dumps(cell.to_dict()),
            "--context",
            json.dumps(ctx),
            "--variants",
            json.dumps(paths),
            "--out",
            str(out),
        ]
        return a + (["--checkpoint", str(ckpt)] if ckpt else [])

    def run_process(out, ckpt):
        return subprocess.run(
            [sys.executable, "-m", "reprokit.cell", *args(out, ckpt)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    # a process of its own, as the healed run: `python -m reprokit.cell` pins run.cpu_isa before torch loads, which
    # this process, with torch loaded, cannot (on an AVX-512 CPU the two would round differently)
    res = run_process(tmp_path / "clean", None)
    assert res.returncode == 0, res.stderr[-3000:]
    clean = json.loads((tmp_path / "clean" / "metrics.json").read_text())
    assert clean["status"] == "completed" and clean["steps"] > 10

    # This cell's own checkpoint (fingerprint sidecar written as run_cell writes it) after 10 steps, cut in half
    ckpt = tmp_path / "ckpt" / "checkpoint.pt"
    ckpt.parent.mkdir()
    cell_mod._guard_checkpoint(cell, ckpt)
    run = cell_mod.kind(cell.kind).build(cell, cell_mod.context_from_dict(ctx, paths))
    for step in range(10):
        run.method.train_step(step)
    save_checkpoint(ckpt, 10, run.method, [])
    whole = ckpt.read_bytes()
    ckpt.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(RuntimeError):  # the premise: torch cannot read it
        torch.load(ckpt, weights_only=False)

    res = run_process(tmp_path / "healed", ckpt)
    assert res.returncode == 0, res.stderr[-3000:]
    healed = json.loads((tmp_path / "healed" / "metrics.json").read_text())
    assert healed["status"] == "completed" and healed["resumed_from_step"] == 0
    assert healed["metrics"] == clean["metrics"]
    assert (tmp_path / "healed" / "curve.csv").read_text() == (tmp_path / "clean" / "curve.csv").read_text()
    aside = list(ckpt.parent.glob("checkpoint.pt.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == whole[: len(whole) // 2]  # kept for inspection
    assert not ckpt.exists()  # the fresh run's own checkpoint went with its finished cell
    warning = next(line for line in res.stderr.splitlines() if "cannot be read" in line)
    assert "WARNING" in warning and str(ckpt) in warning and str(aside[0]) in warning
