"""Wrapping a torch model into a partitioned network: subnetwork k must depend only on partitions 1..k."""

import copy

import pytest
import torch
from torch import nn

from reprokit.models.layers import Bias, Scale
from reprokit.partition import partition
from reprokit.partition.wrap import AffinePartition

C = 3
PROPS = [0.5, 0.3, 0.2]


class Net(nn.Module):
    """Every supported parameter kind: Conv2d, GroupNorm, BatchNorm2d, Scale, Bias, Linear, LayerNorm."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.gn = nn.GroupNorm(2, 6)
        self.conv2 = nn.Conv2d(6, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.scale = Scale()
        self.bias = Bias()
        self.fc = nn.Linear(4 * 4 * 4, 7)
        self.ln = nn.LayerNorm(7)
        self.out = nn.Linear(7, 5)

    def forward(self, x):
        h = torch.relu(self.gn(self.conv1(x)))
        h = self.bias(self.scale(self.bn(self.conv2(h))))
        h = torch.tanh(self.ln(self.fc(h.flatten(1))))
        return self.out(h)


def make(scheme="random", default="init", seed=0, assignments=None):
    torch.manual_seed(seed)
    net = Net()
    with torch.no_grad():  # non-trivial affines so that changing them is visible
        for m in (net.gn, net.bn, net.ln):
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
        net.scale.scale.fill_(1.3)
        net.bias.bias.fill_(0.2)
    ref = copy.deepcopy(net)
    pm = partition(net, PROPS, scheme=scheme, default=default, seed=seed, assignments=assignments)
    pm.eval()
    ref.eval()
    return pm, ref


X = torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(0))


def perturb(pm, select):
    """Add noise to every partitioned entry where select(assignment) holds."""
    g = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for p, a in pm.partitioned_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.add_(torch.where(select(a), noise, torch.zeros(())))


CASES = [(s, d) for s in ("random", "node") for d in ("init", "zero")]


@pytest.mark.parametrize("scheme,default", CASES)
def test_all_subnetworks_equal_unwrapped_at_init(scheme, default):
    """With init defaults every subnetwork is the unwrapped model; with zero defaults only k = C is."""
    pm, ref = make(scheme, default)
    expected = ref(X)
    for k in range(0, C + 1):
        with pm.subnetwork(k):
            out = pm(X)
        if default == "init" or k == C:
            torch.testing.assert_close(out, expected, rtol=0, atol=0)
        else:
            assert not torch.allclose(out, expected)


@pytest.mark.parametrize("scheme,default", CASES)
def test_subnetwork_k_ignores_later_partitions(scheme, default):
    for k in range(0, C):
        pm, _ = make(scheme, default)
        with pm.subnetwork(k):
            before = pm(X)
        perturb(pm, lambda a: a > k)  # noqa: B023 (called at once)
        with pm.subnetwork(k):
            torch.testing.assert_close(pm(X), before, rtol=0, atol=0)
        with pm.subnetwork(C):  # ...while the full network does see the change
            assert not torch.allclose(pm(X), before)
        if k >= 1:  # and changing partition k itself changes subnetwork k
            perturb(pm, lambda a: a == k)  # noqa: B023 (called at once)
            with pm.subnetwork(k):
                assert not torch.allclose(pm(X), before)


def test_each_parameter_kind_is_isolated():
    """Perturb one module's later partitions at a time, so a leak in any single layer type is caught."""
    for name in ("conv1", "gn", "conv2", "bn", "scale", "bias", "fc", "ln", "out"):
        pm, _ = make()
        with pm.subnetwork(1):
            before = pm(X)
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for pname, p, a in pm.named_partitioned_parameters():
                if pname.startswith(name + "."):
                    p.add_(torch.where(a > 1, torch.randn(p.shape, generator=g), torch.zeros(())))
        with pm.subnetwork(1):
            torch.testing.assert_close(pm(X), before, rtol=0, atol=0, msg=name)
        with pm.subnetwork(2):
            assert not torch.allclose(pm(X), before), name


def test_affine_product_and_sum_rule():
    pm, _ = make()
    with torch.no_grad():
        orig = pm.model.gn.parametrizations.weight.original
        orig.copy_(torch.arange(1, 1 + orig.numel(), dtype=orig.dtype).reshape(orig.shape))
        borig = pm.model.bias.parametrizations.bias.original
        borig.copy_(torch.tensor([[1.0], [2.0], [4.0]]))
    assert orig.shape == (C, 6)
    for k in range(1, C + 1):
        pm.set_subnetwork(k)
        torch.testing.assert_close(pm.model.gn.weight, orig[:k].prod(0))
        assert float(pm.model.bias.bias.detach()) == [1.0, 3.0, 7.0][k - 1]


@pytest.mark.parametrize("default", ["init", "zero"])
def test_gradient_zero_for_later_partitions(default):
    pm, _ = make(default=default)
    pm.train()
    for k in range(1, C + 1):
        pm.zero_grad()
        with pm.subnetwork(k):
            pm(X).pow(2).sum().backward()
        for name, p, a in pm.named_partitioned_parameters():
            assert p.grad is not None, name
            assert (p.grad[a > k] == 0).all(), (name, k)
        total_active = sum(float(p.grad[a <= k].abs().sum()) for p, a in pm.partitioned_parameters())
        assert total_active > 0


