"""The numeric reading of BALI Fig. 1's "excellent and smooth fit ... small uncertainty close to the data,
increased further away" (reprokit/shape.py: of_cell), on predictives built by hand over the
real synthetic generators' grids."""

import json

import numpy as np
import pandas as pd

from reprokit import shape as sh_mod
from reprokit.data import registry
from reprokit.report.verdicts import claims


def _fmt(a) -> str:
    return " ".join(f"{v:.6g}" for v in np.asarray(a).ravel())


def _regression_row(dataset: str, spikes: float = 0.0, sd_far: float = 1.0) -> pd.Series:
    kwargs = {"seed": 0}
    b = registry.load(dataset, **kwargs)
    fg = b.meta["f_grid"].numpy().ravel()
    noise = 0.1  # the inferred noise sd (App. H.1's prior floors it at ~0.1)
    d = sh_mod._nearest(b.meta["x_grid"].numpy(), b.x_train.numpy())
    epi = 0.2 * noise + sd_far * np.clip(d, 0, 0.5)  # small close to the data, growing away from it
    mean = fg.copy()
    if spikes:  # a dip of the mean and a spike of the weight sd at every training input
        bump = np.exp(-0.5 * (d / 0.004) ** 2)
        mean = mean - spikes * bump
        epi = epi + 5 * noise * bump
    sd = np.sqrt(epi**2 + noise**2)
    return pd.Series(
        {
            "dataset": dataset,
            "status": "completed",
            "data_kwargs": json.dumps(kwargs),
            "noise_sd": noise,
            "grid_mean": _fmt(mean),
            "grid_sd": _fmt(sd),
            "grid_sd_epistemic": _fmt(epi),
            "method": "bali",
        }
    )


def test_a_smooth_predictive_meets_every_criterion():
    for dataset in ("sines_trend", "sinc"):
        shape = sh_mod.of_cell(_regression_row(dataset))
        assert shape["smooth"], (dataset, shape)
        assert abs(shape["tv_ratio"] - 1.0) < 1e-6 and abs(shape["roughness"] - 1.0) < 1e-4 and shape["fit_err"] < 1e-3
        assert shape["far_over_near"] >= 2.0


def test_dips_and_sd_spikes_at_the_training_points_fail_it():
    shape = sh_mod.of_cell(_regression_row("sines_trend", spikes=0.3))
    assert not shape["smooth"]
    assert shape["roughness"] > sh_mod.SHAPE["roughness_max"] and shape["epi_near"] > sh_mod.SHAPE["epi_near_max"]


def test_flat_uncertainty_fails_the_far_from_data_criterion():
    shape = sh_mod.of_cell(_regression_row("sines_trend", sd_far=0.0))
    assert shape["far_over_near"] < 1.01 and not shape["smooth"]


def _moons_row(confident_far: bool) -> pd.Series:
    kwargs = {"seed": 0}
    b = registry.load("two_moons", **kwargs)
    d = sh_mod._nearest(b.meta["x_grid"].numpy(), b.x_train.numpy())
    p1 = np.full(len(d), 0.98)
    if not confident_far:
        p1 = 0.5 + 0.48 * np.clip(1 - (d - 0.1) / 0.4, 0, 1)  # 0.98 close to the data, 0.5 from 0.5 away
    return pd.Series(
        {
            "dataset": "two_moons",
            "status": "completed",
            "data_kwargs": json.dumps(kwargs),
            "grid_p1": _fmt(p1),
            "method": "bali",
        }
    )


def test_two_moons_needs_more_entropy_far_from_the_data():
    assert sh_mod.of_cell(_moons_row(confident_far=False))["smooth"]
    assert not sh_mod.of_cell(_moons_row(confident_far=True))["smooth"]


def test_two_near_zero_entropies_do_not_pass_on_their_ratio():
    row = _moons_row(confident_far=True)
    b = registry.load("two_moons", seed=0)
    d = sh_mod._nearest(b.meta["x_grid"].numpy(), b.x_train.numpy())
    row["grid_p1"] = _fmt(np.where(d <= 0.1, 1 - 1e-9, 0.999))  # entropy ~2e-8 close, ~0.008 far
    shape = sh_mod.of_cell(row)
    assert shape["far_over_near"] > 1e3 and shape["entropy_far"] < sh_mod.SHAPE["entropy_far_min"]
    assert not shape["smooth"]


def test_the_claim_check_holds_only_when_every_dataset_does():
    class Ctx:
        def __init__(self, rows):
            self.rows = pd.DataFrame(rows)

        def cells(self, experiment, where):
            return self.rows

    def recorded(row):  # what a finished cell records (builders/synthetic_predictive.py)
        return pd.Series({**row, **sh_mod.as_metrics(sh_mod.of_cell(row))})

    good = [recorded(r) for r in (_regression_row("sines_trend"), _regression_row("sinc"), _moons_row(False))]
    assert claims.smooth_predictive(Ctx(good), "bali_synthetic").status == claims.HOLDS
    # the check reads the recorded numbers only: without them (a cell from before they were recorded) it has none
    assert claims.smooth_predictive(Ctx([_regression_row("sinc")]), "bali_synthetic").status == claims.NOT_RUN
    bad = [recorded(_regression_row("sines_trend", spikes=0.3)), good[1], good[2]]
    verdict = claims.smooth_predictive(Ctx(bad), "bali_synthetic")
    assert verdict.status == claims.FAILS and "sines_trend: the mean's total variation" in verdict.measured
    assert claims.smooth_predictive(Ctx([]), "bali_synthetic").status == claims.NOT_RUN
