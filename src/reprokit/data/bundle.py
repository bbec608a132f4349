"""A loaded dataset (:class:`Bundle`), what every loader shares, and the one transform of a whole bundle
(:func:`standardize`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

__all__ = ["Bundle", "standardize", "take_kwargs"]


@dataclass
class Bundle:
    """A loaded dataset.

    Images: float32 in [0, 1], shape (N, C, H, W) (uint8 with ``dtype="uint8"``). Class labels int64
    shape (N,). Regression targets float32 shape (N, 1). ``x_val``/``y_val`` are set only when a
    variant holds out a validation set (see ``variants.apply_variants``).
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    task: str  # "classification" | "regression"
    n_classes: int | None
    name: str
    meta: dict = field(default_factory=dict)
    x_val: torch.Tensor | None = None
    y_val: torch.Tensor | None = None

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.x_test.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def take_kwargs(name: str, kw: dict, allowed: dict) -> dict:
    """``allowed`` (keyword -> default) updated with ``kw``; TypeError naming the valid keywords otherwise."""
    unknown = sorted(set(kw) - set(allowed))
    if unknown:
        raise TypeError(f"load('{name}'): unexpected keyword(s) {unknown}; valid: {sorted(allowed)}")
    return {**allowed, **kw}


def standardize(bundle: Bundle) -> tuple[Bundle, dict]:
    """Z-score the (2-D) inputs, and for regression the targets, with training-set statistics.

    Uses the population standard deviation (ddof=0); a constant column keeps std 1. Returns the new
    bundle and ``stats`` = {"x_mean", "x_std", "y_mean", "y_std"} (y_* None for classification), so
    predictions map back to original units with ``y * y_std + y_mean`` (RMSE scales by ``y_std``;
    a Gaussian log-likelihood shifts by ``-log(y_std)``).
    """
    if bundle.x_train.ndim != 2:
        raise ValueError(
            f"standardize() is for tabular inputs (N, D); {bundle.name} has shape {tuple(bundle.x_train.shape)}"
        )
    if bundle.meta.get("standardized"):
        raise ValueError(f"{bundle.name} is already standardized")

    def stats_of(t):
        mean = t.mean(0, dtype=torch.float64)
        std = t.to(torch.float64).std(0, unbiased=False)
        std = torch.where(std > 0, std, torch.ones_like(std))
        return mean.float(), std.float()

    xm, xs = stats_of(bundle.x_train)
    zx = lambda t: None if t is None else (t - xm) / xs  # noqa: E731
    if bundle.task == "regression":
        ym, ys = stats_of(bundle.y_train)
        zy = lambda t: None if t is None else (t - ym) / ys  # noqa: E731
    else:
        ym = ys = None
        zy = lambda t: t  # noqa: E731
    out = dataclasses.replace(
        bundle,
        x_train=zx(bundle.x_train),
        y_train=zy(bundle.y_train),
        x_test=zx(bundle.x_test),
        y_test=zy(bundle.y_test),
        x_val=zx(bundle.x_val),
        y_val=zy(bundle.y_val),
        meta={**bundle.meta, "standardized": True},
    )
    return out, {"x_mean": xm, "x_std": xs, "y_mean": ym, "y_std": ys}
