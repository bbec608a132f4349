"""BALI classification benchmark (Table 2, Tables 5/6, Figs. 2/3): the experiment kind, OOD ROC, config, tables."""

import io
import json
import os

import numpy as np
import pandas as pd
import pytest
import torch

from reprokit import metrics
from reprokit.builders import CellContext
from reprokit.builders import bali_classification as bcx
from reprokit.config import grid_of, load_pipeline_config
from reprokit.plan import KINDS as PLANS
from reprokit.report.render import bali_classification as bc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(overrides=None):
    return load_pipeline_config(REPO, overrides)


# ------------------------------------------------------------------------------------------- OOD ROC


def test_tpr_at_fpr_hand_example_with_vertical_jump_and_interpolation():
    # ROC points (fpr, tpr): (0,0) (0,0.5) (0.5,0.5) (0.5,1) (1,1): a vertical jump at fpr 0 and 0.5
    fpr = torch.tensor([0.0, 0.0, 0.5, 0.5, 1.0])
    tpr = torch.tensor([0.0, 0.5, 0.5, 1.0, 1.0])
    got = metrics.tpr_at_fpr(fpr, tpr, [0.0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(got, [0.5, 0.5, 1.0, 1.0, 1.0])
    # diagonal segment (ties between ID and OOD scores): linear interpolation
    got = metrics.tpr_at_fpr(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 1.0]), [0.0, 0.3, 1.0])
    np.testing.assert_allclose(got, [0.0, 0.3, 1.0])


def test_ood_score_ordering_and_auroc():
    eye = torch.eye(10, dtype=torch.float64)
    confident = 0.98 * eye[torch.arange(50) % 10] + 0.002  # low entropy: looks in-distribution
    uniform = torch.full((40, 10), 0.1, dtype=torch.float64)  # maximal entropy: looks OOD
    m = metrics.ood_metrics(confident, uniform)
    assert m["ood_auroc"] == 1.0
    assert m[metrics.roc_column(0.0)] == 1.0  # every ID point accepted before the first OOD one
    assert m["ood_entropy_id"] < m["ood_entropy_ood"] == pytest.approx(np.log(10))
    reverse = metrics.ood_metrics(uniform, confident)  # a model that is sure on the OOD set fails
    assert reverse["ood_auroc"] == 0.0 and reverse[metrics.roc_column(0.5)] == 0.0
    # the sampled curve's area agrees with the AUROC on a random, tied example
    gen = torch.Generator().manual_seed(0)
    p_id = torch.softmax(3 * torch.randn(300, 10, generator=gen, dtype=torch.float64), -1)
    p_ood = torch.softmax(torch.randn(300, 10, generator=gen, dtype=torch.float64).round(), -1)
    m = metrics.ood_metrics(p_id, p_ood)
    grid = np.asarray(metrics.ROC_FPR_GRID)
    curve = np.asarray([m[metrics.roc_column(g)] for g in grid])
    assert np.all(np.diff(curve) >= 0)
    assert np.trapezoid(curve, grid) == pytest.approx(m["ood_auroc"], abs=0.01)
    assert 0.5 < m["ood_auroc"] < 1.0


# ------------------------------------------------------------------------------------------- config


def test_misspelled_setting_is_named():
    from reprokit.config import ConfigError

    with pytest.raises(ConfigError, match="n_eff_divisr"):
        _config(
            {"experiments": {"bali_cls_uci": {"settings": {"per_dataset": {"magic": {"bali": {"n_eff_divisr": 3}}}}}}}
        )


# ------------------------------------------------------------------------------------------- cells


def _cells(cfg, name="bali_cls_uci", dataset="spambase"):
    return {c.coord_dict["method"]: c for c in grid_of(cfg, name, "test").cells() if c.coord_dict["dataset"] == dataset}


@pytest.fixture
def ctx(shared_data):
    return CellContext(mirrors=[shared_data], cache_dir=None, variants_dir="unused")


def test_resume_is_bit_identical_and_eval_is_side_effect_free(ctx):
    cfg = _config()
    for method, cell in _cells(cfg).items():
        ref = bcx.build(cell, ctx)
        for step in range(8):
            ref.method.train_step(step)
        ref_eval = ref.evaluation.curve(8)
        assert ref.evaluation.curve(8) == ref_eval  # evaluation is reproducible ...
        a = bcx.build(cell, ctx)
        for step in range(4):
            a.method.train_step(step)
            a.evaluation.curve(step)  # ... and never consumes training randomness
        buf = io.BytesIO()
        torch.save(a.method.state_dict(), buf)
        buf.seek(0)
        b = bcx.build(cell, ctx)
        b.method.load_state_dict(torch.load(buf, weights_only=False))
        for step in range(4, 8):
            b.method.train_step(step)
        assert b.evaluation.curve(8) == ref_eval, method
        assert b.evaluation.final() == ref.evaluation.final(), method


