"""Learned affine augmentations (partitioned paper Figs. 3, 5-9): the methods and the experiment kind.

Behaviour checked: Partitioned (Ens.) network k never trains on chunks > k and its hyper step leaves
the networks alone; Augerino's regulariser widens the augmentation; an identity augmentation equals
standard training; methods resume bit-identically from their state dicts; a retrain cell trains with
exactly the ranges its source cell found (and is NaN when the source diverged); random-search draws
stay in their ranges. Small fake data throughout (no dataset files needed).
"""

import copy
import json
import math

import pytest
import torch
from torch import nn

from reprokit.augment.affine import AugerinoAffine, SchwobelAffine
from reprokit.builders import CellContext, affine_invariance
from reprokit.cell import run_cell
from reprokit.config import Cell, ConfigError
from reprokit.data import registry, variants
from reprokit.data.registry import Bundle
from reprokit.data.task import TaskData
from reprokit.data.variants import variant_path
from reprokit.methods.augerino import AugerinoTraining
from reprokit.methods.augmented import SeededAugmentedModel
from reprokit.methods.partitioned_ensemble import PartitionedEnsembleTraining
from reprokit.methods.standard import OptimConfig, StandardTraining
from reprokit.models.mnist_cnn import MnistCNN
from reprokit.plan.affine_invariance import PLAN
from reprokit.runtime import generator as make_generator


def tiny_task(n=60, n_test=20, shape=(1, 8, 8), classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TaskData(
        torch.rand(n, *shape, generator=g),
        torch.randint(0, classes, (n,), generator=g),
        torch.rand(n_test, *shape, generator=g),
        torch.randint(0, classes, (n_test,), generator=g),
        n_classes=classes,
    )


def mlp(in_features=64, classes=3):
    return nn.Sequential(nn.Flatten(), nn.Linear(in_features, 16), nn.ReLU(), nn.Linear(16, classes))


def chunk_ids(n=60, props=(0.5, 0.25, 0.25)):
    return torch.as_tensor(variants.chunk_assignment(n, props, 0)).long()


# ----------------------------------------------------------------------------------------------
# Partitioned (Ens.)


@pytest.mark.parametrize("update", ["all", "sample"])
@pytest.mark.parametrize("k", [1, 2])
def test_ensemble_network_k_never_trains_on_later_chunks(update, k):
    torch.manual_seed(0)
    data = tiny_task()
    ids = chunk_ids()
    data.x_train[ids >= k] = float("nan")  # any update on chunks > k poisons that network
    nets = [mlp() for _ in range(3)]
    m = PartitionedEnsembleTraining(nets, [], data, ids, OptimConfig(batch_size=8), n_steps=40, seed=0, update=update)
    for step in range(40):
        m.train_step(step)
    for j, net in enumerate(nets, start=1):
        finite = all(torch.isfinite(p).all() for p in net.parameters())
        if j <= k:
            assert finite, f"network {j} saw data from a chunk > {k}"
        elif update == "all":
            assert not finite, f"network {j} should have trained on chunk {k + 1}"


def test_ensemble_batches_come_from_d1k():
    data = tiny_task()
    ids = chunk_ids()
    m = PartitionedEnsembleTraining([mlp() for _ in range(3)], [], data, ids, OptimConfig(batch_size=32), 5, seed=1)
    seen = {1: set(), 2: set(), 3: set()}
    for _ in range(20):
        for k, idx in m.param_batches():
            seen[k] |= set(ids[idx].tolist())
    assert seen == {1: {0}, 2: {0, 1}, 3: {0, 1, 2}}


def test_ensemble_hyper_step_moves_psi_not_networks():
    torch.manual_seed(0)
    data = tiny_task(shape=(1, 28, 28))
    aug = SchwobelAffine(0.1)
    gen = make_generator(0)
    nets = [SeededAugmentedModel(mlp(784), aug, 2, gen) for _ in range(3)]
    m = PartitionedEnsembleTraining(
        nets, list(aug.parameters()), data, chunk_ids(), OptimConfig(batch_size=8), 5, seed=0, hyper_lr=0.05
    )
    before = [copy.deepcopy(n.model.state_dict()) for n in nets]
    psi = aug.maxima.detach().clone()
    m.hyper_step()
    assert not torch.equal(psi, aug.maxima.detach())
    for n, b in zip(nets, before):
        for key, v in n.model.state_dict().items():
            assert torch.equal(v, b[key])


# ----------------------------------------------------------------------------------------------
# Augerino


class ConstantLogits(nn.Module):
    """Ignores its input, so the data loss carries no gradient to the augmentation widths."""

    def __init__(self, classes=3):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(classes))

    def forward(self, x):
        return self.bias.expand(x.shape[0], -1)


