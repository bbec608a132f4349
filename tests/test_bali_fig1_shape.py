"""The numeric reading of BALI Fig. 1's "excellent and smooth fit ... small uncertainty close to the data,
increased further away" (reprokit/predictive_shape.py: of_cell), on predictives built by hand over the
real synthetic generators' grids."""

import json

import numpy as np
import pandas as pd
import pytest

from reprokit import predictive_shape as sh_mod
from reprokit.data import registry
from reprokit.report.verdicts import claims, decide, readings


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


def _moons_entropies(p_near: float, p_far: float) -> pd.Series:
    """A FAKE two-moons cell whose p(class 1) is `p_near` within 0.1 of the data and `p_far` elsewhere."""
    row = _moons_row(confident_far=True)
    b = registry.load("two_moons", seed=0)
    d = sh_mod._nearest(b.meta["x_grid"].numpy(), b.x_train.numpy())
    row["grid_p1"] = _fmt(np.where(d <= 0.1, p_near, p_far))
    return row


def test_two_rounding_residues_do_not_pass_on_their_ratio():
    shape = sh_mod.of_cell(_moons_entropies(1e-9, 1e-7))  # entropy ~2e-8 close, ~2e-6 far: float rounding
    assert shape["far_over_near"] > 10 and shape["entropy_far"] < sh_mod.SHAPE["entropy_resolution"]
    assert not shape["smooth"] and not sh_mod.uncertainty_grows(shape)


def test_two_moons_increased_uncertainty_is_relative_and_the_absolute_floor_a_variant():
    # entropy ~2e-8 close to the data, ~0.008 far from it: far more uncertain far away, though not unsure there
    shape = sh_mod.of_cell(_moons_entropies(1e-9, 1e-3))
    assert shape["far_over_near"] > 1e3 and shape["entropy_far"] < sh_mod.SHAPE["entropy_far_floor"]
    assert shape["smooth"] and sh_mod.meets(shape) and not sh_mod.meets(shape, sh_mod.SHAPE["entropy_far_floor"])
    # as unsure close to the data as far from it: no increase, whatever the absolute entropy
    assert not sh_mod.of_cell(_moons_entropies(0.7, 0.7))["smooth"]


def test_a_cells_recorded_reading_is_decided_anew_from_its_numbers():
    row = _moons_entropies(1e-9, 1e-3)
    metrics = {**sh_mod.as_metrics(sh_mod.of_cell(row)), "shape_smooth": 0.0}  # recorded under a stricter reading
    recorded = sh_mod.recorded(pd.Series({**row, **metrics}))
    assert recorded["smooth"] is True
    assert sh_mod.recorded(pd.Series({**row, **metrics, "status": "failed"})) == {}


def test_the_claim_check_holds_only_when_every_dataset_does():
    class Ctx:
        def __init__(self, rows):
            self.rows = pd.DataFrame(rows)

        def cells(self, experiment, where):
            return self.rows

    def recorded(row):  # what a finished cell records (builders/synthetic_predictive.py)
        return pd.Series({**row, **sh_mod.as_metrics(sh_mod.of_cell(row))})

    good = [recorded(r) for r in (_regression_row("sines_trend"), _regression_row("sinc"), _moons_row(False))]
    assert readings.smooth_predictive(Ctx(good), "bali_synthetic").status == decide.HOLDS
    # the check reads the recorded numbers only: without them (a cell from before they were recorded) it has none
    assert readings.smooth_predictive(Ctx([_regression_row("sinc")]), "bali_synthetic").status == decide.NOT_RUN
    bad = [recorded(_regression_row("sines_trend", spikes=0.3)), good[1], good[2]]
    verdict = readings.smooth_predictive(Ctx(bad), "bali_synthetic")
    assert verdict.status == decide.FAILS and "sines_trend: the mean's total variation" in verdict.measured
    assert readings.smooth_predictive(Ctx([]), "bali_synthetic").status == decide.NOT_RUN
    # an absolute floor on two moons' entropy far from the data (the variant reading) fails a panel whose entropy
    # grows only relatively
    moons = recorded(_moons_entropies(1e-9, 1e-3))
    relative = readings.smooth_predictive(Ctx([good[0], good[1], moons]), "bali_synthetic")
    assert relative.status == decide.HOLDS, relative.measured
    floor = readings.smooth_predictive(Ctx([good[0], good[1], moons]), "bali_synthetic", entropy_far_min=0.1)
    assert floor.status == decide.FAILS and "two_moons: entropy" in floor.measured and "short of" in floor.measured


# -- BBB's panels (App. I.2, Figs. 4-6): underfitting at the large KL factor, overconfidence at the small one ------


def _bbb(row: pd.Series, kl_factor: float, train_rmse: float | None = None, train_nll: float | None = None):
    """A FAKE BBB cell: `row`'s predictive at `kl_factor`, its recorded shape numbers and training fit, and the
    training targets it was fitted to (plot_y_train, as a cell records them)."""
    b = registry.load(str(row["dataset"]), seed=0)
    out = {**row, "method": "bbb", "kl_factor": kl_factor, "plot_y_train": _fmt(b.y_train.numpy())}
    out.update(sh_mod.as_metrics(sh_mod.of_cell(row)))
    if train_rmse is not None:
        out["train_rmse"] = train_rmse
    if train_nll is not None:
        out["train_nll"] = train_nll
    return pd.Series(out)


def test_the_training_fit_is_read_against_the_best_constant_prediction():
    b = registry.load("sines_trend", seed=0)
    sd = float(b.y_train.numpy().std())
    assert sh_mod.explained(_bbb(_regression_row("sines_trend"), 1.0, train_rmse=sd)) == pytest.approx(0.0, abs=1e-6)
    assert sh_mod.explained(_bbb(_regression_row("sines_trend"), 1.0, train_rmse=0.5 * sd)) == pytest.approx(0.75)
    y = registry.load("two_moons", seed=0).y_train.numpy()
    share = np.unique(y, return_counts=True)[1] / len(y)
    h = float(-(share * np.log(share)).sum())  # the label entropy: the best constant prediction's NLL
    assert sh_mod.explained(_bbb(_moons_row(False), 1.0, train_nll=h)) == pytest.approx(0.0, abs=1e-6)
    assert sh_mod.explained(_bbb(_moons_row(False), 1.0, train_nll=0.1 * h)) == pytest.approx(0.9)
    assert sh_mod.explained(pd.Series({"status": "completed"})) is None  # nothing recorded


class _Cells:
    def __init__(self, rows):
        self.rows = pd.DataFrame(rows)

    def cells(self, experiment, where):
        df = self.rows
        for key, value in where.items():
            df = df[df[key] == value] if key in df else df.iloc[0:0]
        return df


def _panels(rows, dataset: str):
    args = {
        "experiment": "bali_bbb_synthetic",
        "where": {"method": "bbb", "dataset": dataset},
        "large": {"kl_factor": 1.0, "label": "KL factor 1"},
        "small": {"kl_factor": 0.01, "label": "KL factor 0.01"},
    }
    return claims.check(_Cells(rows), "underfits_and_overconfident", args)


@pytest.mark.parametrize(
    "large_rmse, small_sd_far, status",
    [
        (1.0, 0.0, decide.HOLDS),  # factor 1 explains nothing; factor 0.01's sd is flat: both halves
        (0.01, 0.0, decide.FAILS),  # factor 1 fits the data: no underfitting
        (1.0, 1.0, decide.FAILS),  # factor 0.01's sd grows away from the data: not overconfident
    ],
)
def test_both_halves_of_the_bbb_sentence_must_hold(large_rmse, small_sd_far, status):
    sd = float(registry.load("sines_trend", seed=0).y_train.numpy().std())
    rows = [
        _bbb(_regression_row("sines_trend", sd_far=1.0), 1.0, train_rmse=large_rmse * sd),
        _bbb(_regression_row("sines_trend", sd_far=small_sd_far), 0.01, train_rmse=0.1 * sd),
    ]
    v = _panels(rows, "sines_trend")
    assert v.status == status, v.measured
    assert (
        "underfitting at KL factor 1: training fit R^2" in v.measured
        and "overconfidence at KL factor 0.01" in v.measured
    )
    assert ("(not underfit)" in v.measured) == (large_rmse < 0.5)
    assert ("(not overconfident: it grows)" in v.measured) == (small_sd_far > 0)
    assert _panels(rows[:1], "sines_trend").status == decide.NOT_RUN  # the small factor has not run


def test_a_two_moons_panel_is_overconfident_when_its_entropy_far_away_is_below_rounding():
    y = registry.load("two_moons", seed=0).y_train.numpy()
    share = np.unique(y, return_counts=True)[1] / len(y)
    h = float(-(share * np.log(share)).sum())
    large = _bbb(_moons_row(False), 1.0, train_nll=0.8 * h)  # recovers a fifth of the label entropy: underfit
    confident = _bbb(_moons_entropies(1e-9, 1e-7), 0.01, train_nll=0.01)  # p at 0 to float rounding far away
    unsure = _bbb(_moons_row(False), 0.01, train_nll=0.01)  # entropy grows away from the data
    assert _panels([large, confident], "two_moons").status == decide.HOLDS
    v = _panels([large, unsure], "two_moons")
    assert v.status == decide.FAILS and "(not overconfident: it grows)" in v.measured, v.measured
