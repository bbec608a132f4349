"""Differentiable Laplace (LILA, methods/diff_laplace.py): our KFAC-GGN marginal likelihood against
laplace-torch's KronLaplace for a fixed augmentation, its gradients against finite differences, the exact
diagonal GGN block of the other parameters (FixUp scalars, GroupNorm affine) against a brute-force
torch.func GGN, and the training schedule (hyper steps move the augmentation, bit-identical resume, OOM
propagates)."""

from __future__ import annotations

import copy
import math
import weakref

import pytest
import torch
from laplace import KronLaplace
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from reprokit.augment.affine import AugmentedModel, SchwobelAffine
from reprokit.data.task import TaskData
from reprokit.loop import LoopConfig, run_loop
from reprokit.methods.augmented import SeededAugmentedModel
from reprokit.methods.diff_laplace import (
    Block,
    DiffLaplaceTraining,
    count_hyper_rounds,
    kfac_factors,
    laplace_log_marginal_likelihood,
    log_marginal_likelihood_and_grads,
    log_marginal_likelihood_from_factors,
)
from reprokit.methods.standard import OptimConfig
from reprokit.models.fixup_resnet import FixupResNet
from reprokit.models.layers import Bias, Scale
from reprokit.models.wide_resnet import WideResNet
from reprokit.runtime import generator as make_generator
from reprokit.runtime import is_oom


def _data(n=40, shape=(1, 6, 6), classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g))


def _mlp(classes=4):
    return nn.Sequential(nn.Flatten(), nn.Linear(36, 12), nn.Tanh(), nn.Linear(12, classes))


def _cnn(classes=4):
    return nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1),
        nn.Tanh(),
        nn.Conv2d(3, 4, 3, stride=2),
        nn.Tanh(),
        nn.Flatten(),
        nn.Linear(16, classes),
    )


def _reference(model, x, y, prior_prec, batch_size):
    lap = KronLaplace(model, "classification")  # temperature 1, sum of the log-likelihood over the data
    lap.fit(DataLoader(TensorDataset(x, y), batch_size=batch_size))
    return float(lap.log_marginal_likelihood(prior_prec))


# ------------------------------------------------------------------- (1) equals laplace-torch's KronLaplace


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
@pytest.mark.parametrize("prior", ["layerwise", "scalar"])
def test_fixed_augmentation_equals_laplace_torch_kron(arch, prior):
    torch.manual_seed(0)
    model = _mlp() if arch == "mlp" else _cnn()
    x, y = _data()
    n_par = len(list(model.parameters()))
    pp = torch.linspace(0.5, 3.0, n_par) if prior == "layerwise" else torch.tensor(2.0)
    refs = [_reference(model, x, y, pp, bs) for bs in (40, 10)]  # one batch; factors summed over 4 batches
    assert refs[0] == pytest.approx(refs[1], rel=1e-5)
    plain = laplace_log_marginal_likelihood(AugmentedModel(model, None), x, y, pp)
    frozen = SchwobelAffine(0.0)
    frozen.set_fixed([0.0] * 6)  # S identical copies: the reduce convention is exact
    averaged = laplace_log_marginal_likelihood(AugmentedModel(model, frozen, 3), x, y, pp)
    for ours in (plain, averaged):
        assert float(ours.detach()) == pytest.approx(refs[0], rel=1e-5, abs=1e-4)


# ------------------------------------------------------------------- (2), (3) gradients vs finite differences


