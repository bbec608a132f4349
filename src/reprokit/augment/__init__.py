"""Hyperparameter modules: learnable input masks, concrete dropout and affine image augmentations.

Every random module takes a ``generator`` (a torch.Generator on the inputs' device); without one it draws
from torch's global generator. Their parameters are the hyperparameters psi that partitioned networks
(`reprokit.partition.PartitionedHPO`) and the baselines learn.

    >>> import torch
    >>> from reprokit.augment import ConcreteBernoulliMask
    >>> mask = ConcreteBernoulliMask(5, init_keep=0.9, generator=torch.Generator().manual_seed(0))
    >>> mask(torch.ones(2, 5)).shape
    torch.Size([2, 5])
    >>> round(float(mask.keep_probability[0].detach()), 3)
    0.9
"""

from .affine import (
    AffineAugmentation,
    AugerinoAffine,
    AugmentedModel,
    ImmerAffine,
    SchwobelAffine,
    augerino_regularizer,
    augmentation_kinds,
    build_augmentation,
)
from .concrete import ConcreteBernoulliMask, FixedInputMask
from .concrete_dropout import ConcreteDropout, concrete_dropout_parameters

__all__ = [
    "AffineAugmentation",
    "AugerinoAffine",
    "AugmentedModel",
    "ConcreteBernoulliMask",
    "ConcreteDropout",
    "FixedInputMask",
    "ImmerAffine",
    "SchwobelAffine",
    "augerino_regularizer",
    "augmentation_kinds",
    "build_augmentation",
    "concrete_dropout_parameters",
]
