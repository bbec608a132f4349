"""BALI regression experiments: config (Table 4 settings), data scaling choice, metrics in original units,
synthetic predictive cells, table helpers."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from reprokit import predictive_shape, seeds
from reprokit.builders import CellContext, synthetic_predictive, uci_regression
from reprokit.config import grid_of, load_pipeline_config
from reprokit.data import registry
from reprokit.loop import LoopConfig, run_loop
from reprokit.plan import KINDS as PLANS
from reprokit.report.render import bali_regression as br

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def config(pipeline_config):
    return pipeline_config()


def _cell(config, name, scale, **coords):
    g = grid_of(config, name, scale)
    for c in g.cells():
        if all(c.coord_dict[k] == v for k, v in coords.items()):
            return c
    raise KeyError(coords)


def test_bali_yraw_is_bali_with_raw_targets_at_every_scale(config):
    """The two BALI readings of Tables 1 and 7 differ in standardize_y only: `bali` standardises the targets (the
    default since the readings table picked it), `bali_yraw` keeps them in their units; every other setting (own
    block, per-dataset and per-scale overrides merged, wishart_n n_eff) is the same in every cell."""
    compared = set()
    for exp in ("bali_uci", "bali_uci_protein"):
        for scale in ("paper", "quick", "test"):
            g = grid_of(config, exp, scale)
            compared.add((exp, scale))
            for d in g.axes["dataset"]:
                b = _cell(config, exp, scale, method="bali", dataset=d, seed=0).settings["bali"]
                if scale == "quick" and d in ("uci_yacht", "uci_concrete", "uci_energy", "uci_redwine"):
                    # quick runs raw-y only where bali_wishart_n compares it (kin8nm, powerplant, protein)
                    with pytest.raises(KeyError):
                        _cell(config, exp, scale, method="bali_yraw", dataset=d, seed=0)
                    continue
                raw = _cell(config, exp, scale, method="bali_yraw", dataset=d, seed=0).settings["bali_yraw"]
                assert b["standardize_y"] is True and raw["standardize_y"] is False, (exp, scale, d)
                assert b["wishart_n"] == "n_eff", (exp, scale, d)
                assert {**raw, "standardize_y": True} == b, (exp, scale, d)
    assert compared == {(e, s) for e in ("bali_uci", "bali_uci_protein") for s in ("paper", "quick", "test")}


def test_the_wishart_readings_ran_with_raw_targets(config):
    """bali_uci_wishart's cells (wishart_n n) ran when raw targets were the default: they are `bali_yraw` cells,
    the same as bali_uci's `bali_yraw` but for the axis, so the bali_wishart_n table compares like with like."""
    for exp, main in (("bali_uci_wishart", "bali_uci"), ("bali_uci_protein_wishart", "bali_uci_protein")):
        for c in grid_of(config, exp, "paper").cells():
            assert c.coord_dict["method"] == "bali_yraw"
            plan = PLANS["uci_regression"]
            mine = plan.resolved_settings(c)["bali_yraw"]  # the axis applied
            theirs = _cell(config, main, "paper", method="bali_yraw", dataset=c.coord_dict["dataset"], seed=0)
            assert (
                mine["wishart_n"] == "n"
                and {**mine, "wishart_n": "n_eff"} == plan.resolved_settings(theirs)["bali_yraw"]
            )


