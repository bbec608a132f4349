"""Synthetic datasets: input selection (partitioned networks), sines-trend, sinc and two moons (BALI)."""

import math

import numpy as np
import pytest
import torch

from reprokit.data import registry


def test_input_selection_coding_and_sizes():
    b = registry.load("input_selection", seed=0, signal="signed")  # the +-1 variant; the default is the text's
    assert b.x_train.shape == (3000, 30) and b.x_test.shape == (1000, 30)
    assert b.y_train.dtype == torch.int64 and set(b.y_train.unique().tolist()) == {0, 1}
    assert b.meta["synthetic"] and b.n_classes == 2
    sign = (2 * b.y_train - 1).float()
    # first 15 features are y_signal + N(0,1) with y_signal = +-1; the last 15 are pure noise
    resid = b.x_train[:, :15] - sign[:, None]
    assert abs(float(resid.mean())) < 0.03 and abs(float(resid.std()) - 1) < 0.03
    assert abs(float((b.x_train[:, 15:] * sign[:, None]).mean())) < 0.03
    assert float((b.x_train[:, :15] * sign[:, None]).mean()) == pytest.approx(1.0, abs=0.03)
    small = registry.load("input_selection", seed=0, n_train=10, n_test=5)
    assert small.x_train.shape == (10, 30)


def test_synthetic_reproducible_from_seed():
    for name in ("input_selection", "sines_trend", "sinc", "two_moons"):
        a, b, c = registry.load(name, seed=4), registry.load(name, seed=4), registry.load(name, seed=5)
        assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
        assert not torch.equal(a.x_train, c.x_train)
    with pytest.raises(TypeError, match="n_train"):
        registry.load("sinc", n_points=3)


def _sines(x):
    return 0.3 * np.sin(2 * np.pi * x) + 0.3 * np.sin(4 * np.pi * x) + x


def test_sines_trend():
    b = registry.load("sines_trend", seed=0)
    x = b.x_train.numpy()[:, 0]
    assert b.x_train.shape == (32, 1) and b.y_train.shape == (32, 1) and b.task == "regression"
    assert np.all((np.abs(x) >= 0.25) & (np.abs(x) <= 1.0))
    big = registry.load("sines_trend", seed=1, n_train=20000)
    xb, yb = big.x_train.numpy()[:, 0], big.y_train.numpy()[:, 0]
    assert np.std(yb - _sines(xb)) == pytest.approx(0.02, rel=0.05)
    assert 0.45 < np.mean(xb < 0) < 0.55  # both intervals are used equally
    g = b.meta["x_grid"].numpy()[:, 0]
    assert g[0] == -1.5 and g[-1] == 1.5 and len(g) == 512
    np.testing.assert_allclose(b.meta["f_grid"].numpy()[:, 0], _sines(g), atol=1e-5)
    xt = b.x_test.numpy()[:, 0]
    assert np.all((np.abs(xt) >= 0.25) & (np.abs(xt) <= 1.0))


def test_sinc():
    b = registry.load("sinc", seed=0)
    assert b.x_train.shape == (256, 1)  # App. H.1
    assert registry.load("sinc", n_train=128).n_train == 128  # Sec. 5.1
    big = registry.load("sinc", seed=2, n_train=20000)
    x, y = big.x_train.numpy()[:, 0], big.y_train.numpy()[:, 0]
    assert x.min() >= -1 and x.max() <= 1 and x.min() < -0.99 and x.max() > 0.99
    f = 2 * np.sin(20 * x) / (20 * x) - 1
    assert np.std(y - f) == pytest.approx(0.1, rel=0.05)
    g = b.meta["x_grid"].numpy()[:, 0]
    i0 = np.argmin(np.abs(g))
    f0 = b.meta["f_grid"].numpy()[i0, 0]
    assert f0 == pytest.approx(2 * math.sin(20 * g[i0]) / (20 * g[i0]) - 1 if g[i0] != 0 else 1.0, abs=1e-5)


def test_two_moons():
    b = registry.load("two_moons", seed=0)
    assert b.x_train.shape == (128, 2) and b.y_train.bincount().tolist() == [64, 64] and b.n_classes == 2
    clean = registry.load("two_moons", seed=0, noise=0.0)
    x, y = clean.x_train.numpy(), clean.y_train.numpy()
    outer, inner = x[y == 0], x[y == 1]
    np.testing.assert_allclose(np.hypot(outer[:, 0], outer[:, 1]), 1.0, atol=1e-6)  # upper unit half circle
    assert outer[:, 1].min() >= -1e-6
    np.testing.assert_allclose(np.hypot(inner[:, 0] - 1, inner[:, 1] - 0.5), 1.0, atol=1e-6)
    assert inner[:, 1].max() <= 0.5 + 1e-6
    # noise only scales the same normal draws, so noisy - clean is the N(0, 0.2^2) input noise itself
    noisy = registry.load("two_moons", seed=0, n_train=4000)
    ref = registry.load("two_moons", seed=0, n_train=4000, noise=0.0)
    assert torch.equal(noisy.y_train, ref.y_train)
    diff = (noisy.x_train - ref.x_train).numpy()
    assert np.std(diff) == pytest.approx(0.2, rel=0.05) and abs(np.mean(diff)) < 0.01
    assert b.meta["x_grid"].shape == (100 * 100, 2) and b.meta["grid_shape"] == (100, 100)


def test_input_selection_follows_the_text_by_default():
    """x_i = y + e_i (Sec. 5): by default the label itself enters the 15 informative inputs."""
    b, label = registry.load("input_selection", seed=0), registry.load("input_selection", seed=0, signal="label")
    assert torch.equal(b.x_train, label.x_train)
    assert "the label itself" in b.meta["label_coding"]


def test_input_selection_signal_coding_sets_the_class_separation():
    """`signal="signed"` adds 2y - 1 to the 15 informative inputs (class means 2 apart), `signal="label"` the label
    itself (x = y + e as the paper writes it: 1 apart); the 15 spurious inputs carry no label in either."""
    from reprokit.data.registry import load

    for signal, gap in (("signed", 2.0), ("label", 1.0)):
        b = load("input_selection", seed=0, n_train=3000, signal=signal)
        x, y = b.x_train.numpy(), b.y_train.numpy()
        diff = x[y == 1].mean(0) - x[y == 0].mean(0)
        assert abs(diff[:15].mean() - gap) < 0.05, (signal, diff[:15].mean())
        assert abs(diff[15:]).max() < 0.15
    with pytest.raises(ValueError, match="signal 'pm1' unknown"):
        load("input_selection", seed=0, signal="pm1")