def test_node_scheme_matches_explicit_element_masks():
    pm_node, _ = make(scheme="node")
    for name, a in pm_node.assignments.items():
        if a.ndim >= 2 and "original" not in name and a.shape[0] != C:
            rows = a.reshape(a.shape[0], -1)
            assert (rows == rows[:, :1]).all(), name
    # same weights, assignments given explicitly as element masks through the random-scheme path
    elementwise = {
        n: a.clone()
        for n, p, a in pm_node.named_partitioned_parameters()
        if not isinstance(_param_module(pm_node, n), AffinePartition)
    }
    pm_el, _ = make(scheme="random", assignments=elementwise)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for (p1, _), (p2, _) in zip(pm_node.partitioned_parameters(), pm_el.partitioned_parameters()):
            p2.copy_(p1 + 0.1 * torch.randn(p1.shape, generator=g))
            p1.copy_(p2)
    for k in range(C + 1):
        with pm_node.subnetwork(k), pm_el.subnetwork(k):
            torch.testing.assert_close(pm_node(X), pm_el(X), rtol=0, atol=0)
    # and the Linear layer computes where(assign <= k, W, W0) explicitly
    lin = pm_node.model.out
    a, w = pm_node.assignments["out.weight"], lin.parametrizations.weight.original
    w0 = lin.parametrizations.weight[0].default
    for k in range(C + 1):
        pm_node.set_subnetwork(k)
        torch.testing.assert_close(lin.weight, torch.where(a <= k, w, w0), rtol=0, atol=0)


def _param_module(pm, name):
    mod_name, attr = name.rsplit(".", 1)
    return pm.model.get_submodule(mod_name).parametrizations[attr][0]


def test_node_bias_follows_its_row():
    pm, _ = make(scheme="node")
    a = pm.assignments
    torch.testing.assert_close(a["fc.bias"], a["fc.weight"][:, 0])
    torch.testing.assert_close(a["conv1.bias"], a["conv1.weight"][:, 0, 0, 0])


def test_one_partition_is_the_plain_model():
    torch.manual_seed(0)
    net = Net()
    ref = copy.deepcopy(net)
    pm = partition(net, [1.0])
    out, out_ref = pm(X), ref(X)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    out.sum().backward()
    out_ref.sum().backward()
    for (name, p, _a), (rname, rp) in zip(pm.named_partitioned_parameters(), ref.named_parameters()):
        assert name == rname
        g = p.grad[0] if isinstance(_param_module(pm, name), AffinePartition) else p.grad
        torch.testing.assert_close(g, rp.grad, rtol=0, atol=0)


def test_unknown_parameter_raises_and_shared_opt_in():
    class WithRaw(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.temperature = nn.Parameter(torch.ones(1))

        def forward(self, x):
            return self.lin(x) * self.temperature

    with pytest.raises(ValueError, match="temperature"):
        partition(WithRaw(), PROPS)
    with pytest.raises(ValueError, match="match no parameter"):
        partition(WithRaw(), PROPS, shared=["temperature", "lin.wieght"])
    pm = partition(WithRaw(), PROPS, shared=["temperature"])
    assert [p.shape for p in pm.shared_parameters()] == [torch.Size([1])]
    assert set(pm.assignments) == {"lin.weight", "lin.bias"}
    frozen = WithRaw()
    frozen.temperature.requires_grad_(False)
    partition(frozen, PROPS)  # constants are allowed


def test_subnetwork_context_restores_and_validates():
    pm, _ = make()
    assert pm.num_partitions == C and pm.current_subnetwork == C
    with pm.subnetwork(1):
        assert pm.current_subnetwork == 1
    assert pm.current_subnetwork == C
    with pytest.raises(ValueError):
        pm.set_subnetwork(C + 1)
    assert all(a.dtype == torch.uint8 for a in pm.assignments.values())


def test_assignment_proportions_per_layer():
    pm, _ = make()
    a = pm.assignments["fc.weight"]
    assert torch.bincount(a.reshape(-1).long(), minlength=C + 1)[1:].tolist() == [224, 134, 90]
    assert pm.partition_sizes().sum() == sum(p.numel() for p, _ in pm.partitioned_parameters())


def test_state_dict_and_deepcopy_roundtrip():
    pm, _ = make(seed=0)
    perturb(pm, lambda a: a >= 1)
    other, _ = make(seed=5)  # different assignments and weights
    other.load_state_dict(pm.state_dict())
    for k in range(C + 1):
        with pm.subnetwork(k), other.subnetwork(k):
            torch.testing.assert_close(other(X), pm(X), rtol=0, atol=0)
    clone = copy.deepcopy(pm)
    ids = {id(p) for p, _ in pm.partitioned_parameters()}
    assert not ids & {id(p) for p, _ in clone.partitioned_parameters()}  # the copy owns its parameters
    clone.set_subnetwork(1)
    assert pm.current_subnetwork == C  # the copy has its own subnetwork state
    with pm.subnetwork(1):
        torch.testing.assert_close(clone(X), pm(X), rtol=0, atol=0)


def test_dtype_cast_keeps_masks_consistent():
    pm, _ = make()
    pm.double()
    x = X.double()
    with pm.subnetwork(1):
        before = pm(x)
    assert before.dtype == torch.float64
    perturb_double = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p, a in pm.partitioned_parameters():
            p.add_(torch.where(a > 1, torch.randn(p.shape, generator=perturb_double, dtype=p.dtype), 0.0))
    with pm.subnetwork(1):
        torch.testing.assert_close(pm(x), before, rtol=0, atol=0)
