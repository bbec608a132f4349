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
It also records what its figure draws besides the predictive (reprokit.predictive_shape.plot_points: the training points,
the plotting grid and, for regression, the true function), so the figures never reload the data.
"""

from __future__ import annotations

import json

import torch

from .. import predictive_shape, seeds
from ..bali import BaliConfig
from ..data import registry
from ..data.task import TaskData
from ..methods.bali import BaliMethod
from ..methods.bbb import BBBMethod
from ..methods.standard import OptimConfig
from ..plan.methods import load_builder
from ..plan.synthetic_predictive import METHOD_TABLE, PLAN, SyntheticSettings
from . import CellContext, Evaluation, Run


def load(st: SyntheticSettings):

    b = registry.load(st.dataset, **st.data_kwargs())
    data = TaskData(b.x_train, b.y_train, b.x_test, b.y_test, task=b.task, n_classes=b.n_classes)
    return data, b.meta["x_grid"], predictive_shape.plot_points(b)


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


def _batch(st, data) -> int:
    return min(int(st.batch_size or data.n_train), data.n_train)


def build_bali(st, data, info: dict) -> BaliMethod:
    """Method `bali` (the table's builder): BALI with the priors of the dataset's task; records what it ran with."""
    b, t = st.need("bali"), st.need(data.task)
    batch, n_steps = _batch(st, data), int(st.n_steps)
    cfg = BaliConfig(
        alpha=float(b.alpha),
        beta=float(b.beta),
        beta_milestones=tuple(b.beta_milestones),
        beta_decay=float(b.beta_decay),
        n_iterations=n_steps,
        n_eff=float(data.n_train),
        n_data=float(data.n_train),
        sigma_init=float(t.sigma_init),
        sigma_r=float(t.sigma_r),
        sigma_u2_factor=float(t.sigma_u2_factor),
        batch_size=batch,
        reparam=b.reparam,
        wishart_n="n",
        **b.library_options(),
    )  # N_eff = N here: both readings count the same N
    inner = BaliMethod(
        data, list(st.hidden), st.activation, cfg, batch, int(st.seed), n_eval_samples=int(st.eval_samples)
    )
    info.update(
        {
            "alpha": cfg.alpha,
            "beta": cfg.beta,
            "sigma_init": cfg.sigma_init,
            "sigma_r": float(t.sigma_r),
            "sigma_u2": cfg.prior_var_u,
            "n_eff": cfg.n_eff,
            "reparam": cfg.reparam,
        }
    )
    return inner


def build_bbb(st, data, info: dict) -> BBBMethod:
    """Method `bbb` (the table's builder): Bayes by Backprop with the cell's KL factor."""
    b = st.need("bbb")
    kl = float(st.kl_factor)
    optim = OptimConfig(optimizer="adam", lr=float(b.lr), batch_size=_batch(st, data))
    inner = BBBMethod(
        data,
        list(st.hidden),
        st.activation,
        kl,
        optim,
        int(st.n_steps),
        int(st.seed),
        prior_sigma=float(b.prior_sigma),
        init_sigma=float(b.init_sigma),
        noise_std=b.noise_std,
        init_noise_std=float(b.init_noise_std),
        n_eval_samples=int(st.eval_samples),
    )
    info.update(
        {"kl_factor": kl, "lr": optim.lr, "prior_sigma": float(b.prior_sigma), "init_sigma": float(b.init_sigma)}
    )
    return inner


def build(cell, ctx: CellContext) -> Run:

    st = PLAN.typed_settings(cell)
    method, dataset, seed = st.method, str(st.dataset), int(st.seed)
    data, x_grid, points = load(st)
    data, x_grid = ctx.runtime.to(data), ctx.runtime.to(x_grid)  # once; methods follow data.device
    hidden, activation = list(st.hidden), st.activation
    n_steps = int(st.n_steps)
    batch, final_samples = _batch(st, data), int(st.final_samples)
    info = {
        "dataset_name": dataset,
        "task": data.task,
        "n_train": data.n_train,
        "n_test": int(data.x_test.shape[0]),
        "data_kwargs": json.dumps(st.data_kwargs()),
        "hidden": "x".join(map(str, hidden)),
        "activation": activation,
        "n_steps": n_steps,
        "batch_size": batch,
        "final_samples": final_samples,
    }
    inner = load_builder(METHOD_TABLE[method])(st, data, info)

    def final() -> dict:
        out = {
            **inner.final_metrics(n_samples=final_samples),
            **grid_predictive(inner, x_grid, data.task, final_samples, seed),
        }
        # Fig. 1's shape reading, recorded so the report reads numbers instead of reloading the data
        row = {**out, "status": "completed", "dataset": dataset, "data_kwargs": info["data_kwargs"]}
        return {**out, **predictive_shape.as_metrics(predictive_shape.of_cell(row)), **points}

    return Run(inner, n_steps, int(st.eval_every), info=info, evaluation=Evaluation(inner.evaluate, final))