def _lml_fn(arch):
    torch.manual_seed(1)
    model = (_mlp(3) if arch == "mlp" else _cnn(3)).double()
    aug = SchwobelAffine([0.3, 0.1, 0.1, 0.05, 0.1, 0.05]).double()
    net = AugmentedModel(model, aug, 2)
    x, y = _data(n=12, classes=3)
    x = x.double()

    def lml(log_prec):
        return laplace_log_marginal_likelihood(
            net, x, y, log_prec.exp(), generator=torch.Generator().manual_seed(5), n_data=100
        )

    return aug, lml


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_gradients_match_finite_differences(arch):
    aug, lml = _lml_fn(arch)
    log_prec = torch.tensor(
        [0.2, -0.3, 0.5, 0.1] if arch == "mlp" else [0.2, -0.3, 0.5, 0.1, 0.0, 0.3],
        dtype=torch.float64,
        requires_grad=True,
    )
    value = lml(log_prec)
    g_aug, g_prec = torch.autograd.grad(value, [aug.maxima, log_prec])
    assert g_aug.abs().min() > 0 and torch.isfinite(g_aug).all()
    eps = 1e-6
    for param, grad in ((aug.maxima, g_aug), (log_prec, g_prec)):
        fd = torch.zeros_like(grad)
        for i in range(param.numel()):
            with torch.no_grad():
                param[i] += eps
                up = float(lml(log_prec))  # the value only: no graph kept under no_grad
                param[i] -= 2 * eps
                down = float(lml(log_prec))
                param[i] += eps
            fd[i] = (up - down) / (2 * eps)
        assert torch.allclose(grad, fd, rtol=1e-4, atol=1e-5), (grad, fd)


# ------------------------------------------------------------------- (3b) the exact diagonal block


class _TinyFixup(nn.Module):
    """FixUp-like: scalar Bias/Scale modules, one of them called twice (as FixUp's bias1a), a GroupNorm."""

    def __init__(self, classes=3):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.b1, self.b2, self.scale = Bias(0.1), Bias(-0.2), Scale(0.7)
        self.norm = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(4 * 6 * 6, classes)

    def forward(self, x):
        h = self.conv(self.b1(x))
        h = torch.tanh(self.norm(self.scale(h)) + self.b1(h))  # b1 used twice
        return self.fc(self.b2(h).flatten(1))