@pytest.mark.parametrize("strength", [0.0, 0.01])
def test_augerino_regulariser_pushes_widths_up(strength):
    data = tiny_task(shape=(1, 8, 8))
    aug = AugerinoAffine()
    net = SeededAugmentedModel(ConstantLogits(), aug, 2, make_generator(0))
    w0 = aug.widths().detach().clone()
    m = AugerinoTraining(net, aug, data, OptimConfig(batch_size=8), 20, seed=0, hyper_lr=0.05, reg_strength=strength)
    out = [m.train_step(s) for s in range(20)]
    w = aug.widths().detach()
    if strength > 0:
        assert (w > w0 + 0.1).all(), (w0, w)
        assert out[-1]["reg"] < out[0]["reg"] < 0  # -strength * ||w|| goes down as widths grow
    else:
        assert torch.allclose(w, w0)


def test_augerino_safe_regulariser_stops_at_threshold():
    data = tiny_task()
    aug = AugerinoAffine(init_raw=11.0)  # every width above the safe threshold of 10
    net = SeededAugmentedModel(ConstantLogits(), aug, 1, make_generator(0))
    m = AugerinoTraining(net, aug, data, OptimConfig(batch_size=8), 5, seed=0, reg_strength=0.01, reg_kind="safe")
    raw = aug.raw_width.detach().clone()
    assert m.train_step(0)["reg"] == 0.0
    assert torch.equal(raw, aug.raw_width.detach())


# ----------------------------------------------------------------------------------------------
# identity augmentation == standard training; bit-identical resume


def test_identity_augmentation_equals_standard_training():
    data = tiny_task(n=40, shape=(1, 28, 28), classes=10)
    torch.manual_seed(3)
    plain = MnistCNN()
    torch.manual_seed(3)
    cnn = MnistCNN()
    aug = SchwobelAffine(0.0)
    aug.set_fixed([0.0] * 6)
    wrapped = SeededAugmentedModel(cnn, aug, 1, make_generator(0))
    opt = OptimConfig(optimizer="sgd", lr=0.1, batch_size=8)  # (Adam would amplify float noise in ~0 gradients)
    a = StandardTraining(plain, data, opt, 6, seed=0)
    b = StandardTraining(wrapped, data, opt, 6, seed=0)
    for s in range(6):
        la, lb = a.train_step(s)["loss"], b.train_step(s)["loss"]
        assert abs(la - lb) < 1e-5
    for p, q in zip(plain.parameters(), cnn.parameters()):
        assert torch.allclose(p, q, atol=1e-5)


def _ens(seed_init):
    torch.manual_seed(seed_init)
    data = tiny_task(shape=(1, 28, 28))
    aug = SchwobelAffine(0.05)
    gen = make_generator(7)
    nets = [SeededAugmentedModel(mlp(784), aug, 2, gen) for _ in range(3)]
    return PartitionedEnsembleTraining(
        nets, list(aug.parameters()), data, chunk_ids(), OptimConfig(batch_size=8), 8, seed=0, hyper_lr=0.01
    )


def _augerino(seed_init):
    torch.manual_seed(seed_init)
    data = tiny_task(shape=(1, 28, 28))
    aug = AugerinoAffine()
    net = SeededAugmentedModel(mlp(784), aug, 2, make_generator(7))
    return AugerinoTraining(net, aug, data, OptimConfig(batch_size=8), 8, seed=0)


