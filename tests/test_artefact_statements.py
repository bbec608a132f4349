"""Every figure and table names the paper artefact it rebuilds and states its claims' verdicts (report/verdicts/statement.py),
computed by the report's own claim code from the cells the notebook was handed; the README's results block is
the committed reports' (report/commands/glance.py)."""

import re
from pathlib import Path

import pytest
from PIL import Image

from reprokit.config import load_pipeline_config
from reprokit.report.commands import build_partial, glance
from reprokit.report.verdicts import claims, decide, papers, reproduction, statement

REPO = Path(__file__).resolve().parents[1]
BUILDS = [REPO / "figures" / "quick", REPO / "figures" / "paper"]


def test_every_configured_artefact_says_which_paper_artefact_it_rebuilds():
    cfg = load_pipeline_config(REPO, {})
    for name, spec in cfg["artefacts"].items():
        text = statement.rebuilds(name, spec)
        assert "Fig." in text or "Table" in text or text.startswith("no artefact of"), (name, text)
    assert statement.rebuilds("bali_table2", {"paper": "bali"}).startswith("Table 2 of BALI")
    with pytest.raises(ValueError, match="rebuilds"):
        statement.rebuilds("my_sweep", {"paper": "bali"})


@pytest.mark.parametrize("build", BUILDS, ids=lambda p: p.name)
def test_every_committed_figure_and_table_states_its_source_and_verdicts(build):
    cfg = load_pipeline_config(REPO, {})
    docs = {p.stem: papers.load(p) for p in (REPO / "config" / "papers").glob("*.yaml")}
    for art, spec in cfg["artefacts"].items():
        mine = [c for c in papers.claims(docs[spec["paper"]]) if c.artefact == art]
        for out in sorted(build.glob(f"{art}.*")):
            if out.suffix == ".png":
                text = Image.open(out).info.get("Title", "")
            elif out.suffix == ".tex":
                text = " ".join(out.read_text().split())
            else:
                continue
            assert "Rebuilds" in text, f"{out.relative_to(REPO)} does not name the paper artefact it rebuilds"
            letters = re.sub(r"\\[a-zA-Z]+|[^a-z0-9]", "", text.lower())  # LaTeX commands and escapes aside
            for claim in mine:  # each claim about it, with a verdict
                assert re.sub(r"[^a-z0-9]", "", claim.words.lower())[:40] in letters, (
                    f"{out.relative_to(REPO)} does not state the claim {claim.id}"
                )
            assert not mine or re.search(
                r"(HOLDS|DOES NOT HOLD|INCONCLUSIVE|NOT RUN|NOT TESTABLE|NOT COMPARABLE|BY CONSTRUCTION)", text
            ), f"{out.relative_to(REPO)} states no verdict"


@pytest.mark.parametrize("artefact", ["fig5", "fig7", "bali_table2", "bali_fig2", "bali_fig1", "bali_fig6"])
def test_a_notebook_states_the_reports_verdicts(tmp_path, artefact):
    """The verdicts an artefact prints (InputsContext over its input CSVs) are the report's (Context over the
    archive), claim for claim, on the committed quick cells."""
    cfg = load_pipeline_config(REPO, {"scale": "quick"})
    spec = cfg["artefacts"][artefact]
    inputs = {}
    for exp in [*spec["experiments"], *statement.experiments_read(spec, artefact, cfg["experiments"])]:
        lines = build_partial.found_lines(cfg, exp, "quick", tmp_path / "no-results", REPO)
        table, curves = build_partial.tables(cfg, exp, "quick", lines)
        inputs[exp], inputs[f"{exp}_curves"] = tmp_path / f"{exp}.csv", tmp_path / f"{exp}_curves.csv"
        table.to_csv(inputs[exp], index=False)
        curves.to_csv(inputs[f"{exp}_curves"], index=False)
    doc = papers.load(REPO / "config" / "papers" / f"{spec['paper']}.yaml")
    report_ctx = reproduction.Context(tmp_path / "no-results", "quick", [doc], archive=(REPO, cfg))
    st = statement.for_artefact(artefact, spec, "quick", inputs, REPO / "config" / "papers")
    assert st.verdicts, artefact
    for claim, verdict in st.verdicts:
        assert verdict == claims.verdict(report_ctx, claim), claim.id
    assert any(line.startswith("Rebuilds") for line in st.lines())


def test_readme_results_block_is_the_committed_reports():
    text = (REPO / "README.md").read_text()
    assert glance.splice(text, glance.block(REPO)) == text, (
        "README.md's results block differs from figures/*/reproduction.md: run python -m reprokit.report.commands.glance"
    )


def test_the_glance_block_counts_each_paper_at_each_scale(tmp_path):
    for scale in glance.SCALES:
        d = tmp_path / "figures" / scale
        d.mkdir(parents=True)
        counts = dict.fromkeys(decide.STATUSES, 0)
        g = {
            "paper": "bali",
            "scale": scale,
            "method": "BALI",
            "claims": 13,
            "compared": 28,
            "within": 6,
            "not_run": {"x": 2},
            "counts": {**counts, "holds": 3, "inconclusive": 1, "does not hold": 6, "by construction": 1, "not run": 2},
            "baseline_claims": 2,
            "baseline_counts": {**counts, "does not hold": 1, "not testable": 1},
            "baseline_within": 4,
            "baseline_compared": 9,
        }
        (d / "reproduction.md").write_text(f"# r\n\n<!-- glance: {__import__('json').dumps(g)} -->\n")
    block = glance.block(tmp_path)
    assert (
        "| paper | scale | claims about | claims | hold | inconclusive | do not hold | not comparable | by construction |"
        in block
    )
    for scale in ("paper", "quick"):
        # one row for the paper's own method, one for its baselines, at each scale
        assert f"| BALI | {scale} | BALI | 13 | 3 | 1 | 6 | 0 | 1 | 2 | 6 / 28 |" in block
        assert f"| BALI | {scale} | its baselines | 2 | 0 | 0 | 1 | 0 | 0 | 1 | 4 / 9 |" in block
        assert f"([{scale}-scale report](figures/{scale}/reproduction.md))" in block
    assert "10 of its 13 claims about BALI were tested" in block  # by construction is shown, not tested
    (tmp_path / "figures" / "quick" / "reproduction.md").write_text("# an old report\n")
    with pytest.raises(ValueError, match="glance"):
        glance.block(tmp_path)


def test_a_variant_claim_is_shown_but_not_counted():
    doc = {"paper": "bali", "artefacts": {}}
    own = papers.Claim("c1", "bali", "bali_fig2", "BALI converges faster", "peak")
    var = papers.Claim("c1_pm1", "bali", "bali_fig2", "BALI converges faster", "peak", variant="another reading")
    verdicts = [(own, decide.Verdict(decide.HOLDS, "m", 3)), (var, decide.Verdict(decide.FAILS, "m", 3))]
    g = reproduction.glance(type("Ctx", (), {"scale": "paper"})(), doc, verdicts)
    assert g["claims"] == 1 and g["counts"][decide.HOLDS] == 1 and g["counts"][decide.FAILS] == 0
    st = statement.Statement("bali_fig2", "paper", "Fig. 2 of BALI", verdicts)
    lines = st.lines()
    assert "1 holds" in lines[0] and "not hold" not in lines[0]
    assert lines[2].startswith("Variant (another reading), claim")
