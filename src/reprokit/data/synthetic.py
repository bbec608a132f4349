"""Synthetic datasets generated from a seed: the input-selection task of the partitioned-networks paper
and BALI's 1-D regression sets (sines with a trend, sinc) and two moons.

Each generator draws from one ``numpy.random.default_rng(seed)`` (train, then test), so a seed gives
the same tensors on every machine; the keywords of :func:`load_synthetic` are the generator's.
"""

from __future__ import annotations

import numpy as np
import torch

from .bundle import Bundle, take_kwargs

__all__ = ["load_synthetic"]


def _input_selection(seed=0, n_train=3000, n_test=1000, n_signal=15, n_noise=15, signal="label") -> dict:
    """Lyle et al. (2020) input selection task (partitioned networks, Sec. 5 / App. I.5).

    label ~ Bernoulli(1/2) in {0, 1}; x = (y_signal + e_1, ..., y_signal + e_15, e_16, ..., e_30),
    e ~ N(0, 1) i.i.d., with y_signal the label itself (``signal="label"``, the default: x = y + e as the paper
    writes it) or 2 * label - 1 (``signal="signed"``, +-1: twice the class separation, a variant).
    Returned y is the int64 class label in {0, 1}. Train and test are independent draws from one
    generator seeded with ``seed`` (train first).
    """
    if signal not in ("signed", "label"):
        raise ValueError(f"input_selection: signal '{signal}' unknown (valid: signed, label)")
    rng = np.random.default_rng(seed)

    def draw(n):
        label = rng.integers(0, 2, size=n)
        e = rng.standard_normal((n, n_signal + n_noise))
        x = e.copy()
        x[:, :n_signal] += ((2 * label - 1) if signal == "signed" else label)[:, None]
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(label.astype(np.int64))

    xtr, ytr = draw(n_train)
    xte, yte = draw(n_test)
    return dict(
        x_train=xtr,
        y_train=ytr,
        x_test=xte,
        y_test=yte,
        meta={
            "label_coding": (
                "label in {0,1}; features use y_signal = 2*label - 1 (+-1)"
                if signal == "signed"
                else "label in {0,1}; features use the label itself (x = y + e)"
            ),
            "n_signal": n_signal,
            "n_noise": n_noise,
        },
    )


def _sines_f(x):
    return 0.3 * np.sin(2 * np.pi * x) + 0.3 * np.sin(4 * np.pi * x) + x


def _sinc_f(x):
    # 2 sin(20x)/(20x) - 1; np.sinc(t) = sin(pi t)/(pi t), so sin(20x)/(20x) = np.sinc(20x/pi) (=1 at x=0)
    return 2.0 * np.sinc(20.0 * x / np.pi) - 1.0


def _regression_1d(f, sample_x, seed, n_train, n_test, noise, grid_range, n_grid, meta) -> dict:
    rng = np.random.default_rng(seed)
    xtr = sample_x(rng, n_train)
    ytr = f(xtr) + noise * rng.standard_normal(n_train)
    xte = sample_x(rng, n_test)
    yte = f(xte) + noise * rng.standard_normal(n_test)
    grid = np.linspace(grid_range[0], grid_range[1], n_grid)

    def col(a):
        return torch.from_numpy(np.asarray(a, dtype=np.float32)).unsqueeze(1)

    return dict(
        x_train=col(xtr),
        y_train=col(ytr),
        x_test=col(xte),
        y_test=col(yte),
        meta={
            **meta,
            "noise_sd": noise,
            "x_grid": col(grid),
            "f_grid": col(f(grid)),
            "test_set": "noisy points drawn like the training inputs; meta x_grid/f_grid: dense "
            "noise-free grid for plotting",
        },
    )