def _perturbed(model, seed=3):
    """Away from init (FixUp's zero weights make most scalar gradients vanish), logits kept O(1) so that
    the softmax is not saturated (a saturated one has a zero GGN)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if p.numel() <= 64:  # scalars and norm affine parameters
                p.add_(0.3 * noise)
            else:
                p.copy_(noise * 0.5 / math.sqrt(p[0].numel()))
    return model


def _brute_force_ggn_diagonal(model, xa, S, M, names):
    """diag(sum_n J_n^T Lambda_n J_n) of the averaged log-probabilities, J by torch.func.jacrev."""
    from torch.func import functional_call, jacrev

    params = dict(model.named_parameters())
    chosen = {n: params[n].detach() for n in names}

    def logp_of(sel):
        logits = functional_call(model, {**{n: p.detach() for n, p in params.items()}, **sel}, (xa,))
        return torch.logsumexp(torch.log_softmax(logits, -1).reshape(S, M, -1), 0) - math.log(S)

    jac = jacrev(logp_of)(chosen)  # name -> (M, C, *shape)
    p = logp_of(chosen).exp()
    lam = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (M, C, C)
    out = {}
    for n in names:
        J = jac[n].reshape(M, p.shape[-1], -1)
        out[n] = torch.einsum("ncp,ncd,ndp->p", J, lam, J)
    return out


@pytest.mark.parametrize("arch", ["tiny_fixup", "fixup_resnet8", "wrn_gn"])
def test_diagonal_block_equals_brute_force_ggn_diagonal(arch):
    torch.manual_seed(0)
    if arch == "tiny_fixup":
        model, shape = _TinyFixup(), (1, 6, 6)
    elif arch == "fixup_resnet8":
        model, shape = FixupResNet(depth=8, num_classes=3, in_channels=1), (1, 8, 8)
    else:  # the ResNet-50 GN family (pre-activation WRN with GroupNorm(2)), 8 layers deep
        model, shape = WideResNet(depth=8, num_classes=3, in_channels=1, norm="group"), (1, 8, 8)
    model = _perturbed(model.double())
    aug = SchwobelAffine([0.3, 0.1, 0.1, 0.05, 0.1, 0.05]).double()
    S, M = 2, 4
    x, y = _data(n=M, shape=shape, classes=3)
    x = x.double()
    nll, blocks = kfac_factors(AugmentedModel(model, aug, S), x, y, generator=torch.Generator().manual_seed(5))
    name_of = {id(p): n for n, p in model.named_parameters()}
    ours = {name_of[id(b.param)]: b.factors[0] for b in blocks if b.kind == "diag"}
    kinds = {b.kind for b in blocks}
    assert kinds == {"kron", "bias", "diag"} if arch != "wrn_gn" else kinds >= {"kron", "diag"}
    assert len(ours) >= (4 if arch == "tiny_fixup" else 10)
    xa = aug(x, S, generator=torch.Generator().manual_seed(5)).reshape(S * M, *shape)
    with torch.no_grad():
        logp = torch.logsumexp(torch.log_softmax(model(xa), -1).reshape(S, M, -1), 0) - math.log(S)
    assert float(nll.detach()) == pytest.approx(
        float(torch.nn.functional.nll_loss(logp, y, reduction="sum")), rel=1e-12
    )
    assert logp.exp().max() < 0.95  # a softmax far from saturation: a GGN far from zero
    ref = _brute_force_ggn_diagonal(model, xa, S, M, list(ours))
    for n, d in ours.items():
        assert d.shape == (dict(model.named_parameters())[n].numel(),)
        torch.testing.assert_close(d.detach(), ref[n], rtol=1e-9, atol=1e-12, msg=n)
    entries = torch.cat(list(ours.values())).detach()
    assert (entries > 1e-6).double().mean() >= 0.75  # mostly non-trivial (a ReLU-dead channel has 0)


def test_marglik_with_diagonal_blocks_is_differentiable_in_the_augmentation():
    torch.manual_seed(0)
    model = _perturbed(FixupResNet(depth=8, num_classes=3, in_channels=1).double())
    aug = SchwobelAffine([0.3, 0.1, 0.1, 0.05, 0.1, 0.05]).double()
    net = AugmentedModel(model, aug, 2)
    x, y = _data(n=6, shape=(1, 8, 8), classes=3)
    x = x.double()
    log_prec = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)

    def lml():
        return laplace_log_marginal_likelihood(
            net, x, y, log_prec.exp(), generator=torch.Generator().manual_seed(5), n_data=50
        )

    g_aug, g_prec = torch.autograd.grad(lml(), [aug.maxima, log_prec])
    assert torch.isfinite(g_aug).all() and g_aug.abs().max() > 0 and torch.isfinite(g_prec) and g_prec != 0
    eps, i = 1e-6, 0  # the rotation maximum: gradient against a central finite difference
    with torch.no_grad():
        aug.maxima[i] += eps
        up = float(lml())
        aug.maxima[i] -= 2 * eps
        down = float(lml())
        aug.maxima[i] += eps
    assert float(g_aug[i]) == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-6)


def test_the_papers_architectures_are_supported_and_batchnorm_is_refused():
    from reprokit.methods.diff_laplace import split_modules
    from reprokit.models.registry import build_model

    for name in ("mnist_cnn", "fixup_resnet8", "fixup_resnet14", "resnet50_gn"):
        kfac, diag = split_modules(build_model(name))
        assert kfac and (diag or name == "mnist_cnn"), name
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(32, 3))
    with pytest.raises(TypeError, match="BatchNorm"):
        laplace_log_marginal_likelihood(AugmentedModel(model, None), *_data(n=4, classes=3), torch.tensor(1.0))


def test_hyper_step_on_a_fixup_resnet_moves_the_augmentation_and_the_prior():
    torch.manual_seed(0)
    model = _perturbed(FixupResNet(depth=8, num_classes=3, in_channels=1))
    net = SeededAugmentedModel(model, SchwobelAffine(0.1), 2, make_generator(7))
    m = DiffLaplaceTraining(
        net, _task(), OptimConfig(batch_size=8), 4, seed=0, marglik_batch_size=8, n_aug_marglik=2, eval_samples=2
    )
    maxima0, prec0 = net.augmentation.maxima.detach().clone(), m.log_prior_prec.detach().clone()
    assert m.log_prior_prec.numel() == len(list(model.parameters()))  # layerwise: scalars get their own
    out = m.train_step(0)
    assert math.isfinite(out["marglik"])
    assert not torch.equal(net.augmentation.maxima.detach(), maxima0)
    assert not torch.equal(m.log_prior_prec.detach(), prec0)


# ------------------------------------------------------------------- (3c) several batches: two passes, one batch's memory


def _batched_setup(arch):
    torch.manual_seed(1)
    if arch == "cnn_dropout":  # a global-RNG draw inside the model too: both passes must see the same masks
        model = nn.Sequential(
            nn.Conv2d(1, 3, 3, padding=1),
            nn.Tanh(),
            nn.Conv2d(3, 4, 3, stride=2),
            nn.Tanh(),
            nn.Flatten(),
            nn.Dropout(0.3),
            nn.Linear(16, 3),
        )
        shape = (1, 6, 6)
    else:  # KFAC weight + bias blocks sharing G, and exact diagonal blocks (a module called twice)
        model, shape = _perturbed(_TinyFixup()), (1, 6, 6)
    model = model.double()
    aug = SchwobelAffine([0.3, 0.1, 0.1, 0.05, 0.1, 0.05]).double()
    x, y = _data(n=14, shape=shape, classes=3)
    n_prior = len(list(model.parameters()))
    log_prec = torch.linspace(-0.3, 0.4, n_prior, dtype=torch.float64).requires_grad_()
    return AugmentedModel(model, aug, 2), x.double(), y, log_prec


def _one_pass_reference(net, x, y, log_prec, batch_size, n_data, gen):
    """The same function by plain autograd: every batch's factors with their graphs, summed, one backward."""
    nll, blocks = 0.0, None
    for xb, yb in zip(x.split(batch_size), y.split(batch_size)):
        nll_b, blocks_b = kfac_factors(net, xb, yb, 3, gen, n_total=x.shape[0])
        nll = nll + nll_b
        blocks = (
            blocks_b
            if blocks is None
            else [
                Block(b.param, b.kind, [f + g for f, g in zip(b.factors, c.factors)]) for b, c in zip(blocks, blocks_b)
            ]
        )
    lml = log_marginal_likelihood_from_factors(nll, blocks, log_prec.exp(), n_data / x.shape[0])
    return lml, torch.autograd.grad(lml, [net.augmentation.maxima, log_prec])


