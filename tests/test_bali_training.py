"""BALI training loop (Alg. 1): beta schedule, pseudo-target direction, a fast 1-D fit, predictive, resume."""

import math

import pytest
import torch
import torch.nn.functional as F

from reprokit.bali import BaliConfig, BaliMLP, BaliTrainer, bali_step, predictive, predictive_log_likelihood


def test_beta_decay_milestones():
    cfg = BaliConfig(wishart_n="n", beta=0.2, n_iterations=100)
    assert [cfg.beta_at(t) for t in (1, 60)] == [0.2, 0.2]
    assert cfg.beta_at(61) == pytest.approx(0.04) and cfg.beta_at(80) == pytest.approx(0.04)
    assert cfg.beta_at(81) == pytest.approx(0.008) and cfg.beta_at(100) == pytest.approx(0.008)


def test_training_follows_beta_schedule_and_exact_bias_correction():
    cfg = BaliConfig(wishart_n="n", beta=0.5, n_iterations=10, n_eff=8, sigma_r2=4.0)
    m = BaliMLP(2, [3], 1, "tanh", "regression", cfg, generator=torch.Generator().manual_seed(0))
    x, y = torch.randn(8, 2), torch.randn(8)
    prod = 1.0
    for t in range(1, 11):
        out = bali_step(m, x, y)
        expected = 0.5 if t <= 6 else (0.1 if t <= 8 else 0.02)
        assert out["beta"] == pytest.approx(expected)
        prod *= 1.0 - expected
        assert out["b"] == pytest.approx(1.0 - prod)  # b_t = 1 - prod_s (1 - beta_s)
    assert int(m.step_count) == 10


def test_config_priors_and_validation():
    cfg = BaliConfig(wishart_n="n", n_eff=300, sigma_r=80)
    assert cfg.prior_var_r == 6400 and cfg.prior_var_u == pytest.approx(3.0)  # sigma_u^2 = 0.01 N_eff
    assert BaliConfig(wishart_n="n", sigma_r2=40).prior_var_r == 40
    with pytest.raises(ValueError):
        BaliConfig(wishart_n="n", sigma_r=2.0, sigma_r2=5.0)
    with pytest.raises(ValueError):
        BaliConfig(wishart_n="n", reparam="dropout")
    with pytest.raises(ValueError):
        BaliConfig.from_dict({"alpha": 0.1, "learning_rate": 1.0})
    m = BaliMLP(4, [5], 2, config=BaliConfig(wishart_n="n", n_eff=50, sigma_u2=2.0, u0=7.0))
    assert [ly.u0 for ly in m.layers] == [7.0, 7.0] and m.layers[0].prior_var_u == 2.0
    assert [ly.u0 for ly in BaliMLP(4, [5], 2, config=BaliConfig(wishart_n="n")).layers] == [
        5.0,
        2.0,
    ]  # default u0 = D_y


def test_pseudo_targets_move_outputs_downhill():
    """One layer, B <= D_x, a very weak prior and beta = 1: the posterior mean interpolates the pseudo-targets,
    so the new outputs are z - alpha g / sqrt(mean g^2); they must lower the loss and point against g."""
    torch.manual_seed(0)
    x = torch.randn(5, 9)
    y = torch.randint(0, 4, (5,))
    cfg = BaliConfig(wishart_n="n", alpha=0.2, beta=1.0, n_eff=5, sigma_r2=1e8, n_iterations=10)
    m = BaliMLP(9, [], 4, task="classification", config=cfg)
    z0 = m(x).detach().requires_grad_(True)
    loss0 = F.cross_entropy(z0, y)
    (g,) = torch.autograd.grad(loss0, z0)
    bali_step(m, x, y)
    z1 = m(x, reparam="mean")
    target = z0.detach() - 0.2 * g / g.square().mean(0).sqrt()
    torch.testing.assert_close(z1, target, rtol=1e-4, atol=1e-4)
    assert (g * (z1 - z0.detach())).sum() < 0
    assert F.cross_entropy(z1, y) < loss0


def _sine_data(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g) * 4 - 2
    y = torch.sin(2 * x) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


