"""Partition-aware SGD/Adam: step(k) touches only partition k (params and state), matches torch at C = 1."""

import copy

import pytest
import torch
from torch import nn

from reprokit.models.layers import Scale
from reprokit.partition import PartitionedAdam, PartitionedSGD, partition, weight_decay_factors

C = 3
X = torch.randn(16, 6, generator=torch.Generator().manual_seed(0))
Y = torch.randn(16, 2, generator=torch.Generator().manual_seed(1))


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.LayerNorm(12), nn.Linear(12, 2), Scale())


def loss_of(pm, k):
    with pm.subnetwork(k):
        return (pm(X) - Y).pow(2).mean()


def train(pm, opt, ks):
    for k in ks:
        opt.zero_grad()
        loss_of(pm, k).backward()
        opt.step(k)


def snapshot(opt):
    """State of every parameter, with state tensors in the parameter's own shape."""
    return {
        id(p): {key: opt.state_in_param_layout(p, key).clone() for key in opt.state[p]}
        for g in opt.param_groups
        for p in g["params"]
    }


OPTS = [
    ("sgd", lambda pm: PartitionedSGD(pm, lr=0.05, momentum=0.9, weight_decay=1e-2, chunk_sizes=[5, 3, 2])),
    (
        "nesterov",
        lambda pm: PartitionedSGD(
            pm, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2, chunk_sizes=[5, 3, 2], wd_scaling="sqrt"
        ),
    ),
    ("adam", lambda pm: PartitionedAdam(pm, lr=0.01, weight_decay=1e-2, chunk_sizes=[5, 3, 2])),
]


@pytest.mark.parametrize("name,make_opt", OPTS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_step_changes_only_partition_k(name, make_opt, k):
    pm = partition(net(), [0.5, 0.3, 0.2], seed=1)
    opt = make_opt(pm)
    train(pm, opt, [1, 2, 3, 3, 2, 1])  # every partition has non-trivial momentum / moments
    before = {id(p): p.detach().clone() for p, _ in pm.partitioned_parameters()}
    state_before = snapshot(opt)
    opt.zero_grad()
    loss_of(pm, k).backward()
    opt.step(k)
    changed_any = False
    for p, a in pm.partitioned_parameters():
        diff = p.detach() != before[id(p)]
        assert not diff[a != k].any()
        changed_any |= bool(diff[a == k].any())
        for key, old in state_before[id(p)].items():
            new = opt.state_in_param_layout(p, key)
            if key == "step":
                expected = old.clone()
                expected[k - 1] += int((a == k).any())  # a tensor with no partition-k entry is skipped
                torch.testing.assert_close(new, expected)
            else:
                assert torch.equal(new[a != k], old[a != k]), key
                if (a == k).any():
                    assert not torch.equal(new[a == k], old[a == k]), key
    assert changed_any


def test_first_adam_step_of_a_partition_uses_its_own_bias_correction():
    """After many steps on partition 1, partition 2's first Adam step still has |update| ~= lr."""
    pm = partition(net(), [0.5, 0.5], seed=0)
    opt = PartitionedAdam(pm, lr=1e-3)
    train(pm, opt, [1] * 20)
    before = {id(p): p.detach().clone() for p, _ in pm.partitioned_parameters()}
    opt.zero_grad()
    loss_of(pm, 2).backward()
    opt.step(2)
    for p, a in pm.partitioned_parameters():
        sel = (a == 2) & (p.grad.abs() > 1e-4)
        step = (p.detach() - before[id(p)])[sel].abs()
        torch.testing.assert_close(step, torch.full_like(step, 1e-3), rtol=1e-2, atol=0)


def test_sgd_first_step_of_partition_copies_gradient_into_momentum():
    pm = partition(net(), [0.5, 0.5], seed=0)
    opt = PartitionedSGD(pm, lr=0.1, momentum=0.9)
    train(pm, opt, [1, 1, 1])
    opt.zero_grad()
    loss_of(pm, 2).backward()
    grads = {id(p): p.grad.clone() for p, _ in pm.partitioned_parameters()}
    opt.step(2)
    for p, a in pm.partitioned_parameters():
        buf = opt.state_in_param_layout(p, "momentum_buffer")
        torch.testing.assert_close(buf[a == 2], grads[id(p)][a == 2], rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["sgd", "nesterov", "adam"])
def test_single_partition_matches_torch_exactly(kind):
    base = net()
    ref = copy.deepcopy(base)
    pm = partition(base, [1.0])
    if kind == "adam":
        opt = PartitionedAdam(pm, lr=0.01, betas=(0.8, 0.99), weight_decay=1e-2, chunk_sizes=[100])
        ref_opt = torch.optim.Adam(ref.parameters(), lr=0.01, betas=(0.8, 0.99), weight_decay=1e-2, foreach=False)
    else:
        nest = kind == "nesterov"
        opt = PartitionedSGD(pm, lr=0.05, momentum=0.9, nesterov=nest, weight_decay=1e-2, chunk_sizes=[100])
        ref_opt = torch.optim.SGD(
            ref.parameters(), lr=0.05, momentum=0.9, nesterov=nest, weight_decay=1e-2, foreach=False
        )
    scheds = [torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=8) for o in (opt, ref_opt)]
    for _ in range(8):
        for o, m, s in ((opt, pm, scheds[0]), (ref_opt, ref, scheds[1])):
            o.zero_grad()
            (m(X) - Y).pow(2).mean().backward()
            o.step(1) if o is opt else o.step()
            s.step()
    pm.set_subnetwork(1)
    torch.testing.assert_close(pm(X), ref(X), rtol=0, atol=0)
    for (name, p, _), (_rname, rp) in zip(pm.named_partitioned_parameters(), ref.named_parameters()):
        val = p[0] if p.shape != rp.shape else p  # per-partition affines have a leading C=1 dim
        torch.testing.assert_close(val, rp, rtol=0, atol=0, msg=name)


