"""The reproduction report (reprokit.report.reproduction) from a tiny fake results folder.

Every number here is SYNTHETIC (watermarked "FAKE" in the cells' notes): the report must show the paper's
number, ours, the right z, flip a claim's verdict when the data change, say "not run" for a missing
experiment, and show a partial experiment with its n.
"""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from reprokit.report import claims, papers, reproduction

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("*.yaml"))


def write_csv(root: Path, experiment: str, rows: list[dict], scale: str = "quick") -> None:
    (root / scale).mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame([{"scale": scale, "experiment": experiment, "note": "FAKE synthetic test data", **r} for r in rows])
    df.to_csv(root / scale / f"{experiment}.csv", index=False)


def write_cell(root: Path, experiment: str, coords: dict, metrics: dict, scale: str = "quick") -> None:
    folder = root / scale / experiment / "/".join(f"{k}~{v}" for k, v in coords.items())
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({
        "coords": coords, "scale": scale, "status": "completed", "metrics": metrics, "experiment": experiment,
        "info": {"note": "FAKE"}, "provenance": {"device": "cuda", "device_name": "FAKE GPU"}}))


def table8_rows(param_ratio: float) -> list[dict]:
    return [{"model": m, "seed": s, "status": "completed", "param_ratio": param_ratio + 0.01 * s,
             "hyper_ratio": 1.05, "device": "cpu (x86_64)"}
            for m in ("mnist_cnn", "fixup_resnet8", "fixup_resnet14") for s in (0, 1, 2)]


def report(root: Path, expected=None) -> str:
    return reproduction.write_report(root / "out.md", root, "quick", PAPERS, expected, generated="")


def line_of(text: str, *parts: str) -> str:
    hits = [ln for ln in text.splitlines() if all(p in ln for p in parts)]
    assert hits, f"no line with {parts}"
    return hits[0]


def test_paper_files_load_and_every_claim_names_a_known_check():
    for path in PAPERS:
        doc = papers.load(path)
        for claim in papers.claims(doc):
            assert claim.check in claims.CHECKS, claim.id
        assert papers.numbers(doc)
    part = papers.load(REPO / "config" / "papers" / "partitioned.yaml")
    assert papers.entry(part, "table1", "cifar10_resnet8", "Partitioned") == [86.1, 0.4]
    assert papers.entry(part, "table1", "tinyimagenet_resnet50", "Diff. Laplace") == "OOM"
    assert papers.entry(part, "table2", "+Finetune", "[0.3, 0.7]") is None  # the paper's NaN
    bali = papers.load(REPO / "config" / "papers" / "bali.yaml")
    quoted = {(n.row, n.column) for n in papers.numbers(bali, "bali_table1") if n.quoted}
    assert ("uci_yacht", "PBP") in quoted and ("uci_yacht", "BALI") not in quoted
    d8 = [n for n in papers.numbers(part, "table8") if n.row == "Diff. Laplace Hyperparam."]
    assert [n.quoted for n in d8] == [False, True, False]


def test_report_shows_paper_ours_n_and_z(tmp_path):
    # FAKE: Table 4 MNIST 1.25k, FedAvg + Partitioned at 0.960, 0.970, 0.980 -> 97.0 ± 0.577 (n 3)
    rows = [{"dataset": "mnist", "rotated": False, "method": "partitioned", "n_train": 1250, "seed": s,
             "status": "completed", "val_acc_last": v, "upload_pct": 80.0} for s, v in enumerate((0.96, 0.97, 0.98))]
    rows += [{"dataset": "mnist", "rotated": False, "method": "fedavg", "n_train": 1250, "seed": s,
              "status": "completed", "val_acc_last": 0.9, "upload_pct": 100.0} for s in range(3)]
    write_csv(tmp_path, "table4_mnist", rows)
    text = report(tmp_path)
    line = line_of(text, "| mnist_1250 | FedAvg + Partitioned |")
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == "97 ± 0.1"  # the paper's number
    assert cells[3].startswith("97 ± 0.58") and cells[4] == "3" and cells[5] == "quick"
    assert float(cells[7]) == pytest.approx(0.0, abs=1e-9)
    fedavg = [c.strip() for c in line_of(text, "| mnist_1250 | FedAvg |").strip("|").split("|")]
    assert float(fedavg[7]) == pytest.approx((90.0 - 95.4) / 0.1, rel=1e-3)  # z_paper
    assert float(fedavg[8]) == pytest.approx((90.0 - 95.4) / 0.1, rel=1e-3)  # our s.e. is 0 (identical seeds)
    assert "not paper-scale numbers" in text
    # a quoted literature value stays marked as quoted
    assert "(quoted)" in line_of(text, "| Yacht | PBP |")
    # an experiment with no results at all: its numbers and its claims are "not run"
    assert "`bali_uci` not run" in text
    assert "**not run**" in line_of(text, "bali_fig3_mnist_ood_almost_perfect")
    assert "**holds**" in line_of(text, "table4_upload_reduced")


def test_z_scores_combined():
    z_p, z_c = papers.z_scores(10.0, 3.0, 4.0, 4.0)
    assert z_p == pytest.approx(1.5) and z_c == pytest.approx(6.0 / 5.0)
    assert all(math.isnan(z) for z in papers.z_scores(1.0, 0.1, 1.21, None))  # no s.e. printed


@pytest.mark.parametrize("ratio, verdict", [(1.10, "holds"), (1.50, "does not hold")])
def test_claim_verdict_follows_the_data(tmp_path, ratio, verdict):
    write_csv(tmp_path, "table8_timing", table8_rows(ratio))  # FAKE timings
    text = report(tmp_path)
    assert f"**{verdict}**" in line_of(text, "table8_partitioned_overhead")
    line = line_of(text, "| Partitioned Param. | MNIST CNN |")
    assert "cpu (x86_64)" in line and "| 3 |" in line


def test_lml_peak_claim_flips(tmp_path):
    def lml(k, peak):
        return -abs(k - peak)

    for peak, verdict in ((15, "holds"), (20, "does not hold")):
        root = tmp_path / str(peak)
        write_csv(root, "fig2a", [{"method": "partitioned", "n_inputs": k, "seed": 0, "status": "completed",
                                   "lml": lml(k, peak)} for k in range(1, 31)])
        assert f"**{verdict}**" in line_of(report(root), "fig2a_lml_peak")


def test_partial_experiment_shows_its_n(tmp_path):
    # two of the grid's cells finished (metrics.json only, no aggregate CSV yet)
    for seed, auroc in ((0, 0.995), (1, 0.999)):
        write_cell(tmp_path, "bali_cls_image", {"dataset": "mnist", "method": "bali", "seed": seed}, {"ood_auroc": auroc})
    text = report(tmp_path, expected={"bali_cls_image": 18})
    claim = line_of(text, "bali_fig3_mnist_ood_almost_perfect")
    assert "**holds**" in claim and "| 2 |" in claim
    ctx = reproduction.Context(tmp_path, "quick", [papers.load(p) for p in PAPERS], {"bali_cls_image": 18})
    assert ctx.state("bali_cls_image") == "partial: 2 of 18 cells ran"
    assert set(ctx.table("bali_cls_image")["device"]) == {"cuda (FAKE GPU)"}


def test_cli_writes_the_report(tmp_path):
    write_csv(tmp_path, "table8_timing", table8_rows(1.1))
    out = tmp_path / "figures" / "reproduction.md"
    assert reproduction.main(["--scale", "quick", "--results", str(tmp_path), "--out", str(out), "--root", "",
                              "--papers", *map(str, PAPERS)]) == 0
    assert out.read_text().startswith("# Reproduction report: quick scale")