def test_uci_cell_builds_bali_with_its_per_dataset_settings(shared_data):
    """A per-dataset block of the config reaches the BALI the cell builds (N_eff, beta, batch), and only
    that dataset's and that method's cells."""
    cfg = load_pipeline_config(
        REPO,
        {
            "experiments": {
                "bali_uci": {
                    "settings": {
                        "per_dataset": {"uci_yacht": {"bali": {"n_eff_divisor": 3, "beta": 0.123, "batch_size": 7}}}
                    }
                }
            }
        },
    )
    run = uci_regression.build(
        _cell(cfg, "bali_uci", "test", method="bali", dataset="uci_yacht", seed=0), _ctx(shared_data)
    )
    bali = run.method.config
    n_train = run.method.data.n_train
    assert bali.n_eff == pytest.approx(n_train / 3) and bali.beta == 0.123
    assert run.method.sampler.batch_size == 7  # the minibatches it trains on
    assert run.info["n_eff_divisor"] == 3 and run.info["beta"] == 0.123 and run.info["batch_size"] == 7
    # the inverse-Wishart dof count u = u_0 + N is the config's reading (bali.wishart_n: n_eff since 2026-11-26)
    assert run.info["wishart_n"] == "n_eff" and bali.n_data == n_train
    assert [layer.n_wishart for layer in run.method.model.layers] == pytest.approx([n_train / 3, n_train / 3])
    other = uci_regression.build(
        _cell(cfg, "bali_uci", "test", method="bali_yraw", dataset="uci_yacht", seed=0), _ctx(shared_data)
    ).method.config
    assert other.beta != 0.123 and other.n_eff != pytest.approx(n_train / 3)


@pytest.mark.parametrize(
    "weight, local", [("bali_cls_uci", "bali_fig7_local"), ("bali_cls_uci_early", "bali_fig7_local_early")]
)
def test_fig7_local_matches_classification_benchmark_except_reparam(config, weight, local):
    for scale in ("paper", "quick", "test"):
        w = grid_of(config, weight, scale)
        l = grid_of(config, local, scale)
        assert l.axes["dataset"] == w.axes["dataset"] and l.axes["seed"] == w.axes["seed"], scale
        assert [c.coord_dict for c in l.cells()] == [
            c.coord_dict for c in w.cells() if c.coord_dict["method"] == "bali"
        ]
        for d in l.axes["dataset"]:
            coords = {"method": "bali", "dataset": d, "seed": 0}
            sw, sl = (
                w.layered_settings(coords),
                l.layered_settings(coords),
            )  # a grid's settings, whether or not it runs them
            assert sw["bali"]["reparam"] == "weight" and sl["bali"]["reparam"] == "local"
            sw = {**sw, "bali": {**sw["bali"], "reparam": None}}
            sl = {**sl, "bali": {**sl["bali"], "reparam": None}}
            assert sw == sl, (scale, d)


def _ctx(shared_data):
    return CellContext(mirrors=[shared_data], cache_dir=None, variants_dir="unused")


@pytest.mark.parametrize("method", ["bali", "bali_yraw", "dropout", "vadam"])
def test_uci_cell_reports_metrics_in_original_units(config, shared_data, method):
    cell = _cell(config, "bali_uci", "test", method=method, dataset="uci_yacht", seed=0)
    if method == "dropout":  # the learned-noise variant (Gal's protocol: test_gal_dropout_cell_... below)
        block = {**cell.settings["dropout"], "protocol": "learned_noise", "p": 0.05, "n_steps": 20}
        cell = dataclasses.replace(cell, settings={**cell.settings, "dropout": block})
    run = uci_regression.build(cell, _ctx(shared_data))
    run_loop(run.method, LoopConfig(n_steps=run.n_steps, eval_every=0))
    inner = run.method
    raw = registry.load("uci_yacht", [shared_data], split=0)
    z, stats = registry.standardize(raw)
    torch.testing.assert_close(inner.data.x_train, z.x_train)  # inputs z-scored in both
    if method == "bali_yraw":  # BALI on raw targets: U_0 = 0.01 N_eff I is on the original scale
        assert torch.equal(inner.data.y_train, raw.y_train) and inner.y_std is None
        assert run.info["standardize_y"] is False
    else:
        torch.testing.assert_close(inner.data.y_train, z.y_train)
        assert inner.y_std == pytest.approx(float(stats["y_std"]))
        assert run.info["standardize_y"] is True
        assert (run.info.get("alpha") is not None) == (method == "bali")  # bali is BALI, dropout is not
    metrics = run.evaluation.final()
    final_samples = int(cell.settings["final_samples"])
    # recompute the test RMSE / LL in original units from the same Monte Carlo samples
    gen = seeds.generator(inner.eval_seed, "eval")
    inner.sample_outputs(inner.data.x_train, final_samples, generator=gen)  # train split comes first
    samples = inner.sample_outputs(inner.data.x_test, final_samples, generator=gen).double()
    ys = 1.0 if inner.y_std is None else inner.y_std
    ym = 0.0 if inner.y_std is None else float(stats["y_mean"])
    pred = samples * ys + ym
    rmse = float((pred.mean(0) - raw.y_test.double()).square().mean().sqrt())
    assert metrics["test_rmse"] == pytest.approx(rmse, rel=1e-6)
    var = torch.as_tensor(inner.noise_cov(), dtype=torch.float64).reshape(-1)[0] * ys**2
    logp = torch.distributions.Normal(pred[..., 0], var.sqrt()).log_prob(raw.y_test.double()[:, 0])
    ll = float((torch.logsumexp(logp, 0) - math.log(logp.shape[0])).mean())
    assert metrics["test_ll"] == pytest.approx(ll, rel=1e-6, abs=1e-9)
    assert metrics["noise_sd"] == pytest.approx(float(var.sqrt()), rel=1e-5)