def test_cells_record_what_ran_and_tables_render_it(ctx, tmp_path):
    """Tables 5/6 come from the cells' recorded hyperparameters: change the config, the table follows."""
    from reprokit.cell import run_cell
    from reprokit.report.store.aggregate import aggregate

    cfg = _config(
        {
            "experiments": {
                "bali_cls_uci": {
                    "settings": {"per_dataset": {"spambase": {"bali": {"alpha": 0.123}}}},
                    "scales": {"test": {"settings": {"eval_every": 5}}},
                }
            }
        }
    )
    grid = grid_of(cfg, "bali_cls_uci", "test")
    cells = [c for c in grid.cells() if c.coord_dict["dataset"] == "spambase"]
    for cell in cells:
        rec = run_cell(cell, ctx, tmp_path / cell.rel_dir, None)
        assert rec["status"] == "completed"
        assert {"test_acc", "test_ece", "test_auc", "test_nll"} <= set(rec["metrics"])
        curve = pd.read_csv(tmp_path / cell.rel_dir / "curve.csv")
        assert list(curve["step"]) == [0, 5, 10, 15, 20]
        assert curve[["train_nll", "test_nll"]].notna().all().all()
    unavailable = {c.rel_dir: ["cdc_diabetes"] for c in grid.cells() if c.coord_dict["dataset"] == "cdc_diabetes"}
    table, _ = aggregate([c for c in grid.cells() if c.coord_dict["dataset"] != "magic"], tmp_path, unavailable)
    bali = json.loads((tmp_path / cells[0].rel_dir / "metrics.json").read_text())
    n_train = bali["info"]["n_train"]
    assert bali["info"]["n_eff"] == pytest.approx(n_train / 4) and bali["info"]["alpha"] == 0.123

    t5 = bc.table5(table).set_index("Dataset")
    assert t5.loc["Spambase", "α"] == "0.123"
    assert t5.loc["Spambase", "N_eff"] == f"N_train/4 = {n_train / 4:.6g}"
    assert t5.loc["Spambase", "σ_r²"] == "10" and t5.loc["Spambase", "# iterations"] == "20"
    assert t5.loc["Diabetes", "size"] == "n/a"
    t6 = bc.table6(table).set_index(["Dataset", "Method"])
    assert t6.loc[("Spambase", "DO"), "dropout probability"] == "0.1"
    assert t6.loc[("Spambase", "MAP"), "dropout probability"] == "0"
    assert t6.loc[("Spambase", "DO"), "learning rate"] == "0.001"
    t2 = bc.table2(table)
    spam = t2[t2["Dataset"] == "Spambase"].set_index("Metric")
    assert list(spam.index) == ["ACC ↑", "ECE ↓", "AUC ↑"]
    acc = float(table.loc[(table.method == "bali") & (table.dataset == "spambase"), "test_acc"].iloc[0])
    assert spam.loc["ACC ↑", "BALI"] == f"{acc:.3f}"
    assert set(t2.loc[t2["Dataset"] == "Diabetes", "BALI"]) == {"n/a"}


def test_a_stopped_cell_is_the_full_runs_start_evaluated_where_its_config_says(ctx, tmp_path):
    """bali_cls_uci_early's cells (stop_at, log-spaced evaluations) train the first stop_at iterations of the
    n_steps run: BALI's beta milestones still fall at fractions of n_steps, so the curve rows both runs evaluate are
    the same numbers, and the rows are where the config puts them."""
    from reprokit.cell import run_cell
    from reprokit.loop import early_eval_steps

    cfg = _config()
    plan = PLANS["bali_classification"]
    early, full = _cells(cfg, "bali_cls_uci_early"), _cells(cfg)
    for method in ("bali", "dropout", "map"):
        st = plan.typed_settings(early[method])
        assert st.stop_at < st.n_steps and st.evals_per_doubling > 1
        rec = run_cell(early[method], ctx, tmp_path / early[method].rel_dir, None)
        assert rec["status"] == "completed" and rec["steps"] == st.stop_at
        ref = run_cell(full[method], ctx, tmp_path / full[method].rel_dir, None)
        assert ref["steps"] == st.n_steps
        a = pd.read_csv(tmp_path / early[method].rel_dir / "curve.csv").set_index("step")
        b = pd.read_csv(tmp_path / full[method].rel_dir / "curve.csv").set_index("step")
        every = st.eval_every_steps(int(rec["info"]["n_train"]))
        want = {0, st.stop_at} | set(early_eval_steps(st.eval_doubling_until, st.evals_per_doubling))
        want |= set(range(every, st.stop_at + 1, every))
        assert list(a.index) == sorted(want), method
        shared = sorted(set(a.index) & set(b.index))
        assert len(shared) > 1
        pd.testing.assert_frame_equal(a.loc[shared], b.loc[shared], check_exact=True)