def _sines_trend(seed=0, n_train=32, n_test=256, noise=0.02, grid_range=(-1.5, 1.5), n_grid=512) -> dict:
    """f(x) = 0.3 sin(2 pi x) + 0.3 sin(4 pi x) + x, inputs uniform on [-1, -0.25] U [0.25, 1]
    (BALI App. H.1), noise sd 0.02. Test: ``n_test`` noisy points from the same input distribution;
    ``meta['x_grid']``/``meta['f_grid']``: a dense noise-free grid over ``grid_range`` for plotting."""

    def sample_x(rng, n):
        # the two intervals have equal length: pick one with prob 1/2, then uniform inside it
        left = rng.random(n) < 0.5
        u = rng.uniform(0.25, 1.0, n)
        return np.where(left, -u, u)

    return _regression_1d(
        _sines_f,
        sample_x,
        seed,
        n_train,
        n_test,
        noise,
        grid_range,
        n_grid,
        {"function": "0.3 sin(2 pi x) + 0.3 sin(4 pi x) + x", "input_range": "[-1,-0.25] U [0.25,1]"},
    )


def _sinc(seed=0, n_train=256, n_test=256, noise=0.1, grid_range=(-1.5, 1.5), n_grid=512) -> dict:
    """f(x) = 2 sin(20x)/(20x) - 1, inputs uniform on [-1, 1] (BALI App. H.1: 256 points; Sec. 5.1
    says 128: pass n_train=128), noise sd 0.1. Test and grid as for ``sines_trend``."""
    return _regression_1d(
        _sinc_f,
        lambda rng, n: rng.uniform(-1.0, 1.0, n),
        seed,
        n_train,
        n_test,
        noise,
        grid_range,
        n_grid,
        {"function": "2 sin(20x)/(20x) - 1", "input_range": "[-1, 1]"},
    )


def _moons(rng, n, noise):
    # Two interleaving half circles, written by hand (no sklearn): outer moon (label 0) at
    # (cos t, sin t), inner moon (label 1) at (1 - cos t, 1/2 - sin t), t evenly spaced on [0, pi],
    # plus isotropic Gaussian input noise of sd `noise`; rows shuffled.
    n0 = n // 2
    n1 = n - n0
    t0 = np.linspace(0, np.pi, n0)
    t1 = np.linspace(0, np.pi, n1)
    x = np.concatenate([np.stack([np.cos(t0), np.sin(t0)], 1), np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)])
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n1, np.int64)])
    x = x + noise * rng.standard_normal(x.shape)
    perm = rng.permutation(n)
    return x[perm], y[perm]


def _two_moons(seed=0, n_train=128, n_test=512, noise=0.2, grid_range=((-1.5, 2.5), (-1.25, 1.75)), n_grid=100) -> dict:
    """Two moons, 128 training points with input noise sd 0.2 (BALI Sec. 5.1). Test: ``n_test``
    noisy points; ``meta['x_grid']`` ((n_grid**2, 2), row-major over ``meta['grid_axes']``) for decision maps."""
    rng = np.random.default_rng(seed)
    xtr, ytr = _moons(rng, n_train, noise)
    xte, yte = _moons(rng, n_test, noise)
    gx = np.linspace(*grid_range[0], n_grid)
    gy = np.linspace(*grid_range[1], n_grid)
    mx, my = np.meshgrid(gx, gy, indexing="ij")
    grid = np.stack([mx.ravel(), my.ravel()], 1)
    f32 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
    return dict(
        x_train=f32(xtr),
        y_train=torch.from_numpy(ytr),
        x_test=f32(xte),
        y_test=torch.from_numpy(yte),
        meta={
            "noise_sd": noise,
            "x_grid": f32(grid),
            "grid_shape": (n_grid, n_grid),
            "grid_axes": (f32(gx), f32(gy)),
            "labels": "0 = outer moon (cos t, sin t), 1 = inner moon (1 - cos t, 1/2 - sin t)",
        },
    )


_SYNTHETIC_GENERATORS = {
    "input_selection": _input_selection,
    "sines_trend": _sines_trend,
    "sinc": _sinc,
    "two_moons": _two_moons,
}


def load_synthetic(spec, kw) -> Bundle:
    import inspect

    gen = _SYNTHETIC_GENERATORS[spec.name]
    allowed = {k: p.default for k, p in inspect.signature(gen).parameters.items()}
    kw = take_kwargs(spec.name, kw, allowed)
    d = gen(**kw)
    meta = {
        "synthetic": True,
        "generator": {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()},
        **d["meta"],
    }
    return Bundle(d["x_train"], d["y_train"], d["x_test"], d["y_test"], spec.task, spec.n_classes, spec.name, meta)
