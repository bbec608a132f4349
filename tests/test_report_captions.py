"""`snakemake --report`: every caption parses without a docutils message, every artefact has one, and the
tables are in the report (the HTML rendering write_table puts beside each .tex)."""

import base64
import functools
import io
import re
import types
import warnings
from pathlib import Path

import pandas as pd
import pytest

from reprokit.config import load_pipeline_config
from reprokit.report.render.tables import write_table

REPO = Path(__file__).resolve().parents[1]
CAPTIONS = sorted((REPO / "workflow" / "report").glob("*.rst"))

# What snakemake (report/__init__.py, FileRecord.render) appends to every caption before rendering it: link
# targets for its panels, each category and each file of the report.
SNAKEMAKE_LINKS = """

.. _Workflow: javascript:show_panel('workflow')
.. _Statistics: javascript:show_panel('statistics')
{% for cat in categories %}
.. _{{ cat }}: javascript:app.showCategory('{{ cat|urlencode }}')
{% endfor %}
{% for res in files %}
.. _{{ res }}: javascript:app.showResultInfo('{{ res|urlencode }}')
{% endfor %}
"""
MESSAGE = re.compile(r"\((DEBUG|INFO|WARNING|ERROR|SEVERE)/(\d)\) (.*)")


@functools.lru_cache(maxsize=1)
def _config() -> dict:
    return load_pipeline_config(REPO)


def render_caption(
    text: str,
    config: dict,
    categories=("Partitioned networks", "BALI", "Reproduction report"),
    files=("fig2.pdf", "table5.html"),
) -> tuple[str, list[tuple[str, int, str]]]:
    """(HTML body, docutils messages) of a caption, as snakemake renders it: the caption plus its link
    targets through jinja2 (trim/lstrip blocks, as snakemake's Environment; undefined names fail here),
    then docutils' publish_parts with the html writer. Messages of every level are collected."""
    from docutils.core import publish_parts
    from jinja2 import Environment, StrictUndefined

    env = Environment(trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
    snakemake = types.SimpleNamespace(config=config, wildcards={}, params={}, input={}, output={})
    rst = env.from_string(text + SNAKEMAKE_LINKS).render(snakemake=snakemake, categories=categories, files=files)
    stream = io.StringIO()
    with warnings.catch_warnings():  # docutils >= 0.22 deprecates writer_name, which snakemake still passes
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        body = publish_parts(
            rst, writer_name="html", settings_overrides={"report_level": 1, "halt_level": 5, "warning_stream": stream}
        )["body"]
    return body, [(name, int(level), text) for name, level, text in MESSAGE.findall(stream.getvalue())]


def own_messages(
    messages, categories=("Partitioned networks", "BALI", "Reproduction report"), files=("fig2.pdf", "table5.html")
):
    """Messages about the caption itself: not the INFO that snakemake's own appended targets go unused."""
    appended = {n.lower() for n in ("Workflow", "Statistics", *categories, *files)}
    return [
        m
        for m in messages
        if not (
            m[0] == "INFO"
            and (t := re.fullmatch(r'Hyperlink target "(.*)" is not referenced\.', m[2]))
            and t[1] in appended
        )
    ]


def test_the_check_sees_what_docutils_reports():
    """Guards the test below: the pre-fix text of Fig. 3's caption is an error, a clean one is not."""
    _, messages = render_caption("regulariser -lambda||psi|| unbounded below, largest |psi|.", {})
    assert any(level >= 3 and "psi" in msg for _, level, msg in own_messages(messages))
    body, messages = render_caption("regulariser ``-lambda||psi||``, largest ``|psi|``.", {})
    assert own_messages(messages) == [] and "||psi||" in body


@pytest.mark.parametrize("path", CAPTIONS, ids=[p.name for p in CAPTIONS])
def test_every_caption_parses_without_a_docutils_message(path):
    body, messages = render_caption(path.read_text(encoding="utf-8"), _config())
    assert own_messages(messages) == [], f"{path.name}: {own_messages(messages)}"
    assert body.strip()


def test_every_artefact_and_the_reproduction_report_have_a_caption():
    """artefacts.smk gives every figure and every table's HTML rendering the caption workflow/report/<name>.rst."""
    names = {p.stem for p in CAPTIONS}
    missing = sorted(set(_config()["artefacts"]) - names)
    assert missing == [], f"no caption file workflow/report/<name>.rst for {missing}"
    assert "reproduction" in names


def test_write_table_writes_an_html_rendering_beside_the_tex(tmp_path):
    df = pd.DataFrame({"Method": ["A & B", "<C>"], "acc": ["91.2 ± 0.3", None]})
    write_table(
        df, tmp_path / "table0.tex", "Accuracy (%)", "test", "test scale; 1 seed(s)", footnotes=["n/a: no cell"]
    )
    page = (tmp_path / "table0.html").read_text()
    assert "TEST DATA" in page and "Accuracy (%) (test scale; 1 seed(s))" in page
    assert "<td>A &amp; B</td>" in page and "<td>&lt;C&gt;</td>" in page and "<td>n/a</td>" in page
    assert "<td>91.2 ± 0.3</td>" in page and "n/a: no cell" in page
    # LaTeX tables (escape=False): colour and escaped characters render, math stays as written
    latex = pd.DataFrame({"Method": [r"Diff.\ Laplace"], "Memory": [r"\textcolor{red}{$\mathcal{O}(D^2)$}"]})
    write_table(latex, tmp_path / "table7.tex", r"Memory, 60\% less", "quick", "note", escape=False)
    page = (tmp_path / "table7.html").read_text()
    assert '<span style="color:red">$\\mathcal{O}(D^2)$</span>' in page and "Diff. Laplace" in page
    assert "Memory, 60% less (note)" in page and "TEST DATA" not in page


def test_the_report_holds_the_tables(tmp_path):
    """A test-scale Table 5 (no cells) built and reported through Snakemake: its rendering is a report item
    with its caption, and no caption draws a docutils message."""
    from test_pipeline import make_workdir, snakemake

    work = make_workdir(tmp_path)
    res = snakemake(work, "--cores", "1", "figures/table5.tex", "--config", "scale=test")
    assert res.returncode == 0, res.stdout[-3000:]
    assert (work / "figures" / "table5.html").is_file()
    res = snakemake(work, "--report", "report.html", "figures/table5.tex", "--config", "scale=test")
    assert res.returncode == 0, res.stdout[-3000:]
    assert "Adding table5.html" in res.stdout
    assert not re.search(r"\((WARNING|ERROR|SEVERE)/\d\)|Undefined substitution", res.stdout), res.stdout[-3000:]
    report = (work / "report.html").read_text()
    items = {
        m[1]: base64.b64decode(m[2]).decode()
        for m in re.finditer(r"data:text/html;charset=utf8;filename=([^;]+);base64,([A-Za-z0-9+/=]+)", report)
    }
    assert "table5.html" in items, sorted(items)
    assert "<table" in items["table5.html"] and "Number of datapoints" in items["table5.html"]
    assert "Table 5 of the partitioned-networks paper" in report  # its caption
