"""Posterior-predictive summaries by Monte Carlo over weight samples.

Works for any model with `task`, `predict(x, n_samples) -> [S, B, D]` and, for regression,
`noise_cov() -> [D, D]` (BaliMLP and the Bayes-by-Backprop BBBMLP both qualify).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def predictive(model, x: torch.Tensor, n_samples: int = 100, **predict_kwargs):
    """Regression: (mean, var) per output, var = Var_s[f_s(x)] + diag(Sigma_noise) (law of total variance).
    Classification: class probabilities averaged over samples, [B, C]."""
    out = model.predict(x, n_samples, **predict_kwargs)
    if model.task == "regression":
        mean = out.mean(0)
        var = out.var(0, unbiased=False) + torch.diagonal(model.noise_cov()).to(out.dtype)
        return mean, var
    return F.softmax(out, dim=-1).mean(0)


@torch.no_grad()
def predictive_log_likelihood(model, x: torch.Tensor, y: torch.Tensor, n_samples: int = 100, **predict_kwargs):
    """Per-example log p(y | x) of the Monte Carlo mixture (1/S) sum_s p(y | f_s(x)), shape [B].

    Regression uses the full Gaussian N(y; f_s(x), Sigma_noise) per sample.
    """
    out = model.predict(x, n_samples, **predict_kwargs)  # [S, B, D]
    s = out.shape[0]
    if model.task == "regression":
        d = out.shape[-1]
        chol = torch.linalg.cholesky(model.noise_cov().to(torch.float64))
        r = (y.reshape(1, -1, d).to(torch.float64) - out.to(torch.float64)).unsqueeze(-1)
        w = torch.linalg.solve_triangular(chol, r, upper=False).squeeze(-1)
        logdet = 2.0 * torch.log(torch.diagonal(chol)).sum()
        logp = -0.5 * w.square().sum(-1) - 0.5 * logdet - 0.5 * d * math.log(2 * math.pi)  # [S, B]
    else:
        logp = F.log_softmax(out.to(torch.float64), dim=-1).gather(-1, y.long().reshape(1, -1, 1).expand(s, -1, 1))
        logp = logp.squeeze(-1)
    return (torch.logsumexp(logp, dim=0) - math.log(s)).to(out.dtype)
