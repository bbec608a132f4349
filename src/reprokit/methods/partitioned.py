"""Partitioned networks (Mlodozeniec et al. 2023, Sec. 3 and App. I.1).

Each iteration: a parameter step (k ~ Cat(u), batch from D_1:k with replacement, update only
partition k with the partition-aware optimiser) followed, when there are hyperparameters psi, by a
hyper step (k ~ Cat(u_2..u_C), batch from D_k, loss of subnetwork k-1, Adam on psi). The LML
objective (Eq. 2, sum of out-of-chunk log-likelihoods) is evaluated on every evaluation and used for
early stopping / model selection when `early_stopping` is set; train/test metrics are those of the
full subnetwork C. A kind that measures something else (augmentation-averaged predictions on a test
subset) gives its cell an `Evaluation` (builders/).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .. import seeds
from ..data.task import TaskData
from ..partition import PartitionedAdam, PartitionedSGD, PartitionSchedule, lml_estimate
from .common import log_likelihood
from .standard import OptimConfig, evaluate_classifier, make_scheduler


def optimised_params(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The tensors an optimiser updates (what its update should differentiate, nothing more)."""
    return [p for g in opt.param_groups for p in g["params"] if p.requires_grad]


def param_update(pmodel, opt, k: int, loss_fn: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> torch.Tensor:
    """Partitioned parameter update (App. I.1): loss of subnetwork k, gradients for `params` only (the
    network weights: psi gets none, so a parameter update costs no more than a standard one), then the
    partition-aware step on partition k."""
    with pmodel.subnetwork(k):
        loss = loss_fn()
    opt.zero_grad(set_to_none=True)
    loss.backward(inputs=params)
    opt.step(k)
    return loss.detach()


def hyper_update(
    pmodel, hyper_opt, k: int, loss_fn: Callable[[], torch.Tensor], hyper_params: list[torch.Tensor]
) -> torch.Tensor:
    """Partitioned hyperparameter update (App. I.1): k >= 2 is the chunk the batch came from; the loss is
    that of subnetwork k-1 and only psi is differentiated (no weight gradients are computed)."""
    with pmodel.subnetwork(k - 1):
        loss = loss_fn()
    hyper_opt.zero_grad(set_to_none=True)
    loss.backward(inputs=hyper_params)
    hyper_opt.step()
    return loss.detach()


@dataclass
class PartitionedConfig:
    chunk_proportions: list[float]
    optim: OptimConfig = field(default_factory=OptimConfig)
    wd_scaling: str = "reciprocal"  # "reciprocal" | "sqrt" | "none" (App. I.1 / I.4)
    hyper_lr: float = 1e-3
    early_stopping: bool = False
    eval_batch_size: int = 4096


class PartitionedTraining:
    """`net` maps inputs to outputs and contains `pmodel` (the partitioned model) and the
    hyperparameter modules whose parameters are `hyper_params`."""

    def __init__(
        self,
        net: nn.Module,
        pmodel,
        hyper_params: list[nn.Parameter],
        data: TaskData,
        chunk_ids: torch.Tensor,
        cfg: PartitionedConfig,
        n_steps: int,
        seed: int,
    ):
        self.net, self.pmodel, self.data, self.cfg = net, pmodel, data, cfg
        self.chunk_ids = torch.as_tensor(chunk_ids, dtype=torch.long)
        n_chunks = len(cfg.chunk_proportions)
        self.chunk_sizes = [int((self.chunk_ids == c).sum()) for c in range(n_chunks)]
        if min(self.chunk_sizes) == 0:
            raise ValueError(f"empty data chunk: chunk sizes {self.chunk_sizes}")
        self.proportions = [s / sum(self.chunk_sizes) for s in self.chunk_sizes]
        opt_kw = dict(
            lr=cfg.optim.lr,
            weight_decay=cfg.optim.weight_decay,
            chunk_sizes=self.chunk_sizes,
            wd_scaling=cfg.wd_scaling,
        )
        if cfg.optim.optimizer == "adam":
            self.opt = PartitionedAdam(pmodel, **opt_kw)
        elif cfg.optim.optimizer == "sgd":
            self.opt = PartitionedSGD(pmodel, momentum=cfg.optim.momentum, **opt_kw)
        else:
            raise ValueError(f"optimizer '{cfg.optim.optimizer}' unknown (valid: adam, sgd)")
        self.sched = make_scheduler(self.opt, cfg.optim, n_steps)  # annealed on the global step (App. I.1)
        self.hyper_params = list(hyper_params)
        hyper_ids = {id(p) for p in self.hyper_params}
        self.weight_params = [p for p in optimised_params(self.opt) if id(p) not in hyper_ids]
        self.hyper_opt = torch.optim.Adam(self.hyper_params, lr=cfg.hyper_lr) if self.hyper_params else None
        self.schedule = PartitionSchedule(
            self.chunk_ids.to(torch.uint8), self.proportions, seeds.generator(seed, "minibatches"), device=data.device
        )
        self.best: dict | None = None

    def _batch_loss(self, idx: torch.Tensor) -> Callable[[], torch.Tensor]:
        def loss_fn():
            out = self.net(self.data.x_train[idx])
            return -log_likelihood(out, self.data.y_train[idx], self.data.task).mean()

        return loss_fn

    def train_step(self, step: int) -> dict[str, float]:
        self.net.train()
        bs = self.cfg.optim.batch_size
        k, idx = self.schedule.param_step(bs)
        loss = param_update(self.pmodel, self.opt, k, self._batch_loss(idx), self.weight_params)
        if self.sched is not None:
            self.sched.step()
        out = {"loss": loss.item(), "k": k}
        if self.hyper_opt is not None:
            kh, idx_h = self.schedule.hyper_step(bs)
            hyper_loss = hyper_update(self.pmodel, self.hyper_opt, kh, self._batch_loss(idx_h), self.hyper_params)
            out["hyper_loss"] = hyper_loss.item()
        return out

    def lml(self) -> float:
        self.net.eval()
        chunks = range(len(self.chunk_sizes))
        xs = [self.data.x_train[self.chunk_ids == c] for c in chunks]
        ys = [self.data.y_train[self.chunk_ids == c] for c in chunks]
        fn = lambda out, y: log_likelihood(out, y, self.data.task)  # noqa: E731
        value = lml_estimate(self.pmodel, xs, ys, fn, self.cfg.eval_batch_size, predict_fn=lambda _pm, x: self.net(x))
        self.net.train()
        return float(value)

    def evaluate(self, step: int) -> dict[str, float]:
        metrics = {"lml": self.lml()}
        with self.pmodel.subnetwork(self.pmodel.num_partitions):
            metrics.update(evaluate_classifier(self.net, self.data))
        if self.cfg.early_stopping and step >= 0:
            if self.best is None or metrics["lml"] > self.best["lml"]:
                self.best = {**metrics, "best_step": step}
        return metrics

    def final_metrics(self) -> dict[str, float]:
        last = self.evaluate(-1)
        if self.cfg.early_stopping and self.best is not None:
            return {**self.best, **{f"last_{k}": v for k, v in last.items()}}
        return last

    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "opt": self.opt.state_dict(),
            "hyper_opt": self.hyper_opt.state_dict() if self.hyper_opt else None,
            "sched": self.sched.state_dict() if self.sched else None,
            "schedule": self.schedule.state_dict(),
            "best": self.best,
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        if self.hyper_opt is not None:
            self.hyper_opt.load_state_dict(state["hyper_opt"])
        if self.sched is not None:
            self.sched.load_state_dict(state["sched"])
        self.schedule.load_state_dict(state["schedule"])
        self.best = state["best"]
