"""Augerino (Benton et al. 2020): augmentation widths learned jointly with the weights on the
training loss plus a width regulariser (App. E of the partitioned-networks paper).

Loss = NLL of the augmentation-averaged prediction + strength * R(widths), as in Benton et al.'s code
(``unif_aug_loss`` / ``safe_unif_aug_loss``): R is the negative L2 norm of the widths (``standard``),
or its "safe" variant, switched off (value and gradient) once any width reaches the threshold in
absolute value (``reprokit.augment.affine.augerino_regularizer``). Weights and widths get separate
Adam optimisers (paper, MNIST: weights lr 1e-3, widths lr 0.05, strength 0.01, safe variant). The
standard variant is unbounded below: its widths grow until the sampled transformations overflow, the
loss becomes NaN, and the run is recorded as diverged (NaN metrics), as the paper reports (App. E).

Parametrisation (:func:`augerino_parametrisation`): App. I.4 gives every baseline the augmentation
parametrisation partitioned training uses, "for a fair comparison" (Schwöbel et al. on MNIST, Immer
et al. on CIFAR), so the default ``"same"`` resolves to the partitioned run's kind; ``"augerino"``
keeps Benton et al.'s own (softplus widths, ``AugerinoAffine``), and any other kind name is taken as is.
With the signed parametrisations the regulariser takes the norm of the half-widths (the hyperparameters
themselves, ``regularizer_widths``) and the safe switch tests their absolute values.
"""

from __future__ import annotations

import torch
from torch import nn

from ..augment.affine import AffineAugmentation, augerino_regularizer, augmentation_kinds
from ..data.task import TaskData
from .standard import OptimConfig, StandardTraining


def augerino_parametrisation(choice: str, partitioned_kind: str) -> str:
    """The augmentation kind Augerino trains: ``"same"`` -> ``partitioned_kind`` (App. I.4, the default),
    ``"augerino"`` -> Benton et al.'s own, or an explicit kind (``schwobel``, ``immer``)."""
    kind = partitioned_kind if choice == "same" else choice
    valid = [k for k in augmentation_kinds() if k != "none"]
    if kind not in valid:
        raise ValueError(
            f"Augerino parametrisation {choice!r} (partitioned: {partitioned_kind!r}) is not one of "
            f"{', '.join(['same', *valid])}"
        )
    return kind


class AugerinoTraining(StandardTraining):
    def __init__(
        self,
        net: nn.Module,
        augmentation: AffineAugmentation,
        data: TaskData,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        hyper_lr: float = 0.05,
        reg_strength: float = 0.01,
        reg_kind: str = "safe",
        reg_threshold: float = 10.0,
    ):
        if reg_kind not in ("safe", "standard"):
            raise ValueError(f"augerino reg_kind must be 'safe' or 'standard', got {reg_kind!r}")
        self.augmentation = augmentation
        self.reg_strength, self.reg_kind, self.reg_threshold = float(reg_strength), reg_kind, float(reg_threshold)
        super().__init__(
            net, data, optim, n_steps, seed, hyper_params=list(augmentation.parameters()), hyper_lr=hyper_lr
        )

    def regularizer(self) -> torch.Tensor:
        return self.reg_strength * augerino_regularizer(self.augmentation, self.reg_kind, self.reg_threshold)
