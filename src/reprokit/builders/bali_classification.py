"""BALI paper, classification benchmark (Sec. 5.3-5.5): Table 2, Fig. 2 (NLL curves), Fig. 3 (OOD ROC).

Grid axes: `method` (bali | dropout | map), `dataset` (spambase, magic, cdc_diabetes, mnist, fashion_mnist),
`seed`. For the UCI sets the seed is also the seed of the random 80/20 split (`registry.load(split=seed)`);
MNIST / FashionMNIST use the standard 60000/10000 split. The seed drives initialisation, minibatches and
weight / dropout-mask draws (methods/bali.py, methods/mc_dropout.py).

Data: UCI features are z-scored with training statistics (`standardize`); images are flattened pixels in
[0, 1], or with `standardize: global` shifted and scaled by the training pixels' one mean and sd (the OOD set of
Fig. 3 gets exactly the same treatment, with the ID set's statistics: `scaler`).

The cell's method wraps BaliMethod / MCDropout / MAP (training, state, Monte Carlo `sample_outputs`) and
adds this experiment's evaluation:

* curve rows (every `eval_every` iterations, or every `eval_every_epochs` epochs = round(epochs N / B)
  iterations): `{train,test}_{nll,ll,acc}` of the Monte Carlo predictive with `eval_samples` draws, on
  `train_eval_size` random training points and the test set (or a fixed `test_eval_size` subset of it);
* final metrics (Table 2): `test_{nll,ll,acc,ece}` and, binary, `test_auc`, on the whole test set with
  `final_samples` draws (ECE: 15 equal-width bins, reprokit.metrics); `train_{nll,acc}` likewise on the
  training evaluation subset;
* with `ood_dataset` (Fig. 3): the negative predictive entropy is the score, in-distribution (ID) test
  points are the positives, the OOD dataset's test split the negatives. `ood_auroc` (rank formula) and
  the ROC curve sampled at the fixed false-positive rates `metrics.ROC_FPR_GRID` as columns
  `roc_tpr_at_fpr_<f>` (see `metrics.tpr_at_fpr`), plus the mean predictive entropies `ood_entropy_{id,ood}`.
  The ROC lives in metrics.json and so in the aggregated table: one row per cell, no side file.

Run.info records the hyperparameters each cell actually used (resolved N_eff, sigma_u^2, evaluation
period, data sizes); Tables 5 and 6 are rendered from those columns.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import seeds
from ..bali import BaliConfig
from ..data import registry
from ..data.task import TaskData
from ..methods.bali import BaliMethod
from ..methods.mc_dropout import MAP, MCDropout
from ..methods.standard import OptimConfig
from ..metrics import ood_metrics, predictive_metrics, split_metrics
from ..plan.bali_classification import (  # noqa: F401 - IMAGES: for tests
    IMAGES,
    METHOD_TABLE,
    PLAN,
    UCI,
    ClassificationSettings,
)
from ..plan.methods import load_builder
from . import CellContext, Evaluation, Run

# ------------------------------------------------------------------------------------------------ data


def _subset(n: int, size: int | None, seed: int) -> torch.Tensor | None:
    """Sorted indices of a random subset of `size` of range(n) (None: everything)."""
    if size is None or int(size) >= n:
        return None
    rng = np.random.default_rng(int(seed))  # a stream seed (reprokit.seeds)
    return torch.from_numpy(np.sort(rng.permutation(n)[: int(size)]))


def _on(idx: torch.Tensor | None, device) -> torch.Tensor | None:
    return None if idx is None else idx.to(device)


def scaler(standardize: bool | str, x_train: torch.Tensor):
    """The input scaling of `standardize`, from the training inputs' statistics: False none; True a z-score
    per feature (a constant feature keeps sd 1); "global" one mean and sd over every feature (images: all
    pixels, as torchvision's Normalize with the dataset's mean and sd). Applied alike to train, test and OOD."""
    if not standardize:
        return lambda x: x
    x64 = x_train.to(torch.float64)
    if standardize == "global":
        mean, std = x64.mean(), x64.std(unbiased=False)
    else:
        mean, std = x64.mean(0), x64.std(0, unbiased=False)
    std = torch.where(std > 0, std, torch.ones_like(std))
    return lambda x: ((x.to(torch.float64) - mean) / std).float()


def load_task(st: ClassificationSettings, ctx: CellContext):
    """(the cell's TaskData (features flattened to [N, D] float32), the input scaling it applied (for the OOD
    set), facts about it)."""

    seed = int(st.seed)
    split = {"split": seed} if st.dataset in UCI else {}  # images: the standard split
    bundle = ctx.load(st.dataset, **split)
    n_total = bundle.n_train + bundle.n_test
    xtr, ytr = bundle.x_train.reshape(bundle.n_train, -1), bundle.y_train
    xte, yte = bundle.x_test.reshape(bundle.n_test, -1), bundle.y_test
    for name, (n, size) in {"train": (len(ytr), st.train_subset), "test": (len(yte), st.test_subset)}.items():
        idx = _subset(n, size, seeds.stream_seed(seed, f"{name}_subset"))
        if idx is not None and name == "train":
            xtr, ytr = xtr[idx], ytr[idx]
        elif idx is not None:
            xte, yte = xte[idx], yte[idx]
    scale = scaler(st.standardize, xtr)
    xtr, xte = scale(xtr), scale(xte)
    data = TaskData(
        xtr.contiguous(),
        ytr.long(),
        xte.contiguous(),
        yte.long(),
        task="classification",
        n_classes=int(bundle.n_classes),
    )
    return (
        data,
        scale,
        {
            "n_total": n_total,
            "n_train": data.n_train,
            "n_test": int(data.x_test.shape[0]),
            "n_features": int(xtr.shape[1]),
            "n_classes": int(bundle.n_classes),
        },
    )


def load_ood(st: ClassificationSettings, ctx: CellContext, scale) -> torch.Tensor:
    """Test images of the OOD dataset `ood_dataset`, flattened and scaled like the ID data (`scale`, from
    `load_task`; test_subset applies)."""
    bundle = ctx.load(st.ood_dataset)
    x = bundle.x_test.reshape(bundle.n_test, -1)
    idx = _subset(len(x), st.test_subset, seeds.stream_seed(int(st.seed), "ood_subset"))
    return scale(x if idx is None else x[idx]).contiguous()


# ------------------------------------------------------------------------------------------------ method


class ClassificationEvaluation:
    """This experiment's curve and final metrics of a BaliMethod / MCDropout / MAP (the cell's
    `Evaluation`): fixed train/test evaluation subsets, final metrics with ECE/AUC and OOD detection.

    Evaluation draws from generators re-seeded at every call (never the training ones), so curves and
    metrics do not depend on when a run was interrupted.
    """

    def __init__(
        self,
        inner,
        data: TaskData,
        seed: int,
        eval_samples: int,
        final_samples: int,
        train_eval_size: int | None,
        test_eval_size: int | None,
        ood_x: torch.Tensor | None = None,
        eval_batch_size: int = 4096,
    ):
        self.inner, self.data, self.seed = inner, data, int(seed)
        self.eval_samples, self.final_samples = int(eval_samples), int(final_samples)
        self.train_idx = _on(
            _subset(data.n_train, train_eval_size, seeds.stream_seed(seed, "train_eval_subset")), data.device
        )
        self.test_idx = _on(
            _subset(int(data.x_test.shape[0]), test_eval_size, seeds.stream_seed(seed, "test_eval_subset")), data.device
        )
        self.ood_x = ood_x
        self.eval_batch_size = int(eval_batch_size)

    def _train_split(self):
        d = self.data
        return (
            (d.x_train, d.y_train) if self.train_idx is None else (d.x_train[self.train_idx], d.y_train[self.train_idx])
        )

    def _sampler(self, stream: str):
        gen = seeds.generator(self.seed, stream, self.data.device)
        return lambda x, s: self.inner.sample_outputs(x, s, generator=gen)

    def _samples(self, x: torch.Tensor, n_samples: int, sample_fn) -> torch.Tensor:
        b = self.eval_batch_size
        return torch.cat([sample_fn(x[i : i + b], n_samples) for i in range(0, x.shape[0], b)], dim=1)

    @torch.no_grad()
    def evaluate(self, step: int) -> dict[str, float]:

        d = self.data
        test = (d.x_test, d.y_test) if self.test_idx is None else (d.x_test[self.test_idx], d.y_test[self.test_idx])
        return split_metrics(
            self._sampler("eval"),
            {"train": self._train_split(), "test": test},
            "classification",
            self.eval_samples,
            calibration_splits=(),
            batch_size=self.eval_batch_size,
        )

    @torch.no_grad()
    def final_metrics(self) -> dict[str, float]:

        sample_fn = self._sampler("final")
        d = self.data
        test_samples = self._samples(d.x_test, self.final_samples, sample_fn)
        out = {
            f"test_{k}": v
            for k, v in predictive_metrics(test_samples, d.y_test, "classification", calibration=True).items()
        }
        xt, yt = self._train_split()
        train = predictive_metrics(self._samples(xt, self.final_samples, sample_fn), yt, "classification")
        out.update({f"train_{k}": v for k, v in train.items()})
        if self.ood_x is not None:
            probs_id = torch.softmax(test_samples.to(torch.float64), -1).mean(0)
            ood_samples = self._samples(self.ood_x, self.final_samples, sample_fn)
            probs_ood = torch.softmax(ood_samples.to(torch.float64), -1).mean(0)
            out.update(ood_metrics(probs_id, probs_ood))
        return out


def build_bali(st: ClassificationSettings, data: TaskData, info: dict) -> BaliMethod:
    """Method `bali` (the table's builder): BaliMethod from the `bali` block; records what it ran with."""
    b = st.need("bali")
    batch, eval_samples = int(st.batch_size), int(st.eval_samples)
    cfg = BaliConfig(**b.config_kwargs(data.n_train, int(st.n_steps), batch))
    inner = BaliMethod(data, list(st.hidden), st.activation, cfg, batch, int(st.seed), n_eval_samples=eval_samples)
    info.update(
        {
            "alpha": cfg.alpha,
            "beta": cfg.beta,
            "beta_decay": cfg.beta_decay,
            "beta_milestones": " ".join(f"{m:g}" for m in cfg.beta_milestones),
            "sigma_r2": cfg.prior_var_r,
            "sigma_u2": cfg.prior_var_u,
            "sigma_u2_factor": cfg.sigma_u2_factor,
            "n_eff": cfg.n_eff,
            "wishart_n": cfg.wishart_n,
            "gram_dtype": cfg.gram_dtype or cfg.stats_dtype,
            "n_eff_divisor": float(b.n_eff_divisor),
            "sigma_init": cfg.sigma_init,
            "reparam": cfg.reparam,
            "scale_input_layer": cfg.scale_input_layer,
        }
    )
    return inner


def _adam(st: ClassificationSettings, info: dict, dropout_p: float) -> OptimConfig:
    o = st.need("optim")
    optim = OptimConfig(
        optimizer="adam", lr=float(o.lr), weight_decay=float(o.weight_decay), batch_size=int(st.batch_size)
    )
    info.update({"optimizer": "adam", "lr": optim.lr, "weight_decay": optim.weight_decay, "dropout_p": dropout_p})
    return optim


def build_dropout(st: ClassificationSettings, data: TaskData, info: dict) -> MCDropout:
    """Method `dropout` (the table's builder): MC dropout trained with Adam (`optim`, `dropout_p`)."""
    p = float(st.need("dropout_p"))
    optim = _adam(st, info, p)
    hidden, n_eval = list(st.hidden), int(st.eval_samples)
    return MCDropout(data, hidden, st.activation, p, optim, int(st.n_steps), int(st.seed), n_eval_samples=n_eval)


def build_map(st: ClassificationSettings, data: TaskData, info: dict) -> MAP:
    """Method `map` (the table's builder): the same network without dropout, trained with Adam (`optim`)."""
    optim = _adam(st, info, 0.0)
    return MAP(data, list(st.hidden), st.activation, optim, int(st.n_steps), int(st.seed))


def build(cell, ctx: CellContext) -> Run:

    st = PLAN.typed_settings(cell)
    method, dataset, seed = st.method, str(st.dataset), int(st.seed)
    data, scale, info = load_task(st, ctx)
    data = ctx.runtime.to(data)  # once; methods build their models and generators on data.device
    n_steps, batch = int(st.n_steps), int(st.batch_size)
    hidden, activation = list(st.hidden), st.activation
    eval_samples, final_samples = int(st.eval_samples), int(st.final_samples)
    eval_every = st.eval_every_steps(data.n_train)
    info.update(
        {
            "dataset_name": dataset,
            "batch_size": batch,
            "n_steps": n_steps,
            "eval_every": eval_every,
            "eval_doubling_until": int(st.eval_doubling_until),
            "evals_per_doubling": int(st.evals_per_doubling),
            "eval_samples": eval_samples,
            "final_samples": final_samples,
            "hidden": "x".join(map(str, hidden)),
            "activation": activation,
            "standardize": st.standardize,
        }
    )
    if st.stop_at is not None:  # the first stop_at iterations of the n_steps run
        info["stop_at"] = int(st.stop_at)
    inner = load_builder(METHOD_TABLE[method])(st, data, info)
    ood_x = None
    if st.ood_dataset:
        info["ood_dataset"] = st.ood_dataset
        try:
            ood_x = load_ood(st, ctx, scale).to(data.device)
            info["n_ood"] = int(ood_x.shape[0])
        except registry.DatasetUnavailable as err:  # Table 2 / Fig. 2 still get this cell; Fig. 3 shows n/a
            info["ood_note"] = f"OOD dataset {st.ood_dataset} unavailable: " + str(err).splitlines()[0]
    ev = ClassificationEvaluation(
        inner, data, seed, eval_samples, final_samples, st.train_eval_size, st.test_eval_size, ood_x
    )
    return Run(
        inner,
        st.steps_run,
        eval_every,
        info=info,
        evaluation=Evaluation(ev.evaluate, ev.final_metrics),
        eval_doubling_until=int(st.eval_doubling_until),
        evals_per_doubling=int(st.evals_per_doubling),
    )
