"""Committed artefacts' provenance records (figures/<artefact>.provenance.json) still describe HEAD's config.

A record names the commit, scale, devices, date and the fingerprint of the artefact's resolved config (the
settings of every cell of its experiments at its scale; reprokit/report/store/provenance.py). If HEAD's config
for the artefact differs from the recorded commit's, the committed artefact is stale: the test fails and
names the artefact and the recorded commit.
"""

import json
import subprocess
from pathlib import Path

import pytest

from reprokit.config import load_pipeline_config
from reprokit.report.commands.provenance import publish
from reprokit.report.render import notebook
from reprokit.report.store import provenance

REPO = Path(__file__).resolve().parents[1]


def committed_records() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", f"figures/*{provenance.SUFFIX}"], cwd=REPO, capture_output=True, text=True, check=False
    )
    return [REPO / p for p in out.stdout.split()] if out.returncode == 0 else []


def stale(records: list[dict]) -> list[str]:
    configs, problems = {}, []
    for rec in records:
        if rec["scale"] not in configs:
            configs[rec["scale"]] = load_pipeline_config(REPO, {"scale": rec["scale"]})
        why = provenance.mismatch(rec, configs[rec["scale"]])
        if why:
            problems.append(why)
    return problems


def test_committed_artefacts_match_heads_config():
    records = [json.loads(p.read_text()) for p in committed_records()]
    problems = stale(records)
    assert not problems, "\n".join(problems)


def test_a_fresh_record_matches_and_a_doctored_one_fails(tmp_path):
    cfg = load_pipeline_config(REPO, {"scale": "quick"})
    rec = provenance.record(cfg, "fig2", "quick", ["cpu (x86_64)"], root=REPO)
    assert set(rec) >= {"artefact", "commit", "scale", "devices", "date", "fingerprint"}
    path = tmp_path / f"fig2{provenance.SUFFIX}"
    provenance.write(path, rec)
    assert stale([json.loads(path.read_text())]) == []
    doctored = {**rec, "fingerprint": "0" * 16, "commit": "deadbeef"}
    (problem,) = stale([doctored])
    assert "fig2" in problem and "deadbeef" in problem


def test_a_config_change_changes_the_fingerprint():
    cfg = load_pipeline_config(REPO, {"scale": "quick"})
    before = provenance.fingerprint(cfg, "fig2", "quick")
    cfg["experiments"]["fig2a"]["settings"]["lr"] = 0.5
    assert provenance.fingerprint(cfg, "fig2", "quick") != before
    assert provenance.fingerprint(cfg, "table8", "quick") == provenance.fingerprint(
        load_pipeline_config(REPO, {"scale": "quick"}), "table8", "quick"
    )


@pytest.mark.parametrize("name", ["table5", "bali_table1"])
def test_fingerprint_is_stable(name):
    cfg = load_pipeline_config(REPO, {"scale": "test"})
    assert provenance.fingerprint(cfg, name, "test") == provenance.fingerprint(cfg, name, "test")


def test_the_notebooks_finish_writes_the_record(tmp_path):
    import logging
    import types

    cfg = load_pipeline_config(REPO, {"scale": "test"})
    out = tmp_path / "table5.tex"
    out.write_text("FAKE table")
    smk = types.SimpleNamespace(rule="artefact_table5", config=cfg, input={}, output={"tex": str(out)})
    notebook.write_record(smk, "test", logging.getLogger("test"))
    rec = json.loads((tmp_path / f"table5{provenance.SUFFIX}").read_text())
    assert rec["artefact"] == "table5" and rec["scale"] == "test"
    assert rec["fingerprint"] == provenance.fingerprint(cfg, "table5", "test")


def test_no_committed_file_sits_at_a_pipeline_output_path():
    """Snakemake counts an existing output whose inputs are missing as up to date, so an artefact committed at
    figures/<artefact>.* would make a fresh clone's `snakemake` skip building it (at every scale). Committed
    builds live in figures/<scale>/."""
    out = subprocess.run(["git", "ls-files", "figures"], cwd=REPO, capture_output=True, text=True, check=True)
    at_top = [p for p in out.stdout.split() if Path(p).parent == Path("figures")]
    assert at_top == ["figures/README.md"], at_top
    assert committed_records(), "no committed build under figures/<scale>/"
    assert all(p.parent.parent == REPO / "figures" and p.parent.name in ("quick", "paper") for p in committed_records())


def _fake_build(src: Path, scale: str) -> None:
    src.mkdir()
    for name, rec_scale in (("fig2", scale), ("fig9", "test")):
        (src / f"{name}.pdf").write_bytes(b"%PDF FAKE " + name.encode())
        (src / f"{name}.png").write_bytes(b"FAKE")
        provenance.write(src / f"{name}{provenance.SUFFIX}", {"artefact": name, "scale": rec_scale, "commit": "FAKE"})
    (src / "reproduction.md").write_text(f"# Reproduction report: {scale} scale\n\nFAKE\n")


def test_publish_copies_one_scales_artefacts_and_report(tmp_path):
    _fake_build(tmp_path / "figures", "quick")
    copied = publish(tmp_path / "figures", tmp_path / "figures" / "quick", "quick")
    names = sorted(p.name for p in copied)
    assert names == ["fig2.pdf", "fig2.png", f"fig2{provenance.SUFFIX}", "reproduction.md"]  # not the test-scale fig9
    assert (tmp_path / "figures" / "quick" / "fig2.pdf").read_bytes() == b"%PDF FAKE fig2"
    assert not (tmp_path / "figures" / "quick" / "compute.md").exists()  # no archive: no cost table


def test_publish_rewrites_the_cost_table_from_the_archive(tmp_path):
    _fake_build(tmp_path / "figures", "quick")
    cells = tmp_path / "figures" / "quick" / "cells"
    cells.mkdir(parents=True)
    line = {
        "cell": "quick/exp_a/seed~0",
        "settings": {},
        "status": "completed",
        "coords": {},
        "metrics": {},
        "provenance": {"device": "cpu", "device_name": "AMD EPYC", "threads": 1},
        "seconds_per_step": 0.5,
        "steps": 7200,
    }
    (cells / "exp_a.jsonl").write_text(json.dumps(line) + "\n")
    (tmp_path / "figures" / "quick" / "compute.md").write_text("STALE\n")
    copied = publish(tmp_path / "figures", tmp_path / "figures" / "quick", "quick")
    table = (tmp_path / "figures" / "quick" / "compute.md").read_text()
    assert tmp_path / "figures" / "quick" / "compute.md" in copied
    assert "| exp_a | cpu (AMD EPYC), 1 thread | 1 | 1.00 | 60.0 |" in table and "STALE" not in table


def test_publish_refuses_a_report_of_another_scale(tmp_path):
    _fake_build(tmp_path / "figures", "test")
    with pytest.raises(FileNotFoundError, match="reproduction.md"):
        publish(tmp_path / "figures", tmp_path / "figures" / "quick", "quick")


def test_cells_of_an_unavailable_dataset_do_not_stale_a_record():
    """A build where a dataset was n/a names it; its cells' settings then shaped nothing in the artefact,
    so changing them leaves the record valid, while changing a cell that ran stales it."""
    from reprokit.config import load_pipeline_config

    cfg = load_pipeline_config(REPO, {"scale": "quick"})
    rec = provenance.record(cfg, "table1", "quick", ["cpu"], root=REPO, unavailable=["cifar10", "tinyimagenet"])
    assert rec["unavailable_datasets"] == ["cifar10", "tinyimagenet"]
    assert provenance.mismatch(rec, cfg) is None
    cfg["experiments"]["fig3b"]["settings"] = {**cfg["experiments"]["fig3b"]["settings"], "lr": 0.5}
    assert provenance.mismatch(rec, cfg) is None  # fig3b (CIFAR-10) did not run in that build
    full = provenance.record(cfg, "table1", "quick", ["cpu"], root=REPO)  # a build with CIFAR-10 present
    cfg["experiments"]["fig3b"]["settings"] = {**cfg["experiments"]["fig3b"]["settings"], "lr": 0.25}
    assert "rebuild it" in provenance.mismatch(full, cfg)
