"""BALI paper Sec. 5.1 / App. H.1 / App. I.2: posterior predictives on synthetic data (Fig. 1, Figs. 4-6).

Grid axes: `method` (bali | bbb), `dataset` (sines_trend | sinc | two_moons), `kl_factor` (Bayes by
Backprop's KL down-weighting factor; ignored by BALI, whose grid has the single value 1), `seed`
(initialisation and minibatches; the data sample is fixed by `data_seed`).

Settings per task (`regression` / `classification` blocks, chosen by the dataset's task) hold the BALI
priors of App. H.1. Final metrics: test NLL / RMSE or ACC and the Monte Carlo predictive (`final_samples`
draws, 256 in the paper) on the dataset's plotting grid, stored as space-separated strings so that the
tidy CSV carries everything the figures need:
  regression:     grid_mean, grid_sd (total predictive sd = sqrt(Var_s f_s + noise)), grid_sd_epistemic
  classification: grid_p1 (predictive p(class 1)), grid_p1_sd (sd of p(class 1) over samples)
The figures regenerate the training points from `data_kwargs` (JSON in the row; synthetic data are
deterministic).
"""

from __future__ import annotations

import json

import torch

from .. import seeds
from ..data import registry
from ..plan.synthetic_predictive import DATASETS, METHODS
from . import CellContext, Evaluation, Run


def data_kwargs(dataset: str, settings: dict) -> dict:
    kw = {"seed": int(settings["data_seed"])}
    kw.update({k: v for k, v in (settings.get("data", {}).get(dataset) or {}).items()})
    return kw


def load(dataset: str, settings: dict):
    from ..methods.common import TaskData
    if dataset not in DATASETS:
        raise ValueError(f"synthetic_predictive: dataset '{dataset}' unknown (valid: {', '.join(DATASETS)})")
    b = registry.load(dataset, **data_kwargs(dataset, settings))
    data = TaskData(b.x_train, b.y_train, b.x_test, b.y_test, task=b.task, n_classes=b.n_classes)
    return data, b.meta["x_grid"]


def _fmt(t: torch.Tensor) -> str:
    return " ".join(f"{v:.5g}" for v in t.reshape(-1).tolist())


@torch.no_grad()
def grid_predictive(method, x_grid: torch.Tensor, task: str, n_samples: int, seed: int) -> dict[str, str]:
    """The predictive on the plotting grid (BALI Figs. 1, 4-6) as space-separated numbers: regression mean
    and total / epistemic sd, classification mean and sd of p(class 1)."""
    gen = seeds.generator(seed, "grid", x_grid.device)
    samples = method.sample_outputs(x_grid, n_samples, generator=gen).to(torch.float64)
    if task == "regression":
        mean = samples.mean(0)[:, 0]
        epi = samples.var(0, unbiased=False)[:, 0]
        noise = float(torch.as_tensor(method.noise_cov(), dtype=torch.float64, device=x_grid.device).reshape(-1)[0])
        return dict(grid_mean=_fmt(mean), grid_sd=_fmt((epi + noise).sqrt()), grid_sd_epistemic=_fmt(epi.sqrt()))
    p1 = torch.softmax(samples, -1)[..., 1]
    return dict(grid_p1=_fmt(p1.mean(0)), grid_p1_sd=_fmt(p1.std(0, unbiased=False)))


def build(cell, ctx: CellContext) -> Run:
    from ..bali import BaliConfig
    from ..methods.bali import BaliMethod
    from ..methods.bbb import BBBMethod
    from ..methods.standard import OptimConfig
    s, c = cell.settings, cell.coord_dict
    method, dataset, seed = c["method"], str(c["dataset"]), int(c["seed"])
    if method not in METHODS:
        raise ValueError(f"synthetic_predictive: method '{method}' unknown (valid: {', '.join(METHODS)})")
    data, x_grid = load(dataset, s)
    data, x_grid = ctx.runtime.to(data), ctx.runtime.to(x_grid)  # once; methods follow data.device
    t = s[data.task]
    hidden, activation = list(s["hidden"]), s["activation"]
    n_steps = int(s["n_steps"])
    batch = min(int(s.get("batch_size") or data.n_train), data.n_train)
    info = {"dataset_name": dataset, "task": data.task, "n_train": data.n_train, "n_test": int(data.x_test.shape[0]),
            "data_kwargs": json.dumps(data_kwargs(dataset, s)), "hidden": "x".join(map(str, hidden)),
            "activation": activation, "n_steps": n_steps, "batch_size": batch,
            "final_samples": int(s["final_samples"])}
    if method == "bali":
        b = s["bali"]
        cfg = BaliConfig(alpha=float(b["alpha"]), beta=float(b["beta"]), n_iterations=n_steps, n_eff=float(data.n_train),
                         sigma_init=float(t["sigma_init"]), sigma_r=float(t["sigma_r"]),
                         sigma_u2_factor=float(t["sigma_u2_factor"]), batch_size=batch, reparam=b.get("reparam", "weight"))
        inner = BaliMethod(data, hidden, activation, cfg, batch, seed, n_eval_samples=int(s["eval_samples"]))
        info.update({"alpha": cfg.alpha, "beta": cfg.beta, "sigma_init": cfg.sigma_init, "sigma_r": float(t["sigma_r"]),
                     "sigma_u2": cfg.prior_var_u, "n_eff": cfg.n_eff, "reparam": cfg.reparam})
    else:
        b = s["bbb"]
        kl = float(c["kl_factor"])
        optim = OptimConfig(optimizer="adam", lr=float(b["lr"]), batch_size=batch)
        inner = BBBMethod(data, hidden, activation, kl, optim, n_steps, seed, prior_sigma=float(b["prior_sigma"]),
                          init_sigma=float(b["init_sigma"]), n_eval_samples=int(s["eval_samples"]))
        info.update({"kl_factor": kl, "lr": optim.lr, "prior_sigma": float(b["prior_sigma"]),
                     "init_sigma": float(b["init_sigma"])})
    final_samples = int(s["final_samples"])

    def final() -> dict:
        return {**inner.final_metrics(n_samples=final_samples),
                **grid_predictive(inner, x_grid, data.task, final_samples, seed)}

    return Run(inner, n_steps, int(s["eval_every"]), info=info, evaluation=Evaluation(inner.evaluate, final))
