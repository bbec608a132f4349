"""The hand-written diagonal GGN backend equals laplace-torch's own (curvlinops) exact diagonal GGN."""

import pytest
import torch
from laplace.curvature import CurvlinopsGGN
from torch import nn

from reprokit.augment.concrete import FixedInputMask
from reprokit.methods.curvature import LinearDiagGGN
from reprokit.models.mlp import MLP


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_matches_curvlinops_diag_ggn(likelihood):
    torch.manual_seed(0)
    net = nn.Sequential(FixedInputMask(12, 7), MLP(12, [16, 8], 3))
    x = torch.randn(40, 12)
    y = torch.randint(0, 3, (40,)) if likelihood == "classification" else torch.randn(40, 3)
    loss_ref, h_ref = CurvlinopsGGN(net, likelihood).diag(x, y)
    loss, h = LinearDiagGGN(net, likelihood).diag(x, y)
    assert torch.allclose(loss, loss_ref)
    assert h.shape == h_ref.shape
    assert torch.allclose(h, h_ref, rtol=1e-4, atol=1e-5)


def test_rejects_non_linear_parameters():
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 2))
    with pytest.raises(TypeError, match="0.weight"):
        LinearDiagGGN(net, "classification").diag(torch.randn(3, 1, 6, 6), torch.tensor([0, 1, 0]))
