"""Pre-activation ("v2") Wide-ResNet-N-D (Zagoruyko & Komodakis 2016; He et al. 2016 identity skips).

Layout: stem conv3x3 -> 16 channels; 3 stages of n pre-activation basic blocks with 16D, 32D, 64D
channels (stride 2 at the start of stages 2 and 3); final norm, ReLU, global average pool, linear.

Pre-activation basic block::

    a   = relu(norm1(x))
    out = conv2(dropout(relu(norm2(conv1(a)))))
    out = out + (x if shapes match else conv1x1(a))

Depth N -> blocks per stage n (both conventions accepted; N mod 6 decides which, no ambiguity):

* N = 6n + 4 (the WRN paper's count, e.g. WRN-16, -22, -28, -40), or
* N = 6n + 2 (the ResNet count: stem + 2 convs per block + final linear; e.g. WRN-20 -> n = 3, whose
  first two stages hold stem + 12 = 13 convolutions, exactly the "first two out of the three stages
  (13 convolution layers)" of the paper's Table 3; and ResNet-50 -> n = 8, "three stages of 8").

Normalisation is configurable: ``norm="batch"`` (the WRN default), ``"group"`` (GroupNorm with
``gn_groups`` groups; 2 for the paper's ResNet-50), or ``"none"``. Careful: BatchNorm running
statistics are shared buffers, which a partitioned network (several subnetworks) cannot share
meaningfully; GroupNorm has no running statistics.

Children used by experiments: ``conv1`` (stem), ``stage1``, ``stage2``, ``stage3``, ``norm``, ``fc``.
Init: convs He-normal (fan_out, ReLU), norm weight 1 / bias 0, linear bias 0 (PyTorch default weight).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PreActBlock", "WideResNet", "make_norm", "wrn_blocks_per_stage"]


def make_norm(kind: str, channels: int, gn_groups: int = 2) -> nn.Module:
    kind = kind.lower()
    if kind in ("batch", "bn", "batchnorm"):
        return nn.BatchNorm2d(channels)
    if kind in ("group", "gn", "groupnorm"):
        if channels % gn_groups:
            raise ValueError(f"{channels} channels not divisible into {gn_groups} groups")
        return nn.GroupNorm(gn_groups, channels)
    if kind in ("none", "identity"):
        return nn.Identity()
    raise ValueError(f"unknown norm {kind!r}; use 'batch', 'group' or 'none'")


def wrn_blocks_per_stage(depth: int) -> int:
    """Blocks per stage for WRN-``depth`` (6n+4 or 6n+2, see module docstring)."""
    if depth % 6 == 4 and depth >= 10:
        return (depth - 4) // 6
    if depth % 6 == 2 and depth >= 8:
        return (depth - 2) // 6
    raise ValueError(f"WRN depth must be 6n+4 or 6n+2 (n >= 1), got {depth}")


class PreActBlock(nn.Module):
    def __init__(
        self,
        in_planes: int,
        planes: int,
        stride: int = 1,
        norm: str = "batch",
        gn_groups: int = 2,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.norm1 = make_norm(norm, in_planes, gn_groups)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.norm2 = make_norm(norm, planes, gn_groups)
        self.relu2 = nn.ReLU()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False)
        else:
            self.shortcut = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.relu1(self.norm1(x))
        out = self.conv1(a)
        out = self.conv2(self.dropout(self.relu2(self.norm2(out))))
        skip = x if self.shortcut is None else self.shortcut(a)
        return out + skip


class WideResNet(nn.Module):
    """WRN-``depth``-``width``; see module docstring."""

    def __init__(
        self,
        depth: int = 20,
        width: int = 1,
        num_classes: int = 10,
        in_channels: int = 3,
        norm: str = "batch",
        gn_groups: int = 2,
        dropout: float = 0.0,
    ):
        super().__init__()
        n = wrn_blocks_per_stage(depth)
        self.depth, self.width, self.num_classes = depth, width, num_classes
        self.blocks_per_stage = n
        chans = [16, 16 * width, 32 * width, 64 * width]
        self.conv1 = nn.Conv2d(in_channels, chans[0], 3, padding=1, bias=False)
        cin = chans[0]
        stages = []
        for i in range(3):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(PreActBlock(cin, chans[i + 1], stride, norm, gn_groups, dropout))
                cin = chans[i + 1]
            stages.append(nn.Sequential(*blocks))
        self.stage1, self.stage2, self.stage3 = stages
        self.norm = make_norm(norm, cin, gn_groups)
        self.relu = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(cin, num_classes)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        x = self.stage3(self.stage2(self.stage1(x)))
        x = self.relu(self.norm(x))
        return self.fc(self.flatten(self.avgpool(x)))