def test_weight_decay_factors():
    sizes = [800, 100, 100]
    assert weight_decay_factors(sizes, 3, "reciprocal") == pytest.approx([1000 / 800, 1000 / 900, 1.0])
    assert weight_decay_factors(sizes, 3, "sqrt") == pytest.approx([(1000 / 800) ** 0.5, (1000 / 900) ** 0.5, 1.0])
    assert weight_decay_factors(sizes, 3, "none") == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        PartitionedSGD([torch.zeros(2, requires_grad=True)], lr=0.1, weight_decay=1e-2, num_partitions=3)


@pytest.mark.parametrize("scaling", ["reciprocal", "sqrt", "none"])
def test_weight_decay_applied_per_partition(scaling):
    """With a zero gradient, one SGD step on partition k shrinks its entries by lr * wd * f_k exactly."""
    w = nn.Parameter(torch.ones(4, 5))
    a = torch.tensor([1, 2, 3, 1, 2] * 4, dtype=torch.uint8).reshape(4, 5)
    sizes = [2, 1, 1]
    opt = PartitionedSGD([(w, a)], lr=0.5, weight_decay=0.1, chunk_sizes=sizes, wd_scaling=scaling)
    f = weight_decay_factors(sizes, 3, scaling)
    for k in (1, 2, 3):
        w.grad = torch.zeros_like(w)
        before = w.detach().clone()
        opt.step(k)
        torch.testing.assert_close(w.detach()[a == k], before[a == k] * (1 - 0.5 * 0.1 * f[k - 1]))
        torch.testing.assert_close(w.detach()[a != k], before[a != k], rtol=0, atol=0)


def test_shared_parameters_update_every_step_like_torch():
    torch.manual_seed(0)
    t = nn.Parameter(torch.randn(3))
    t_ref = nn.Parameter(t.detach().clone())
    opt = PartitionedAdam([t], lr=0.1, num_partitions=3)
    ref = torch.optim.Adam([t_ref], lr=0.1, foreach=False)
    for k in (1, 3, 2, 2):
        for p, o in ((t, opt), (t_ref, ref)):
            o.zero_grad()
            (p * torch.arange(1.0, 4.0)).sum().pow(2).backward()
            o.step(k) if o is opt else o.step()
    torch.testing.assert_close(t, t_ref, rtol=0, atol=0)