def test_pbp_cell_reports_its_gaussian_predictive_in_original_units(config, shared_data):
    """PBP trains on z-scored rows; its test RMSE / LL are those of N(y | m, v + noise) mapped back to the raw
    targets (no Monte Carlo)."""
    cell = _cell(config, "bali_uci", "test", method="pbp", dataset="uci_yacht", seed=0)
    run = uci_regression.build(cell, _ctx(shared_data))
    run_loop(run.method, LoopConfig(n_steps=run.n_steps, eval_every=0))
    raw = registry.load("uci_yacht", [shared_data], split=0)
    _, stats = registry.standardize(raw)
    ym, ys = float(stats["y_mean"]), float(stats["y_std"])
    mean, var = run.method.predictive(run.method.x_test)
    pred, sd = mean * ys + ym, np.sqrt(var) * ys
    y = raw.y_test.double().numpy().ravel()
    metrics = run.evaluation.final()
    assert metrics["test_rmse"] == pytest.approx(float(np.sqrt(np.mean((pred - y) ** 2))), rel=1e-6)
    ll = float(np.mean(-0.5 * np.log(2 * np.pi * sd**2) - 0.5 * ((y - pred) / sd) ** 2))
    assert metrics["test_ll"] == pytest.approx(ll, rel=1e-6)
    assert run.info["epochs"] == run.n_steps == cell.settings["pbp"]["epochs"]


def test_gal_dropout_cell_reports_metrics_in_original_units(config, shared_data):
    """The DO baseline's default (Gal's protocol): the split is loaded raw, the final network standardises
    with all training rows, and test RMSE / LL are Gal's formulas on its T passes in original units."""
    cell = _cell(config, "bali_uci", "test", method="dropout", dataset="uci_yacht", seed=0)
    run = uci_regression.build(cell, _ctx(shared_data))
    run_loop(run.method, LoopConfig(n_steps=run.n_steps, eval_every=0))
    inner, raw = run.method, registry.load("uci_yacht", [shared_data], split=0)
    assert torch.equal(inner.data.y_train, raw.y_train) and run.info["protocol"] == "gal"
    assert inner.scaled.y_mean == pytest.approx(float(raw.y_train.double().mean()))
    assert len(inner.results) == len(cell.settings["dropout"]["rates"]) * 3  # yacht's 3 taus
    metrics = run.evaluation.final()
    t = int(cell.settings["dropout"]["predictive_samples"])
    gen = seeds.generator(0, "final")
    inner.sample_outputs(raw.x_train, t, gen)  # train split comes first
    s = inner.sample_outputs(raw.x_test, t, gen).double().numpy()
    y, tau = raw.y_test.double().numpy()[:, 0], metrics["chosen_tau"]
    a = -0.5 * tau * (y[None] - s) ** 2
    ll = a.max(0) + np.log(np.exp(a - a.max(0)).sum(0)) - np.log(t) - 0.5 * np.log(2 * np.pi) + 0.5 * np.log(tau)
    assert metrics["test_ll"] == pytest.approx(float(ll.mean()), rel=1e-6)
    assert metrics["test_rmse"] == pytest.approx(float(np.sqrt(((s.mean(0) - y) ** 2).mean())), rel=1e-6)
    assert metrics["chosen_p"] in cell.settings["dropout"]["rates"] and metrics["noise_sd"] == pytest.approx(tau**-0.5)


