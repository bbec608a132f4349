"""The one training loop: SIGTERM checkpoints and resumes bit-identically; NaN loss => diverged."""

import os
import signal

import pytest
import torch
from torch import nn

from reprokit.loop import EXIT_PREEMPTED, LoopConfig, Preempted, early_eval_steps, run_loop
from reprokit.methods.common import EpochSampler
from reprokit.runtime import generator as make_generator


class ToyRegression:
    """Noisy SGD on a tiny MLP: uses its own generator, the global RNG (dropout) and a sampler."""

    def __init__(self, seed=0, kill_at=None, nan_at=None):
        torch.manual_seed(seed)
        self.x = torch.randn(64, 3)
        self.y = self.x.sum(1, keepdim=True)
        self.net = nn.Sequential(nn.Linear(3, 16), nn.Dropout(0.2), nn.Tanh(), nn.Linear(16, 1))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)
        self.sampler = EpochSampler(64, 8, make_generator(seed + 1))
        self.kill_at, self.nan_at = kill_at, nan_at

    def train_step(self, step):
        if step == self.kill_at:
            os.kill(os.getpid(), signal.SIGTERM)
        idx = self.sampler.next()
        loss = ((self.net(self.x[idx]) - self.y[idx]) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        if step == self.nan_at:
            return {"loss": float("nan")}
        return {"loss": loss.item()}

    def evaluate(self, step):
        with torch.no_grad():
            self.net.eval()
            mse = float(((self.net(self.x) - self.y) ** 2).mean())
            self.net.train()
        return {"mse": mse}

    def final_metrics(self):
        return self.evaluate(-1)

    def state_dict(self):
        return {"net": self.net.state_dict(), "opt": self.opt.state_dict(), "sampler": self.sampler.state_dict()}

    def load_state_dict(self, s):
        self.net.load_state_dict(s["net"])
        self.opt.load_state_dict(s["opt"])
        self.sampler.load_state_dict(s["sampler"])


CFG = LoopConfig(n_steps=60, eval_every=10, checkpoint_every=25)


def test_sigterm_checkpoints_and_resume_is_bit_identical(tmp_path):
    ref = ToyRegression()
    ref_result = run_loop(ref, CFG)
    ckpt = tmp_path / "ckpt.pt"
    killed = ToyRegression(kill_at=37)
    with pytest.raises(Preempted) as exc:
        run_loop(killed, CFG, ckpt)
    assert exc.value.code == EXIT_PREEMPTED and exc.value.step == 38
    assert ckpt.exists()
    torch.manual_seed(12345)  # a fresh process has a different global RNG state: the checkpoint restores it
    resumed = ToyRegression()
    result = run_loop(resumed, CFG, ckpt)
    assert result.resumed_from == 38 and result.status == "completed"
    assert resumed.final_metrics() == ref.final_metrics()
    for a, b in zip(resumed.net.parameters(), ref.net.parameters()):
        assert torch.equal(a, b)
    assert result.curve == ref_result.curve


def test_resume_without_rng_restore_would_differ(tmp_path):
    """Guards the test above: the global RNG (dropout) really matters for the trajectory."""
    a, b = ToyRegression(), ToyRegression()
    run_loop(a, CFG)
    torch.manual_seed(999)
    for step in range(CFG.n_steps):
        b.train_step(step)
    assert a.final_metrics() != b.final_metrics()


def test_nan_loss_ends_as_diverged():
    result = run_loop(ToyRegression(nan_at=5), CFG)
    assert result.status == "diverged" and result.steps == 6


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _garbage(path):
    path.write_bytes(b"\x00not a checkpoint" * 100)


def _without_curve(path):
    ckpt = torch.load(path, weights_only=False)
    del ckpt["curve"]
    torch.save(ckpt, path)


def _method_state_without_sampler(path):
    """The net and optimiser load, then the sampler's key is missing: a half-loaded method."""
    ckpt = torch.load(path, weights_only=False)
    del ckpt["method"]["sampler"]
    torch.save(ckpt, path)


def _bad_numpy_state(path):
    """torch's global random state is restored, then numpy's fails: half-restored random states."""
    ckpt = torch.load(path, weights_only=False)
    ckpt["rng"]["numpy"] = "not a state"
    torch.save(ckpt, path)


@pytest.mark.parametrize(
    "spoil", [_truncated, _garbage, _without_curve, _method_state_without_sampler, _bad_numpy_state]
)
def test_an_unreadable_checkpoint_is_moved_aside_and_the_run_starts_afresh(tmp_path, caplog, spoil):
    """The run ends as an uninterrupted one would: whatever was loaded before the error is undone."""
    ref = ToyRegression()
    ref_result = run_loop(ref, CFG)
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(Preempted):
        run_loop(ToyRegression(kill_at=37), CFG, ckpt)
    spoil(ckpt)
    spoiled = ckpt.read_bytes()
    fresh = ToyRegression()
    with caplog.at_level("WARNING", logger="reprokit.loop"):
        result = run_loop(fresh, CFG, ckpt)
    assert result.status == "completed" and result.resumed_from == 0
    assert result.curve == ref_result.curve
    for a, b in zip(fresh.net.parameters(), ref.net.parameters()):
        assert torch.equal(a, b)
    aside = list(tmp_path.glob("ckpt.pt.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == spoiled
    assert any(str(ckpt) in r.getMessage() and str(aside[0]) in r.getMessage() for r in caplog.records)


def test_a_cuda_checkpoint_on_a_machine_without_cuda_is_not_moved_aside(tmp_path, monkeypatch):
    """A sound checkpoint in the wrong place is an error to fix (resume it on a GPU node), not a bad file."""
    from reprokit import loop as train

    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(Preempted):
        run_loop(ToyRegression(kill_at=37), CFG, ckpt)
    state = torch.load(ckpt, weights_only=False)
    state["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8)]
    torch.save(state, ckpt)
    monkeypatch.setattr(train.torch.cuda, "is_available", lambda: False)
    with pytest.raises(train.CheckpointNeedsCuda):
        run_loop(ToyRegression(), CFG, ckpt)
    assert ckpt.exists() and not list(tmp_path.glob("*.unreadable-*"))


def test_a_doubling_schedule_adds_curve_rows_at_the_start_only():
    """eval_doubling_until: rows at 1, 2, 4, 8 (below 10) besides every eval_every steps and the last step."""
    cfg = LoopConfig(n_steps=25, eval_every=10, eval_doubling_until=10)
    res = run_loop(ToyRegression(), cfg, None)
    assert [r["step"] for r in res.curve] == [0, 1, 2, 4, 8, 10, 20, 25]
    plain = run_loop(ToyRegression(), LoopConfig(n_steps=25, eval_every=10), None)
    assert [r["step"] for r in plain.curve] == [0, 10, 20, 25]
    # the extra rows only evaluate: the training itself is unchanged
    assert res.curve[-1]["mse"] == plain.curve[-1]["mse"]


def test_log_spaced_schedule_adds_n_rows_per_doubling():
    """evals_per_doubling 2: rows at round(2 ** (k / 2)) below eval_doubling_until, i.e. 1, 2, 3, 4, 6, 8, 11, 16, .."""
    cfg = LoopConfig(n_steps=25, eval_every=10, eval_doubling_until=20, evals_per_doubling=2)
    res = run_loop(ToyRegression(), cfg, None)
    assert [r["step"] for r in res.curve] == [0, 1, 2, 3, 4, 6, 8, 10, 11, 16, 20, 25]
    plain = run_loop(ToyRegression(), LoopConfig(n_steps=25, eval_every=10), None)
    assert res.curve[-1]["mse"] == plain.curve[-1]["mse"]  # evaluation only: the training is unchanged


@pytest.mark.parametrize("per_doubling", [1, 2, 3, 4])
def test_early_eval_steps_are_log_spaced_and_keep_the_doubling_steps(per_doubling):
    steps = sorted(early_eval_steps(1000, per_doubling))
    assert {1, 2, 4, 8, 16, 32, 64, 128, 256, 512} <= set(steps) and max(steps) < 1000
    assert steps == sorted({round(2 ** (k / per_doubling)) for k in range(10 * per_doubling)})
    # past the first integers, successive steps are a factor of about 2 ** (1 / per_doubling) apart
    ratios = [b / a for a, b in zip(steps, steps[1:]) if a >= 4 * per_doubling]
    assert max(ratios) < 2 ** (1 / per_doubling) * 1.15 and min(ratios) > 2 ** (1 / per_doubling) / 1.15
    assert sorted(early_eval_steps(1000, 1)) == [2**k for k in range(10)]
    assert early_eval_steps(1, per_doubling) == frozenset() and early_eval_steps(2, per_doubling) == {1}
    with pytest.raises(ValueError, match="at least 1"):
        early_eval_steps(10, 0)