@pytest.mark.parametrize("arch", ["cnn_dropout", "tiny_fixup"])
def test_two_pass_gradient_equals_one_pass_over_three_batches(arch):
    net, x, y, log_prec = _batched_setup(arch)
    torch.manual_seed(11)
    gen_ref = torch.Generator().manual_seed(5)
    ref, (g_aug, g_prec) = _one_pass_reference(net, x, y, log_prec, 5, 100, gen_ref)  # batches 5, 5, 4
    rng_ref = torch.random.get_rng_state()
    torch.manual_seed(11)
    gen = torch.Generator().manual_seed(5)
    value, (h_aug, h_prec) = log_marginal_likelihood_and_grads(
        net, x, y, log_prec.exp(), [net.augmentation.maxima, log_prec], 3, gen, n_data=100, batch_size=5
    )
    assert float(value) == pytest.approx(float(ref.detach()), rel=1e-12)
    assert g_aug.abs().min() > 0 and g_prec.abs().min() > 0
    torch.testing.assert_close(h_aug, g_aug, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(h_prec, g_prec, rtol=1e-8, atol=1e-10)
    # the streams end where one pass leaves them: the next hyper step draws what it drew before
    assert torch.equal(gen.get_state(), gen_ref.get_state())
    assert torch.equal(torch.random.get_rng_state(), rng_ref)


def test_several_batches_without_augmentation_randomness_equal_one_batch_and_laplace_torch():
    """Zero-width augmentation: the draws do not matter, so 3 uneven batches (15, 15, 10) give the marginal
    likelihood of the 40 examples in one batch, and laplace-torch's KronLaplace on them."""
    torch.manual_seed(0)
    model = _cnn()
    x, y = _data()
    frozen = SchwobelAffine(0.0)
    frozen.set_fixed([0.0] * 6)
    net = AugmentedModel(model, frozen, 3)
    log_prec = torch.linspace(-0.5, 1.0, len(list(model.parameters()))).requires_grad_()
    one = laplace_log_marginal_likelihood(net, x, y, log_prec.exp())
    (g_one,) = torch.autograd.grad(one, log_prec)
    value, (g,) = log_marginal_likelihood_and_grads(net, x, y, log_prec.exp(), [log_prec], batch_size=15)
    assert float(value) == pytest.approx(float(one.detach()), rel=1e-5)
    assert float(value) == pytest.approx(_reference(model, x, y, log_prec.detach().exp(), 15), rel=1e-5, abs=1e-4)
    torch.testing.assert_close(g, g_one, rtol=1e-4, atol=1e-5)


class _GraphBytes:
    """Bytes of the tensors autograd graphs hold for backward, live and at the peak: every saved tensor is
    counted from its graph node's creation until the node is freed (saved-tensor hooks; the packed box dies
    with the node)."""

    class _Box:
        def __init__(self, t):
            self.t = t

    def __init__(self):
        self.live = self.peak = 0

    def _pack(self, t):
        n = t.numel() * t.element_size()
        self.live += n
        self.peak = max(self.peak, self.live)
        box = self._Box(t.detach())  # the tensor itself would close a reference cycle through its grad_fn
        weakref.finalize(box, self._free, n)
        return box

    def _free(self, n):
        self.live -= n

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda box: box.t)


