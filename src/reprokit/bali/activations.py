"""Activation functions used by the BALI experiments (shared with the Bayes-by-Backprop baseline)."""

from __future__ import annotations

import torch
from torch import nn


class LeakyTanh(nn.Module):
    """f(x) = tanh(x) + slope * x (Sec. 5.3 uses slope 0.1)."""

    def __init__(self, slope: float = 0.1):
        super().__init__()
        self.slope = float(slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) + self.slope * x

    def extra_repr(self) -> str:
        return f"slope={self.slope}"


ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "leaky_tanh": LeakyTanh, "identity": nn.Identity}


def get_activation(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation '{name}' unknown (valid: {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]()
