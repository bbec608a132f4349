"""Eq. 2 objective: sum over k = 2..C of log-likelihood of D_k under subnetwork k-1."""

import pytest
import torch
from torch import nn

from reprokit.partition import lml_estimate, partition


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
    pm = partition(model, [0.5, 0.25, 0.25], seed=0)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(n, 4, generator=g) for n in (20, 7, 9)]
    ys = [torch.randint(0, 3, (n,), generator=g) for n in (20, 7, 9)]
    return pm, xs, ys


def loglik(out, y):
    return -nn.functional.cross_entropy(out, y, reduction="none")


def test_matches_manual_sum_and_restores_state():
    pm, xs, ys = setup()
    pm.train()
    pm.set_subnetwork(3)
    value, terms = lml_estimate(pm, xs, ys, loglik, batch_size=4, return_terms=True)
    assert pm.training and pm.current_subnetwork == 3
    pm.eval()
    expected = []
    for k in (2, 3):
        with pm.subnetwork(k - 1), torch.no_grad():
            expected.append(float(loglik(pm(xs[k - 1]), ys[k - 1]).sum()))
    assert terms == pytest.approx(expected, rel=1e-6)
    assert value == pytest.approx(sum(expected), rel=1e-6)
    # D_1 is not scored: changing it does not move the objective
    xs2 = [xs[0] * 10] + xs[1:]
    assert lml_estimate(pm, xs2, ys, loglik, batch_size=4) == pytest.approx(value, rel=1e-6)


def test_ignores_last_partition_and_is_deterministic():
    pm, xs, ys = setup()
    v1 = lml_estimate(pm, xs, ys, loglik)
    assert lml_estimate(pm, xs, ys, loglik) == v1  # eval mode: dropout off
    with torch.no_grad():  # subnetworks 1..C-1 never see partition C
        for p, a in pm.partitioned_parameters():
            p.add_(torch.where(a == 3, torch.ones(()), torch.zeros(())))
    assert lml_estimate(pm, xs, ys, loglik) == pytest.approx(v1, rel=1e-6)
    with torch.no_grad():
        for p, a in pm.partitioned_parameters():
            p.add_(torch.where(a == 1, torch.ones(()), torch.zeros(())))
    assert lml_estimate(pm, xs, ys, loglik) != pytest.approx(v1, rel=1e-6)