@pytest.mark.parametrize("factory", [_ens, _augerino])
def test_resume_from_state_dict_is_bit_identical(factory):
    ref = factory(0)
    for s in range(8):
        ref.train_step(s)
    first = factory(0)
    for s in range(4):
        first.train_step(s)
    state = copy.deepcopy(first.state_dict())
    resumed = factory(123)  # different initialisation: everything must come from the state
    resumed.load_state_dict(state)
    torch.manual_seed(999)  # the global RNG must not matter
    for s in range(4, 8):
        resumed.train_step(s)
    assert resumed.final_metrics() == ref.final_metrics()


# ----------------------------------------------------------------------------------------------
# the experiment kind on a fake MNIST (no files needed)


def fake_image_context(monkeypatch, tmp_path, name, shape, n_train, n_test):
    """Replace registry.load by random images of `shape` for dataset `name`; return a CellContext."""
    g = torch.Generator().manual_seed(0)
    n = n_train + n_test

    def load(asked, mirrors=(), cache_dir=None, download=False, checksums=None, **kw):
        assert asked == name
        x = torch.rand(n, *shape, generator=g)
        if kw.get("dtype") == "uint8":
            x = (x * 255).to(torch.uint8)
        y = torch.arange(n) % 10
        return Bundle(x[:n_train], y[:n_train], x[n_train:], y[n_train:], "classification", 10, name, {})

    monkeypatch.setattr(registry, "load", load)
    return CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path / "variants"))


@pytest.fixture
def fake_mnist(monkeypatch, tmp_path):
    return fake_image_context(monkeypatch, tmp_path, "mnist", (1, 28, 28), 120, 30)


SETTINGS = dict(
    model="mnist_cnn",
    lr=1e-3,
    batch_size=8,
    n_steps=2,
    eval_every=1,
    aug_samples=2,
    eval_aug_samples=2,
    hyper_lr=1e-3,
    augmentation="schwobel",
    chunk_proportions=[8, 1, 1],
    n_test=None,
    dataset="mnist",
    n_train=60,
    rotated=False,
)


def make_cell(ctx, method, extra=None, **coords):
    settings = {**SETTINGS, **(extra or {})}
    cell = Cell(
        "test", "t", tuple({"method": method, "seed": 0, **coords}.items()), settings, "affine_invariance", ("mnist",)
    )
    for name, (ds, fn) in PLAN.required_variants(cell).items():
        path = variant_path(ctx.variants_dir, ds, fn)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            variants.build_variant(ds, fn, path, [])
        ctx.variant_paths[name] = path
    return cell


SMALL = {
    "diff_laplace": {"diff_laplace": {"marglik_every": 1, "n_aug_marglik": 2}},  # the defaults are paper scale
    "last_layer_ml": {"last_layer_ml": {"n_inducing": 8, "orbit_size": 2, "lik_samples": 2, "eval_lik_samples": 2}},
}


@pytest.mark.parametrize(
    "method", ["baseline", "augerino", "diff_laplace", "last_layer_ml", "partitioned", "partitioned_ens", "random"]
)
def test_every_method_runs_and_reports_ranges(fake_mnist, tmp_path, method):
    extra = SMALL.get(method)
    cell = make_cell(fake_mnist, method, sample=3) if method == "random" else make_cell(fake_mnist, method, extra)
    record = run_cell(cell, fake_mnist, tmp_path / method, None)
    assert record["status"] == "completed" and record["steps"] == 2
    m = record["metrics"]
    assert 0.0 <= m["test_acc"] <= 1.0
    if method != "baseline":
        assert "aug_rotation" in m
    if method in ("partitioned", "partitioned_ens"):
        assert record["info"]["chunk_sizes"] == [48, 6, 6]
    if method == "diff_laplace":  # hyper steps ran (every step here): a finite marginal likelihood
        assert math.isfinite(m["marglik"]) and m["prior_prec_mean"] > 0
    if method == "last_layer_ml":
        assert m["n_inducing"] == 8 and "gp_lengthscale" in m


