"""Last-layer marginal likelihood (Schwöbel et al. 2021): the orbit kernel, the ELBO's gradients, learning
on a rotation-invariant toy task, bit-identical resumption and placement (methods/last_layer_gp.py)."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

from reprokit.augment.affine import SchwobelAffine
from reprokit.data.task import TaskData
from reprokit.methods.last_layer_gp import (
    InvariantGP,
    LastLayerGPConfig,
    LastLayerGPModel,
    LastLayerGPTraining,
    mnist_cnn_features,
)
from reprokit.methods.standard import OptimConfig
from reprokit.models.mnist_cnn import MnistCNN


def _features(seed: int = 0, size: int = 16, dim: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * (size // 2) ** 2, dim),
        nn.Tanh(),
    )


def _blobs(n: int, size: int = 16, seed: int = 0) -> torch.Tensor:
    """Images with content away from the corners (a rotation keeps all of it)."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    mask = ((xx**2 + yy**2) < 0.6).float()
    return torch.rand((n, 1, size, size), generator=g) * mask


def _bars(n: int, seed: int, size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Class 0: one bar, class 1: a cross; each at a uniformly random orientation (labels rotation-invariant)."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    y = torch.randint(0, 2, (n,), generator=g)
    angle = (torch.rand(n, generator=g) * 2 - 1) * math.pi
    out = []
    for a, c in zip(angle.tolist(), y.tolist()):
        u = math.cos(a) * xx + math.sin(a) * yy
        v = -math.sin(a) * xx + math.cos(a) * yy
        img = ((v.abs() < 0.18) & (u.abs() < 0.75)).float()
        if c == 1:
            img = torch.maximum(img, ((u.abs() < 0.18) & (v.abs() < 0.75)).float())
        out.append(img)
    return torch.stack(out).unsqueeze(1), y


def _model(ranges, dim: int = 8, lengthscale: float = 1.0) -> LastLayerGPModel:
    feats = _features(dim=dim)
    z = torch.randn(6, dim)
    gp = InvariantGP(z, n_classes=3)
    gp.kernel.base_kernel.base_kernel.lengthscale = lengthscale
    return LastLayerGPModel(feats, SchwobelAffine(ranges), gp)


# ----------------------------------------------------------------------------------- (1) the kernel


def test_orbit_kernel_with_the_identity_augmentation_is_the_base_kernel():
    model = _model(0.0)
    x = _blobs(5)
    with torch.no_grad():
        orbits = model.orbit_features(x, 7, torch.Generator().manual_seed(0))  # (N, S, D), all S identical
        feats = model.features(x)
        kernel = model.gp.kernel
        base = kernel.base_kernel(feats, feats).to_dense()
        torch.testing.assert_close(kernel(orbits, orbits), base, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(kernel.diag(orbits), base.diagonal(), atol=1e-5, rtol=1e-5)
        # an inducing point is an orbit of size one: K_uf = base kernel too
        torch.testing.assert_close(kernel(feats.unsqueeze(1), orbits), base, atol=1e-5, rtol=1e-5)


def test_orbit_kernel_is_symmetric_psd_and_nearly_invariant_for_large_orbits():
    model = _model({"rotation": math.pi}, lengthscale=0.1)  # the whole rotation group; features ~0.1 apart
    x = _blobs(6)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        kernel = model.gp.kernel
        orbits = model.orbit_features(x, 64, gen)
        k = kernel(orbits, orbits)
        torch.testing.assert_close(k, k.T, atol=1e-6, rtol=1e-6)
        assert torch.linalg.eigvalsh(k.double()).min() > -1e-6
        # k_inv(x, R x) ~ k_inv(x, x) (independent orbits for each argument); the base kernel is not invariant
        x0 = x[:1]
        xr = torch.rot90(x0, 1, dims=(-2, -1))
        o1, o2, o_r = (model.orbit_features(v, 400, gen) for v in (x0, x0, xr))
        k_same, k_rot = float(kernel(o1, o2)), float(kernel(o1, o_r))
        f0, fr = model.features(x0), model.features(xr)
        base_same, base_rot = float(kernel.base_kernel(f0, f0).to_dense()), float(kernel.base_kernel(f0, fr).to_dense())
        assert abs(k_rot - k_same) < 0.03 * k_same
        assert abs(k_rot - k_same) < 0.1 * abs(base_rot - base_same)


# ----------------------------------------------------------------------------------- the method


def _toy_data(n_train: int = 64, n_test: int = 200) -> TaskData:
    x, y = _bars(n_train + n_test, seed=3)
    return TaskData(x[:n_train], y[:n_train], x[n_train:], y[n_train:], n_classes=2)


def _method(data: TaskData, init: float = 0.05, head: nn.Module | None = None, **cfg) -> LastLayerGPTraining:
    settings = dict(n_inducing=16, orbit_size=4, eval_orbit_size=4, likelihood_samples=4, eval_likelihood_samples=8)
    settings.update(cfg)
    return LastLayerGPTraining(
        _features(),
        SchwobelAffine(init),
        data,
        OptimConfig(batch_size=16),
        LastLayerGPConfig(**settings),
        seed=0,
        head=head,
    )


def _staged(data: TaskData, **cfg) -> LastLayerGPTraining:
    torch.manual_seed(1)
    return _method(data, init=0.0, head=nn.Linear(8, 2), pretrain_steps=3, gp_warmup_steps=2, **cfg)


def test_stages_pretrain_the_cnn_then_the_gp_alone_then_everything():
    m = _staged(_toy_data())
    z0 = m.model.gp.orbit_strategy.inducing_points.detach().clone()
    gp0 = {k: v.detach().clone() for k, v in m.model.gp.state_dict().items()}
    feat0 = m.model.features[0].weight.detach().clone()
    for step in range(3):  # stage 1: cross-entropy of CNN + head; the GP is untouched
        assert m.stage(step) == "pretrain"
        assert "nll" not in m.train_step(step)
    assert all(torch.equal(v, m.model.gp.state_dict()[k]) for k, v in gp0.items())
    assert not torch.equal(feat0, m.model.features[0].weight)

    feat1 = m.model.features[0].weight.detach().clone()
    aug1 = m.augmentation.maxima.detach().clone()
    m.train_step(3)  # stage 2 starts: inducing points at the trained features, then a GP-only step
    assert m.stage(3) == "gp_warmup" and m.stage(5) == "joint"
    z = m.model.gp.orbit_strategy.inducing_points.detach()
    assert not torch.equal(z, z0)
    with torch.no_grad():
        expected = m._inducing_features(m.model.features)  # the same training images, the trained features
    torch.testing.assert_close(z, expected, atol=0.05, rtol=0)  # one GP Adam step (lr 0.01) away from them
    assert torch.equal(feat1, m.model.features[0].weight) and torch.equal(aug1, m.augmentation.maxima)
    m.train_step(4)
    m.train_step(5)  # stage 3: the network and psi move too
    assert not torch.equal(feat1, m.model.features[0].weight) and not torch.equal(aug1, m.augmentation.maxima)


def test_pretraining_needs_the_output_layer():
    with pytest.raises(ValueError, match="head"):
        _method(_toy_data(), pretrain_steps=2)


def test_resume_across_the_stage_boundaries_is_bit_identical():
    data = _toy_data()
    full = _staged(data)
    losses_full = [full.train_step(s)["loss"] for s in range(8)]
    first = _staged(data)
    losses = [first.train_step(s)["loss"] for s in range(3)]  # checkpoint at the end of stage 1
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    resumed = _staged(_toy_data())
    buf.seek(0)
    resumed.load_state_dict(torch.load(buf, weights_only=False))
    losses += [resumed.train_step(s)["loss"] for s in range(3, 8)]
    assert losses == losses_full
    assert full.evaluate(8) == resumed.evaluate(8)


def test_elbo_gradients_reach_the_augmentation_the_cnn_and_the_gp():
    m = _method(_toy_data(), init=0.0)
    idx = torch.arange(16)
    elbo, _, _ = m.elbo(
        m.data.x_train[idx], m.data.y_train[idx], torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    )
    (-elbo).backward()
    assert m.augmentation.maxima.grad is not None and (m.augmentation.maxima.grad.abs() > 0).all()
    assert m.model.features[0].weight.grad.abs().sum() > 0
    gp = m.model.gp
    assert gp.kernel.base_kernel.raw_outputscale.grad.abs() > 0
    assert gp.orbit_strategy.inducing_points.grad.abs().sum() > 0
    assert gp.orbit_strategy._variational_distribution.variational_mean.grad.abs().sum() > 0


def test_mnist_cnn_features_drop_the_output_layer_and_share_weights():
    cnn = MnistCNN()
    feats = mnist_cnn_features(cnn)
    assert feats(torch.zeros(2, 1, 28, 28)).shape == (2, 50)
    assert feats.fc2 is cnn.fc2 and "fc3" not in dict(feats.named_children())


def test_learns_the_rotation_invariance_of_a_toy_task():
    """Two classes (bar / cross at a uniformly random orientation), 32 training images, fixed pixel features
    (van der Wilk et al.'s setting): the ELBO widens the rotation range (to ~pi/2, the cross's symmetry)."""
    data = _toy_data(n_train=32)
    m = LastLayerGPTraining(
        nn.Sequential(nn.AvgPool2d(2), nn.Flatten()),
        SchwobelAffine({"rotation": 0.05}),
        data,
        OptimConfig(batch_size=16),
        LastLayerGPConfig(
            n_inducing=16, orbit_size=8, likelihood_samples=4, eval_likelihood_samples=8, aug_lr=0.02, gp_lr=0.02
        ),
        seed=0,
    )
    assert m.opt is None  # no trainable feature weights: no network optimiser
    for step in range(80):
        assert math.isfinite(m.train_step(step)["loss"])
    metrics = m.final_metrics()
    assert metrics["aug_rotation"] > 0.5
    assert metrics["test_acc"] > 0.75 and metrics["test_ll"] > math.log(0.5)


def test_trains_cnn_features_jointly_to_above_chance():
    torch.manual_seed(0)
    m = _method(_toy_data(), init=0.3, aug_lr=0.02, gp_lr=0.02)
    for step in range(100):
        assert math.isfinite(m.train_step(step)["loss"])
    metrics = m.final_metrics()
    assert metrics["test_acc"] > 0.75
    assert math.isfinite(metrics["test_ll"]) and metrics["test_ll"] > math.log(0.5)


# ----------------------------------------------------------------------------------- (4) resumption


def _params(m: LastLayerGPTraining) -> dict:
    return {k: v.detach().clone() for k, v in m.model.state_dict().items()}


def test_resume_from_state_dict_is_bit_identical():
    data = _toy_data()
    full = _method(data)
    losses_full = [full.train_step(s)["loss"] for s in range(6)]

    first = _method(data)
    losses = [first.train_step(s)["loss"] for s in range(3)]
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    first.evaluate(3)  # evaluating before the checkpoint is taken/after must not matter
    resumed = _method(_toy_data())
    buf.seek(0)
    resumed.load_state_dict(torch.load(buf, weights_only=False))
    losses += [resumed.train_step(s)["loss"] for s in range(3, 6)]

    assert losses == losses_full
    a, b = _params(full), _params(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert full.evaluate(6) == resumed.evaluate(6)


# ----------------------------------------------------------------------------------- (5) placement


def test_steps_create_no_tensor_off_the_datas_device():
    """After construction, steps, evaluations and final metrics run with torch's default device set to "meta"
    (tests/test_device.py's trick): a tensor made without naming a device would fail them."""
    m = _method(_toy_data(n_test=20))
    with torch.device("meta"):
        for step in range(2):
            assert math.isfinite(m.train_step(step)["loss"])
        assert math.isfinite(m.evaluate(2)["test_ll"])
        assert math.isfinite(m.final_metrics()["test_acc"])
    gens = (m.sampler.gen, m.aug_gen, m.latent_gen)
    assert all(g.device == m.data.device for g in gens)
    assert all(t.device == m.data.device for t in [*m.model.parameters(), *m.model.buffers()])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_cuda():
    m = _method(_toy_data().to("cuda"))
    for step in range(2):
        assert math.isfinite(m.train_step(step)["loss"])
    assert math.isfinite(m.final_metrics()["test_acc"])
    assert all(p.is_cuda for p in m.model.parameters())
