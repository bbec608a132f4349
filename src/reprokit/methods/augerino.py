"""Augerino (Benton et al. 2020): augmentation widths learned jointly with the weights on the
training loss plus a width regulariser (App. E of the partitioned-networks paper).

Loss = NLL of the augmentation-averaged prediction + strength * R(widths), with R the negative L2
norm of the widths (``standard``) or its "safe" variant, switched off once any width reaches the
threshold (``reprokit.augment.affine.augerino_regularizer``). Weights and widths get separate Adam
optimisers (paper, MNIST: weights lr 1e-3, widths lr 0.05, strength 0.01, safe variant). The
standard variant is unbounded below: its loss may go to -inf, and the run is then recorded as
diverged (NaN), as the paper reports.
"""

from __future__ import annotations

import torch
from torch import nn

from ..augment.affine import AffineAugmentation, augerino_regularizer
from ..data.task import TaskData
from .standard import OptimConfig, StandardTraining


class AugerinoTraining(StandardTraining):
    def __init__(self, net: nn.Module, augmentation: AffineAugmentation, data: TaskData, optim: OptimConfig,
                 n_steps: int, seed: int, hyper_lr: float = 0.05, reg_strength: float = 0.01,
                 reg_kind: str = "safe", reg_threshold: float = 10.0):
        if reg_kind not in ("safe", "standard"):
            raise ValueError(f"augerino reg_kind must be 'safe' or 'standard', got {reg_kind!r}")
        self.augmentation = augmentation
        self.reg_strength, self.reg_kind, self.reg_threshold = float(reg_strength), reg_kind, float(reg_threshold)
        super().__init__(net, data, optim, n_steps, seed, hyper_params=list(augmentation.parameters()),
                         hyper_lr=hyper_lr)

    def regularizer(self) -> torch.Tensor:
        return self.reg_strength * augerino_regularizer(self.augmentation, self.reg_kind, self.reg_threshold)
