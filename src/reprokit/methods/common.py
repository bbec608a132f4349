"""Pieces several methods share: the task data, minibatch samplers, likelihoods and metrics."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class TaskData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    task: str = "classification"  # or "regression"
    n_classes: int | None = None

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])


class EpochSampler:
    """Shuffled minibatches without replacement, reshuffled each epoch; checkpointable."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator):
        self.n, self.batch_size, self.gen = n, min(batch_size, n), generator
        self.perm = torch.randperm(n, generator=generator)
        self.pos = 0

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.n:
            self.perm = torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state_dict(self) -> dict:
        return {"perm": self.perm.clone(), "pos": self.pos, "gen": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.perm, self.pos = state["perm"].clone(), int(state["pos"])
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