@pytest.mark.parametrize("reparam", ["weight", "local"])
def test_small_regression_fit_reduces_rmse(reparam):
    x, y = _sine_data()
    cfg = BaliConfig(wishart_n="n", alpha=0.3, beta=0.2, n_eff=64, sigma_r2=40.0, n_iterations=200, reparam=reparam)
    gen = torch.Generator().manual_seed(1)
    m = BaliMLP(1, [32], 1, "tanh", "regression", cfg, generator=gen)
    trainer = BaliTrainer(m, generator=gen)
    losses = [trainer.step(x, y)["loss"] for _ in range(200)]
    mean, var = predictive(m, x, 16, generator=gen)
    rmse = (mean - y).square().mean().sqrt().item()
    assert rmse < 0.25 * y.std().item(), rmse
    assert sum(losses[-20:]) / 20 < sum(losses[:5]) / 5 - 0.3
    # The inferred noise is positive and much smaller than the target variance.
    s2 = m.noise_cov().item()
    assert 0.0 < s2 < 0.2 * y.var().item()
    assert torch.isfinite(var).all() and (var >= s2 - 1e-9).all()


def test_classification_fit_on_separable_blobs():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (96,), generator=g)
    centres = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    x = centres[y] + 0.4 * torch.randn(96, 2, generator=g)
    cfg = BaliConfig(wishart_n="n", alpha=0.25, beta=0.1, n_eff=96, sigma_r2=10.0, n_iterations=100)
    m = BaliMLP(2, [16, 16], 3, "leaky_tanh", "classification", cfg, generator=g)
    trainer = BaliTrainer(m, generator=g)
    for _ in range(100):
        trainer.step(x, y)
    probs = predictive(m, x, 8, generator=g)
    torch.testing.assert_close(probs.sum(1), torch.ones(96))
    assert (probs.argmax(1) == y).float().mean() > 0.95
    ll = predictive_log_likelihood(m, x, y, 8, generator=g)
    assert ll.shape == (96,) and ll.mean() > -0.3


def test_predictive_regression_adds_inferred_noise_and_log_likelihood():
    x, y = _sine_data(32)
    cfg = BaliConfig(wishart_n="n", n_eff=32, n_iterations=20, reparam="mean")
    m = BaliMLP(1, [8], 1, "relu", "regression", cfg)
    for _ in range(20):
        bali_step(m, x, y)
    mean, var = predictive(m, x, 5)  # mean weights: no epistemic spread, var = Sigma_L
    torch.testing.assert_close(var, m.noise_cov().diagonal().float().expand_as(var))
    ll = predictive_log_likelihood(m, x, y, 3)
    s2 = m.noise_cov().item()
    ref = -0.5 * (y - mean).square() / s2 - 0.5 * math.log(2 * math.pi * s2)
    torch.testing.assert_close(ll, ref.squeeze(1), rtol=1e-5, atol=1e-5)
    # Weight sampling adds epistemic variance on top of the noise.
    _, var_w = predictive(m, x, 64, reparam="weight")
    assert (var_w > var).all()


def test_state_dict_resume_is_bit_identical():
    x, y = _sine_data(32)
    cfg = BaliConfig(wishart_n="n", n_eff=32, n_iterations=12)

    def make():
        return BaliMLP(1, [6], 1, "tanh", "regression", cfg, generator=torch.Generator().manual_seed(3))

    gen = torch.Generator().manual_seed(5)
    a = make()
    tr = BaliTrainer(a, generator=gen)
    for _ in range(6):
        tr.step(x, y)
    state, gstate = {k: v.clone() for k, v in a.state_dict().items()}, gen.get_state()
    ref = [tr.step(x, y)["loss"] for _ in range(6)]

    b = BaliMLP(1, [6], 1, "tanh", "regression", cfg, generator=torch.Generator().manual_seed(99))
    b.load_state_dict(state)
    gen2 = torch.Generator()
    gen2.set_state(gstate)
    tr2 = BaliTrainer(b, generator=gen2)
    assert [tr2.step(x, y)["loss"] for _ in range(6)] == ref
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


def test_hidden_noise_prior_override_reaches_hidden_layers_only():
    """sigma_u2_factor_hidden sets U_0 of the hidden layers; the last layer keeps sigma_u2_factor * N_eff."""
    cfg = BaliConfig(wishart_n="n", n_eff=200.0, sigma_u2_factor=0.01, sigma_u2_factor_hidden=1.0)
    model = BaliMLP(3, [8, 8], 1, "relu", "regression", cfg, generator=torch.Generator().manual_seed(0))
    assert [layer.prior_var_u for layer in model.layers] == [200.0, 200.0, 2.0]
    plain = BaliMLP(
        3,
        [8, 8],
        1,
        "relu",
        "regression",
        BaliConfig(wishart_n="n", n_eff=200.0),
        generator=torch.Generator().manual_seed(0),
    )
    assert [layer.prior_var_u for layer in plain.layers] == [2.0, 2.0, 2.0]
