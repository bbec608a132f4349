"""MC dropout (2026-11-23, commit bca0508): Gal's DropoutUncertaintyExps protocol as the BALI tables' DO baseline
(methods/gal_dropout.py): the tau log-likelihood, the grid selection, input dropout, the step count, and a
tiny end-to-end run that resumes bit-identically from a checkpoint taken inside the grid."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from reprokit.data.task import TaskData
from reprokit.loop import LoopConfig, run_loop
from reprokit.methods import gal_dropout as gd
from reprokit.methods.common import EpochSampler
from reprokit.methods.mc_dropout import DropoutMLP


def test_tau_log_likelihood_matches_numpy():
    rng = np.random.default_rng(0)
    samples, y, tau = rng.normal(3.0, 2.0, size=(50, 7)), rng.normal(3.0, 2.0, size=7), 0.37
    a = -0.5 * tau * (y[None] - samples) ** 2
    amax = a.max(0)
    lse = amax + np.log(np.exp(a - amax).sum(0))
    expected = lse - np.log(50) - 0.5 * np.log(2 * np.pi) + 0.5 * np.log(tau)
    got = gd.tau_log_likelihood(torch.tensor(samples, dtype=torch.float32), torch.tensor(y), tau)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    # one sample: the Gaussian log-density with precision tau
    one = gd.tau_log_likelihood(torch.tensor([[1.0]]), torch.tensor([2.0]), 4.0)
    assert float(one) == pytest.approx(-0.5 * 4.0 - 0.5 * math.log(2 * math.pi) + 0.5 * math.log(4.0))


def test_select_best_picks_the_highest_validation_ll_first_on_ties():
    results = [
        {"p": 0.005, "tau": 0.25, "val_ll": -2.0},
        {"p": 0.01, "tau": 0.5, "val_ll": -1.1},
        {"p": 0.05, "tau": 0.5, "val_ll": -1.1},
        {"p": 0.1, "tau": 0.75, "val_ll": float("nan")},
    ]
    assert gd.select_best(results) == results[1]
    assert gd.select_best([{"p": 0.1, "tau": 1.0, "val_ll": float("nan")}])["p"] == 0.1


def _toy(n_train=60, n_test=20, noise=0.05, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_train + n_test, 3, generator=g) * 4.0 + 10.0
    y = (x[:, :1] - 10.0) * 3.0 + 100.0 + noise * 3.0 * torch.randn(n_train + n_test, 1, generator=g)
    return TaskData(x[:n_train], y[:n_train], x[n_train:], y[n_train:], task="regression")


def test_grid_search_picks_the_known_best_tau():
    """A linear target (sd 12) that the network fits to within ~1 unit: a model precision of 2 scores
    log-likelihood ~ -1 on validation rows, 1e-4 scores ~ -5.5 whatever the fit (the log tau term) and 1e4
    ~ -1e3 or worse (the error term); the protocol must choose 2 and retrain with it."""
    data = _toy(n_train=120, n_test=40)
    m = gd.GalDropoutProtocol(
        data,
        [16],
        rates=[0.01],
        taus=[1e-4, 2.0, 1e4],
        epochs=150,
        seed=0,
        batch_size=32,
        predictive_samples=64,
        eval_samples=8,
    )
    run_loop(m, LoopConfig(n_steps=m.n_steps, eval_every=0))
    lls = [r["val_ll"] for r in m.results]
    assert len(lls) == 3 and int(np.argmax(lls)) == 1, lls
    out = m.final_metrics()
    assert out["chosen_tau"] == 2.0 and out["chosen_p"] == 0.01 and m.phase == 3
    assert out["best_val_ll"] == pytest.approx(max(lls))
    assert set(out) >= {"test_rmse", "test_ll", "train_rmse", "val_ll_p0.01_tau2"}


def test_streamed_scores_equal_scoring_all_passes_at_once(caplog, monkeypatch):
    """predict_metrics accumulates LL (log-sum-exp) and the MC mean chunk by chunk; with chunks of 3 passes
    (7 chunks, the last one short) it must give what the T passes held at once give, and draw the same
    passes (same generator order). A long scoring logs its progress (here: after every chunk)."""
    data = _toy(n_train=60, n_test=20)
    m = gd.GalDropoutProtocol(
        data,
        [8],
        rates=[0.1],
        taus=[2.0],
        epochs=3,
        seed=0,
        batch_size=16,
        predictive_samples=20,
        eval_samples=4,
        sample_chunk=3,
    )
    run_loop(m, LoopConfig(n_steps=m.n_steps, eval_every=0))
    x, y = data.x_test, data.y_test
    s = m.sample_outputs(x, 20, torch.Generator().manual_seed(5))
    assert s.shape == (20, 20) and len(list(m.sample_chunks(x, 20, torch.Generator().manual_seed(5)))) == 7
    got = m.predict_metrics(x, y, 20, torch.Generator().manual_seed(5))
    ll = float(gd.tau_log_likelihood(s, y, m.tau).mean())
    rmse = float((s.double().mean(0) - y.reshape(-1).double()).square().mean().sqrt())
    assert got["ll"] == pytest.approx(ll, rel=1e-12) and got["nll"] == -got["ll"]
    assert got["rmse"] == pytest.approx(rmse, rel=1e-12)
    other = m.predict_metrics(x, y, 20, torch.Generator().manual_seed(6))  # other passes: other numbers
    assert other["ll"] != pytest.approx(ll, rel=1e-9)
    monkeypatch.setattr(gd.GalDropoutProtocol, "progress_seconds", 0.0)
    with caplog.at_level("INFO", logger=gd.log.name):
        assert m.predict_metrics(x, y, 20, torch.Generator().manual_seed(5)) == got  # logging changes nothing
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scoring:")]
    assert lines[0] == "scoring: 3/20 dropout passes over 20 rows" and lines[-1].startswith("scoring: 20/20")


def test_input_dropout_is_active():
    """With p on the inputs, masking reaches the first layer: zeroing one input changes the MC output only
    through it, and one dropout pass differs from the mean network; with dropout on inputs only (no hidden
    layer) every pass equals the network applied to a masked, rescaled input."""
    torch.manual_seed(0)
    net = DropoutMLP(4, [], 1, "relu", p=0.5, dropout_input=True, task="regression", noise_std=1.0)
    x = torch.ones(1, 4)
    g = torch.Generator().manual_seed(1)
    outs = torch.stack([net(x, mc=True, generator=g) for _ in range(200)]).reshape(-1)
    w, b = net.linears[0].weight.detach().reshape(-1), net.linears[0].bias.detach()
    masks = [torch.tensor(m, dtype=torch.float32) for m in np.ndindex(*(2,) * 4)]
    possible = torch.stack([(m * 2.0 * w).sum() + b for m in masks]).reshape(-1)
    assert outs.unique().numel() > 4  # many different input masks were drawn
    assert all(torch.isclose(o, possible, atol=1e-5).any() for o in outs)
    assert not torch.allclose(outs, net(x, mc=False).reshape(()))
    # the protocol's network drops inputs
    m = gd.GalDropoutProtocol(_toy(), [8], rates=[0.3], taus=[1.0], epochs=1, seed=0, batch_size=16)
    m.train_step(0)
    assert m.net.dropout_input and m.net.p == 0.3


def test_protocol_steps_follow_n_and_batch_size():
    # yacht: 277 training rows, inner int(0.8 * 277) = 221 -> 2 batches of 128 per epoch; all rows: 3
    assert gd.inner_size(277, 0.2) == 221
    assert gd.protocol_steps(277, 4000, 128, 0.2) == (8000, 12000)
    assert gd.steps_per_epoch(256, 128) == 2 and gd.steps_per_epoch(257, 128) == 3
    data = _toy(n_train=50)
    m = gd.GalDropoutProtocol(data, [8], rates=[0.01, 0.05], taus=[1.0, 2.0], epochs=3, seed=0, batch_size=16)
    assert (m.n_inner, m.inner_steps, m.full_steps) == (40, 3 * 3, 3 * 4)
    assert m.n_steps == 4 * 9 + 12
    # the plan's count (torch-free, for the cost model) agrees with the method's for the configured grids
    from reprokit.plan.uci_regression import UciDropoutBlock

    block = UciDropoutBlock(
        standardize_x=True,
        standardize_y=True,
        prior_lengthscale=0.01,
        lr=1e-3,
        batch_size=128,
        taus={"uci_yacht": [0.25, 0.5, 0.75]},
    )
    assert block.total_steps("uci_yacht") == 12 * 8000 + 12000
    # Keras' fit: every row once per epoch, the last batch smaller
    s = EpochSampler(50, 16, torch.Generator().manual_seed(0), keep_last=True)
    epoch = [s.next() for _ in range(4)]
    assert [len(i) for i in epoch] == [16, 16, 16, 2] and torch.cat(epoch).sort().values.tolist() == list(range(50))


def test_weight_reg_is_gals():
    assert gd.weight_reg(0.05, 0.5, 221) == pytest.approx(1e-4 * 0.95 / (2 * 221 * 0.5))


def test_resumes_bit_identically_inside_the_grid(tmp_path):
    data = _toy(n_train=40, n_test=10)
    kw = {
        "rates": [0.05, 0.1],
        "taus": [1.0, 5.0],
        "epochs": 2,
        "seed": 3,
        "batch_size": 16,
        "predictive_samples": 16,
        "eval_samples": 4,
    }
    ref = gd.GalDropoutProtocol(data, [8], **kw)
    run_loop(ref, LoopConfig(n_steps=ref.n_steps, eval_every=0))
    ckpt = tmp_path / "ckpt.pt"
    first = gd.GalDropoutProtocol(data, [8], **kw)
    stop = ref.inner_steps + 2  # inside grid point 2
    run_loop(first, LoopConfig(n_steps=stop, eval_every=0, checkpoint_every=stop - 1), ckpt)
    resumed = gd.GalDropoutProtocol(data, [8], **kw)
    run_loop(resumed, LoopConfig(n_steps=ref.n_steps, eval_every=0), ckpt)
    assert resumed.results == ref.results
    for a, b in zip(resumed.net.state_dict().values(), ref.net.state_dict().values()):
        assert torch.equal(a, b)
    assert resumed.final_metrics() == ref.final_metrics()


def _grid_kw(**kw):
    return {
        "rates": [0.0, 0.05, 0.1],
        "taus": [1.0, 5.0],
        "epochs": 6,
        "seed": 3,
        "batch_size": 32,
        "predictive_samples": 32,
        "eval_samples": 4,
        **kw,
    }


def test_parallel_grid_trains_the_same_networks_as_the_sequential_grid():
    """Side by side (stacked weights, one summed loss) every grid point gets its own gradient, Adam update,
    minibatches and masks (p = 0 draws none): the validation scores, the choice and the retrained model
    equal the sequential grid's up to rounding, in a sixth of the steps."""
    data = _toy(n_train=100, n_test=20)
    seq = gd.GalDropoutProtocol(data, [16], **_grid_kw())
    par = gd.GalDropoutProtocol(data, [16], parallel_grid=True, **_grid_kw())
    assert par.n_steps == seq.n_steps - 5 * seq.inner_steps
    for m in (seq, par):
        run_loop(m, LoopConfig(n_steps=m.n_steps, eval_every=0))
    assert [(r["p"], r["tau"]) for r in par.results] == [(r["p"], r["tau"]) for r in seq.results]
    for key in ("val_ll", "val_rmse"):
        np.testing.assert_allclose([r[key] for r in par.results], [r[key] for r in seq.results], rtol=1e-5)
    assert len({round(r["val_rmse"], 3) for r in par.results}) == 6  # the points really differ
    assert par.chosen == pytest.approx(seq.chosen, rel=1e-5)
    for a, b in zip(par.net.state_dict().values(), seq.net.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # the plan counts the parallel grid's steps like the method
    from reprokit.plan.uci_regression import UciDropoutBlock

    block = UciDropoutBlock(
        standardize_x=True,
        standardize_y=True,
        prior_lengthscale=0.01,
        lr=1e-3,
        batch_size=128,
        taus={"uci_yacht": [0.25, 0.5, 0.75]},
        parallel_grid=True,
    )
    assert block.total_steps("uci_yacht") == 8000 + 12000


@pytest.mark.parametrize("where", ["inside the grid", "at the grid's end"])
def test_parallel_grid_resumes_bit_identically(tmp_path, where):
    data = _toy(n_train=40, n_test=10)
    ref = gd.GalDropoutProtocol(data, [8], parallel_grid=True, **_grid_kw(epochs=2))
    run_loop(ref, LoopConfig(n_steps=ref.n_steps, eval_every=0))
    ckpt = tmp_path / "ckpt.pt"
    first = gd.GalDropoutProtocol(data, [8], parallel_grid=True, **_grid_kw(epochs=2))
    # a checkpoint at step inner_steps - 2, or at inner_steps: the grid scored, the retraining not started
    stop = ref.inner_steps + (1 if where == "at the grid's end" else -1)
    run_loop(first, LoopConfig(n_steps=stop, eval_every=0, checkpoint_every=stop - 1), ckpt)
    resumed = gd.GalDropoutProtocol(data, [8], parallel_grid=True, **_grid_kw(epochs=2))
    run_loop(resumed, LoopConfig(n_steps=ref.n_steps, eval_every=0), ckpt)
    assert resumed.results == ref.results
    for a, b in zip(resumed.net.state_dict().values(), ref.net.state_dict().values()):
        assert torch.equal(a, b)
    assert resumed.final_metrics() == ref.final_metrics()
