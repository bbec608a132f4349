"""Fully connected network (input selection, Fig. 2: 2x256 GeLU, Kaiming-uniform init)."""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "tanh": nn.Tanh}


class MLP(nn.Sequential):
    def __init__(self, in_features: int, hidden: list[int], out_features: int, activation: str = "gelu"):
        if activation not in ACTIVATIONS:
            raise ValueError(f"MLP activation '{activation}' unknown (valid: {', '.join(ACTIVATIONS)})")
        layers: list[nn.Module] = []
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, h), ACTIVATIONS[activation]()]
            width = h
        layers.append(nn.Linear(width, out_features))
        super().__init__(*layers)
        # nn.Linear's default init is already Kaiming-uniform (a=sqrt(5)) on the weights (App. I.3).

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.flatten(1))
