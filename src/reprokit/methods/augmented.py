"""Augmentation-averaged prediction with its own random generator, and its evaluation.

:class:`SeededAugmentedModel` is :class:`reprokit.augment.affine.AugmentedModel` (average of the
predictive probabilities over S augmentation samples, at train and test time) whose augmentation
draws come from a dedicated ``torch.Generator`` instead of the global RNG. The generator's state is
part of the module's ``state_dict`` (``get_extra_state``), so every method that checkpoints its
network checkpoints the augmentation stream too, and a resumed run draws the same augmentations.
Several wrappers may share one augmentation module and one generator (Partitioned (Ens.)).

:func:`make_evaluator` evaluates such a model on a fixed test (sub)set, and optionally a fixed
training subset, with ``n_samples`` augmentation samples drawn from a generator re-seeded at every
evaluation: evaluation never consumes the training streams and two evaluations of the same weights
give the same numbers.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import runtime, seeds
from ..augment.affine import AffineAugmentation, AugmentedModel
from .common import classification_metrics


class SeededAugmentedModel(AugmentedModel):
    def __init__(
        self, model: nn.Module, augmentation: AffineAugmentation | None, n_samples: int, generator: torch.Generator
    ):
        super().__init__(model, augmentation, n_samples)
        self.generator = generator

    def forward(
        self,
        x: torch.Tensor,
        n_samples: int | None = None,
        generator: torch.Generator | None = None,
        chunk: int | None = None,
    ) -> torch.Tensor:
        """Log of the mean predictive over `n_samples` augmentations of each input. `chunk`: at most this many
        augmented images per network forward (the draws are made for the whole batch first, so chunking
        changes nothing but float rounding)."""
        if self.augmentation is None:
            return F.log_softmax(self._model_in_chunks(x, chunk), dim=-1)
        s = self.n_samples if n_samples is None else int(n_samples)
        xa = self.augmentation(x, s, generator=self.generator if generator is None else generator)
        logits = self._model_in_chunks(xa.reshape(s * x.shape[0], *x.shape[1:]), chunk)
        logp = F.log_softmax(logits, dim=-1).reshape(s, x.shape[0], -1)
        return torch.logsumexp(logp, dim=0) - math.log(s)

    def _model_in_chunks(self, x: torch.Tensor, chunk: int | None) -> torch.Tensor:
        if chunk is None or x.shape[0] <= chunk:
            return self.model(x)
        return torch.cat([self.model(part) for part in x.split(chunk)])

    def get_extra_state(self):
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state):
        self.generator.set_state(state["generator"])


@torch.no_grad()
def predict_augmented(
    net: SeededAugmentedModel, x: torch.Tensor, n_samples: int, generator: torch.Generator, batch_size: int = 1000
) -> torch.Tensor:
    was_training = net.training
    net.eval()
    try:
        chunk = runtime.inference_chunk(x.device)
        return torch.cat(
            [
                net(x[i : i + batch_size], n_samples=n_samples, generator=generator, chunk=chunk)
                for i in range(0, x.shape[0], batch_size)
            ]
        )
    finally:
        net.train(was_training)


def make_evaluator(
    net: SeededAugmentedModel,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    n_samples: int,
    seed: int = 0,
    train: tuple[torch.Tensor, torch.Tensor] | None = None,
    batch_size: int = 1000,
    extra=None,
):
    """A no-argument function returning {test_acc, test_ll[, train_acc, train_ll], **extra()}."""

    def evaluate() -> dict[str, float]:
        out = {}
        splits = [("test", x_test, y_test)] + ([("train", *train)] if train is not None else [])
        for split, x, y in splits:
            gen = seeds.generator(seed, "eval", x.device)  # the same draws at every evaluation
            logp = predict_augmented(net, x, n_samples, gen, batch_size)
            for key, value in classification_metrics(logp, y).items():
                out[f"{split}_{key}"] = value
        if extra is not None:
            out.update(extra())
        return out

    return evaluate


def ranges_metrics(aug: AffineAugmentation | None, prefix: str = "aug_") -> dict[str, float]:
    """The augmentation's half-widths as metrics ({'aug_rotation': ..., ...}); {} without one."""
    if aug is None:
        return {}
    return {f"{prefix}{k}": float(v) for k, v in aug.ranges().items()}
