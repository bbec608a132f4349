"""Concrete (relaxed-Bernoulli) dropout with a learnable drop rate.

Used by the federated experiments (App. J: "learnable dropout using the continuous relaxation of
Maddison et al. (2016) between layers", initialised to drop 10 % of hidden activations).

Semantics (inverted dropout, as ``nn.Dropout``):

* training: ``y = x * z / (1 - p)`` with an element-wise keep mask
  ``z ~ RelaxedBernoulli(temperature, probs=1 - p)``, reparametrised, so ``dy/d drop_logit`` exists;
* eval: ``y = x`` (the expectation of the relaxed mask is ~(1 - p), the rescaling removes it).

The only parameter is the scalar ``drop_logit`` = logit(p). It is a *hyperparameter* (part of psi),
not a model weight; :func:`concrete_dropout_parameters` collects them from a model so that training
code can route them to the hyperparameter optimiser and keep them out of weight partitioning.

Self-contained on purpose: the lead's ``reprokit.augment.concrete`` (a relaxed-Bernoulli mask module)
did not exist when this was written.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import RelaxedBernoulli
from torch.distributions.utils import clamp_probs

__all__ = ["ConcreteDropout", "concrete_dropout_parameters", "make_dropout"]


def _logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


class ConcreteDropout(nn.Module):
    """Dropout whose rate p = sigmoid(drop_logit) is learnable through a binary-concrete relaxation.

    Args:
        p: initial drop probability, in (0, 1).
        temperature: relaxation temperature (0.1 as in Gal et al. 2017's concrete dropout).
        learnable: if False the logit is kept as a buffer (fixed rate, same relaxed noise).
        eps: the drop probability is clamped to [eps, 1 - eps] so the 1/(1-p) rescaling stays finite.
        generator: the torch.Generator the training noise is drawn from (on the inputs' device); None draws
            from torch's global generator.
    """

    def __init__(
        self,
        p: float = 0.1,
        temperature: float = 0.1,
        learnable: bool = True,
        eps: float = 1e-6,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if not 0.0 < p < 1.0:
            raise ValueError(f"ConcreteDropout needs 0 < p < 1, got {p}")
        self.temperature = float(temperature)
        self.eps = float(eps)
        self.learnable = bool(learnable)
        logit = torch.tensor([_logit(p)])
        if learnable:
            self.drop_logit = nn.Parameter(logit)
        else:
            self.register_buffer("drop_logit", logit)
        # Uniforms in [0, 1) of x's shape that replace the draw of the next forward passes (the federated
        # clients draw theirs from their own generators, outside torch.func.vmap); None: draw.
        self.noise: torch.Tensor | None = None
        self.generator = generator

    @property
    def p(self) -> torch.Tensor:
        """Current drop probability (differentiable, shape (1,))."""
        return torch.sigmoid(self.drop_logit).clamp(self.eps, 1.0 - self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        p = self.p.to(x.dtype)
        noise = self.noise
        if noise is None and self.generator is not None:
            noise = torch.rand(x.shape, generator=self.generator, dtype=x.dtype, device=x.device)
        if noise is not None:  # RelaxedBernoulli(temperature, probs=1 - p).rsample from given uniforms
            u, q = clamp_probs(noise.to(x.dtype)), clamp_probs(1.0 - p)
            z = clamp_probs(torch.sigmoid((u.log() - (-u).log1p() + q.log() - (-q).log1p()) / self.temperature))
            return x * z / (1.0 - p)
        keep = RelaxedBernoulli(torch.tensor(self.temperature, dtype=x.dtype, device=x.device), probs=1.0 - p)
        # sample_shape x.shape; the distribution's batch shape (1,) is squeezed away
        z = keep.rsample(x.shape).reshape(x.shape)
        return x * z / (1.0 - p)

    def extra_repr(self) -> str:
        return f"p={float(self.p.detach()):.4g}, temperature={self.temperature}, learnable={self.learnable}"


def concrete_dropout_parameters(model: nn.Module) -> list[nn.Parameter]:
    """All learnable ``drop_logit`` parameters of ConcreteDropout modules in ``model`` (module order)."""
    return [m.drop_logit for m in model.modules() if isinstance(m, ConcreteDropout) and m.learnable]


def make_dropout(p: float | None, learnable: bool = False, temperature: float = 0.1) -> nn.Module | None:
    """Dropout slot factory shared by the models.

    ``p`` None or 0 -> None (no module inserted); ``learnable`` -> :class:`ConcreteDropout`;
    otherwise a plain ``nn.Dropout(p)`` (the fixed-rate FedAvg baseline of App. J).
    """
    if p is None or p == 0:
        if learnable:
            raise ValueError("learnable dropout needs an initial rate p in (0, 1)")
        return None
    if learnable:
        return ConcreteDropout(p, temperature=temperature, learnable=True)
    return nn.Dropout(p)
