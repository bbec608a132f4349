"""The numeric reading of BALI Fig. 1's words ("an excellent and smooth fit ... increased predictive uncertainty
further away"): one synthetic cell's predictive on its plotting grid, reduced to a few numbers.

The cell computes it when it finishes (builders/synthetic_predictive.py, `of_cell`, which regenerates the
training data from the cell's `data_kwargs`) and records it as `shape_<name>` metrics, with the training points
and plotting grid its figure draws (`plot_points`); the claim check (report/verdicts/readings.smooth_predictive)
and the Fig. 1 notebooks read those back (`recorded`, `recorded_points`), so the report never loads training
data. Torch-free (numpy; the data generators are loaded only by `of_cell`).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd


def floats(text) -> np.ndarray:
    return np.array([float(v) for v in str(text).split()]) if isinstance(text, str) else np.array([])


PLOT = "plot_"  # what a synthetic cell's figure draws besides its predictive, recorded by the cell


def _numbers(a) -> str:
    return " ".join(f"{v:.6g}" for v in np.asarray(a, dtype=np.float64).ravel())


def plot_points(b) -> dict[str, str]:
    """The training points and plotting grid of a synthetic data bundle (reprokit.data.synthetic) as
    space-separated numbers, recorded by the cell beside its grid predictive so that the figures draw from the
    cell's record: plot_x_train, plot_y_train and, for regression, plot_x_grid and plot_f_grid (the true f),
    for classification plot_grid_x1 and plot_grid_x2 (the grid's axes)."""
    out = {PLOT + "x_train": _numbers(b.x_train), PLOT + "y_train": _numbers(b.y_train)}
    if b.task == "regression":
        out.update({PLOT + "x_grid": _numbers(b.meta["x_grid"]), PLOT + "f_grid": _numbers(b.meta["f_grid"])})
    else:
        gx, gy = b.meta["grid_axes"]
        out.update({PLOT + "grid_x1": _numbers(gx), PLOT + "grid_x2": _numbers(gy)})
    return out


def recorded_points(row) -> dict[str, np.ndarray]:
    """:func:`plot_points` read back from a cell's row: arrays without the prefix (x_train has two columns for
    classification); {} when the cell recorded none."""
    out = {k[len(PLOT) :]: floats(v) for k, v in dict(row).items() if str(k).startswith(PLOT) and isinstance(v, str)}
    if "x_train" not in out:
        return {}
    if "grid_x1" in out:
        out["x_train"] = out["x_train"].reshape(-1, 2)
    return out


def synthetic_data(row: pd.Series):
    """Training points and plotting grid of a synthetic cell, regenerated from its recorded `data_kwargs`."""
    from .data import registry  # torch: the report reads this module torch-free, the cell alone regenerates data

    b = registry.load(str(row["dataset"]), **json.loads(row["data_kwargs"]))
    return b


# Numeric reading of Sec. 5.1's words for Fig. 1, "an excellent and smooth fit to the data with small uncertainty
# close to the data points and increased predictive uncertainty further away from the training data and decision
# boundary". Distances are to the nearest training input, in input units (regression inputs span [-1, 1]). Noise
# levels are the cell's inferred noise sd: App. H.1's U_0 = 0.01 N I floors Sigma at ~0.01 N / (N + 3), a noise
# sd of ~0.1 whatever the data (sines-trend's true 0.02 is out of reach), so the fit and the uncertainty near the
# data are judged against the noise level the model itself states.
SHAPE = {
    "near": 0.02,  # regression: grid points this close to a training input are "close to the data"
    "far": 0.2,  # ... and at least this far from every one are "further away"
    "near_2d": 0.1,  # two moons (inputs span ~3 units): close to the data
    "far_2d": 0.5,  # ... and further away
    # what "excellent and smooth fit ... small ... increased" must reach, per dataset
    "tv_ratio_max": 1.5,  # total variation of the mean over the data range / the true function's (no wiggles)
    "roughness_max": 1.5,  # summed |second difference| of the mean over the data range / the true function's
    "fit_err_max": 1.0,  # RMS error of the mean against the true f close to the data, in inferred noise sds
    "epi_near_max": 2.0,  # largest weight (epistemic) sd close to the data, in inferred noise sds (no spikes)
    "far_over_near_min": 2.0,  # predictive sd (regression) or entropy (classification) far / close
    # two moons: "increased predictive uncertainty" is relative (far / close, above); the entropy far from the data
    # must only be resolvable, above the float32 rounding of p near 0 or 1 (p = 1 - 6e-8 gives ~1e-6 nats), so that a
    # ratio of two rounding residues cannot pass
    "entropy_resolution": 1e-5,
    # an absolute floor on it, a variant reading of ours (the claim bali_fig1_smooth_fit_entropy_floor): at least this
    # much entropy (nats; p ~ 0.02 / 0.98) far from the data
    "entropy_far_floor": 0.1,
    # BBB's panels (App. I.2, Figs. 4-6), "underfitting": the predictive explains under this share of the training
    # targets against the best constant prediction (:func:`explained`), where the fit at the small factor does not
    "underfit_explained_max": 0.5,
}


def uncertainty_grows(shape: dict, entropy_far_min: float | None = None) -> bool:
    """Whether a shape reading (:func:`of_cell`'s numbers) has "increased predictive uncertainty further away": the
    predictive sd (regression) or entropy (classification) far from the data at least `far_over_near_min` x that
    close to it; for classification the entropy far away must also reach `entropy_far_min` nats (default: only
    resolvable, :data:`SHAPE`'s `entropy_resolution`)."""
    if shape.get("far_over_near", 0.0) < SHAPE["far_over_near_min"]:
        return False
    if "entropy_far" not in shape:
        return True
    floor = (
        SHAPE["entropy_resolution"] if entropy_far_min is None else max(entropy_far_min, SHAPE["entropy_resolution"])
    )
    return shape["entropy_far"] >= floor


def meets(shape: dict, entropy_far_min: float | None = None) -> bool:
    """Whether a shape reading meets every criterion of :data:`SHAPE` (regression: the fit's and the uncertainty's;
    classification: :func:`uncertainty_grows`), decided from its numbers, so a cell's recorded numbers are read
    under the current reading whatever `smooth` it recorded."""
    if not shape:
        return False
    if "tv_ratio" in shape and not (
        shape["tv_ratio"] <= SHAPE["tv_ratio_max"]
        and shape["roughness"] <= SHAPE["roughness_max"]
        and shape["fit_err"] <= SHAPE["fit_err_max"]
        and shape["epi_near"] <= SHAPE["epi_near_max"]
    ):
        return False
    return uncertainty_grows(shape, entropy_far_min)


def explained(row) -> float | None:
    """The share of its training targets a synthetic cell's predictive explains against the best constant
    prediction, from what the cell recorded: regression 1 - train RMSE^2 / var(y_train) (R^2; below 0 where it does
    worse than the targets' mean), classification 1 - train NLL / the entropy of the training labels' frequencies
    (McFadden's pseudo-R^2; 0: no better than predicting the class shares). None where the cell recorded neither."""
    y = floats(row.get("plot_y_train"))
    if not len(y):
        return None
    shape = recorded(row)
    if "entropy_far" in shape:  # classification
        nll = float(row.get("train_nll", np.nan))
        share = np.unique(y, return_counts=True)[1] / len(y)
        h = float(-(share * np.log(share)).sum())
        return 1.0 - nll / h if np.isfinite(nll) and h > 0 else None
    rmse = float(row.get("train_rmse", np.nan))
    return 1.0 - rmse**2 / float(y.var()) if np.isfinite(rmse) and y.var() > 0 else None


def _nearest(grid: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Distance of each grid point to its nearest training input ([G, D], [N, D] -> [G])."""
    g = grid.reshape(len(grid), -1)
    t = train.reshape(len(train), -1)
    return np.sqrt(((g[:, None, :] - t[None, :, :]) ** 2).sum(-1)).min(1)


def of_cell(row) -> dict:
    """The numeric reading (:data:`SHAPE`) of one synthetic cell's predictive on its plotting grid.

    Regression, over the grid points inside the training inputs' range: `tv_ratio` and `roughness` (total
    variation and summed absolute second difference of the predictive mean, over the true function's),
    `fit_err` (RMS of mean - f close to the data) and `epi_near` (largest weight sd close to the data), both in
    the cell's inferred noise sds, and `far_over_near` (median total sd far from the data / close to it).
    Classification: `far_over_near` of the predictive entropy of p(class 1), and `entropy_near` / `entropy_far`
    (nats; far from the data it must also be resolvable, `entropy_resolution`, else a ratio of two rounding
    residues would pass). `smooth` is True when every criterion of :data:`SHAPE` is met (:func:`meets`). Empty for
    a cell that did not complete.
    """
    if row.get("status") != "completed":
        return {}
    b = synthetic_data(row)
    x_train = b.x_train.numpy()
    grid = b.meta["x_grid"].numpy()
    d = _nearest(grid, x_train)
    if b.task == "regression":
        xg, fg = grid.ravel(), b.meta["f_grid"].numpy().ravel()
        mean, sd, epi = floats(row["grid_mean"]), floats(row["grid_sd"]), floats(row["grid_sd_epistemic"])
        noise = float(row["noise_sd"])
        near, far = d <= SHAPE["near"], d >= SHAPE["far"]
        inside = (xg >= x_train.min()) & (xg <= x_train.max())
        m, f = mean[inside], fg[inside]
        out = {
            "tv_ratio": float(np.abs(np.diff(m)).sum() / np.abs(np.diff(f)).sum()),
            "roughness": float(np.abs(np.diff(m, 2)).sum() / np.abs(np.diff(f, 2)).sum()),
            "fit_err": float(np.sqrt(np.mean((mean[near] - fg[near]) ** 2)) / noise),
            "epi_near": float(epi[near].max() / noise),
            "far_over_near": float(np.median(sd[far]) / np.median(sd[near])),
            "noise": noise,
        }
        out["smooth"] = meets(out)
        return out
    p = np.clip(floats(row["grid_p1"]), 1e-12, 1 - 1e-12)
    entropy = -(p * np.log(p) + (1 - p) * np.log(1 - p))
    e_near = float(np.median(entropy[d <= SHAPE["near_2d"]]))
    e_far = float(np.median(entropy[d >= SHAPE["far_2d"]]))
    ratio = e_far / e_near if e_near > 0 else float("inf")
    out = {"entropy_near": e_near, "entropy_far": e_far, "far_over_near": ratio}
    out["smooth"] = meets(out)
    return out


def shape_text(shape: dict) -> str:
    """One line of :func:`predictive_shape`'s numbers."""
    if not shape:
        return "n/a"
    if "tv_ratio" in shape:
        return (
            f"the mean's total variation {shape['tv_ratio']:.2f}x and its summed curvature "
            f"{shape['roughness']:.2f}x the true function's; error of the mean near the data "
            f"{shape['fit_err']:.2f} and largest weight sd there {shape['epi_near']:.2f} noise sds "
            f"(inferred noise sd {shape['noise']:.3f}); predictive sd far from the data "
            f"{shape['far_over_near']:.2f}x that near it"
        )
    return (
        f"entropy near data {shape['entropy_near']:.3f}, far {shape['entropy_far']:.3f}, "
        f"far/near {shape['far_over_near']:.3g}"
    )


PREFIX = "shape_"


def as_metrics(shape: dict) -> dict[str, float]:
    """`of_cell`'s reading as the cell's metrics: `shape_<name>` floats (`smooth` as 1.0 / 0.0)."""
    return {PREFIX + k: float(v) for k, v in shape.items()}


def recorded(row) -> dict:
    """The reading a cell recorded (its `shape_<name>` metrics) in `of_cell`'s form, `smooth` decided anew from its
    numbers (:func:`meets`); {} for a cell that did not complete or recorded none."""
    if row.get("status") != "completed":
        return {}
    out = {}
    for key, value in dict(row).items():
        if str(key).startswith(PREFIX) and value is not None and np.isfinite(float(value)):
            out[str(key)[len(PREFIX) :]] = float(value)
    if "smooth" not in out:
        return {}
    out["smooth"] = meets(out)  # under the current reading, whatever the cell recorded when it ran
    return out
