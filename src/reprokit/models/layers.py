"""Small building blocks shared by several models.

`Scale` and `Bias` are the FixUp scalars (Zhang et al. 2019). They are separate modules (not bare
parameters) so that `reprokit.partition` can recognise them and give them per-partition values
(product of scales / sum of biases over partitions 1..k, App. I.2).
"""

import torch
from torch import nn


class Scale(nn.Module):
    """Multiply by a learnable scalar (init 1)."""

    def __init__(self, init: float = 1.0):
        super().__init__()
        self.scale = nn.Parameter(torch.full((1,), float(init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class Bias(nn.Module):
    """Add a learnable scalar (init 0)."""

    def __init__(self, init: float = 0.0):
        super().__init__()
        self.bias = nn.Parameter(torch.full((1,), float(init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias
