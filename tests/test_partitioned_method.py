"""The partitioned method's two updates (App. I.1), as `PartitionedTraining.train_step` runs them.

Behaviour checked: the parameter update differentiates the network weights only (psi gets no gradient)
and changes only partition k; the hyperparameter update's gradient is exactly that of subnetwork k-1's
loss on the batch it is given, computes no weight gradients and leaves the network unchanged; a full
train_step draws its hyper batch from one chunk k >= 2 only.
"""

import copy

import torch
from torch import nn

from reprokit.data.task import TaskData
from reprokit.methods.partitioned import (
    PartitionedConfig,
    PartitionedTraining,
    hyper_update,
    optimised_params,
    param_update,
)
from reprokit.methods.standard import OptimConfig
from reprokit.partition import PartitionedAdam, partition


class InputScale(nn.Module):
    """A toy hyperparameter psi: a learnable per-feature input scale."""

    def __init__(self, d):
        super().__init__()
        self.psi = nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return x * self.psi


def setup(seed=0, n_chunks=3):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    pmodel = partition(model, [1.0 / n_chunks] * n_chunks, seed=seed)
    hyper = InputScale(6)
    net = nn.Sequential(hyper, pmodel)
    x, y = torch.randn(12, 6), torch.randint(0, 3, (12,))
    loss_fn = lambda: nn.functional.cross_entropy(net(x), y)  # noqa: E731
    return net, pmodel, hyper, loss_fn


def subnet_loss_grad(pmodel, hyper, loss_fn, k):
    with pmodel.subnetwork(k):
        loss = loss_fn()
    return torch.autograd.grad(loss, [hyper.psi])[0]


def test_param_update_gives_psi_no_gradient_and_changes_only_partition_k():
    net, pmodel, hyper, loss_fn = setup()
    opt = PartitionedAdam(pmodel, lr=0.1, chunk_sizes=[4, 4, 4])
    before = copy.deepcopy(pmodel.state_dict())
    psi0 = hyper.psi.detach().clone()
    param_update(pmodel, opt, 2, loss_fn, optimised_params(opt))
    assert hyper.psi.grad is None
    assert torch.equal(hyper.psi.detach(), psi0)
    # Compared through the subnetworks: subnetwork 1 must be unchanged, subnetwork 2 (partition 2) moved.
    x = torch.randn(5, 6)
    now = {k: v.clone() for k, v in pmodel.state_dict().items()}
    pmodel.load_state_dict(before)
    with torch.no_grad(), pmodel.subnetwork(1):
        y1_before = pmodel(x)
    with torch.no_grad(), pmodel.subnetwork(2):
        y2_before = pmodel(x)
    pmodel.load_state_dict(now)
    with torch.no_grad(), pmodel.subnetwork(1):
        y1_after = pmodel(x)
    with torch.no_grad(), pmodel.subnetwork(2):
        y2_after = pmodel(x)
    assert torch.equal(y1_before, y1_after)
    assert not torch.allclose(y2_before, y2_after)


def test_hyper_update_gradient_is_subnetwork_k_minus_1_only():
    net, pmodel, hyper, loss_fn = setup()
    opt = PartitionedAdam(pmodel, lr=0.1, chunk_sizes=[4, 4, 4])
    # Make the subnetworks differ so that a wrong k would give a different gradient.
    for k in (1, 2, 3):
        param_update(pmodel, opt, k, loss_fn, optimised_params(opt))
    expected = {k: subnet_loss_grad(pmodel, hyper, loss_fn, k) for k in (1, 2, 3)}
    assert not torch.allclose(expected[1], expected[2])
    opt.zero_grad(set_to_none=True)
    weights_before = copy.deepcopy(pmodel.state_dict())
    hopt = torch.optim.SGD([hyper.psi], lr=0.0)  # lr 0 keeps psi, so the gradient can be compared
    hyper_update(pmodel, hopt, 3, loss_fn, [hyper.psi])  # chunk 3 -> subnetwork 2
    torch.testing.assert_close(hyper.psi.grad, expected[2])
    for p in optimised_params(opt):
        assert p.grad is None
    for key, v in pmodel.state_dict().items():
        assert torch.equal(v, weights_before[key])


def test_train_step_hyper_batch_comes_from_one_chunk_k_at_least_2():
    torch.manual_seed(0)
    n = 60
    data = TaskData(
        torch.randn(n, 6), torch.randint(0, 3, (n,)), torch.randn(10, 6), torch.randint(0, 3, (10,)), n_classes=3
    )
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    pmodel = partition(model, [0.5, 0.25, 0.25], seed=0)
    hyper = InputScale(6)
    net = nn.Sequential(hyper, pmodel)
    chunk_ids = torch.tensor([0] * 30 + [1] * 15 + [2] * 15)
    m = PartitionedTraining(
        net,
        pmodel,
        [hyper.psi],
        data,
        chunk_ids,
        PartitionedConfig([0.5, 0.25, 0.25], OptimConfig(optimizer="adam", lr=1e-2, batch_size=8)),
        n_steps=10,
        seed=0,
    )
    seen = []
    real_hyper_step = m.schedule.hyper_step

    def spy(bs):
        k, idx = real_hyper_step(bs)
        seen.append((k, set(chunk_ids[idx].tolist())))
        return k, idx

    m.schedule.hyper_step = spy
    for step in range(20):
        m.train_step(step)
    assert len(seen) == 20
    for k, chunks in seen:
        assert k >= 2 and chunks == {k - 1}
