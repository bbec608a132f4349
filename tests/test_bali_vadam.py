"""Vadam (methods/vadam.py), the VADAM column of BALI Tables 1 / 7: the posterior it converges to on a
linear-Gaussian regression, its per-sample gradients, the selection protocol's steps and choice, resuming."""

import math

import pytest
import torch

from reprokit.data.task import TaskData
from reprokit.methods.cv_protocol import protocol_steps
from reprokit.methods.vadam import VadamProtocol, VadamRun, mlp_forward


def _linear_problem(n=150, tau=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    y = (x @ torch.tensor([1.0, -0.5]) + 0.3 + torch.randn(n, generator=g) / math.sqrt(tau)).reshape(-1, 1)
    return x, y


def test_vadam_on_linear_gaussian_regression_finds_the_posterior_mean_and_a_mean_field_variance():
    """No hidden layer: the model is Bayesian linear regression with known noise. Vadam's mean converges to the
    closed-form posterior mean; its variance 1 / (N s + lambda) (s: averaged squared single-example gradients,
    the empirical Fisher at batch size 1) is close to the mean-field variance 1 / diag(precision), which lies
    below the exact marginal variance."""
    tau, lam = 4.0, 1.0
    x, y = _linear_problem(tau=tau)
    run = VadamRun(x, y, [], tau, lam, 0.002, (0.9, 0.99), 1, 1, seed=0, keys=(0,))
    for step in range(25 * x.shape[0]):
        run.train_step(step)
    phi = torch.cat([x, torch.ones(len(x), 1)], 1).double()  # mu's layout: [w1, w2, bias]
    precision = tau * phi.T @ phi + lam * torch.eye(3, dtype=torch.float64)
    mean = torch.linalg.solve(precision, tau * phi.T @ y.double()).ravel()
    post_sd = torch.linalg.inv(precision).diagonal().sqrt()
    assert (run.mu.double() - mean).abs().max() < 0.5 * post_sd.min()
    ratio = run.sigma().double() / precision.diagonal().rsqrt()
    assert ratio.min() > 0.7 and ratio.max() < 1.3, ratio


def test_a_far_prior_moves_the_mean_and_shrinks_the_variance():
    """The prior precision reaches both the update (lambda~ mu) and the variance: with lambda = 1e4 the mean
    is shrunk to ~0 and sigma is ~1 / sqrt(lambda)."""
    x, y = _linear_problem()
    run = VadamRun(x, y, [], 4.0, 1e4, 0.01, (0.9, 0.99), 10, 1, seed=0, keys=(0,))
    for step in range(300):
        run.train_step(step)
    assert run.mu.abs().max() < 0.1
    assert run.sigma().max() < 1.2e-2


def test_per_sample_gradients_are_each_samples_own():
    torch.manual_seed(0)
    x, y = torch.randn(7, 3), torch.randn(7, 1)
    run = VadamRun(x, y, [4], 2.0, 1.0, 0.01, (0.9, 0.99), 7, 3, seed=0, keys=(0,))
    w = run.sample(3, torch.Generator().manual_seed(1)).requires_grad_()
    (g,) = torch.autograd.grad(run.nll(mlp_forward(run.params(w), x), y).sum(), w)
    for k in range(3):
        wk = w.detach()[k : k + 1].clone().requires_grad_()
        (gk,) = torch.autograd.grad(run.nll(mlp_forward(run.params(wk), x), y).sum(), wk)
        torch.testing.assert_close(g[k], gk[0])


def _data(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n + 10, 2, generator=g)
    y = torch.sin(2 * x[:, :1]) + 0.1 * torch.randn(n + 10, 1, generator=g)
    return TaskData(x[:n], y[:n], x[n:], y[n:], task="regression")


def _protocol(data, **kw):
    args = dict(
        hidden=[8],
        epochs=2,
        batch_size=8,
        lr=0.01,
        betas=(0.9, 0.99),
        mc_samples=2,
        log_noise_prec=[0.0, 4.0],
        log_prior_prec=[0.0],
        folds=3,
        seed=0,
        val_samples=16,
        n_eval_samples=8,
    )
    return VadamProtocol(data, **{**args, **kw})


def test_the_protocol_runs_every_fold_of_every_grid_point_then_the_chosen_one():
    data = _data()
    p = _protocol(data)
    select, final = protocol_steps(40, 2, 8, 3, 2)
    assert p.n_steps == select + final and p.phase_steps[-1] == final == 10
    for step in range(p.n_steps):
        p.train_step(step)
    assert len(p.scores) == 2 * 3 and p.final_phase
    means = p.grid_scores()
    assert p.chosen() == p.grid[max(range(2), key=means.__getitem__)]
    out = p.final_metrics(8)
    assert out["log_noise_prec"] == p.chosen()[0] and out["val_ll_chosen"] == pytest.approx(max(means))
    one = _protocol(data, log_noise_prec=[2.0])
    assert one.n_steps == final and one.phases == [None]  # one grid point: no selection


def test_a_run_resumed_mid_selection_is_identical():
    data = _data()
    a = _protocol(data)
    for step in range(13):  # inside grid point 0's second fold
        a.train_step(step)
    state = a.state_dict()
    b = _protocol(data)
    b.load_state_dict(state)
    for step in range(13, a.n_steps):
        a.train_step(step)
        b.train_step(step)
    assert a.scores == b.scores
    assert a.final_metrics(8) == b.final_metrics(8)
