"""BALI multilayer perceptron: a stack of `BaliLinear` layers in the pre-activation view of Eq. 12."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .activations import get_activation
from .config import BaliConfig
from .layers import BaliLinear

TASKS = ("regression", "classification")


class BaliMLP(nn.Module):
    """Fully connected BNN learned with BALI.

    Layer l computes z_l = W_l^T x_l with x_1 = (x, 1) (unscaled unless `BaliConfig.scale_input_layer`) and
    x_l = (h(z_{l-1}), 1) / sqrt(D_{l-1} + 1) (Eq. 12). `forward(x)` draws one weight sample per layer
    and per call (BALI-W), samples the pre-activations (BALI-L) or uses the posterior means, as set by
    `config.reparam` or the `reparam` argument.

    task "regression": the last layer is fit to the true targets and its inferred Sigma_L is the Gaussian
    noise covariance of the likelihood. task "classification": categorical likelihood on the logits z_L,
    pseudo-targets in every layer.

    All state (posteriors, EMAs, step count) lives in buffers; there are no nn.Parameters, training is
    done by `reprokit.bali.BaliTrainer.step`.
    """

    def __init__(
        self,
        in_features: int,
        hidden: list[int],
        out_features: int,
        activation: str = "tanh",
        task: str = "regression",
        config: BaliConfig | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"task '{task}' unknown (valid: {', '.join(TASKS)})")
        if config is None:
            raise TypeError("BaliMLP needs config=BaliConfig(...) (its wishart_n has no default)")
        self.config = config
        self.task = task
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.hidden = [int(h) for h in hidden]
        self.activation = get_activation(activation)
        cfg = self.config
        dims = [self.in_features, *self.hidden, self.out_features]
        self.layers = nn.ModuleList(
            BaliLinear(
                d_in,
                d_out,
                sigma_init=cfg.sigma_init,
                prior_var_r=cfg.prior_var_r,
                prior_var_u=cfg.prior_var_u if i == len(dims) - 2 else cfg.prior_var_u_hidden,
                u0=cfg.u0,
                n_eff=cfg.n_eff,
                n_wishart=cfg.wishart_count,
                scale_input=cfg.scale_input_layer or i > 0,
                stats_dtype=cfg.torch_stats_dtype,
                gram_dtype=cfg.torch_gram_dtype,
                generator=generator,
            )
            for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:]))
        )
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))
        # prod_s (1 - beta_s); b_t = 1 - this (bias correction, exact also when beta decays).
        self.register_buffer("ema_decay_prod", torch.ones((), dtype=torch.float64))

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor, reparam: str | None = None, generator: torch.Generator | None = None):
        return self.forward_trace(x, reparam, generator)[0]

    def forward_trace(
        self,
        x: torch.Tensor,
        reparam: str | None = None,
        generator: torch.Generator | None = None,
        track: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Forward pass returning (z_L, [x_l], [z_l]).

        With `track=True` the first layer's output is made a leaf requiring grad, so that
        `torch.autograd.grad(loss, zs)` gives dloss/dz_l for every layer (no weight gradients needed).
        """
        reparam = reparam or self.config.reparam
        h = x.reshape(x.shape[0], -1)
        if not torch.is_floating_point(h):
            h = h.float()
        xs: list[torch.Tensor] = []
        zs: list[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            if i > 0:
                h = self.activation(h)
            feats = layer.features(h)
            z = layer.linear(feats.detach() if i == 0 else feats, reparam, generator)
            if track and i == 0:
                z = z.detach().requires_grad_(True)
            xs.append(feats.detach())
            zs.append(z)
            h = z
        return h, xs, zs

    @torch.no_grad()
    def predict(
        self, x: torch.Tensor, n_samples: int = 1, reparam: str | None = None, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Outputs (regression means / classification logits) for `n_samples` posterior draws, [S, B, D_out]."""
        return torch.stack([self.forward(x, reparam, generator) for _ in range(int(n_samples))])

    # ------------------------------------------------------------------ likelihood
    def noise_cov(self) -> torch.Tensor:
        """Regression noise covariance Sigma_L (inferred, Eq. 21), [D_out, D_out]."""
        if self.task != "regression":
            raise ValueError("noise_cov is defined for regression only")
        return self.layers[-1].noise_cov()

    def targets(self, y: torch.Tensor) -> torch.Tensor:
        """Regression targets as [B, D_out] floats."""
        y = y.reshape(y.shape[0], self.out_features)
        return y if y.is_floating_point() else y.float()

    def nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-example negative log-likelihood of y given outputs `out` [B, D] (one weight sample)."""
        if self.task == "classification":
            return F.cross_entropy(out, y.long(), reduction="none")
        r = (self.targets(y).to(out.dtype) - out).unsqueeze(-1)  # [B, D, 1]
        chol = self.layers[-1].chol_sigma.to(out.dtype)
        w = torch.linalg.solve_triangular(chol, r, upper=False).squeeze(-1)  # L^{-1} r
        logdet = 2.0 * torch.log(torch.diagonal(chol)).sum()
        return 0.5 * w.square().sum(-1) + 0.5 * logdet + 0.5 * self.out_features * math.log(2 * math.pi)
