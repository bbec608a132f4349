"""Metrics of probabilistic predictions, shared by the BALI-paper methods (BALI, MC dropout, BBB, MAP).

Predictions come as Monte Carlo samples of the network output, ``samples`` of shape [S, B, D]
(regression means or classification logits, one row per posterior / dropout sample). The predictive
distribution is the equal-weight mixture over the S samples (plus, for regression, Gaussian noise with
covariance ``noise_cov``):

    log p(y | x) = logsumexp_s log p(y | f_s(x)) - log S.

Conventions (documented here, used by every table):
  * NLL / LL are per-example averages (natural log), LL = -NLL.
  * Regression metrics can be reported in the targets' original units: pass ``y_std`` (the training-set
    standard deviation used to standardise the targets, per output). Predictions and targets are then
    in standardised units; RMSE is multiplied by y_std and the log-likelihood shifted by
    -sum(log y_std) (the Jacobian of y = y_std * y' + y_mean). With y_std None (or 1) nothing changes.
  * ECE: 15 equal-width confidence bins on [0, 1] (Guo et al. 2017), confidence = max class probability,
    ECE = sum_b |B_b|/N * |acc(B_b) - conf(B_b)|. The BALI paper does not state its binning.
  * AUC: the rank (Mann-Whitney) formula with average ranks for ties, no sklearn:
    AUC = (sum of positive ranks - P (P + 1) / 2) / (P N).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

ECE_BINS = 15

__all__ = [
    "ECE_BINS",
    "accuracy",
    "binary_auc",
    "categorical_sample_log_likelihood",
    "expected_calibration_error",
    "gaussian_sample_log_likelihood",
    "mixture_log_likelihood",
    "predictive_entropy",
    "predictive_metrics",
    "rank_auc",
    "rmse",
    "roc_curve",
    "split_metrics",
]


def mixture_log_likelihood(sample_logp: torch.Tensor) -> torch.Tensor:
    """[S, B] per-sample log-likelihoods -> [B] log of the equal-weight mixture (logsumexp - log S)."""
    s = sample_logp.shape[0]
    return torch.logsumexp(sample_logp, dim=0) - math.log(s)


def gaussian_sample_log_likelihood(samples: torch.Tensor, y: torch.Tensor, noise_cov: torch.Tensor | float) -> torch.Tensor:
    """log N(y; f_s(x), Sigma) for every sample, [S, B]. ``noise_cov``: scalar variance, [D] variances or [D, D]."""
    samples = samples.to(torch.float64)
    s, b, d = samples.shape
    y = y.reshape(1, b, d).to(torch.float64)
    cov = torch.as_tensor(noise_cov, dtype=torch.float64, device=samples.device)
    if cov.ndim == 0:
        cov = cov.expand(d)
    if cov.ndim == 1:
        cov = torch.diag(cov)
    chol = torch.linalg.cholesky(cov)
    r = (y - samples).unsqueeze(-1)
    w = torch.linalg.solve_triangular(chol, r, upper=False).squeeze(-1)
    logdet = 2.0 * torch.log(torch.diagonal(chol)).sum()
    return -0.5 * w.square().sum(-1) - 0.5 * logdet - 0.5 * d * math.log(2 * math.pi)


def categorical_sample_log_likelihood(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log softmax(f_s(x))[y] for every sample, [S, B]."""
    logp = F.log_softmax(logits.to(torch.float64), dim=-1)
    idx = y.long().reshape(1, -1, 1).expand(logp.shape[0], -1, 1)
    return logp.gather(-1, idx).squeeze(-1)


def rmse(mean: torch.Tensor, y: torch.Tensor) -> float:
    """Root mean squared error over all examples and outputs."""
    return float((mean.to(torch.float64) - y.reshape(mean.shape).to(torch.float64)).square().mean().sqrt())


def accuracy(probs: torch.Tensor, y: torch.Tensor) -> float:
    return float((probs.argmax(-1) == y.long()).to(torch.float64).mean())


def expected_calibration_error(probs: torch.Tensor, y: torch.Tensor, n_bins: int = ECE_BINS) -> float:
    """ECE with ``n_bins`` equal-width confidence bins; bin b holds confidences in (b/n, (b+1)/n] (the
    first bin also holds 0)."""
    conf, pred = probs.to(torch.float64).max(-1)
    correct = (pred == y.long()).to(torch.float64)
    bins = torch.clamp(torch.ceil(conf * n_bins).long() - 1, 0, n_bins - 1)
    n = conf.shape[0]
    count = torch.zeros(n_bins, dtype=torch.float64, device=conf.device).index_add_(0, bins, torch.ones_like(conf))
    conf_sum = torch.zeros(n_bins, dtype=torch.float64, device=conf.device).index_add_(0, bins, conf)
    acc_sum = torch.zeros(n_bins, dtype=torch.float64, device=conf.device).index_add_(0, bins, correct)
    return float((acc_sum - conf_sum).abs().sum() / n)


