"""Bayes-by-Backprop baseline (App. I.2): closed-form KL, the down-weighted ELBO, reparametrised sampling."""

import math

import pytest
import torch
from torch.distributions import Normal, kl_divergence

from reprokit.bali import predictive
from reprokit.models.bbb import BBBMLP, BayesLinear, gaussian_kl


def test_layer_kl_matches_closed_form_and_torch_distributions():
    torch.manual_seed(0)
    layer = BayesLinear(5, 3, prior_sigma=0.7, init_sigma=0.05)
    with torch.no_grad():
        layer.weight_rho.normal_(-2.0, 0.5)
        layer.bias_rho.normal_(-1.0, 0.5)
    ref = sum(
        kl_divergence(Normal(mu, sig), Normal(torch.zeros_like(mu), 0.7 * torch.ones_like(mu))).sum()
        for mu, sig in ((layer.weight_mu, layer.weight_sigma), (layer.bias_mu, layer.bias_sigma))
    )
    torch.testing.assert_close(layer.kl(), ref)
    # Hand formula on one scalar: KL(N(1, 0.5^2) || N(0, 2^2)) = log(4) + (0.25 + 1) / 8 - 1/2.
    val = gaussian_kl(torch.tensor([1.0]), torch.tensor([0.5]), 2.0)
    assert val.item() == pytest.approx(math.log(4.0) + 1.25 / 8 - 0.5)
    # KL is zero iff q equals the prior.
    assert gaussian_kl(torch.zeros(3), torch.full((3,), 0.7), 0.7).abs().item() < 1e-7


def test_kl_matches_monte_carlo_estimate():
    torch.manual_seed(1)
    mu, sig = torch.randn(4), torch.rand(4) + 0.3
    w = mu + sig * torch.randn(200000, 4)
    mc = (Normal(mu, sig).log_prob(w) - Normal(0.0, 1.5).log_prob(w)).sum(1)
    se = mc.std() / math.sqrt(len(mc))
    assert abs(mc.mean() - gaussian_kl(mu, sig, 1.5)) < 5 * se


def test_model_kl_and_downweighted_elbo():
    torch.manual_seed(2)
    m = BBBMLP(2, [8], 1, "tanh", "regression", prior_sigma=1.0)
    assert m.kl().item() == pytest.approx(sum(layer.kl().item() for layer in m.layers))
    x, y = torch.randn(10, 2), torch.randn(10)
    for kl_factor in (1.0, 0.1, 0.01):
        g = torch.Generator().manual_seed(4)
        loss, info = m.elbo_loss(x, y, n_data=100, kl_factor=kl_factor, generator=g)
        g = torch.Generator().manual_seed(4)
        nll = m.nll(m(x, generator=g), y).mean()
        torch.testing.assert_close(loss, nll + kl_factor * m.kl() / 100)
        assert info["kl"] == pytest.approx(m.kl().item())
    loss.backward()
    assert m.layers[0].weight_rho.grad is not None and m.log_noise_std.grad is not None


def test_reparametrised_samples_have_variational_moments():
    layer = BayesLinear(3, 2, init_sigma=0.2)
    x = torch.tensor([[1.0, -2.0, 0.5]])
    g = torch.Generator().manual_seed(0)
    out = torch.stack([layer(x, generator=g) for _ in range(4000)]).squeeze(1)
    with torch.no_grad():
        mean = layer(x, sample=False).squeeze(0)
        var = (x.square() @ layer.weight_sigma.square().T).squeeze(0) + layer.bias_sigma.square()
    assert ((out.mean(0) - mean).abs() < 5 * (var / 4000).sqrt()).all()
    assert ((out.var(0) - var).abs() < 5 * var * math.sqrt(2 / 4000)).all()


def test_bbb_fits_and_predictive_interface():
    torch.manual_seed(0)
    x = torch.rand(48, 1) * 4 - 2
    y = torch.sin(2 * x) + 0.05 * torch.randn(48, 1)
    m = BBBMLP(1, [32], 1, "tanh", "regression", prior_sigma=1.0)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(250):
        loss, _ = m.elbo_loss(x, y, n_data=48, kl_factor=0.01)
        opt.zero_grad()
        loss.backward()
        opt.step()
    mean, var = predictive(m, x, 16)
    assert (mean - y).square().mean().sqrt() < 0.3 * y.std()
    assert (var >= m.noise_cov().diagonal() - 1e-7).all()
    c = BBBMLP(2, [4], 3, "leaky_tanh", "classification", noise_std=None)
    probs = predictive(c, torch.randn(5, 2), 4)
    torch.testing.assert_close(probs.sum(1), torch.ones(5))
    fixed = BBBMLP(1, [4], 1, noise_std=0.3)
    assert not any(n == "log_noise_std" for n, _ in fixed.named_parameters())
    torch.testing.assert_close(fixed.noise_cov(), torch.tensor([[0.09]]))
