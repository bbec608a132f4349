"""FixUp ResNet-(6n+2) for CIFAR-sized inputs (Zhang et al. 2019; as used by Immer et al. 2022).

Architecture (App. I.3 of the partitioned-networks paper, "we follow Immer et al. (2022); Zhang et al."):

* stem: conv3x3(in_channels -> 16w), FixUp bias, ReLU;
* 3 stages with (16, 32, 64) * w channels, n = (depth - 2) / 6 basic blocks each
  (ResNet-8: n = 1, ResNet-14: n = 2); stages 2 and 3 start with a stride-2 block;
* head: global average pool, FixUp bias, linear layer with bias.

Basic block (no normalisation layers)::

    xb     = x + bias1a
    branch = scale * conv2(relu(conv1(xb) + bias1b) + bias2a) + bias2b
    skip   = x                                        (same shape)
           = zero_pad_channels(AvgPool2d(k, stride 2)(xb))   (downsampling block)
    out    = relu(branch + skip)

Downsampling: conv1 of the residual branch has stride 2; the identity skip ("option A" of He et al.
2016) is spatially downsampled by 2D average pooling and zero-padded to the new channel count. We use
pooling kernel ``skip_pool_kernel = 1`` (pure strided subsampling) by default, which is what the
reference implementations of Zhang et al. and Immer et al. do; App. I.3's "2D average pooling in the
residual branches of the downsampling blocks" refers to this avg-pool module. ``skip_pool_kernel=2``
gives a true 2x2 average instead.

FixUp scalars are :class:`reprokit.models.layers.Scale` / ``Bias`` modules so the partition library
can give them per-partition values (product of scales / sum of biases, App. I.2).

FixUp init (Zhang et al. 2019, m = 2 layers per branch, L = number of residual branches = 3n):
conv1 of every branch ~ He-normal (fan_out, ReLU gain) * L^{-1/(2m-2)} = L^{-1/2}; conv2 (last layer
of every branch) = 0; scales 1, biases 0; final linear weight and bias = 0. The stem conv keeps
PyTorch's default init (as in both reference implementations). Consequence: at init every residual
branch outputs exactly 0, so each block computes relu(skip(x)) and the network output is 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from reprokit.models.layers import Bias, Scale

__all__ = ["FixupBasicBlock", "FixupResNet", "fixup_resnet8", "fixup_resnet14"]


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


class FixupBasicBlock(nn.Module):
    """Two-conv FixUp residual block; see the module docstring for the exact computation."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1, skip_pool_kernel: int = 1):
        super().__init__()
        if planes < in_planes:
            raise ValueError("FixupBasicBlock only zero-pads channels (planes >= in_planes)")
        self.in_planes, self.planes, self.stride = in_planes, planes, stride
        self.bias1a = Bias()
        self.conv1 = _conv3x3(in_planes, planes, stride)
        self.bias1b = Bias()
        self.relu = nn.ReLU()
        self.bias2a = Bias()
        self.conv2 = _conv3x3(planes, planes)
        self.scale = Scale()
        self.bias2b = Bias()
        self.downsample = stride != 1 or in_planes != planes
        if self.downsample:
            self.skip_pool = nn.AvgPool2d(kernel_size=skip_pool_kernel, stride=stride, ceil_mode=True)
        else:
            self.skip_pool = None

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        """Residual branch output (exactly zero at FixUp init)."""
        out = self.conv1(self.bias1a(x))
        out = self.relu(self.bias1b(out))
        out = self.conv2(self.bias2a(out))
        return self.bias2b(self.scale(out))

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        """Identity skip; pooled + channel zero-padded in downsampling blocks."""
        if not self.downsample:
            return x
        s = self.skip_pool(self.bias1a(x))
        extra = self.planes - self.in_planes
        if extra:
            s = F.pad(s, (0, 0, 0, 0, 0, extra))  # zero channels appended at the end
        return s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.branch(x) + self.shortcut(x))


class FixupResNet(nn.Module):
    """FixUp ResNet-``depth`` (depth = 6n + 2) with channel widths (16, 32, 64) * ``width``."""

    def __init__(
        self,
        depth: int = 8,
        num_classes: int = 10,
        in_channels: int = 3,
        width: int = 1,
        skip_pool_kernel: int = 1,
    ):
        super().__init__()
        if depth < 8 or (depth - 2) % 6 != 0:
            raise ValueError(f"FixUp ResNet depth must be 6n+2 with n >= 1, got {depth}")
        n = (depth - 2) // 6
        self.depth, self.width, self.num_classes = depth, width, num_classes
        self.num_branches = 3 * n
        chans = [16 * width, 32 * width, 64 * width]
        self.conv1 = _conv3x3(in_channels, chans[0])
        self.bias1 = Bias()
        self.relu = nn.ReLU()
        stages = []
        cin = chans[0]
        for i, c in enumerate(chans):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(FixupBasicBlock(cin, c, stride, skip_pool_kernel))
                cin = c
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.bias2 = Bias()
        self.fc = nn.Linear(chans[2], num_classes)
        self.reset_parameters()

    def blocks(self) -> list[FixupBasicBlock]:
        return [m for m in self.modules() if isinstance(m, FixupBasicBlock)]

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """FixUp initialisation (see module docstring)."""
        L, m = self.num_branches, 2
        factor = L ** (-1.0 / (2 * m - 2))
        for blk in self.blocks():
            nn.init.kaiming_normal_(blk.conv1.weight, mode="fan_out", nonlinearity="relu")
            blk.conv1.weight.mul_(factor)
            nn.init.zeros_(blk.conv2.weight)
        for mod in self.modules():
            if isinstance(mod, Scale):
                mod.scale.fill_(1.0)
            elif isinstance(mod, Bias):
                mod.bias.zero_()
        nn.init.zeros_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bias1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = self.flatten(self.avgpool(x))
        return self.fc(self.bias2(x))


def fixup_resnet8(**kwargs) -> FixupResNet:
    return FixupResNet(depth=8, **kwargs)


def fixup_resnet14(**kwargs) -> FixupResNet:
    return FixupResNet(depth=14, **kwargs)
