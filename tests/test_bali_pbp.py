"""Probabilistic backpropagation (methods/pbp.py), the PBP column of BALI Tables 1 / 7: ADF against the closed-form
Bayesian linear regression posterior, the hand-written derivatives against autograd, the moment propagation
against Monte Carlo, the Gamma moment match against quadrature, and resuming."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from reprokit.data.task import TaskData
from reprokit.methods.pbp import PBPMethod, PBPNetwork, gamma_match, relu_moments


def test_one_adf_pass_is_the_exact_posterior_where_the_posterior_factorises():
    """No hidden layer, no bias, one-hot inputs and a known noise: each point informs one weight only, so the
    exact posterior is factorised and ADF's single pass must reproduce its means and variances."""
    rng = np.random.default_rng(1)
    d, n, noise = 3, 40, 0.3
    x = np.eye(d)[rng.integers(0, d, n)] * rng.uniform(0.5, 2.0, (n, 1))
    y = x @ rng.standard_normal(d) / math.sqrt(d) + math.sqrt(noise) * rng.standard_normal(n)
    net = PBPNetwork(d, [], rng, 6.0, 6.0, bias=False, noise_var=noise)
    m0, v0 = net.M[0].ravel().copy(), net.V[0].ravel().copy()
    for i in range(n):
        net.adf_update(x[i], y[i])
    phi = x / math.sqrt(d)  # PBP divides a layer's input by sqrt(its width)
    precision = np.diag(1.0 / v0) + phi.T @ phi / noise
    cov = np.linalg.inv(precision)
    mean = cov @ (m0 / v0 + phi.T @ y / noise)
    np.testing.assert_allclose(net.M[0].ravel(), mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(net.V[0].ravel(), np.diag(cov), rtol=1e-10)


def test_the_adf_pass_differs_from_the_exact_posterior_where_it_is_correlated():
    """The check above is not vacuous: with dense inputs the posterior is correlated and the factorised ADF
    pass gives other variances than the exact marginals."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    net = PBPNetwork(2, [], rng, 6.0, 6.0, bias=False, noise_var=0.5)
    v0 = net.V[0].ravel().copy()
    for i in range(30):
        net.adf_update(x[i], y[i])
    phi = x / math.sqrt(2)
    cov = np.linalg.inv(np.diag(1.0 / v0) + phi.T @ phi / 0.5)
    assert np.abs(net.V[0].ravel() / np.diag(cov) - 1).max() > 1e-3


def _autograd_log_evidence(net: PBPNetwork, x: np.ndarray, y: float):
    """log Z of one point through the moment propagation, written in torch (autograd's reference)."""
    ms = [torch.tensor(a, requires_grad=True) for a in net.M]
    vs = [torch.tensor(a, requires_grad=True) for a in net.V]
    m, v = torch.tensor(x), torch.zeros(len(x), dtype=torch.float64)
    normal = torch.distributions.Normal(0.0, 1.0)
    for i, (mw, vw) in enumerate(zip(ms, vs)):
        mt, vt = torch.cat([m, torch.ones(1, dtype=torch.float64)]), torch.cat([v, torch.zeros(1, dtype=torch.float64)])
        k = 1.0 / math.sqrt(mt.shape[0])
        ma, va = k * (mw @ mt), k * k * ((mw * mw) @ vt + vw @ (mt * mt + vt))
        if i == len(ms) - 1:
            break
        s = va.sqrt()
        cdf, pdf = normal.cdf(ma / s), normal.log_prob(ma / s).exp()
        m = ma * cdf + s * pdf
        v = (ma * ma + va) * cdf + ma * s * pdf - m * m
    var = va[0] + net.noise_variance()
    logz = -0.5 * (math.log(2 * math.pi) + torch.log(var) + (y - ma[0]) ** 2 / var)
    logz.backward()
    return float(logz.detach()), [a.grad.numpy() for a in ms], [a.grad.numpy() for a in vs]


def test_hand_written_derivatives_of_the_log_evidence_match_autograd():
    rng = np.random.default_rng(0)
    net = PBPNetwork(3, [4, 5], rng, 6.0, 6.0)
    for v in net.V:
        v[:] = rng.uniform(0.05, 0.5, v.shape)
    x, y = rng.standard_normal(3), 0.7
    m, v, cache = net._forward_one(x)
    var = v + net.noise_variance()
    dm, dv = net._backward((y - m) / var, -0.5 / var + 0.5 * (y - m) ** 2 / var**2, cache)
    logz, ref_m, ref_v = _autograd_log_evidence(net, x, y)
    assert net.log_evidence(x, y) == pytest.approx(logz, rel=1e-12)
    for ours, ref in zip(dm + dv, ref_m + ref_v):
        np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-14)


def test_moment_propagation_through_a_relu_layer_matches_monte_carlo():
    """One hidden ReLU layer: the hidden units are independent given x, so the propagated mean and variance
    are the output's exact moments under q; Monte Carlo over weight draws agrees within its error."""
    rng = np.random.default_rng(3)
    net = PBPNetwork(2, [3], rng, 6.0, 6.0)
    for m, v in zip(net.M, net.V):
        m[:] = rng.standard_normal(m.shape)
        v[:] = rng.uniform(0.1, 0.6, v.shape)
    x = np.array([[0.8, -1.3], [-0.2, 0.4]])
    mean, var = net.predict(x)
    s = 400_000
    w1 = net.M[0] + np.sqrt(net.V[0]) * rng.standard_normal((s, *net.M[0].shape))
    w2 = net.M[1] + np.sqrt(net.V[1]) * rng.standard_normal((s, *net.M[1].shape))
    for i, row in enumerate(x):
        h = np.maximum(0.0, w1 @ np.append(row, 1.0) / math.sqrt(3))  # [S, 3]
        out = (w2[:, 0, :3] * h).sum(1) / 2.0 + w2[:, 0, 3] / 2.0  # layer 2: 3 units + bias, / sqrt(4)
        se_mean = out.std() / math.sqrt(s)
        assert abs(out.mean() - mean[i]) < 5 * se_mean
        assert out.var() == pytest.approx(var[i], rel=0.02)


def test_relu_moments_are_those_of_the_rectified_gaussian():
    mu, var = np.array([-1.5, 0.0, 0.7]), np.array([0.3, 1.0, 2.0])
    mean, v = relu_moments(mu, var)[:2]
    for i in range(3):
        d = stats.norm(mu[i], math.sqrt(var[i]))
        m1 = integrate.quad(lambda a, d=d: a * d.pdf(a), 0, np.inf)[0]
        m2 = integrate.quad(lambda a, d=d: a * a * d.pdf(a), 0, np.inf)[0]
        assert mean[i] == pytest.approx(m1, rel=1e-7)
        assert v[i] == pytest.approx(m2 - m1 * m1, rel=1e-7)


def test_the_gamma_update_matches_the_tilted_distributions_moments():
    """gamma_match with the exact evidences Z(a + k, b) = int Gamma(g | a + k, b) N(r | 0, v + 1/g) dg returns the
    Gamma with the mean and variance of Gamma(a, b) N(r | 0, v + 1/g), by quadrature."""
    a, b, r, v = 4.0, 3.0, 0.9, 0.2

    def lik(g):
        return stats.norm.pdf(r, 0.0, math.sqrt(v + 1.0 / g))

    def z(shape):
        return integrate.quad(lambda g: stats.gamma.pdf(g, shape, scale=1 / b) * lik(g), 0, np.inf)[0]

    logz = [math.log(z(a + k)) for k in range(3)]
    a_new, b_new = gamma_match(a, b, *logz)
    tilted = [
        integrate.quad(lambda g, k=k: g**k * stats.gamma.pdf(g, a, scale=1 / b) * lik(g), 0, np.inf)[0]
        for k in range(3)
    ]
    mean, second = tilted[1] / tilted[0], tilted[2] / tilted[0]
    assert a_new / b_new == pytest.approx(mean, rel=1e-7)
    assert a_new / b_new**2 == pytest.approx(second - mean**2, rel=1e-6)


def _toy_data(n=60, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n + 20, d, generator=g)
    y = (torch.sin(x[:, :1] * 2) + 0.1 * torch.randn(n + 20, 1, generator=g)).to(torch.float32)
    return TaskData(x[:n], y[:n], x[n:], y[n:], task="regression")


def test_an_epoch_learns_and_a_resumed_run_is_identical():
    data = _toy_data()
    a = PBPMethod(data, [10], seed=0, prior_a=6.0, prior_b=6.0)
    before = a.evaluate(0)["test_ll"]
    a.train_step(0)
    state = a.state_dict()
    a.train_step(1)
    b = PBPMethod(data, [10], seed=5, prior_a=6.0, prior_b=6.0)
    b.load_state_dict(state)
    b.train_step(1)
    assert a.final_metrics() == b.final_metrics()
    after = a.final_metrics()
    assert after["test_ll"] > before and math.isfinite(after["noise_sd"])
    assert sum(after[k] for k in ("skipped_points", "skipped_noise")) == 0


def test_metrics_are_the_gaussian_predictive_in_original_units():
    data = _toy_data()
    m = PBPMethod(data, [10], seed=0, prior_a=6.0, prior_b=6.0, y_std=2.5)
    m.train_step(0)
    mean, var = m.predictive(m.x_test)
    y = data.y_test.double().numpy().ravel()
    out = m.final_metrics()
    assert out["test_rmse"] == pytest.approx(2.5 * float(np.sqrt(np.mean((mean - y) ** 2))), rel=1e-12)
    ll = stats.norm.logpdf(2.5 * y, 2.5 * mean, 2.5 * np.sqrt(var)).mean()
    assert out["test_ll"] == pytest.approx(ll, rel=1e-10)
    assert out["noise_sd"] == pytest.approx(2.5 * math.sqrt(m.net.noise_b / (m.net.noise_a - 1)))