def test_graph_memory_does_not_grow_with_the_number_of_batches():
    """Peak bytes held by autograd graphs: two passes over 2 or 6 batches hold what one batch does; keeping
    every graph (the one-pass reference) grows with the batches, which shows the probe sees them."""
    net, x, y, log_prec = _batched_setup("tiny_fixup")
    x, y = torch.cat([x] * 3), torch.cat([y] * 3)  # 42 examples: up to 6 batches of 7
    wrt = [net.augmentation.maxima, log_prec]

    def peak(fn):
        probe = _GraphBytes()
        with probe.hooks():
            fn()
        assert probe.live == 0  # every graph freed at the end
        return probe.peak

    def two_pass(n):
        return peak(
            lambda: log_marginal_likelihood_and_grads(
                net, x[: 7 * n], y[: 7 * n], log_prec.exp(), wrt, 3, torch.Generator().manual_seed(5), 100, batch_size=7
            )
        )

    def kept(n):
        return peak(
            lambda: _one_pass_reference(net, x[: 7 * n], y[: 7 * n], log_prec, 7, 100, torch.Generator().manual_seed(5))
        )

    one_batch = two_pass(1)  # one batch: one pass with its graph
    assert one_batch > 0
    assert two_pass(2) <= 1.05 * one_batch and two_pass(6) <= 1.05 * one_batch
    assert kept(6) >= 4 * kept(1)


# ------------------------------------------------------------------- (4) the training schedule, resume


def _task(n=48, classes=3, seed=0):
    x, y = _data(n=n, shape=(1, 8, 8), classes=classes, seed=seed)
    xt, yt = _data(n=16, shape=(1, 8, 8), classes=classes, seed=seed + 1)
    return TaskData(x, y, xt, yt, n_classes=classes)


def _method(seed_init=0, n_steps=6):
    torch.manual_seed(seed_init)
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3))
    net = SeededAugmentedModel(cnn, SchwobelAffine(0.0), 2, make_generator(7))
    return DiffLaplaceTraining(
        net,
        _task(),
        OptimConfig(batch_size=16),
        n_steps,
        seed=0,
        burnin=2,
        marglik_every=2,
        marglik_steps=2,
        marglik_batches=2,
        marglik_batch_size=8,
        n_aug_marglik=3,
        eval_samples=2,
    )