def test_settings_added_later_are_recorded_only_where_set():
    """stop_at and evals_per_doubling came after cells were archived: a cell that leaves them at their defaults
    records neither (its archived line and its artefacts' fingerprints stay valid); one that sets them records
    both; a stop past n_steps is refused."""
    from reprokit.config import ConfigError
    from reprokit.report.store.archive import differing_keys

    cfg = _config()
    plan = PLANS["bali_classification"]
    full, early = _cells(cfg)["bali"], _cells(cfg, "bali_cls_uci_early")["bali"]
    plain = plan.resolved_settings(full)
    assert "stop_at" not in plain and "evals_per_doubling" not in plain
    assert plan.typed_settings(full).stop_at is None and plan.typed_settings(full).evals_per_doubling == 1
    assert plan.n_steps(full) == 20 and plan.n_steps(early) == 12
    recorded = plan.resolved_settings(early)
    assert recorded["stop_at"] == 12 and recorded["evals_per_doubling"] == 2
    assert {"stop_at", "evals_per_doubling"} <= set(differing_keys(plain, recorded))
    bad = _config(
        {
            "experiments": {
                "bali_cls_uci_early": {"scales": {"test": {"settings": {"per_dataset": {"spambase": {"stop_at": 50}}}}}}
            }
        }
    )
    with pytest.raises(ConfigError, match="beyond n_steps"):
        plan.typed_settings(_cells(bad, "bali_cls_uci_early")["bali"])


@pytest.mark.parametrize("name", ["bali_cls_uci", "bali_cls_image", "bali_fig7_local"])
def test_committed_quick_curves_are_evaluated_where_the_config_says(name):
    """The archived quick cells of the speed claims (Figs. 2 and 7) ran HEAD's settings and evaluated their curves at
    exactly the steps those give: step 0, every eval_every, the last step, and round(2^(k/n)) below
    eval_doubling_until (n = evals_per_doubling)."""
    from reprokit.loop import early_eval_steps
    from reprokit.report.store import archive

    cfg = _config({"scale": "quick"})
    lines = archive.load(archive.path_of(REPO, "quick", name))
    fresh, stale = archive.split(lines, archive.current_settings(cfg, "quick", name))
    assert fresh and not stale, stale
    for line in fresh:
        st = PLANS["bali_classification"].Settings.from_dict({**line["settings"], **line["coords"]})
        n, every = int(line["steps"]), int(line["info"]["eval_every"])
        want = (
            {0, n} | set(range(every, n + 1, every)) | early_eval_steps(st.eval_doubling_until, st.evals_per_doubling)
        )
        assert line["curve"]["step"] == sorted(want), line["cell"]
        assert st.evals_per_doubling > 1 and n == st.steps_run, line["cell"]


def test_fig2_footer_names_the_evaluation_schedule_the_cells_ran():
    cells = pd.DataFrame(
        {
            "dataset": ["spambase", "mnist", "magic"],
            "status": ["completed"] * 3,
            "eval_every": [18, 30, 60],
            "eval_doubling_until": [0, 30, 60],
            "evals_per_doubling": [None, 1, 4],
        }
    )
    text = bc.eval_text(cells)
    assert "Spambase every 18" in text and "Spambase every 18 and" not in text
    assert "MNIST every 30 and at 1, 2, 4, .. < 30" in text
    assert "Telescope every 60 and at round(2^(k/4)) < 60" in text


def test_missing_ood_dataset_keeps_the_cell_without_ood_metrics(monkeypatch):
    from reprokit.data import registry

    def fake_load(name, mirrors=(), **kw):
        if name == "fashion_mnist":
            raise registry.DatasetUnavailable(name, list(mirrors), None)
        g = torch.Generator().manual_seed(0)
        return registry.Bundle(
            torch.rand(64, 1, 28, 28, generator=g),
            torch.arange(64) % 10,
            torch.rand(32, 1, 28, 28, generator=g),
            torch.arange(32) % 10,
            "classification",
            10,
            name,
        )

    monkeypatch.setattr(bcx.registry, "load", fake_load)
    ctx = CellContext(mirrors=["nowhere"], cache_dir=None, variants_dir="unused")
    cell = _cells(_config(), "bali_cls_image", "mnist")["map"]
    run = bcx.build(cell, ctx)
    assert run.info["ood_dataset"] == "fashion_mnist" and "unavailable" in run.info["ood_note"]
    run.method.train_step(0)
    metrics = run.evaluation.final()
    assert "test_acc" in metrics and not any(k.startswith(("ood_", "roc_")) for k in metrics)


