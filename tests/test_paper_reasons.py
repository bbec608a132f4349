"""A claim's reasons (`below_paper_scale`, `at_paper_scale`) live in config/papers/reasons/<paper>.yaml, keyed by
claim id, and reprokit.report.verdicts.papers.load merges them into the paper file's claims: a reason for no claim,
a key that is no reason, or a reason also written in the paper file is an error naming the file and the claim."""

from pathlib import Path

import pytest
import yaml

from reprokit.report.verdicts import papers

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("*.yaml"))


@pytest.mark.parametrize("path", PAPERS, ids=[p.stem for p in PAPERS])
def test_the_reasons_are_kept_apart_and_merged_back_by_claim_id(path):
    raw = yaml.safe_load(path.read_text())
    assert not [c["id"] for c in raw["claims"] if set(c) & set(papers.REASON_KEYS)]  # the paper file has none
    reasons = yaml.safe_load((path.parent / "reasons" / path.name).read_text())["claims"]
    by_id = {c.id: c for c in papers.claims(papers.load(path))}
    assert reasons and set(reasons) <= set(by_id)
    for cid, texts in reasons.items():
        for key, text in texts.items():
            assert getattr(by_id[cid], key) == " ".join(text.split())


def write(tmp_path, reasons: dict, claim_extra: str = "") -> Path:
    paper = tmp_path / "p.yaml"
    paper.write_text(
        "paper: p\nsource: FAKE\nartefacts: {}\nclaims:\n"
        f"  - {{id: c1, artefact: a, words: FAKE, check: threshold{claim_extra}}}\n"
    )
    (tmp_path / "reasons").mkdir()
    (tmp_path / "reasons" / "p.yaml").write_text(yaml.safe_dump({"claims": reasons}))
    return paper


def test_a_reason_is_merged_into_its_claim(tmp_path):
    doc = papers.load(write(tmp_path, {"c1": {"below_paper_scale": "FAKE quick reason"}}))
    assert doc["claims"][0]["below_paper_scale"] == "FAKE quick reason"


@pytest.mark.parametrize(
    "reasons, extra, error",
    [
        ({"c2": {"at_paper_scale": "FAKE"}}, "", r"reasons/p\.yaml: no claim 'c2'"),
        ({"c1": {"wrods": "FAKE"}}, "", r"claim 'c1': 'wrods' is not one of below_paper_scale, at_paper_scale"),
        ({"c1": {"at_paper_scale": "FAKE"}}, ", at_paper_scale: FAKE too", r"claim 'c1': 'at_paper_scale' is also set"),
    ],
)
def test_a_reason_for_no_claim_an_unknown_key_or_a_reason_set_twice_is_named(tmp_path, reasons, extra, error):
    with pytest.raises(ValueError, match=error):
        papers.load(write(tmp_path, reasons, extra))
