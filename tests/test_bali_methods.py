"""BALI-paper methods behind the Method protocol (BALI, MC dropout, MAP, BBB) and the shared metrics."""

import itertools
import math

import pytest
import torch

from reprokit import metrics
from reprokit.bali import BaliConfig
from reprokit.data.task import TaskData
from reprokit.loop import LoopConfig, run_loop
from reprokit.methods.bali import BaliMethod
from reprokit.methods.bbb import BBBMethod
from reprokit.methods.mc_dropout import MAP, DropoutMLP, MCDropout
from reprokit.methods.standard import OptimConfig


# ---------------------------------------------------------------------------------------------- metrics
def test_mixture_log_likelihood_is_log_mean_exp():
    logp = torch.tensor([[-1.0, -3.0], [-2.0, -0.5], [-4.0, -1.0]], dtype=torch.float64)
    ref = torch.log(torch.exp(logp).mean(0))
    torch.testing.assert_close(metrics.mixture_log_likelihood(logp), ref)


def test_gaussian_log_likelihood_and_original_units():
    torch.manual_seed(0)
    samples = torch.randn(4, 7, 1)
    y = torch.randn(7, 1)
    var = 0.3
    ref = torch.distributions.Normal(samples.squeeze(-1).double(), math.sqrt(var)).log_prob(y.squeeze(-1).double())
    torch.testing.assert_close(metrics.gaussian_sample_log_likelihood(samples, y, var), ref)
    m1 = metrics.predictive_metrics(samples, y, "regression", torch.tensor([[var]]))
    m2 = metrics.predictive_metrics(samples, y, "regression", torch.tensor([[var]]), y_std=5.0)
    # y = 5 y' + c: RMSE scales by 5, the density by 1/5.
    assert m2["rmse"] == pytest.approx(5 * m1["rmse"])
    assert m2["ll"] == pytest.approx(m1["ll"] - math.log(5.0))
    # Same numbers computed directly in original units.
    ll_orig = metrics.mixture_log_likelihood(
        metrics.gaussian_sample_log_likelihood(5 * samples + 2, 5 * y + 2, 25 * var)
    )
    assert m2["ll"] == pytest.approx(float(ll_orig.mean()))


def test_ece_hand_example():
    probs = torch.tensor([[0.95, 0.05], [0.9, 0.1], [0.3, 0.7], [0.45, 0.55]])
    y = torch.tensor([0, 1, 1, 1])
    # 15 bins: 0.95 -> bin 14, 0.9 -> bin 13, 0.7 -> bin 10, 0.55 -> bin 8; each bin one example.
    ref = (abs(1 - 0.95) + abs(0 - 0.9) + abs(1 - 0.7) + abs(1 - 0.55)) / 4
    assert metrics.expected_calibration_error(probs, y) == pytest.approx(ref)
    # 2 bins: (0, .5] holds nothing (max prob >= .5), (.5, 1] all four: |3/4 - mean conf|
    assert metrics.expected_calibration_error(probs, y, n_bins=2) == pytest.approx(
        abs(0.75 - (0.95 + 0.9 + 0.7 + 0.55) / 4)
    )
    # perfectly calibrated one-hot predictions
    assert metrics.expected_calibration_error(torch.eye(3), torch.arange(3)) == 0.0


def test_auc_matches_pair_counting_with_ties():
    g = torch.Generator().manual_seed(1)
    scores = torch.randint(0, 6, (40,), generator=g).double()  # many ties
    labels = torch.randint(0, 2, (40,), generator=g)
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = [(1.0 if p > n else 0.5 if p == n else 0.0) for p, n in itertools.product(pos.tolist(), neg.tolist())]
    assert metrics.auroc(scores, labels) == pytest.approx(sum(pairs) / len(pairs), abs=1e-15)
    assert metrics.auroc(torch.tensor([0.1, 0.2, 0.8, 0.9]), torch.tensor([0, 0, 1, 1])) == 1.0
    assert metrics.auroc(torch.tensor([0.9, 0.8, 0.2, 0.1]), torch.tensor([0, 0, 1, 1])) == 0.0
    assert math.isnan(metrics.auroc(torch.tensor([0.1, 0.2]), torch.tensor([1, 1])))  # one class only
    # the ROC curve's trapezoid area is the same number
    fpr, tpr = metrics.roc_curve(scores, labels)
    assert fpr.dtype == tpr.dtype == torch.float64
    assert fpr[0] == 0 and tpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1
    assert len(fpr) == len(scores.unique()) + 1  # one point per distinct score, after (0, 0)
    assert float(torch.trapezoid(tpr, fpr)) == pytest.approx(metrics.auroc(scores, labels), abs=1e-15)