def test_cell_settings_keep_only_the_cells_method_keys():
    """A cell's parameters hold the shared settings and its own method's keys only: editing the dropout /
    MAP optimiser leaves the BALI cells' parameters (what Snakemake compares) unchanged, and vice versa."""

    def cell(config, method):
        g = grid_of(config, "bali_cls_uci", "paper")
        return next(c for c in g.cells() if c.coord_dict == {"method": method, "dataset": "magic", "seed": 0})

    config = _config()
    bali = PLANS["bali_classification"].resolved_settings(cell(config, "bali"))
    assert bali["bali"]["alpha"] == 0.5 and bali["hidden"] == [256, 256]  # per-dataset Table 5 value applied
    assert "optim" not in bali and "dropout_p" not in bali
    do = PLANS["bali_classification"].resolved_settings(cell(config, "dropout"))
    assert do["optim"]["lr"] == 1.0e-3 and do["dropout_p"] == 0.1 and "bali" not in do
    assert set(PLANS["bali_classification"].resolved_settings(cell(config, "map"))) == set(do) - {"dropout_p"}
    spec = config["experiments"]["bali_cls_uci"]
    edited = {
        **config,
        "experiments": {
            **config["experiments"],
            "bali_cls_uci": {**spec, "settings": {**spec["settings"], "optim": {"lr": 5.0e-3, "weight_decay": 0.0}}},
        },
    }
    assert PLANS["bali_classification"].resolved_settings(cell(edited, "bali")) == bali
    assert PLANS["bali_classification"].resolved_settings(cell(edited, "dropout"))["optim"]["lr"] == 5.0e-3


def test_wishart_sweep_cells_join_the_figure_as_their_own_method():
    """bali_cls_image_wishart's cells with the other reading (wishart_n n) are drawn in BALI Fig. 3 as "bali_n",
    beside (not instead of) the paper's BALI; its ROC mean is theirs alone."""
    from reprokit.report.render import bali_classification as rbc

    grid = [0.0, 0.5, 1.0]
    cols = {f"{rbc.ROC_PREFIX}{g:.3f}": [g, g] for g in grid}
    sweep = pd.DataFrame(
        {
            "method": ["bali", "bali"],
            "dataset": ["mnist", "mnist"],
            "seed": [0, 0],
            "bali.wishart_n": ["n", "n_eff"],
            "status": ["completed"] * 2,
            "ood_auroc": [0.81, 0.93],
            **cols,
        }
    )
    paper = sweep.drop(columns="bali.wishart_n").iloc[[1]].assign(ood_auroc=0.87)
    variant = rbc.as_wishart_variant(sweep)
    assert variant["method"].tolist() == ["bali_n"] and variant["ood_auroc"].tolist() == [0.81]
    both = pd.concat([paper, variant], ignore_index=True)
    assert rbc.roc_mean(both, "mnist", "bali_n")[2] == [0.81]
    assert rbc.roc_mean(both, "mnist", "bali")[2] == [0.87]
    assert "bali_n" in rbc.METHODS and "bali_n" in rbc.COLORS  # a legend label and a colour
    assert len(rbc.as_wishart_variant(paper)) == 0  # an experiment without the axis adds nothing


def test_input_scaling_uses_training_statistics_and_scales_ood_alike():
    """`standardize: global` shifts and scales every feature by the training inputs' one mean and sd; true by each
    feature's own (a constant feature keeps sd 1); false leaves them; whatever it is applies unchanged to other
    inputs (test, OOD)."""
    x = torch.tensor([[0.0, 1.0, 5.0], [2.0, 3.0, 5.0]])
    other = torch.tensor([[1.0, 1.0, 1.0]])
    g = bcx.scaler("global", x)
    mean, sd = x.double().mean(), x.double().std(unbiased=False)
    torch.testing.assert_close(g(other), ((other.double() - mean) / sd).float())
    assert abs(float(g(x).double().mean())) < 1e-6 and abs(float(g(x).double().std(unbiased=False)) - 1) < 1e-6
    f = bcx.scaler(True, x)
    torch.testing.assert_close(f(x), torch.tensor([[-1.0, -1.0, 0.0], [1.0, 1.0, 0.0]]))
    torch.testing.assert_close(f(other), torch.tensor([[0.0, -1.0, -4.0]]))  # the constant column: sd 1
    assert bcx.scaler(False, x)(other) is other