def test_retrain_cell_uses_the_found_ranges(fake_mnist, tmp_path):
    found = {"rotation": 2.5, "shear": 0.1, "translate_x": 0.2, "translate_y": 0.05, "scale_x": 0.3, "scale_y": 0.0}
    src = tmp_path / "src" / "metrics.json"
    src.parent.mkdir()
    src.write_text(json.dumps({"status": "completed", "metrics": {f"aug_{k}": v for k, v in found.items()}}))
    cell = make_cell(fake_mnist, "retrain", {"source_experiment": "x", "_inputs": {"found": str(src)}})
    run = affine_invariance.build(cell, fake_mnist)
    aug = run.method.net.augmentation
    assert aug.ranges() == pytest.approx(found)
    assert not any(p.requires_grad for p in aug.parameters())
    record = run_cell(cell, fake_mnist, tmp_path / "out", None)
    assert record["status"] == "completed"
    assert {k: record["metrics"][f"aug_{k}"] for k in found} == pytest.approx(found)
    assert record["info"]["fixed_ranges"] == pytest.approx(found)


def test_retrain_of_a_diverged_source_is_nan_not_a_crash(fake_mnist, tmp_path):
    src = tmp_path / "metrics.json"
    src.write_text(
        json.dumps({"status": "diverged", "metrics": {f"aug_{n}": float("nan") for n in SchwobelAffine.names}})
    )
    cell = make_cell(fake_mnist, "retrain", {"source_experiment": "x", "_inputs": {"found": str(src)}})
    record = run_cell(cell, fake_mnist, tmp_path / "out", None)
    assert record["status"] == "diverged" and math.isnan(record["metrics"]["test_acc"])


def test_required_cells_point_retrain_at_its_source():
    coords = (
        ("dataset", "mnist"),
        ("rotated", True),
        ("method", "retrain"),
        ("param_proportions", [8, 1]),
        ("chunk_proportions", [1, 8]),
        ("seed", 1),
    )
    cell = Cell(
        "quick", "retrain_x", coords, {**SETTINGS, "source_experiment": "sens_x"}, "affine_invariance", ("mnist",)
    )
    ((name, (exp, src)),) = PLAN.required_cells(cell).items()
    assert name == "found" and exp == "sens_x"
    assert src == {**dict(coords), "method": "partitioned"}
    other = Cell("quick", "x", (("method", "partitioned"), ("seed", 0)), SETTINGS, "affine_invariance", ("mnist",))
    with pytest.raises(ConfigError, match=r"retrain_x \(affine_invariance\)\.n_train: required"):
        PLAN.required_cells(Cell("quick", "retrain_x", coords, {"source_experiment": "sens_x"}, "affine_invariance"))
    assert PLAN.required_cells(other) == {}


def test_random_ranges_are_in_range_and_fixed_per_sample():
    names = SchwobelAffine.names
    draws = []
    for sample in range(50):
        cell = Cell(
            "test",
            "t",
            (("method", "random"), ("sample", sample), ("seed", 0)),
            {**SETTINGS, "random_ranges": {"rotation": math.pi, "default": 0.5}},
            "affine_invariance",
            ("mnist",),
        )
        st = PLAN.typed_settings(cell)
        r = affine_invariance.random_ranges(st, names)
        assert r == affine_invariance.random_ranges(st, names)
        assert 0 <= r["rotation"] <= math.pi and all(0 <= r[n] <= 0.5 for n in names if n != "rotation")
        draws.append(r["rotation"])
    assert max(draws) > 2.0 and len(set(draws)) == 50


def test_cifar_settings_of_fig3b_build_and_run(monkeypatch, tmp_path):
    """Fig. 3b/3c cells are n/a here (no data); their settings (fixup ResNet, SGD + cosine, sqrt weight
    decay scaling, Immer et al. generators) still build and train on a fake CIFAR-shaped set."""
    ctx = fake_image_context(monkeypatch, tmp_path, "cifar10", (3, 32, 32), 40, 20)
    extra = dict(
        model="fixup_resnet8",
        optimizer="sgd",
        lr=0.1,
        momentum=0.9,
        lr_schedule="cosine",
        weight_decay=1e-4,
        wd_scaling="sqrt",
        augmentation="immer",
        n_train=40,
        dataset="cifar10",
        rotated=True,
        rotation_seed=0,
        n_steps=2,
        rotated_steps_factor=2,
    )
    cell = make_cell(ctx, "partitioned", extra)
    record = run_cell(cell, ctx, tmp_path / "out", None)
    assert record["status"] == "completed" and record["steps"] == 4  # doubled for rotated data
    assert "aug_rotation" in record["metrics"]