def test_synthetic_cells_store_grid_predictive(config):
    for name, d in (("bali_synthetic", "sinc"), ("bali_bbb_synthetic", "two_moons")):
        cell = _cell(config, name, "test", dataset=d)
        run = synthetic_predictive.build(cell, CellContext(mirrors=[], cache_dir=None, variants_dir="unused"))
        run_loop(run.method, LoopConfig(n_steps=run.n_steps, eval_every=0))
        m = run.evaluation.final()
        b = registry.load(d, **__import__("json").loads(run.info["data_kwargs"]))
        n_grid = b.meta["x_grid"].shape[0]
        if d == "sinc":
            assert b.n_train == 256  # App. H.1
            mean, sd, epi = (br.floats(m[k]) for k in ("grid_mean", "grid_sd", "grid_sd_epistemic"))
            assert len(mean) == len(sd) == n_grid and np.all(sd >= epi - 1e-4) and np.all(np.isfinite(mean))
        else:
            p1 = br.floats(m["grid_p1"])
            assert len(p1) == n_grid and np.all((p1 >= 0) & (p1 <= 1))
            assert run.info["kl_factor"] == cell.coord_dict["kl_factor"]
        # Fig. 1's shape reading is recorded with the metrics: what the report reads, never the data again
        row = {**m, "status": "completed", "dataset": d, "data_kwargs": run.info["data_kwargs"]}
        assert predictive_shape.recorded(row) == predictive_shape.of_cell(
            row
        ) and "far_over_near" in predictive_shape.recorded(row)
        # ... and so are the training points its figure draws
        pts = predictive_shape.recorded_points(row)
        np.testing.assert_allclose(pts["x_train"], b.x_train.numpy().reshape(pts["x_train"].shape), rtol=1e-5)
        np.testing.assert_allclose(pts["y_train"], b.y_train.numpy().ravel(), rtol=1e-5, atol=1e-7)


def test_uci_table_formats_mean_se_and_labels_sources():
    rows = []
    for seed, (r, l) in enumerate([(0.5, -0.7), (0.7, -0.9)]):
        rows.append(
            {
                "scale": "paper",
                "method": "bali",
                "dataset": "uci_yacht",
                "seed": seed,
                "status": "completed",
                "test_rmse": r,
                "test_ll": l,
            }
        )
        rows.append(
            {
                "scale": "paper",
                "method": "dropout",
                "dataset": "uci_yacht",
                "seed": seed,
                "status": "diverged" if seed else "completed",
                "test_rmse": np.nan if seed else 1.0,
                "test_ll": -1,
            }
        )
    rows.append({"scale": "paper", "method": "bbb", "dataset": "uci_yacht", "seed": 0, "status": "unavailable"})
    for seed, r in enumerate((0.9, 1.1)):  # our PBP, beside the PBP value the paper quotes
        rows.append({"scale": "paper", "method": "pbp", "dataset": "uci_yacht", "seed": seed, "status": "completed"})
        rows[-1].update({"test_rmse": r, "test_ll": -1.6})
    df = pd.DataFrame(rows)
    paper = br.paper_values(REPO / "config" / "papers" / "bali.yaml")
    table, notes = br.uci_table(df, paper, "rmse")
    row = table.iloc[0]
    assert row["BALI (ours)"] == "0.600 ± 0.100"  # mean 0.6, sd 0.1414 / sqrt 2
    assert row["DO (ours)"] == "NaN" and row["BBB (ours)"] == "n/a"
    assert row["BALI (paper)"] == "0.642 ± 0.042" and row["BBB (quoted)"] == "1.174 ± 0.086"
    assert row["splits"] == "2" and any("diverged" in n for n in notes)
    assert row["PBP (ours)"] == "1.000 ± 0.100" and row["PBP (quoted)"] == "1.015 ± 0.054"
    assert "VADAM (ours)" not in table and row["VADAM (quoted)"] == "1.320 ± 0.100"  # no cell: no column of ours
    check = br.within_two_se(df, paper, "ll")
    b = check[check.method == "BALI"].iloc[0]
    assert b["z_paper_se"] == pytest.approx((-0.8 + 0.745) / 0.033) and b["within_2se"]  # -1.67 s.e.
    p = check[check.method == "PBP"].iloc[0]  # compared with the quoted PBP
    assert p["z_paper_se"] == pytest.approx((-1.6 + 1.634) / 0.016)
    d = check[check.method == "DO"].iloc[0]
    assert d["z_paper_se"] == pytest.approx((-1.0 + 1.250) / 0.015) and not d["within_2se"]