def _average_ranks(x: torch.Tensor) -> torch.Tensor:
    """1-based ranks of x with ties given their average rank."""
    x = x.to(torch.float64)
    order = torch.argsort(x, stable=True)
    xs = x[order]
    n = x.shape[0]
    # group equal values: average rank within each run of ties
    _, inverse, counts = torch.unique_consecutive(xs, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(torch.float64)
    starts = ends - counts.to(torch.float64) + 1
    avg = (starts + ends) / 2
    ranks = torch.empty(n, dtype=torch.float64, device=x.device)
    ranks[order] = avg[inverse]
    return ranks


def rank_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve of ``scores`` for positives ``labels == 1`` (Mann-Whitney U / (P N))."""
    labels = labels.reshape(-1).bool()
    scores = scores.reshape(-1)
    p, n = int(labels.sum()), int((~labels).sum())
    if p == 0 or n == 0:
        return float("nan")
    ranks = _average_ranks(scores)
    return float((ranks[labels].sum() - p * (p + 1) / 2) / (p * n))


def binary_auc(probs: torch.Tensor, y: torch.Tensor) -> float:
    """AUC of a binary classifier from its predictive class probabilities [B, 2] (score = p(class 1))."""
    if probs.shape[-1] != 2:
        raise ValueError(f"binary_auc needs 2 classes, got {probs.shape[-1]}")
    return rank_auc(probs[:, 1], y)


def roc_curve(scores: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(fpr, tpr, thresholds): positives are ``labels == 1``, predicted positive when score >= threshold.

    Thresholds are the distinct scores in decreasing order, preceded by +inf (the point (0, 0)).
    """
    labels = labels.reshape(-1).to(torch.float64)
    scores = scores.reshape(-1).to(torch.float64)
    order = torch.argsort(scores, descending=True, stable=True)
    s, l = scores[order], labels[order]
    tp = torch.cumsum(l, 0)
    fp = torch.cumsum(1 - l, 0)
    last_of_run = torch.ones_like(s, dtype=torch.bool)
    last_of_run[:-1] = s[1:] != s[:-1]
    tp, fp, thr = tp[last_of_run], fp[last_of_run], s[last_of_run]
    p, n = max(float(labels.sum()), 1.0), max(float((1 - labels).sum()), 1.0)
    zero = torch.zeros(1, dtype=torch.float64, device=s.device)
    return (torch.cat([zero, fp / n]), torch.cat([zero, tp / p]),
            torch.cat([torch.full((1,), math.inf, dtype=torch.float64, device=s.device), thr]))


def predictive_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy of the predictive class distribution, [B] (nats)."""
    p = probs.to(torch.float64)
    return -(p * torch.log(p.clamp_min(1e-300))).sum(-1)


def split_metrics(sample_fn, splits: dict, task: str, n_samples: int, noise_cov=None, y_std=None,
                  calibration_splits: tuple = ("test",), batch_size: int = 8192) -> dict[str, float]:
    """``{split}_{metric}`` for every split in ``splits`` = {name: (x, y)}.

    ``sample_fn(x, n_samples) -> [S, B, D]`` draws the Monte Carlo outputs (it must not consume training
    generators); inputs are processed in chunks of ``batch_size`` rows (each chunk draws its own samples,
    which is still a valid Monte Carlo estimate per example). ``noise_cov``: regression noise covariance
    (or a callable returning it). ECE/AUC are added for the splits in ``calibration_splits``.
    """
    out = {}
    cov = noise_cov() if callable(noise_cov) else noise_cov
    for name, (x, y) in splits.items():
        chunks = [sample_fn(x[i : i + batch_size], n_samples) for i in range(0, x.shape[0], batch_size)]
        samples = torch.cat(chunks, dim=1)
        metrics = predictive_metrics(samples, y, task, cov, y_std, calibration=name in calibration_splits)
        out.update({f"{name}_{k}": v for k, v in metrics.items()})
    return out


def predictive_metrics(samples: torch.Tensor, y: torch.Tensor, task: str, noise_cov=None, y_std=None,
                       calibration: bool = False) -> dict[str, float]:
    """Metrics of the mixture predictive from Monte Carlo output samples [S, B, D].

    regression: {'nll', 'll', 'rmse'} (RMSE of the predictive mean; original units when ``y_std`` given);
    classification: {'nll', 'll', 'acc'} plus, with ``calibration``, {'ece'} and for 2 classes {'auc'}.
    """
    if samples.ndim != 3:
        raise ValueError(f"samples must be [S, B, D], got shape {tuple(samples.shape)}")
    if task == "regression":
        if noise_cov is None:
            raise ValueError("regression metrics need the noise covariance")
        d = samples.shape[-1]
        ll = mixture_log_likelihood(gaussian_sample_log_likelihood(samples, y, noise_cov)).mean()
        scale = (torch.ones(d, dtype=torch.float64, device=samples.device) if y_std is None
                 else torch.as_tensor(y_std, dtype=torch.float64, device=samples.device).reshape(-1).expand(d))
        ll = float(ll) - float(torch.log(scale).sum())
        err = (samples.to(torch.float64).mean(0) - y.reshape(samples.shape[1:]).to(torch.float64)) * scale
        return {"nll": -ll, "ll": ll, "rmse": float(err.square().mean().sqrt())}
    if task != "classification":
        raise ValueError(f"task '{task}' unknown (valid: regression, classification)")
    ll = float(mixture_log_likelihood(categorical_sample_log_likelihood(samples, y)).mean())
    probs = F.softmax(samples.to(torch.float64), dim=-1).mean(0)
    out = {"nll": -ll, "ll": ll, "acc": accuracy(probs, y)}
    if calibration:
        out["ece"] = expected_calibration_error(probs, y)
        if probs.shape[-1] == 2:
            out["auc"] = binary_auc(probs, y)
    return out
