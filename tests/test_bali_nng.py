"""Noisy K-FAC (methods/nng.py), the NNG-MVG column of BALI Tables 1 / 7: the posterior it converges to on a
linear-Gaussian regression, its hand-written backward pass, the learned noise, resuming."""

import math

import torch

from reprokit.data.task import TaskData
from reprokit.methods.nng import NoisyKfacMLP, _gamma_draws


def _linear_task(n=2000, tau=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g) * torch.tensor([1.0, 2.0])
    y = (x @ torch.tensor([1.0, -0.5]) + 0.3 + torch.randn(n, generator=g) / math.sqrt(tau)).reshape(-1, 1)
    return TaskData(x, y, x[:50], y[:50], task="regression")


def _nng(data, **kw):
    args = dict(hidden=[], epochs=1, batch_size=data.n_train, lr=0.5, ema=0.05, mc_samples=10, seed=0)
    args.update(n_eval_samples=4, decay_epoch=None)
    args.update(kw)
    return NoisyKfacMLP(data, **args)


def test_on_linear_gaussian_regression_it_finds_the_exact_posterior():
    """No hidden layer and a fixed noise precision: the model is Bayesian linear regression, whose posterior is
    N((tau Phi^T Phi + I / eta)^-1 tau Phi^T y, (tau Phi^T Phi + I / eta)^-1) (lambda = 1). Noisy K-FAC's mean
    converges to that mean; its matrix-variate covariance (lambda / N) [A + damping]^-1 x [S + damping]^-1 with
    A = Phi^T Phi / N and S = E[ds^2] = tau (the true Fisher) is that covariance up to the factored damping,
    here a few per cent (N = 2000)."""
    tau = 4.0
    data = _linear_task(tau=tau)
    # the mean jitters by its draws' gradient noise: lr 0.5, then 0.005 for the last 300 steps
    m = _nng(data, learn_noise=False, noise_prior=(tau, 1.0), epochs=600, decay_epoch=300, decay=0.01)
    for step in range(600):
        m.train_step(step)
    phi = torch.cat([data.x_train, torch.ones(data.n_train, 1)], 1).double()
    precision = tau * phi.T @ phi + torch.eye(3, dtype=torch.float64)
    mean = torch.linalg.solve(precision, tau * phi.T @ data.y_train.double()).ravel()
    cov = torch.linalg.inv(precision)
    post_sd = cov.diagonal().sqrt()
    assert ((m.means[0].double().ravel() - mean) / post_sd).abs().max() < 0.1  # in posterior sds
    ((la, ls),) = m._sampling_factors()
    ours = (la.double() @ la.double().T) * float(ls.double() @ ls.double().T)
    torch.testing.assert_close(ours, cov, rtol=0.08, atol=0.08 * float(cov.diagonal().min()))
    # the draws follow that covariance
    draws = m.sample_weights(20000, torch.Generator().manual_seed(3))[0].reshape(20000, 3).double()
    torch.testing.assert_close(torch.cov(draws.T), ours, rtol=0.05, atol=0.05 * float(ours.diagonal().min()))


def test_a_far_prior_shrinks_the_mean_to_zero():
    """eta = 1e-6 (prior variance): gamma_in dominates the gradient and the damping, the mean goes to ~0."""
    data = _linear_task(n=200)
    m = _nng(data, learn_noise=False, noise_prior=(4.0, 1.0), prior_var=1e-6, lr=0.2)
    for step in range(300):
        m.train_step(step)
    assert m.means[0].abs().max() < 0.01


def test_the_hand_written_backward_matches_autograd():
    torch.manual_seed(0)
    x, y = torch.randn(7, 3), torch.randn(7, 1)
    m = _nng(TaskData(x, y, x, y, task="regression"), hidden=[5, 4])
    weights = [w.requires_grad_() for w in m.sample_weights(3, torch.Generator().manual_seed(1))]
    out, inputs, pre = m.forward(weights, x)
    for p in pre:
        p.retain_grad()
    upstream = torch.randn(out.shape)
    (out * upstream).sum().backward()
    for mine, ref in zip(m.backward([w.detach() for w in weights], [p.detach() for p in pre], upstream), pre):
        torch.testing.assert_close(mine, ref.grad)
    for w, h, g in zip(weights, inputs, m.backward([w.detach() for w in weights], [p.detach() for p in pre], upstream)):
        torch.testing.assert_close(h.detach().transpose(-1, -2) @ g, w.grad)


def test_the_learned_noise_precision_approaches_the_residuals():
    """q(tau) moves from its Gamma(6, 6) start (E tau = 1) towards 1 / residual variance (tau = 4 here)."""
    data = _linear_task(n=400, tau=4.0)
    m = _nng(data, batch_size=40, lr=0.1, noise_lr=0.05, epochs=30)
    for step in range(m.n_steps):
        m.train_step(step)
    assert 2.5 < m.noise_precision() < 6.0, m.noise_ab()


def test_gamma_draws_have_the_gamma_moments():
    gen = torch.Generator().manual_seed(0)
    for shape in (0.5, 6.0, 300.0):
        x = _gamma_draws(shape, 40000, gen)
        assert abs(float(x.mean()) / shape - 1) < 0.03
        assert abs(float(x.var()) / shape - 1) < 0.06


def test_a_resumed_run_is_identical():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(60, 2, generator=g)
    data = TaskData(x[:50], torch.sin(x[:50, :1]), x[50:], torch.sin(x[50:, :1]), task="regression")
    full = _nng(data, hidden=[6], batch_size=8, epochs=4, lr=0.05, ema=0.01, mc_samples=3, decay_epoch=2)
    half = _nng(data, hidden=[6], batch_size=8, epochs=4, lr=0.05, ema=0.01, mc_samples=3, decay_epoch=2)
    for step in range(12):
        full.train_step(step)
        half.train_step(step)
    state = half.state_dict()
    resumed = _nng(data, hidden=[6], batch_size=8, epochs=4, lr=0.05, ema=0.01, mc_samples=3, decay_epoch=2)
    resumed.load_state_dict(state)
    for step in range(12, full.n_steps):
        full.train_step(step)
        resumed.train_step(step)
    for a, b in zip(full.means, resumed.means):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert full.evaluate(-1) == resumed.evaluate(-1)
