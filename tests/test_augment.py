"""Learnable affine augmentations, the augmented-model wrapper, Augerino regulariser, concrete dropout."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from reprokit.augment.affine import (
    AugerinoAffine,
    AugmentedModel,
    ImmerAffine,
    SchwobelAffine,
    affine_grid,
    apply_affine,
    augerino_regularizer,
    augmentation_kinds,
    build_augmentation,
    rotation_matrix,
)
from reprokit.augment.concrete_dropout import ConcreteDropout, concrete_dropout_parameters, make_dropout

KINDS = ["schwobel", "immer", "augerino"]


def _images(n=3, c=2, h=9, w=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, h, w, generator=g)


def _coeffs(aug, **values):
    c = torch.zeros(len(aug.names))
    for k, v in values.items():
        c[aug.names.index(k)] = v
    return c


# ------------------------------------------------------------------------------------------------ identity


@pytest.mark.parametrize("kind", KINDS)
def test_zero_ranges_leave_images_unchanged(kind):
    x = _images()
    aug = build_augmentation(kind)
    aug.set_fixed(0.0)
    out = aug(x, n_samples=4)
    assert out.shape == (4, *x.shape)
    for s in range(4):
        torch.testing.assert_close(out[s], x, atol=1e-5, rtol=0)
    assert all(abs(v) < 1e-9 for v in aug.ranges().values())


@pytest.mark.parametrize("kind", ["schwobel", "immer"])
def test_default_init_is_identity(kind):
    # Schwöbel maxima and Immer half-widths initialise to 0 (identity augmentation)
    x = _images(seed=1)
    out = build_augmentation(kind)(x, n_samples=3)
    torch.testing.assert_close(out, x.expand(3, *x.shape), atol=1e-5, rtol=0)


def test_nonzero_ranges_change_images():
    x = _images()
    for kind in KINDS:
        aug = build_augmentation(kind)
        aug.set_ranges({"rotation": 0.5})
        assert (aug(x, 2) - x).abs().max() > 0.1, kind


# ------------------------------------------------------------------------------------------ conventions


@pytest.mark.parametrize("kind", KINDS)
def test_rotation_by_half_pi_matches_rot90(kind):
    # Convention: +angle rotates the content counter-clockwise as displayed == torch.rot90(k=1).
    x = _images(n=2, c=3, h=11, w=11)
    aug = build_augmentation(kind)
    for angle, k in [(math.pi / 2, 1), (-math.pi / 2, -1), (math.pi, 2)]:
        A = aug.matrices_from_coefficients(_coeffs(aug, rotation=angle).expand(x.shape[0], -1))
        y = apply_affine(x, A)
        ref = torch.rot90(x, k=k, dims=(-2, -1))
        torch.testing.assert_close(y[..., 1:-1, 1:-1], ref[..., 1:-1, 1:-1], atol=1e-4, rtol=0)
    # the other direction must NOT match (guards against a sign error that the symmetry would hide)
    A = aug.matrices_from_coefficients(_coeffs(aug, rotation=math.pi / 2).expand(x.shape[0], -1))
    wrong = torch.rot90(x, k=-1, dims=(-2, -1))
    assert (apply_affine(x, A) - wrong)[..., 1:-1, 1:-1].abs().max() > 0.5


def test_translation_direction_one_pixel():
    # A positive x-translation coefficient of one pixel (2/W normalised units) samples input
    # column j+1 into output column j: the content moves left by one pixel.
    x = _images(n=1, c=1, h=7, w=7)
    aug = ImmerAffine()
    A = aug.matrices_from_coefficients(_coeffs(aug, translate_x=2 / 7).unsqueeze(0))
    y = apply_affine(x, A)
    torch.testing.assert_close(y[..., :, :-1], x[..., :, 1:], atol=1e-5, rtol=0)
    assert y[..., :, -1].abs().max() < 1e-6  # zeros padding


@pytest.mark.parametrize("cls", [ImmerAffine, AugerinoAffine])
def test_matrix_exp_of_rotation_generator_is_rotation_matrix(cls):
    aug = cls()
    G = aug.generators[aug.names.index("rotation")]
    for angle in [0.3, -1.2, math.pi / 2, 3.0]:
        torch.testing.assert_close(torch.linalg.matrix_exp(angle * G), rotation_matrix(angle), atol=3e-5, rtol=0)
        A = aug.matrices_from_coefficients(_coeffs(aug, rotation=angle))
        torch.testing.assert_close(A, rotation_matrix(angle), atol=3e-5, rtol=0)


def test_generator_scale_and_translation_maps():
    immer = ImmerAffine()
    A = immer.matrices_from_coefficients(_coeffs(immer, scale_x=0.4, translate_y=0.25))
    torch.testing.assert_close(A, torch.tensor([[math.exp(0.4), 0, 0], [0, 1, 0.25], [0, 0, 1.0]]), atol=3e-5, rtol=0)
    aug = AugerinoAffine()
    A = aug.matrices_from_coefficients(_coeffs(aug, scale=0.3, stretch=0.1))
    torch.testing.assert_close(A[:2, :2], torch.diag(torch.tensor([math.exp(0.4), math.exp(0.2)])), atol=3e-5, rtol=0)


def test_schwobel_composition_order():
    aug = SchwobelAffine()
    rot, sh, tx, ty, sx, sy = 0.7, 0.2, 0.1, -0.3, 0.25, -0.15
    A = aug.matrices_from_coefficients(torch.tensor([rot, sh, tx, ty, sx, sy]))
    T = torch.tensor([[1, 0, tx], [0, 1, ty], [0, 0, 1.0]])
    Sh = torch.tensor([[1, sh, 0], [0, 1, 0], [0, 0, 1.0]])
    S = torch.diag(torch.tensor([math.exp(sx), math.exp(sy), 1.0]))
    torch.testing.assert_close(A, T @ rotation_matrix(rot) @ Sh @ S, atol=1e-6, rtol=0)
    lin = SchwobelAffine(scale_mode="linear").matrices_from_coefficients(_coeffs(aug, scale_x=0.5))
    torch.testing.assert_close(lin, torch.diag(torch.tensor([1.5, 1.0, 1.0])), atol=1e-6, rtol=0)


# -------------------------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("kind", KINDS)
def test_samples_fill_the_range_and_nothing_else(kind):
    aug = build_augmentation(kind)
    aug.set_ranges(dict.fromkeys(aug.names, 0.0) | {"rotation": 0.5})
    g = torch.Generator().manual_seed(0)
    c = aug.sample_coefficients(n=50, n_samples=40, generator=g).detach()
    assert c.shape == (40, 50, 6)
    r = c[..., aug.names.index("rotation")]
    assert r.abs().max() <= 0.5 + 1e-5
    assert r.min() < -0.45 and r.max() > 0.45
    assert r.std() > 0.25  # U[-0.5, 0.5] has sd 0.289; a constant or a point mass would fail
    others = torch.cat([c[..., i] for i, n in enumerate(aug.names) if n != "rotation"])
    assert others.abs().max() < 1e-6
    # independent across samples and images
    assert r[0].std() > 0.2 and r[:, 0].std() > 0.2


def test_sampling_is_reproducible_with_generator():
    aug = ImmerAffine(init=0.3)
    x = _images()
    a = aug(x, 3, generator=torch.Generator().manual_seed(5))
    b = aug(x, 3, generator=torch.Generator().manual_seed(5))
    c = aug(x, 3, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(a, b)
    assert (a - c).abs().max() > 1e-3


def test_immer_rotation_clamped_to_pi():
    aug = ImmerAffine()
    aug.set_ranges({"rotation": 5.0})
    assert aug.ranges()["rotation"] == pytest.approx(math.pi)
    c = aug.sample_coefficients(20, 20).detach()[..., aug.names.index("rotation")]
    assert c.abs().max() <= math.pi + 1e-6


# ---------------------------------------------------------------------------------------- accessors


@pytest.mark.parametrize("kind", KINDS)
def test_ranges_roundtrip_and_set_fixed(kind):
    aug = build_augmentation(kind)
    vals = {n: 0.05 * (i + 1) for i, n in enumerate(aug.names)}
    aug.set_ranges(vals)
    got = aug.ranges()
    assert list(got) == list(aug.names)
    for n in aug.names:
        assert got[n] == pytest.approx(vals[n], rel=1e-5)
    assert all(p.requires_grad for p in aug.parameters())
    aug.set_fixed([0.1] * 6)
    assert all(not p.requires_grad for p in aug.parameters())
    assert all(v == pytest.approx(0.1, rel=1e-5) for v in aug.ranges().values())
    with pytest.raises(KeyError):
        aug.set_ranges({"not_a_transform": 1.0})
    with pytest.raises(ValueError):
        aug.set_ranges([0.1] * 5)


def test_ranges_units_augerino_translation_is_scaled():
    aug = AugerinoAffine()  # raw 0 -> width softplus(0) = log 2
    r = aug.ranges()
    assert r["rotation"] == pytest.approx(math.log(2) / 2, rel=1e-6)
    assert r["translate_x"] == pytest.approx(0.1 * math.log(2) / 2, rel=1e-6)


def test_build_augmentation_errors_and_none():
    assert build_augmentation("none") is None
    assert set(KINDS) <= set(augmentation_kinds())
    with pytest.raises(KeyError, match="schwobel"):
        build_augmentation("bogus")


# ---------------------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_wrt_augmentation_parameters_nonzero_and_finite(kind):
    torch.manual_seed(0)
    aug = build_augmentation(kind)  # default init (0 for schwobel/immer)
    x = _images(n=4, c=1, h=12, w=12)
    out = aug(x, n_samples=6)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (p,) = list(aug.parameters())
    assert p.grad is not None
    assert torch.isfinite(p.grad).all()
    assert (p.grad.abs() > 1e-6).all(), p.grad


def test_augmented_model_averages_probabilities():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(2 * 9 * 9, 5))
    aug = ImmerAffine(init=0.2)
    am = AugmentedModel(model, aug, n_samples=7)
    x = _images()
    out = am(x)  # uses the global RNG
    torch.manual_seed(0)
    model2 = nn.Sequential(nn.Flatten(), nn.Linear(2 * 9 * 9, 5))
    model2.load_state_dict(model.state_dict())
    xa = aug(x, 7)
    probs = torch.stack([F.softmax(model2(xa[s]), -1) for s in range(7)]).mean(0)
    torch.testing.assert_close(out, probs.log(), atol=1e-5, rtol=1e-5)
    assert out.shape == (3, 5)
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(3))
    # it is NOT the average of logits / log-probs (would differ for non-degenerate samples)
    logmean = torch.stack([F.log_softmax(model2(xa[s]), -1) for s in range(7)]).mean(0)
    assert (out - logmean).abs().max() > 1e-4
    # same behaviour in eval mode (the paper averages at test time too) and gradients reach psi
    am.eval()
    loss = F.nll_loss(am(x), torch.tensor([0, 1, 2]))
    loss.backward()
    assert aug.theta.grad is not None and aug.theta.grad.abs().sum() > 0


def test_augmented_model_without_augmentation():
    model = nn.Sequential(nn.Flatten(), nn.Linear(2 * 9 * 9, 4))
    x = _images()
    torch.testing.assert_close(AugmentedModel(model, None)(x), F.log_softmax(model(x), -1))
    zero = AugmentedModel(model, SchwobelAffine(), n_samples=5)
    torch.testing.assert_close(zero(x), F.log_softmax(model(x), -1), atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------------- regulariser


def test_augerino_regularizer_standard_and_safe():
    aug = AugerinoAffine(init_raw=[0.0, 1.0, -1.0, 2.0, 0.5, 0.0])
    w = F.softplus(aug.raw_width.detach())
    std = augerino_regularizer(aug, "standard")
    safe = augerino_regularizer(aug, "safe")
    assert std.item() == pytest.approx(-w.norm().item(), rel=1e-6)
    assert safe.item() == pytest.approx(std.item(), rel=1e-6)
    safe.backward()
    assert (aug.raw_width.grad < 0).all()  # minimising the loss increases every width
    # one width beyond the threshold switches the safe term (and its gradient) off
    aug.raw_width.grad = None
    with torch.no_grad():
        aug.raw_width[2] = 12.0
    safe = augerino_regularizer(aug, "safe", threshold=10.0)
    assert safe.item() == 0.0
    safe.backward()
    assert torch.count_nonzero(aug.raw_width.grad) == 0
    assert augerino_regularizer(aug, "standard").item() < -10.0
    with pytest.raises(ValueError):
        augerino_regularizer(aug, "other")


# ---------------------------------------------------------------------------------- concrete dropout


def test_concrete_dropout_rate_rescaling_and_gradient():
    torch.manual_seed(0)
    d = ConcreteDropout(p=0.1, temperature=0.1)
    assert float(d.p.detach()) == pytest.approx(0.1, rel=1e-5)
    x = torch.ones(100_000)
    y = d(x)
    assert float((y < 0.5).float().mean()) == pytest.approx(0.1, abs=0.01)  # ~10 % dropped
    assert float(y.detach().mean()) == pytest.approx(1.0, abs=0.02)  # inverted-dropout rescaling
    y.pow(2).mean().backward()
    assert torch.isfinite(d.drop_logit.grad).all() and d.drop_logit.grad.abs().item() > 0
    d.eval()
    torch.testing.assert_close(d(x), x)


def test_make_dropout_and_parameter_collection():
    assert make_dropout(None) is None
    assert isinstance(make_dropout(0.1), nn.Dropout)
    cd = make_dropout(0.1, learnable=True)
    assert isinstance(cd, ConcreteDropout)
    fixed = ConcreteDropout(0.3, learnable=False)
    assert list(fixed.parameters()) == []
    model = nn.Sequential(cd, nn.Linear(3, 3), fixed, ConcreteDropout(0.2))
    params = concrete_dropout_parameters(model)
    assert len(params) == 2 and params[0] is cd.drop_logit
    with pytest.raises(ValueError):
        ConcreteDropout(p=0.0)


@pytest.mark.parametrize("height, width", [(28, 28), (5, 7)])
def test_affine_grid_equals_torch_and_runs_under_vmap_without_fallback(height, width):
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(4, 2, 3, generator=g, dtype=torch.float64)
    ref = F.affine_grid(theta, [4, 1, height, width], align_corners=False)
    assert torch.allclose(affine_grid(theta, height, width), ref, atol=1e-12)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's affine_grid warns of its slow vmap fallback here
        out = torch.func.vmap(lambda t: affine_grid(t, height, width))(theta.reshape(2, 2, 2, 3))
    assert torch.allclose(out.reshape(4, height, width, 2), ref, atol=1e-12)