def test_classification_metrics_from_samples():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 2.0]], [[0.0, 0.0], [0.0, 4.0]]])  # S=2, B=2
    y = torch.tensor([0, 1])
    m = metrics.predictive_metrics(logits, y, "classification", calibration=True)
    p = torch.softmax(logits.double(), -1).mean(0)
    assert m["acc"] == 1.0
    assert m["ll"] == pytest.approx(float(torch.log(p[torch.arange(2), y]).mean()))
    assert m["nll"] == pytest.approx(-m["ll"]) and m["auc"] == 1.0
    conf = p.max(-1).values
    assert m["ece"] == pytest.approx(float((1 - conf).mean()))  # both correct, in different bins
    ent = metrics.predictive_entropy(torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
    torch.testing.assert_close(ent, torch.tensor([math.log(2), 0.0], dtype=torch.float64))


# ---------------------------------------------------------------------------------------------- methods
def _regression(n=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=g) * 4 - 2
    y = torch.sin(x[:, :1] * 1.5) + 0.5 * x[:, 1:] + 0.05 * torch.randn(n, 1, generator=g)
    return TaskData(x[:90], y[:90], x[90:], y[90:], task="regression")


def _classification(n=160, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    y = ((x[:, 0] * x[:, 1]) > 0).long()
    return TaskData(x[:120], y[:120], x[120:], y[120:], task="classification", n_classes=2)


def _makers(task):
    data = _regression() if task == "regression" else _classification()
    act = "relu" if task == "regression" else "leaky_tanh"
    opt = OptimConfig(lr=1e-2, batch_size=32, weight_decay=1e-4)
    cfg = dict(n_eff=data.n_train, n_iterations=60, sigma_r2=10.0, alpha=0.25, beta=0.1)
    return data, {
        "bali_w": lambda: BaliMethod(
            data, [16], act, BaliConfig(wishart_n="n", **cfg, reparam="weight"), 32, 3, n_eval_samples=8
        ),
        "bali_l": lambda: BaliMethod(
            data, [16], act, BaliConfig(wishart_n="n", **cfg, reparam="local"), 32, 3, n_eval_samples=8
        ),
        "bali_mean": lambda: BaliMethod(
            data, [16], act, BaliConfig(wishart_n="n", **cfg, reparam="mean"), 32, 3, n_eval_samples=8
        ),
        "dropout": lambda: MCDropout(data, [16], act, 0.2, opt, 60, 3, n_eval_samples=8, dropout_input=True),
        "map": lambda: MAP(data, [16], act, opt, 60, 3),
        "bbb": lambda: BBBMethod(data, [16], act, 0.5, opt, 60, 3, n_eval_samples=8),
    }


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_resume_is_bit_identical_and_evaluation_is_side_effect_free(task, tmp_path):
    _, makers = _makers(task)
    for name, make in makers.items():
        ref = make()
        ref_curve = run_loop(ref, LoopConfig(n_steps=40, eval_every=10)).curve
        # interrupted after step 20 (checkpoint at 10, the last one written), resumed by a fresh object
        ckpt = tmp_path / f"{task}_{name}.pt"
        run_loop(make(), LoopConfig(n_steps=20, eval_every=10, checkpoint_every=10), ckpt)
        resumed = make()
        result = run_loop(resumed, LoopConfig(n_steps=40, eval_every=10, checkpoint_every=1000), ckpt)
        curve = result.curve
        assert result.resumed_from == 10, name
        assert curve == ref_curve, name
        assert resumed.final_metrics() == ref.final_metrics(), name
        # evaluation does not consume training randomness: without evaluations, the same result
        a = make()
        run_loop(a, LoopConfig(n_steps=40, eval_every=0))
        assert a.final_metrics() == ref.final_metrics(), name
        keys = a.final_metrics()
        main = "rmse" if task == "regression" else "acc"
        assert {f"train_{main}", f"test_{main}", "train_nll", "test_nll", "test_ll"} <= set(keys), name
        assert all(math.isfinite(v) for v in keys.values()), (name, keys)


def test_methods_learn_regression_and_report_original_units():
    data, makers = _makers("regression")
    base = data.y_train.std().item()
    for name in ("bali_w", "dropout", "map", "bbb"):
        m = makers[name]()
        run_loop(m, LoopConfig(n_steps=400 if name != "bali_w" else 200, eval_every=0))
        r = m.final_metrics()
        assert r["test_rmse"] < 0.5 * base, (name, r)
        m.y_std = 10.0  # the same predictions read as standardised with y_std = 10
        r10 = m.final_metrics()
        assert r10["test_rmse"] == pytest.approx(10 * r["test_rmse"])
        assert r10["test_ll"] == pytest.approx(r["test_ll"] - math.log(10.0))
        assert r10["noise_sd"] == pytest.approx(10 * r["noise_sd"])


def _ece_by_hand(probs, y, n_bins=metrics.ECE_BINS):
    """Per-bin loop, independent of the vectorised implementation: bin b holds confidences in
    (b/n, (b+1)/n]; ECE = sum over bins of |accuracy - mean confidence| * (bin size / n)."""
    conf, pred = probs.max(-1)
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = [i for i, c in enumerate(conf.tolist()) if lo < c <= hi or (b == 0 and c == 0)]
        if sel:
            acc = sum(int(pred[i] == y[i]) for i in sel) / len(sel)
            total += abs(acc - sum(conf[i].item() for i in sel) / len(sel)) * len(sel) / len(y)
    return total


def test_bali_classification_fits_and_dropout_predictive_averages_masks(monkeypatch):
    data, makers = _makers("classification")
    m = makers["bali_w"]()
    run_loop(m, LoopConfig(n_steps=150, eval_every=0))
    seen = []  # (samples, y, calibration) of every predictive the evaluation scores

    def recording(samples, y, *args, calibration=False, **kwargs):
        seen.append((samples, y, calibration))
        return predictive_metrics(samples, y, *args, calibration=calibration, **kwargs)

    predictive_metrics = metrics.predictive_metrics
    monkeypatch.setattr(metrics, "predictive_metrics", recording)
    r = m.final_metrics()
    assert r["train_acc"] > 0.85 and r["test_auc"] > 0.5, r
    # ECE and AUC are those of the test split's mixture predictive (the paper's 15-bin ECE)
    ((samples, y, _),) = [call for call in seen if call[2]]
    assert y is data.y_test
    probs = torch.softmax(samples.double(), -1).mean(0)
    assert r["test_ece"] == pytest.approx(_ece_by_hand(probs, y), abs=1e-12) and r["test_ece"] > 0
    assert r["test_auc"] == pytest.approx(metrics.auroc(probs[:, 1], y))
    assert "train_ece" not in r
    # BALI-W samples differ; the "mean" reparam is deterministic
    x = data.x_test
    s = m.sample_outputs(x, 3, generator=torch.Generator().manual_seed(0))
    assert s.shape == (3, x.shape[0], 2) and not torch.equal(s[0], s[1])
    mm = makers["bali_mean"]()
    run_loop(mm, LoopConfig(n_steps=5, eval_every=0))
    s = mm.sample_outputs(x, 2)
    assert torch.equal(s[0], s[1])
    # MC dropout: different masks per sample, MAP: a single deterministic pass
    do, mp = makers["dropout"](), makers["map"]()
    assert not torch.equal(*do.sample_outputs(x, 2, generator=torch.Generator().manual_seed(0)))
    assert mp.sample_outputs(x, 5).shape[0] == 1
    net = DropoutMLP(2, [4], 1, p=0.5, dropout_input=True, task="regression")
    net.eval()
    torch.testing.assert_close(net(x), net(x))  # eval mode: no dropout unless mc=True
    with pytest.raises(ValueError):
        DropoutMLP(2, [4], 1, p=1.0)


def test_bbb_kl_factor_changes_the_loss():
    data, _ = _makers("regression")
    opt = OptimConfig(lr=1e-2, batch_size=32)
    lo = BBBMethod(data, [8], "tanh", 0.01, opt, 10, 0)
    hi = BBBMethod(data, [8], "tanh", 1.0, opt, 10, 0)
    a, b = lo.train_step(0), hi.train_step(0)
    assert a["kl"] == pytest.approx(b["kl"]) and a["nll"] == pytest.approx(b["nll"])
    assert b["loss"] - a["loss"] == pytest.approx(0.99 * b["kl"] / data.n_train, rel=1e-4)
