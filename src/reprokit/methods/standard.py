"""Standard training on all of the training data ("Baseline" / MAP): one optimiser, no partitions.

Hyperparameter modules inside `net` (input masks, augmentations) are held fixed, unless their
parameters are passed as `hyper_params`: they are then optimised jointly on the training loss by
their own Adam (Augerino, methods/augerino.py), and a subclass may add a `regularizer()` term.
`evaluate` is plain train/test accuracy and log-likelihood; a kind that measures something else
(augmentation-averaged predictions, a test subset) gives its cell an `Evaluation` (builders/).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .. import seeds
from ..data.task import TaskData
from ..typed import numbers_of
from .common import EpochSampler, classification_metrics, log_likelihood, predict_batched


@dataclass
class OptimConfig:
    optimizer: str = "adam"  # "adam" | "sgd"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 256
    lr_schedule: str = "constant"  # "constant" | "cosine"
    cosine_final_factor: float = 0.01  # cosine decays the lr by 100x (App. I.4)
    cosine_steps: int | None = None  # cosine over the first cosine_steps steps, then held (None: all steps)

    def __post_init__(self):
        # a string from YAML ("1e-3") is converted, anything else that is not a number refused, naming the field
        numbers_of(
            self,
            floats=("lr", "momentum", "weight_decay", "cosine_final_factor"),
            ints=("batch_size", "cosine_steps"),
            optional=("cosine_steps",),
        )


def make_optimizer(params, cfg: OptimConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    raise ValueError(f"optimizer '{cfg.optimizer}' unknown (valid: adam, sgd)")


class CosineThenHold(torch.optim.lr_scheduler.CosineAnnealingLR):
    """Cosine annealing over the first ``T_max`` steps, then the final learning rate held (Table 2: "decaying
    the learning rate with Cosine Annealing for the first 60000 iterations" of 80000)."""

    def get_lr(self):
        if self.last_epoch > self.T_max:
            return [group["lr"] for group in self.optimizer.param_groups]
        return super().get_lr()


def make_scheduler(opt: torch.optim.Optimizer, cfg: OptimConfig, n_steps: int):
    """The learning-rate schedule of every method (the scheduler steps once per training step):
    constant, or cosine decay by ``1 / cosine_final_factor`` over ``n_steps`` or, with ``cosine_steps``,
    over the first ``cosine_steps`` steps and then held."""
    if cfg.lr_schedule == "constant":
        return None
    if cfg.lr_schedule == "cosine":
        eta_min = cfg.lr * cfg.cosine_final_factor
        if cfg.cosine_steps is not None and int(cfg.cosine_steps) < n_steps:
            return CosineThenHold(opt, T_max=max(1, int(cfg.cosine_steps)), eta_min=eta_min)
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=n_steps, eta_min=eta_min)
    raise ValueError(f"lr_schedule '{cfg.lr_schedule}' unknown (valid: constant, cosine)")


def evaluate_classifier(net: nn.Module, data: TaskData) -> dict[str, float]:
    was_training = net.training
    net.eval()
    out = {}
    for split, x, y in (("train", data.x_train, data.y_train), ("test", data.x_test, data.y_test)):
        for key, value in classification_metrics(predict_batched(net, x), y).items():
            out[f"{split}_{key}"] = value
    net.train(was_training)
    return out


class StandardTraining:
    def __init__(
        self,
        net: nn.Module,
        data: TaskData,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        hyper_params: list[nn.Parameter] | None = None,
        hyper_lr: float = 1e-3,
    ):
        self.net, self.data, self.cfg = net, data, optim
        self.hyper_params = list(hyper_params or [])
        hyper_ids = {id(p) for p in self.hyper_params}
        trainable = [p for p in net.parameters() if p.requires_grad and id(p) not in hyper_ids]
        self.opt = make_optimizer(trainable, optim)
        self.sched = make_scheduler(self.opt, optim, n_steps)
        self.hyper_opt = torch.optim.Adam(self.hyper_params, lr=hyper_lr) if self.hyper_params else None
        self.sampler = EpochSampler(data.n_train, optim.batch_size, seeds.generator(seed, "minibatches", data.device))

    def data_nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Hook: mean negative log-likelihood of a minibatch (default: categorical on logits, or Gaussian
        with unit noise). MC dropout / MAP regression override it with a learned noise scale."""
        return -log_likelihood(out, y, self.data.task).mean()

    def regularizer(self) -> torch.Tensor | None:
        """Hook: a term added to the training loss (None: nothing added)."""
        return None

    def train_step(self, step: int) -> dict[str, float]:
        idx = self.sampler.next()
        self.net.train()
        out = self.net(self.data.x_train[idx])
        loss = self.data_nll(out, self.data.y_train[idx])
        reg = self.regularizer()
        total = loss if reg is None else loss + reg
        self.opt.zero_grad(set_to_none=True)
        if self.hyper_opt is not None:
            self.hyper_opt.zero_grad(set_to_none=True)
        total.backward()
        self.opt.step()
        if self.hyper_opt is not None:
            self.hyper_opt.step()
        if self.sched is not None:
            self.sched.step()
        if reg is None:
            return {"loss": loss.item()}
        return {"loss": total.item(), "nll": loss.item(), "reg": reg.item()}

    def evaluate(self, step: int) -> dict[str, float]:
        return evaluate_classifier(self.net, self.data)

    def final_metrics(self) -> dict[str, float]:
        return self.evaluate(-1)

    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict() if self.sched else None,
            "sampler": self.sampler.state_dict(),
            **({"hyper_opt": self.hyper_opt.state_dict()} if self.hyper_opt is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        if self.sched is not None:
            self.sched.load_state_dict(state["sched"])
        self.sampler.load_state_dict(state["sampler"])
        if self.hyper_opt is not None:
            self.hyper_opt.load_state_dict(state["hyper_opt"])