def test_cell_settings_keep_only_the_cells_method_block(config):
    """A cell's parameters (what Snakemake compares to decide a re-run) hold its own method's block only, so
    adding a method to the grid or editing another method's block leaves finished cells valid."""
    cell = _cell(config, "bali_uci", "paper", method="bali", dataset="uci_kin8nm", seed=3)
    own = PLANS["uci_regression"].resolved_settings(cell)
    assert "bali" in own and not {"bali_yraw", "dropout", "bbb"} & set(own)
    assert own["bali"]["n_eff_divisor"] == 4 and own["hidden"] == [50]  # per-dataset overrides already applied
    edited = {**config, "experiments": {**config["experiments"]}}
    spec = edited["experiments"]["bali_uci"]
    settings = {**spec["settings"], "dropout": {**spec["settings"]["dropout"], "p": 0.2}}
    edited["experiments"]["bali_uci"] = {**spec, "settings": settings}
    again = _cell(edited, "bali_uci", "paper", method="bali", dataset="uci_kin8nm", seed=3)
    assert PLANS["uci_regression"].resolved_settings(again) == own
    d = _cell(edited, "bali_uci", "paper", method="dropout", dataset="uci_kin8nm", seed=3)
    assert PLANS["uci_regression"].resolved_settings(d)["dropout"]["p"] == 0.2 and "bali" not in PLANS[
        "uci_regression"
    ].resolved_settings(d)


def test_readings_table_names_the_reading_nearest_the_paper_in_combined_se():
    """Nearest = smallest |ours - paper| / sqrt(se_ours^2 + se_paper^2); a reading without a completed split is
    n/a and never nearest; one split prints the value without a s.e."""
    paper = {"rmse": {"uci_yacht": {"BALI": [1.0, 0.1]}}, "ll": {"uci_yacht": {"BALI": [-1.0, 0.1]}}}

    def rows(rmse, ll, status="completed"):
        return pd.DataFrame(
            {"dataset": "uci_yacht", "seed": range(len(rmse)), "status": status, "test_rmse": rmse, "test_ll": ll}
        )

    near_rmse = rows([1.1, 1.3], [-2.0, -2.2])  # RMSE mean 1.2 (se 0.1): 1.41 se away; LL 7.8 se away
    near_ll = rows([2.0], [-1.05])  # one split: RMSE 9.9 se away, LL 0.5 se away
    table, nearest, totals = br.readings_table(
        {"a": near_rmse, "b": near_ll, "c": rows([1.0], [-1.0], "unavailable")}, paper
    )
    assert nearest == {"a": 1, "b": 1, "c": 0}
    # summed distance over the rows each reading ran: a 1.41 + 7.78, b 10 + 0.5; c none
    assert totals["a"][0] == pytest.approx((0.2 + 1.1) / np.hypot(0.1, 0.1)) and totals["a"][1] == 2
    assert totals["b"][0] == pytest.approx(1.0 / 0.1 + 0.05 / 0.1) and totals["c"] == (0.0, 0)
    by = table.set_index("metric")
    assert by.loc["RMSE", "nearest the paper"].startswith("a (1.4")
    assert by.loc["LL", "nearest the paper"].startswith("b (0.5")
    assert by.loc["LL", "b"] == "-1.050 (1)" and by.loc["RMSE", "c"] == "n/a"
