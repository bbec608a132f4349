"""GroupNorm ResNets: the paper's "ResNet-50" (TinyImagenet) and "ResNet-9 (Dys)" (federated CIFAR10).

ResNet-50 (App. I.3): "the V2 version of Wide ResNet ... replace BatchNormalization with
GroupNormalization using 2 groups ... 'standard' width D = 1 and three stages of 8 layers for a
50-layer deep ResNet". We read "8 layers" as 8 pre-activation *basic* blocks per stage: 3 x 8 x 2 = 48
convolutions + stem conv + final linear = 50 weight layers, i.e. WRN-50-1 (depth 6n+2, n = 8) with
GroupNorm(2). (8 bottleneck blocks per stage would give 3 x 8 x 3 + 2 = 74 layers, not 50.) Channels
16/32/64, 3x3 stride-1 stem (WRN style, also for 64x64 TinyImagenet), global average pooling, so any
input size works. ~0.76 M parameters with 200 classes.

ResNet-9 (Dys) (App. J; Kaggle notebook by K. Dys, itself the DAWNBench "ResNet-9"), BatchNorm
replaced by GroupNorm::

    conv_block(c_in, c_out, pool) = Conv3x3(c_in, c_out, bias=True) -> GroupNorm -> ReLU [-> MaxPool2]
    prep  = conv_block(in, 64)
    conv2 = conv_block(64, 128, pool)
    res1  = conv_block(128, 128) -> [dropout slot] -> conv_block(128, 128);   x = x + res1(x)
    conv3 = conv_block(128, 256, pool)
    conv4 = conv_block(256, 512, pool)
    res2  = conv_block(512, 512) -> [dropout slot] -> conv_block(512, 512);   x = x + res2(x)
    head  = MaxPool(4) -> Flatten -> Dropout(0.2) -> Linear(512, classes)

6,575,370 parameters for 10 classes (same as the BatchNorm original). The paper's "dropout on the
middle layer of each block, initialised to 0.1" is the slot between the two conv blocks of each
residual block; learnable (concrete) or fixed, see ``dropout``/``learnable_dropout``. The head's
fixed Dropout(0.2) is kept from the Dys original (``head_dropout``). GroupNorm groups: 2 by default
(as in the federated-learning literature the paper follows, Reddi et al. 2020 / Hsieh et al. 2020,
and as in the paper's ResNet-50); configurable.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from reprokit.augment.concrete_dropout import make_dropout
from reprokit.models.wide_resnet import WideResNet

__all__ = ["resnet50_gn", "ResNet9GN"]


def resnet50_gn(num_classes: int = 200, in_channels: int = 3, gn_groups: int = 2, width: int = 1) -> WideResNet:
    """The paper's ResNet-50: pre-activation WRN-50-``width`` with GroupNorm(``gn_groups``)."""
    return WideResNet(
        depth=50, width=width, num_classes=num_classes, in_channels=in_channels, norm="group", gn_groups=gn_groups
    )


def _conv_block(cin: int, cout: int, gn_groups: int, pool: bool = False) -> nn.Sequential:
    layers = [
        ("conv", nn.Conv2d(cin, cout, kernel_size=3, padding=1)),
        ("norm", nn.GroupNorm(gn_groups, cout)),
        ("relu", nn.ReLU()),
    ]
    if pool:
        layers.append(("pool", nn.MaxPool2d(2)))
    return nn.Sequential(OrderedDict(layers))


class _Residual(nn.Module):
    """x + body(x), body = conv_block -> optional dropout -> conv_block."""

    def __init__(self, channels: int, gn_groups: int, dropout: nn.Module | None):
        super().__init__()
        self.block1 = _conv_block(channels, channels, gn_groups)
        self.dropout = dropout if dropout is not None else nn.Identity()
        self.block2 = _conv_block(channels, channels, gn_groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block2(self.dropout(self.block1(x)))


class ResNet9GN(nn.Module):
    """ResNet-9 (Dys) with GroupNorm; see module docstring."""

    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 3,
        gn_groups: int = 2,
        dropout: float | None = None,
        learnable_dropout: bool = False,
        dropout_temperature: float = 0.1,
        head_dropout: float = 0.2,
    ):
        super().__init__()

        def slot():
            return make_dropout(dropout, learnable=learnable_dropout, temperature=dropout_temperature)

        self.num_classes = num_classes
        self.prep = _conv_block(in_channels, 64, gn_groups)
        self.conv2 = _conv_block(64, 128, gn_groups, pool=True)
        self.res1 = _Residual(128, gn_groups, slot())
        self.conv3 = _conv_block(128, 256, gn_groups, pool=True)
        self.conv4 = _conv_block(256, 512, gn_groups, pool=True)
        self.res2 = _Residual(512, gn_groups, slot())
        self.pool = nn.AdaptiveMaxPool2d(1)  # == MaxPool2d(4) on 32x32 inputs (4x4 maps here)
        self.flatten = nn.Flatten()
        self.head_dropout = nn.Dropout(head_dropout) if head_dropout > 0 else nn.Identity()
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv2(self.prep(x))
        x = self.res1(x)
        x = self.conv4(self.conv3(x))
        x = self.res2(x)
        return self.fc(self.head_dropout(self.flatten(self.pool(x))))
