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
    torchmetrics' `multiclass_calibration_error` (l1) bins [b/n, (b+1)/n) instead and computes in float32:
    the two agree except for confidences exactly on a bin edge (tests/test_metrics_library.py).
  * AUC and ROC: exact thresholds, one ROC point per distinct score, the area by the trapezoid rule (ties
    between a positive and a negative count one half, the Mann-Whitney value), in float64. Written here,
    not taken from torchmetrics' `binary_auroc` / `binary_roc`, which give the same numbers
    (tests/test_metrics_library.py checks them against each other): importing torchmetrics imports
    torchvision's models, torch._dynamo and scipy.signal, 5.5 s of every classification cell's process on this
    project's 2-core CPU (torch 2.14.1, `python -X importtime -c "import torch, torchmetrics"`), more than a
    test-scale cell's training, and it squashes scores outside [0, 1] with a sigmoid.
  * OOD detection (BALI Fig. 3): score = negative predictive entropy, in-distribution points positive;
    `ood_metrics` records the AUROC and the ROC sampled at `ROC_FPR_GRID` (`tpr_at_fpr`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

ECE_BINS = 15

__all__ = [
    "ECE_BINS",
    "ROC_FPR_GRID",
    "accuracy",
    "auroc",
    "binary_auc",
    "categorical_sample_log_likelihood",
    "expected_calibration_error",
    "gaussian_sample_log_likelihood",
    "mixture_log_likelihood",
    "ood_metrics",
    "predictive_entropy",
    "predictive_metrics",
    "rmse",
    "roc_column",
    "roc_curve",
    "split_metrics",
    "tpr_at_fpr",
]


def mixture_log_likelihood(sample_logp: torch.Tensor) -> torch.Tensor:
    """[S, B] per-sample log-likelihoods -> [B] log of the equal-weight mixture (logsumexp - log S)."""
    s = sample_logp.shape[0]
    return torch.logsumexp(sample_logp, dim=0) - math.log(s)


def gaussian_sample_log_likelihood(
    samples: torch.Tensor, y: torch.Tensor, noise_cov: torch.Tensor | float
) -> torch.Tensor:
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
    conf_sum = torch.zeros(n_bins, dtype=torch.float64, device=conf.device).index_add_(0, bins, conf)
    acc_sum = torch.zeros(n_bins, dtype=torch.float64, device=conf.device).index_add_(0, bins, correct)
    return float((acc_sum - conf_sum).abs().sum() / n)


def roc_curve(scores: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fpr, tpr), float64, from (0, 0) to (1, 1): one point per distinct score, in decreasing score order
    (positives are ``labels == 1``, predicted positive when score >= threshold; as torchmetrics' `binary_roc`
    with exact thresholds)."""
    scores, labels = scores.reshape(-1), labels.reshape(-1).long()
    order = torch.argsort(scores, descending=True, stable=True)
    scores, positive = scores[order], (labels[order] == 1).to(torch.float64)
    # the last example of each run of equal scores: every example at or above its threshold is predicted positive
    last = torch.ones_like(scores, dtype=torch.bool)
    last[:-1] = scores[1:] != scores[:-1]
    tps = torch.cumsum(positive, 0)[last]
    fps = torch.cumsum(1.0 - positive, 0)[last]
    zero = torch.zeros(1, dtype=torch.float64, device=scores.device)
    tps, fps = torch.cat([zero, tps]), torch.cat([zero, fps])
    return fps / fps[-1].clamp_min(1.0), tps / tps[-1].clamp_min(1.0)


def auroc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve of ``scores`` for positives ``labels == 1`` (trapezoid rule on `roc_curve`:
    a tie between a positive and a negative counts one half); NaN without both classes."""
    labels = labels.reshape(-1).long()
    if labels.numel() == 0 or labels.min() == labels.max():
        return float("nan")
    fpr, tpr = roc_curve(scores, labels)
    return float(torch.trapezoid(tpr, fpr))


def binary_auc(probs: torch.Tensor, y: torch.Tensor) -> float:
    """AUC of a binary classifier from its predictive class probabilities [B, 2] (score = p(class 1))."""
    if probs.shape[-1] != 2:
        raise ValueError(f"binary_auc needs 2 classes, got {probs.shape[-1]}")
    return auroc(probs[:, 1], y)


def predictive_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy of the predictive class distribution, [B] (nats)."""
    p = probs.to(torch.float64)
    return -(p * torch.log(p.clamp_min(1e-300))).sum(-1)


# -- OOD detection (BALI Fig. 3) ----------------------------------------------------------------------

# False-positive rates at which each cell records its OOD ROC curve (dense near 0, where curves differ).
ROC_FPR_GRID = tuple(sorted({0.0, 0.001, 0.002, 0.005, *(round(i / 100, 2) for i in range(101))}))


def roc_column(fpr: float) -> str:
    return f"roc_tpr_at_fpr_{fpr:.3f}"


def tpr_at_fpr(fpr: torch.Tensor, tpr: torch.Tensor, grid) -> np.ndarray:
    """Sample a ROC curve (points in threshold order, both coordinates non-decreasing) at the FPRs `grid`.

    The curve is the polyline through its points; where it jumps vertically at an FPR (several points
    with that FPR) the highest TPR is taken, between distinct FPRs it is interpolated linearly.
    """
    f = np.asarray(fpr, dtype=np.float64)
    t = np.asarray(tpr, dtype=np.float64)
    xs, first = np.unique(f, return_index=True)
    last = np.r_[first[1:] - 1, len(f) - 1]  # points are grouped by FPR (non-decreasing)
    lo, hi = t[first], t[last]  # TPR entering / leaving each distinct FPR
    out = []
    for g in grid:
        j = int(np.searchsorted(xs, g, side="right")) - 1
        if j < 0:
            out.append(0.0)
        elif xs[j] == g or j == len(xs) - 1:
            out.append(float(hi[j]))
        else:
            w = (g - xs[j]) / (xs[j + 1] - xs[j])
            out.append(float(hi[j] + w * (lo[j + 1] - hi[j])))
    return np.asarray(out)


def ood_metrics(probs_id: torch.Tensor, probs_ood: torch.Tensor) -> dict[str, float]:
    """OOD detection by negative predictive entropy: ID points are positives (score high = 'ID')."""
    score_id, score_ood = -predictive_entropy(probs_id), -predictive_entropy(probs_ood)
    scores = torch.cat([score_id, score_ood])
    scores = scores.cpu()  # a few thousand scores: ranks and ROC on the host
    labels = torch.cat([torch.ones(len(score_id)), torch.zeros(len(score_ood))])
    fpr, tpr = roc_curve(scores, labels)
    out = {
        "ood_auroc": auroc(scores, labels),
        "ood_entropy_id": float(-score_id.mean()),
        "ood_entropy_ood": float(-score_ood.mean()),
    }
    for g, v in zip(ROC_FPR_GRID, tpr_at_fpr(fpr, tpr, ROC_FPR_GRID)):
        out[roc_column(g)] = float(v)
    return out


def split_metrics(
    sample_fn,
    splits: dict,
    task: str,
    n_samples: int,
    noise_cov=None,
    y_std=None,
    calibration_splits: tuple = ("test",),
    batch_size: int = 8192,
) -> dict[str, float]:
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


def predictive_metrics(
    samples: torch.Tensor, y: torch.Tensor, task: str, noise_cov=None, y_std=None, calibration: bool = False
) -> dict[str, float]:
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
        scale = (
            torch.ones(d, dtype=torch.float64, device=samples.device)
            if y_std is None
            else torch.as_tensor(y_std, dtype=torch.float64, device=samples.device).reshape(-1).expand(d)
        )
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