def test_hyper_rounds_follow_burnin_and_frequency():
    assert count_hyper_rounds(10, burnin=4, every=2) == 4  # after steps 4, 6, 8, 10
    assert count_hyper_rounds(10, burnin=0, every=3) == 3
    m = _method()
    maxima0 = m.net.augmentation.maxima.detach().clone()
    prec0 = m.log_prior_prec.detach().clone()
    out = m.train_step(0)
    assert "marglik" not in out and torch.equal(m.net.augmentation.maxima, maxima0)  # burn-in
    out = m.train_step(1)  # step 2: two hyper steps
    assert math.isfinite(out["marglik"]) and math.isfinite(out["loss"])
    assert not torch.equal(m.net.augmentation.maxima.detach(), maxima0)
    assert not torch.equal(m.log_prior_prec.detach(), prec0)
    assert m.hyper_sched.last_epoch == 2
    metrics = m.final_metrics()
    assert {"test_acc", "train_ll", "aug_rotation", "marglik", "prior_prec_mean"} <= set(metrics)


def test_resume_from_state_dict_is_bit_identical():
    ref = _method()
    for s in range(6):
        ref.train_step(s)
    first = _method()
    for s in range(3):
        first.train_step(s)
    state = copy.deepcopy(first.state_dict())
    resumed = _method(seed_init=123)  # another initialisation: everything must come from the state
    resumed.load_state_dict(state)
    torch.manual_seed(999)  # the global RNG must not matter
    for s in range(3, 6):
        resumed.train_step(s)
    for (name, p), q in zip(ref.net.named_parameters(), resumed.net.parameters()):
        assert torch.equal(p, q), name
    assert torch.equal(ref.log_prior_prec, resumed.log_prior_prec)
    assert resumed.final_metrics() == ref.final_metrics()


def test_steps_create_no_tensor_off_the_datas_device():
    m = _method()
    with torch.device("meta"):  # see tests/test_device.py: a tensor made without a device would be meta
        for s in range(2):
            assert math.isfinite(m.train_step(s)["loss"])
        assert m.final_metrics()


# ------------------------------------------------------------------- (5) out of memory propagates


def test_out_of_memory_in_a_hyper_step_propagates_and_ends_the_loop_as_oom():
    m = _method()
    m.train_step(0)

    def boom(module, inputs):
        if inputs[0].shape[0] == 3 * 8:  # n_aug_marglik x one batch of 8: the marginal-likelihood passes
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    m.net.model[0].register_forward_pre_hook(boom)
    with pytest.raises(torch.OutOfMemoryError) as err:
        m.train_step(1)
    assert is_oom(err.value)
    result = run_loop(_method_with_hook(boom), LoopConfig(n_steps=6, eval_every=0))
    assert result.status == "oom" and result.steps == 1


def _method_with_hook(hook):
    m = _method()
    m.net.model[0].register_forward_pre_hook(hook)
    return m


def test_eigenvalues_fall_back_to_float64_when_float32_returns_nan(monkeypatch):
    """float32 LAPACK can return NaN eigenvalues for a finite factor without raising (seen with one
    thread on the MNIST CNN); the log-determinant must then come from float64, not become NaN."""
    from reprokit.methods import diff_laplace as dl

    a = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    f = (a @ a.T).float()  # PSD, rank 4
    real = torch.linalg.eigvalsh

    def flaky(x):
        return torch.full(x.shape[:-1], float("nan"), dtype=x.dtype) if x.dtype == torch.float32 else real(x)

    monkeypatch.setattr(torch.linalg, "eigvalsh", flaky)
    eigs = dl._eigvalsh(f)
    assert eigs.dtype == torch.float32 and torch.isfinite(eigs).all()
    assert torch.allclose(eigs.double(), real(f.double()), atol=1e-5)
