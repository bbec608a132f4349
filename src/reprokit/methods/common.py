"""Pieces several methods share: minibatch samplers, likelihoods and metrics (the task data: data/task.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import seeds
from ..data.task import TaskData
from ..metrics import split_metrics


class EpochSampler:
    """Shuffled minibatches without replacement, reshuffled each epoch; checkpointable. An epoch's last,
    incomplete batch is skipped, or with `keep_last` returned smaller (Keras' fit)."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator, keep_last: bool = False):
        self.n, self.batch_size, self.gen = n, min(batch_size, n), generator
        self.keep_last = bool(keep_last)
        self.perm = torch.randperm(n, generator=generator, device=generator.device)  # on the generator's device
        self.pos = 0

    def next(self) -> torch.Tensor:
        if self.pos + (1 if self.keep_last else self.batch_size) > self.n:
            self.perm = torch.randperm(self.n, generator=self.gen, device=self.gen.device)
            self.pos = 0
        idx = self.perm[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state_dict(self) -> dict:
        return {"perm": self.perm.clone(), "pos": self.pos, "gen": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.perm, self.pos = state["perm"].to(self.gen.device, copy=True), int(state["pos"])
        self.gen.set_state(state["gen"])


def log_likelihood(output: torch.Tensor, y: torch.Tensor, task: str, noise_std: float = 1.0) -> torch.Tensor:
    """Per-example log-likelihood: categorical on logits, or Gaussian with fixed noise."""
    if task == "classification":
        return -F.cross_entropy(output, y, reduction="none")
    dist = torch.distributions.Normal(output, noise_std)
    return dist.log_prob(y).sum(-1)


@torch.no_grad()
def predict_batched(net: torch.nn.Module, x: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    return torch.cat([net(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)])


@torch.no_grad()
def classification_metrics(logits: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    ll = -F.cross_entropy(logits, y, reduction="mean")
    acc = (logits.argmax(-1) == y).float().mean()
    return {"acc": float(acc), "ll": float(ll)}


class PredictiveEvaluation:
    """Mixin for Bayesian methods (BALI, MC dropout, BBB, MAP): `evaluate`/`final_metrics` from Monte Carlo
    output samples via `reprokit.metrics.split_metrics`.

    The class defines `sample_outputs(x, n_samples, generator) -> [S, B, D]`, `noise_cov()` (regression)
    and calls `_setup_eval(...)` in its constructor. Evaluation draws from a generator re-seeded at every
    call, so it never touches the training generators and is reproducible. Metrics: `{train,test}_{nll,
    ll, rmse|acc}` and, on the test split, `test_ece` and (binary) `test_auc`; regression metrics are in
    the targets' original units when `y_std` (the standardisation scale) is given.
    """

    def _setup_eval(
        self,
        data: TaskData,
        seed: int,
        n_eval_samples: int,
        y_std=None,
        train_eval_size: int | None = None,
        eval_batch_size: int = 8192,
    ) -> None:
        self.eval_data = data
        self.eval_seed = int(seed)
        self.eval_device = data.device
        self.n_eval_samples = int(n_eval_samples)
        self.y_std = y_std
        self.eval_batch_size = int(eval_batch_size)
        self.train_eval_idx = None
        if train_eval_size is not None and int(train_eval_size) < data.n_train:
            idx = (
                torch.randperm(data.n_train, generator=seeds.generator(seed, "train_eval_subset"))[
                    : int(train_eval_size)
                ]
                .sort()
                .values
            )
            self.train_eval_idx = idx.to(data.device)

    def eval_splits(self) -> dict:
        d = self.eval_data
        xt, yt = d.x_train, d.y_train
        if self.train_eval_idx is not None:
            xt, yt = xt[self.train_eval_idx], yt[self.train_eval_idx]
        return {"train": (xt, yt), "test": (d.x_test, d.y_test)}

    def noise_cov(self) -> torch.Tensor:
        raise NotImplementedError

    @torch.no_grad()
    def evaluate(self, step: int, n_samples: int | None = None) -> dict[str, float]:
        """Metrics from `n_samples` Monte Carlo draws (default: the constructor's `n_eval_samples`)."""

        gen = seeds.generator(self.eval_seed, "eval", self.eval_device)  # the same draws at every evaluation
        regression = self.eval_data.task == "regression"
        return split_metrics(
            lambda x, s: self.sample_outputs(x, s, generator=gen),
            self.eval_splits(),
            self.eval_data.task,
            self.n_eval_samples if n_samples is None else int(n_samples),
            noise_cov=self.noise_cov if regression else None,
            y_std=self.y_std,
            batch_size=self.eval_batch_size,
        )

    def final_metrics(self, n_samples: int | None = None) -> dict[str, float]:
        out = self.evaluate(-1, n_samples)
        if self.eval_data.task == "regression":
            cov = self.noise_cov()
            sd = torch.diagonal(torch.as_tensor(cov, dtype=torch.float64, device=self.eval_device)).sqrt()
            if self.y_std is not None:
                sd = sd * torch.as_tensor(self.y_std, dtype=torch.float64, device=self.eval_device).reshape(-1)
            out["noise_sd"] = float(sd.mean())
        return out
