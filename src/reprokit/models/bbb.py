"""Bayes by Backprop (Blundell et al. 2015): mean-field Gaussian weights learned by the reparametrised ELBO.

Used as the baseline of BALI App. I.2 (Figs. 4-6) with three KL down-weighting factors:

    loss = mean_n NLL(y_n | f_w(x_n)) + kl_factor * KL(q(w) || p(w)) / N,   w ~ q(w),

i.e. the negative ELBO per data point, with the KL term multiplied by `kl_factor` (1 = the ELBO).
q(w) = prod N(mu, sigma^2), sigma = softplus(rho); prior p(w) = N(0, prior_sigma^2) on every weight
and bias; one weight sample per forward call (weight reparametrisation).

`BBBMLP` exposes `task`, `predict(x, n_samples)` and `noise_cov()` like `reprokit.bali.BaliMLP`, so
`reprokit.bali.predictive` works for both.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from reprokit.bali.activations import get_activation


def _inv_softplus(y: float) -> float:
    return y + math.log(-math.expm1(-y))


def gaussian_kl(mu: torch.Tensor, sigma: torch.Tensor, prior_sigma: float) -> torch.Tensor:
    """sum KL(N(mu, sigma^2) || N(0, prior_sigma^2)) = sum log(p/s) + (s^2 + mu^2) / (2 p^2) - 1/2."""
    p2 = prior_sigma**2
    return (math.log(prior_sigma) - torch.log(sigma) + (sigma.square() + mu.square()) / (2 * p2) - 0.5).sum()


class BayesLinear(nn.Module):
    """Mean-field Gaussian linear layer y = x W^T + b with W, b ~ q and a N(0, prior_sigma^2) prior."""

    def __init__(self, in_features: int, out_features: int, prior_sigma: float = 1.0, init_sigma: float = 1e-3):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.prior_sigma = float(prior_sigma)
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default (Kaiming-uniform, a = sqrt(5)) range
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        rho0 = _inv_softplus(float(init_sigma))
        self.weight_rho = nn.Parameter(torch.full((out_features, in_features), rho0))
        self.bias_rho = nn.Parameter(torch.full((out_features,), rho0))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, prior_sigma={self.prior_sigma:g}"

    @property
    def weight_sigma(self) -> torch.Tensor:
        return F.softplus(self.weight_rho)

    @property
    def bias_sigma(self) -> torch.Tensor:
        return F.softplus(self.bias_rho)

    def forward(self, x: torch.Tensor, sample: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
        if not sample:
            return F.linear(x, self.weight_mu, self.bias_mu)
        ew = torch.randn(self.weight_mu.shape, dtype=x.dtype, device=x.device, generator=generator)
        eb = torch.randn(self.bias_mu.shape, dtype=x.dtype, device=x.device, generator=generator)
        w = self.weight_mu + self.weight_sigma * ew
        b = self.bias_mu + self.bias_sigma * eb
        return F.linear(x, w, b)

    def kl(self) -> torch.Tensor:
        """Closed-form KL(q || p) summed over the layer's weights and biases."""
        return gaussian_kl(self.weight_mu, self.weight_sigma, self.prior_sigma) + gaussian_kl(
            self.bias_mu, self.bias_sigma, self.prior_sigma
        )


class BBBMLP(nn.Module):
    """MLP of `BayesLinear` layers. Regression: homoscedastic Gaussian noise, learned (point estimate) unless
    `noise_std` is given; classification: categorical likelihood on the logits."""

    def __init__(
        self,
        in_features: int,
        hidden: list[int],
        out_features: int,
        activation: str = "tanh",
        task: str = "regression",
        prior_sigma: float = 1.0,
        init_sigma: float = 1e-3,
        noise_std: float | None = None,
        init_noise_std: float = 0.1,
    ):
        super().__init__()
        if task not in ("regression", "classification"):
            raise ValueError(f"task '{task}' unknown (valid: regression, classification)")
        self.task = task
        self.out_features = int(out_features)
        dims = [int(in_features), *[int(h) for h in hidden], self.out_features]
        self.layers = nn.ModuleList(
            BayesLinear(a, b, prior_sigma=prior_sigma, init_sigma=init_sigma) for a, b in zip(dims[:-1], dims[1:])
        )
        self.activation = get_activation(activation)
        self.fixed_noise = noise_std is not None
        log_std = math.log(noise_std if noise_std is not None else init_noise_std)
        if self.fixed_noise:
            self.register_buffer("log_noise_std", torch.full((self.out_features,), log_std))
        else:
            self.log_noise_std = nn.Parameter(torch.full((self.out_features,), log_std))

    def forward(self, x: torch.Tensor, sample: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
        h = x.reshape(x.shape[0], -1)
        for i, layer in enumerate(self.layers):
            if i > 0:
                h = self.activation(h)
            h = layer(h, sample=sample, generator=generator)
        return h

    def kl(self) -> torch.Tensor:
        return sum(layer.kl() for layer in self.layers)

    def noise_cov(self) -> torch.Tensor:
        if self.task != "regression":
            raise ValueError("noise_cov is defined for regression only")
        return torch.diag(torch.exp(2.0 * self.log_noise_std))

    def nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-example negative log-likelihood, [B]."""
        if self.task == "classification":
            return F.cross_entropy(out, y.long(), reduction="none")
        y = y.reshape(out.shape).to(out.dtype)
        log_std = self.log_noise_std.to(out.dtype)
        z = (y - out) / torch.exp(log_std)
        return (0.5 * z.square() + log_std + 0.5 * math.log(2 * math.pi)).sum(-1)

    def elbo_loss(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        n_data: int,
        kl_factor: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """Negative (down-weighted) ELBO per data point: mean NLL + kl_factor * KL / n_data."""
        nll = self.nll(self.forward(x, sample=True, generator=generator), y).mean()
        kl = self.kl()
        loss = nll + kl_factor * kl / float(n_data)
        return loss, {"nll": float(nll.detach()), "kl": float(kl.detach())}

    @torch.no_grad()
    def predict(self, x: torch.Tensor, n_samples: int = 1, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.stack([self.forward(x, sample=True, generator=generator) for _ in range(int(n_samples))])
