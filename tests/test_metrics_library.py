"""reprokit.metrics against torchmetrics: the hand-written AUROC/ROC (reprokit.metrics says why) equal its
`binary_auroc` / `binary_roc` (exactly, ties included) and keep the order of confident scores it would squash;
the hand-written ECE (the BALI paper's binning) agrees with its calibration error except for
confidences exactly on a bin edge."""

import itertools
import math

import pytest
import torch
from torchmetrics.functional.classification import binary_auroc, binary_roc, multiclass_calibration_error

from reprokit import metrics


def _pair_auc(scores, labels):
    pos, neg = scores[labels == 1].tolist(), scores[labels == 0].tolist()
    pairs = [1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg)]
    return sum(pairs) / len(pairs)


def test_auroc_is_torchmetrics_in_float64():
    g = torch.Generator().manual_seed(3)
    probs = torch.rand(500, generator=g, dtype=torch.float64)
    probs = (probs * 30).round() / 30  # ties between positives and negatives
    labels = torch.randint(0, 2, (500,), generator=g)
    ours = metrics.auroc(probs, labels)
    assert ours == pytest.approx(_pair_auc(probs, labels), abs=1e-14)  # exact, not float32
    assert ours == pytest.approx(float(binary_auroc(probs, labels)), abs=1e-6)  # torchmetrics' own (float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_roc_curve_is_torchmetrics_binary_roc(seed):
    g = torch.Generator().manual_seed(seed)
    n = 300 + 100 * seed
    probs = (torch.rand(n, generator=g, dtype=torch.float64) * 25).round() / 25  # many ties
    labels = torch.randint(0, 2, (n,), generator=g)
    fpr, tpr = metrics.roc_curve(probs, labels)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # torchmetrics divides counts in the default dtype
    try:
        ref_fpr, ref_tpr, _ = binary_roc(probs, labels)
    finally:
        torch.set_default_dtype(old)
    assert fpr.dtype == tpr.dtype == torch.float64
    torch.testing.assert_close(fpr, ref_fpr.to(torch.float64), rtol=0, atol=1e-15)
    torch.testing.assert_close(tpr, ref_tpr.to(torch.float64), rtol=0, atol=1e-15)
    assert metrics.auroc(probs, labels) == pytest.approx(_pair_auc(probs, labels), abs=1e-14)


def test_auroc_without_both_classes_is_nan():
    assert math.isnan(metrics.auroc(torch.rand(5), torch.ones(5)))
    assert math.isnan(metrics.auroc(torch.rand(5), torch.zeros(5)))


def test_auroc_keeps_the_order_of_scores_torchmetrics_would_squash():
    # negative entropies of confident predictions: distinct, all within 1e-16 of 0. torchmetrics' sigmoid
    # for scores outside [0, 1] maps them all to 0.5 (a tie, AUROC 0.5); their order decides here.
    scores = torch.tensor([-1e-20, -2e-20, -1e-18, -2e-18], dtype=torch.float64)
    labels = torch.tensor([1, 1, 0, 0])
    assert float(binary_auroc(scores, labels)) == 0.5
    assert metrics.auroc(scores, labels) == 1.0
    fpr, tpr = metrics.roc_curve(scores, labels)
    assert fpr.tolist() == [0.0, 0.0, 0.0, 0.5, 1.0] and tpr.tolist() == [0.0, 0.5, 1.0, 1.0, 1.0]


def test_ood_metrics_on_confident_predictions_order_tiny_entropies():
    eye = torch.eye(10, dtype=torch.float64)
    sure = torch.softmax(80 * eye[torch.arange(20) % 10], -1)  # entropy ~ 1e-32
    less_sure = torch.softmax(60 * eye[torch.arange(20) % 10], -1)  # entropy ~ 1e-23: same sigmoid(-H) = 0.5
    m = metrics.ood_metrics(sure, less_sure)
    assert m["ood_auroc"] == 1.0 and m[metrics.roc_column(0.0)] == 1.0


@pytest.mark.parametrize("n_classes", [2, 10])
def test_ece_agrees_with_torchmetrics_calibration_error_on_random_data(n_classes):
    g = torch.Generator().manual_seed(n_classes)
    probs = torch.softmax(2 * torch.randn(2000, n_classes, generator=g, dtype=torch.float64), -1)
    y = torch.randint(0, n_classes, (2000,), generator=g)
    for n_bins in (5, metrics.ECE_BINS):
        ref = float(multiclass_calibration_error(probs, y, num_classes=n_classes, n_bins=n_bins, norm="l1"))
        # torchmetrics casts confidences to float32: agreement to float32 precision
        assert metrics.expected_calibration_error(probs, y, n_bins) == pytest.approx(ref, abs=1e-6)


def test_ece_bin_edge_differs_from_torchmetrics_as_documented():
    # Confidence exactly 0.5 with 2 bins: ours puts it in (0, 0.5] (bins are right-closed), torchmetrics in
    # [0.5, 1) (left-closed). Ours: |0 - .5|/2 + |1 - .9|/2 = 0.30; torchmetrics one bin: |.5 - .7| = 0.20.
    probs = torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64)
    y = torch.tensor([1, 0])
    assert metrics.expected_calibration_error(probs, y, n_bins=2) == pytest.approx(0.30)
    assert float(multiclass_calibration_error(probs, y, num_classes=2, n_bins=2)) == pytest.approx(0.20)