def test_lr_scheduler_counts_global_steps_and_state_dict_resumes():
    pm = partition(net(), [0.5, 0.3, 0.2], seed=0)
    opt = PartitionedAdam(pm, lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    ks = [1, 3, 2, 1, 1, 2]
    for k in ks[:3]:
        train(pm, opt, [k])
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** (3 // 2))
    model_state, opt_state = copy.deepcopy(pm.state_dict()), copy.deepcopy(opt.state_dict())
    train(pm, opt, ks[3:])
    expected = pm(X)
    pm2 = partition(net(), [0.5, 0.3, 0.2], seed=9)
    pm2.load_state_dict(model_state)
    opt2 = PartitionedAdam(pm2, lr=0.1)
    opt2.load_state_dict(opt_state)
    train(pm2, opt2, ks[3:])
    torch.testing.assert_close(pm2(X), expected, rtol=0, atol=0)


def test_step_validates_k():
    pm = partition(net(), [0.5, 0.5])
    opt = PartitionedSGD(pm, lr=0.1)
    with pytest.raises(TypeError):
        opt.step()
    with pytest.raises(ValueError):
        opt.step(3)
    assert opt.num_partitions == 2


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_matches_one_torch_optimizer_per_partition(kind, channels_last):
    """Reference semantics: partition k is driven by its own torch optimizer that only ever sees
    gradients masked to partition k (zero gradient + zero state leaves other entries untouched)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 6, 3), nn.GroupNorm(2, 6), nn.Flatten(), nn.Linear(6 * 4 * 4, 3), Scale())
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    pm = partition(model, [0.5, 0.3, 0.2], seed=3)
    ref_params = [nn.Parameter(p.detach().clone()) for p, _ in pm.partitioned_parameters()]
    assigns = [a for _, a in pm.partitioned_parameters()]
    if kind == "adam":
        opt = PartitionedAdam(pm, lr=0.01)
        refs = [torch.optim.Adam(ref_params, lr=0.01, foreach=False) for _ in range(C)]
    else:
        opt = PartitionedSGD(pm, lr=0.05, momentum=0.9, nesterov=True)
        refs = [torch.optim.SGD(ref_params, lr=0.05, momentum=0.9, nesterov=True, foreach=False) for _ in range(C)]
    x = torch.randn(5, 2, 6, 6, generator=torch.Generator().manual_seed(2))
    for k in [1, 1, 3, 2, 1, 3, 3, 2]:
        opt.zero_grad()
        with pm.subnetwork(k):
            pm(x).pow(2).mean().backward()
        for rp, (p, _), a in zip(ref_params, pm.partitioned_parameters(), assigns):
            rp.grad = torch.where(a == k, p.grad, torch.zeros(()))
        opt.step(k)
        refs[k - 1].step()
        for rp, (p, _) in zip(ref_params, pm.partitioned_parameters()):
            torch.testing.assert_close(p.detach(), rp.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_cuda_matches_cpu(kind):
    results = []
    for device in ("cpu", "cuda"):
        pm = partition(net(), [0.5, 0.3, 0.2], seed=1).to(device)
        if kind == "adam":
            opt = PartitionedAdam(pm, lr=0.01, weight_decay=1e-2, chunk_sizes=[5, 3, 2])
        else:
            opt = PartitionedSGD(pm, lr=0.05, momentum=0.9, weight_decay=1e-2, chunk_sizes=[5, 3, 2])
        x, y = X.to(device), Y.to(device)
        for k in [1, 2, 3, 1, 1, 2]:
            opt.zero_grad()
            with pm.subnetwork(k):
                (pm(x) - y).pow(2).mean().backward()
            opt.step(k)
        results.append([p.detach().cpu() for p, _ in pm.partitioned_parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
