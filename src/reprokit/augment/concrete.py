"""Relaxed (concrete) Bernoulli gates with learnable keep probabilities (Maddison et al. 2016).

Used as a learnable mask over inputs (Fig. 2b, differentiable input selection) and as concrete dropout.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions.utils import clamp_probs


class ConcreteBernoulliMask(nn.Module):
    """Multiply features by gates z ~ RelaxedBernoulli(temperature, p_keep) during training.

    At evaluation the expected gate (p_keep) is used, so evaluation consumes no randomness.
    `logits` are the hyperparameters psi.

    Args:
        n_features: the width of the inputs' last dimension (inputs [N, n_features]).
        init_keep: the initial keep probability of every feature, in (0, 1).
        temperature: the relaxation temperature (smaller: gates closer to 0/1).
        generator: the torch.Generator the training gates are drawn from (on the inputs' device); None draws
            from torch's global generator (the pipeline's Fig. 2b cells, seeded by ``torch.manual_seed``).
    """

    def __init__(
        self,
        n_features: int,
        init_keep: float = 0.9,
        temperature: float = 0.1,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if not 0.0 < init_keep < 1.0:
            raise ValueError(f"init_keep must be in (0, 1), got {init_keep}")
        logit = torch.logit(torch.tensor(float(init_keep)))
        self.logits = nn.Parameter(torch.full((n_features,), float(logit)))
        self.temperature = float(temperature)
        self.generator = generator

    @property
    def keep_probability(self) -> torch.Tensor:
        return torch.sigmoid(self.logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x * self.keep_probability
        if self.generator is not None:  # RelaxedBernoulli(temperature, logits).rsample from the given generator
            shape = x.shape[:1] + self.logits.shape
            u = clamp_probs(torch.rand(shape, generator=self.generator, dtype=self.logits.dtype, device=x.device))
            return x * torch.sigmoid((u.log() - (-u).log1p() + self.logits) / self.temperature)
        temperature = torch.tensor(self.temperature, dtype=self.logits.dtype, device=self.logits.device)
        dist = torch.distributions.RelaxedBernoulli(temperature, logits=self.logits)
        gates = dist.rsample(x.shape[:1])
        return x * gates


class FixedInputMask(nn.Module):
    """Keep the first `n_keep` of `n_features` inputs (Fig. 2a's fixed masks)."""

    def __init__(self, n_features: int, n_keep: int):
        super().__init__()
        if not 0 < n_keep <= n_features:
            raise ValueError(f"n_keep must be in 1..{n_features}, got {n_keep}")
        mask = torch.zeros(n_features)
        mask[:n_keep] = 1.0
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask
