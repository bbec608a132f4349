"""Augerino as Benton et al.'s code has it (2026-11-23, commit 4815538): the standard loss NLL - reg * ||w|| and its
"safe" variant, whose regulariser (value and gradient) is off once any width reaches the threshold in absolute value;
the parametrisation partitioned training uses is the default (App. I.4).

Behaviour checked: the safe switch turns the gradient off exactly at |w| = threshold, for every
parametrisation and for negative (signed) widths; the standard variant on a setting that drives the
widths up ends as a diverged run with NaN metrics, not an exception, while the safe variant completes;
signed widths growing negative stop at the threshold too.
"""

import math

import numpy as np
import pytest
import torch
from test_mnist_invariance import fake_image_context, make_cell
from torch import nn

from reprokit.augment.affine import augerino_regularizer, build_augmentation
from reprokit.cell import run_cell
from reprokit.data.task import TaskData
from reprokit.loop import LoopConfig, run_loop
from reprokit.methods.augerino import AugerinoTraining, augerino_parametrisation
from reprokit.methods.augmented import SeededAugmentedModel
from reprokit.methods.standard import OptimConfig
from reprokit.runtime import generator as make_generator

KINDS = ["schwobel", "immer", "augerino"]


def reg_grad(aug, threshold):
    for p in aug.parameters():
        p.grad = None
    term = augerino_regularizer(aug, "safe", threshold)
    term.backward()
    return term.item(), next(aug.parameters()).grad


@pytest.mark.parametrize("kind,sign", [(k, 1.0) for k in KINDS] + [("schwobel", -1.0), ("immer", -1.0)])
def test_safe_switch_turns_the_gradient_off_exactly_at_the_threshold(kind, sign):
    aug = build_augmentation(kind)
    with torch.no_grad():  # widths 0.5..3 (rotation stays below pi: Immer clamps it), one of them negative
        p = next(aug.parameters())
        p.copy_(torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]))
        if kind != "augerino":
            p[5] = sign * 3.0
    w = aug.regularizer_widths().detach()
    largest = float(w.abs().max())
    assert largest == pytest.approx(3.0 if kind != "augerino" else float(nn.functional.softplus(torch.tensor(3.0))))
    # just above the largest |w|: on, with the standard variant's value and gradient
    above = float(np.nextafter(np.float32(largest), np.float32(np.inf)))
    value, grad = reg_grad(aug, above)
    std = augerino_regularizer(aug, "standard")
    assert value == pytest.approx(std.item()) and value < 0
    assert torch.count_nonzero(grad) == grad.numel()
    # at the largest |w| (reached, not exceeded): off, value and gradient exactly zero
    value, grad = reg_grad(aug, largest)
    assert value == 0.0 and torch.count_nonzero(grad) == 0


def tiny_task(n=60, classes=3):
    g = torch.Generator().manual_seed(0)
    return TaskData(
        torch.rand(n, 1, 8, 8, generator=g),
        torch.randint(0, classes, (n,), generator=g),
        torch.rand(20, 1, 8, 8, generator=g),
        torch.randint(0, classes, (20,), generator=g),
        n_classes=classes,
    )


def augerino(kind, reg_kind, init=None, strength=1.0, hyper_lr=1.0):
    torch.manual_seed(0)
    aug = build_augmentation(kind) if init is None else build_augmentation(kind, init=init)
    net = SeededAugmentedModel(
        nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3)), aug, 2, make_generator(0)
    )
    return AugerinoTraining(
        net,
        aug,
        tiny_task(),
        OptimConfig(batch_size=8),
        150,
        seed=0,
        hyper_lr=hyper_lr,
        reg_strength=strength,
        reg_kind=reg_kind,
    )


@pytest.mark.parametrize("kind", ["schwobel", "augerino"])
def test_standard_variant_diverges_to_nan_and_safe_does_not(kind):
    """A strong regulariser with a large width learning rate (reg 1, lr 1) drives the widths up until the
    sampled scale overflows: the loss turns NaN and the loop records a divergence instead of raising."""
    init = 0.1 if kind == "schwobel" else None
    m = augerino(kind, "standard", init)
    result = run_loop(m, LoopConfig(n_steps=150, eval_every=0))
    assert result.status == "diverged" and result.steps < 150
    assert math.isnan(result.curve[-1]["loss"])
    safe = augerino(kind, "safe", init)
    result = run_loop(safe, LoopConfig(n_steps=150, eval_every=0))
    w = safe.augmentation.regularizer_widths().detach().abs()
    assert result.status == "completed" and torch.isfinite(w).all()
    assert float(w.max()) >= 10.0 and float(w.max()) < 40.0  # grew to the switch, then stopped being pushed


def test_safe_variant_stops_signed_widths_growing_negative():
    """Schwöbel's maxima are signed: with a negative start the regulariser pushes them to -inf; the safe
    switch looks at |w|, so they stop as positive ones do (they would diverge if it tested w < 10)."""
    m = augerino("schwobel", "safe", init=0.1)
    with torch.no_grad():
        m.augmentation.maxima.neg_()
    result = run_loop(m, LoopConfig(n_steps=150, eval_every=0))
    w = m.augmentation.maxima.detach()
    assert result.status == "completed"
    assert float(w.min()) <= -10.0 and float(w.abs().max()) < 40.0


@pytest.fixture
def fake_mnist(monkeypatch, tmp_path):
    return fake_image_context(monkeypatch, tmp_path, "mnist", (1, 28, 28), 120, 30)


def test_standard_variant_cell_is_diverged_with_nan_metrics(fake_mnist, tmp_path):
    """Through the cell: the plain variant's divergence is a NaN cell with status 'diverged' (App. E)."""
    extra = dict(
        n_steps=200,
        aug_init=60.0,  # exp(scale) overflows beyond 88
        augerino=dict(reg_kind="standard", reg=1.0, hyper_lr=5.0, augmentation="schwobel"),
    )
    record = run_cell(make_cell(fake_mnist, "augerino", extra), fake_mnist, tmp_path / "out", None)
    assert record["status"] == "diverged" and record["steps"] < 200
    assert math.isnan(record["metrics"]["test_acc"]) and math.isnan(record["metrics"]["aug_rotation"])


def test_parametrisation_default_is_the_partitioned_ones():
    assert augerino_parametrisation("same", "schwobel") == "schwobel"  # MNIST (App. I.4)
    assert augerino_parametrisation("same", "immer") == "immer"  # CIFAR
    assert augerino_parametrisation("augerino", "schwobel") == "augerino"  # Benton et al.'s own, as an option
    assert augerino_parametrisation("immer", "schwobel") == "immer"
    with pytest.raises(ValueError, match="same"):
        augerino_parametrisation("benton", "schwobel")
    with pytest.raises(ValueError):
        augerino_parametrisation("same", "none")


def test_chunked_evaluation_draws_the_same_augmentations(monkeypatch):
    """On a CPU, predict_augmented splits a forward into runtime.CPU_INFERENCE_CHUNK images: the augmentations are
    drawn for the whole batch first, so the predictive is the unchunked one (up to float rounding), and every
    network forward takes at most that many images."""
    from reprokit import runtime
    from reprokit.methods.augmented import predict_augmented

    torch.manual_seed(0)
    aug = build_augmentation("schwobel", init=0.3)
    seen = []
    body = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 3))
    body.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[0]))
    net = SeededAugmentedModel(body, aug, 2, make_generator(0))
    x = torch.rand(50, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    whole = predict_augmented(net, x, 4, make_generator(5), batch_size=50)
    assert seen == [200]
    monkeypatch.setattr(runtime, "CPU_INFERENCE_CHUNK", 64)
    seen.clear()
    parts = predict_augmented(net, x, 4, make_generator(5), batch_size=50)
    assert seen == [64, 64, 64, 8]
    torch.testing.assert_close(parts, whole)
    assert not torch.equal(predict_augmented(net, x, 4, make_generator(6), batch_size=50), whole)  # draws matter
