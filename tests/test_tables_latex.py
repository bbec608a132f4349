"""Every committed LaTeX table (figures/quick/*.tex, figures/paper/*.tex) compiles with pdflatex in a plain
`\\documentclass{article}` that loads only the packages its `% needs:` line names, and fits the page: no LaTeX
error, no overfull \\hbox wider than a few points, no table taller than the page's text (nor LaTeX's "Float too
large for page" warning), and a caption of a few lines, at most CAPTION_MAX_CHARS (350) printed characters with its
provenance note (reprokit.report.render.latex_check.check_latex). Also: pure ASCII, no text-mode < or > (OT1
prints them as inverted punctuation), and write_table's layout rules on synthetic tables.

Without pdflatex the compile tests skip with a reason; with REPROKIT_REQUIRE_LATEX=1 (CI, .ci/run) they fail instead.
REPROKIT_LATEX_TABLES (glob patterns, separated by the path separator) adds tables to check, e.g. freshly built
figures/*.tex before they are committed:
    REPROKIT_LATEX_TABLES='figures/*.tex' python -m pytest -q tests/test_tables_latex.py -n 0
"""

import glob
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reprokit.report.render import notebook
from reprokit.report.render.latex import (
    CAPTION_MAX_CHARS,
    MIN_SHRINK,
    TEXT_HEIGHT_PT,
    TEXT_WIDTH_PT,
    caption_length,
    latex_escape,
)
from reprokit.report.render.latex_check import check_latex, needs_of
from reprokit.report.render.tables import n_per_entry, write_table

REPO = Path(__file__).resolve().parents[1]
MAX_OVERFULL_PT = 3.0  # "a few points": TeX's own \hfuzz is 0.1pt, rounding in a resized box stays far below this
# the smallest \resizebox factor write_table's layout allows itself (MIN_SHRINK) with room for its width estimate
MIN_FACTOR = 0.75


def committed_tables() -> list[Path]:
    found = sorted(REPO.glob("figures/quick/*.tex")) + sorted(REPO.glob("figures/paper/*.tex"))
    for pattern in filter(None, os.environ.get("REPROKIT_LATEX_TABLES", "").split(os.pathsep)):
        found += sorted(Path(p) for p in glob.glob(pattern if os.path.isabs(pattern) else str(REPO / pattern)))
    return list(dict.fromkeys(p.resolve() for p in found))


def _id(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def pdflatex() -> str:
    exe = shutil.which("pdflatex")
    if exe:
        return exe
    reason = (
        "pdflatex is not installed (Debian: apt-get install texlive-latex-base texlive-latex-recommended, "
        "as .ci/run does)"
    )
    if os.environ.get("REPROKIT_REQUIRE_LATEX") == "1":
        pytest.fail(f"REPROKIT_REQUIRE_LATEX=1 but {reason}")
    pytest.skip(reason)


def text_mode(tex: str) -> str:
    """`tex` without its math, tabular preambles and the \\ifdim of write_table's fit (where < and > are fine)."""
    tex = "\n".join(line for line in tex.splitlines() if not line.startswith((r"\ifdim", "%")))
    tex = re.sub(r"\\begin\{tabular\}(\[[tcb]\])?\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}", "", tex)
    tex = re.sub(r"\\ensuremath\{(?:[^{}]|\{[^{}]*\})*\}", "", tex)
    return re.sub(r"(?<!\\)\$[^$]*(?<!\\)\$", "", tex)


def assert_compiles_and_fits(path: Path, tmp_path: Path, min_factor: float = MIN_FACTOR) -> None:
    check = check_latex(path, tmp_path, pdflatex())
    problems = check.problems(MAX_OVERFULL_PT, min_factor)
    assert not problems, f"{_id(path)} (packages {needs_of(path.read_text())}): " + "; ".join(problems)


# -- the committed tables ------------------------------------------------------------------------------

TABLES = committed_tables()


def test_there_are_committed_tables():
    assert len([p for p in TABLES if "figures" in p.parts]) >= 20


@pytest.mark.parametrize("path", TABLES, ids=_id)
def test_table_compiles_in_a_plain_article_and_fits_the_page(path, tmp_path):
    """Width, height (the float measured against \\textheight, and no "Float too large") and the caption's length."""
    assert_compiles_and_fits(path, tmp_path)


@pytest.mark.parametrize("path", TABLES, ids=_id)
def test_table_source_is_ascii_names_its_packages_and_has_no_text_mode_angle_brackets(path):
    tex = path.read_text(encoding="utf-8")
    assert tex.isascii(), f"{_id(path)} is not pure ASCII"
    assert tex.startswith(r"% needs: \usepackage{"), f"{_id(path)}: first line is not '% needs: \\usepackage{{...}}'"
    needs = needs_of(tex)
    assert "booktabs" in needs
    if r"\textcolor" in tex:
        assert "xcolor" in needs, f"{_id(path)} colours text without naming xcolor"
    if r"\resizebox" in tex:
        assert "graphicx" in needs, f"{_id(path)} uses \\resizebox without naming graphicx"
    bad = re.findall(r".{0,30}[<>].{0,30}", text_mode(tex))
    assert not bad, f"{_id(path)}: text-mode < or > (prints as inverted punctuation in OT1): {bad}"


# -- write_table's layout --------------------------------------------------------------------------------


def wide_frame(n_cols: int, n_rows: int = 4) -> pd.DataFrame:
    return pd.DataFrame(
        {"Dataset": [f"set {i}" for i in range(n_rows)]}
        | {f"Method {j} (quoted)": [f"{j}.{i}23 ± 0.0{i}5" for i in range(n_rows)] for j in range(n_cols)}
    )


def test_escape_covers_the_characters_ot1_misprints():
    assert latex_escape("a < b > c | d") == r"a \textless{} b \textgreater{} c \textbar{} d"


def test_a_narrow_table_is_left_as_it_is(tmp_path):
    out = tmp_path / "narrow.tex"
    layout = write_table(pd.DataFrame({"a": ["x"], "b": [1.5]}), out, "Narrow", "quick", "note", footnotes=["p < 0.05"])
    tex = out.read_text()
    assert layout.size is None and len(layout.parts) == 1
    assert tex.splitlines()[0] == r"% needs: \usepackage{booktabs,graphicx}"
    assert r"p \textless{} 0.05" in tex and r"\small" not in tex and r"\tabcolsep" not in tex
    assert tex.count(r"\begin{tabular}") == 1 and r"\resizebox{\linewidth}{!}{\usebox0}" in tex


def test_a_wide_table_is_set_smaller_then_split_repeating_its_key_columns(tmp_path):
    out = tmp_path / "wide.tex"
    layout = write_table(wide_frame(4), out, "Four", "quick", "n")
    assert layout.size is None and len(layout.parts) == 1 and "\n(quoted)" in layout.headers[1]  # wrapped headers
    layout = write_table(wide_frame(5), out, "Five", "quick", "n")
    assert layout.size == "footnotesize" and layout.colsep_pt < 6 and len(layout.parts) == 1  # then smaller type
    assert r"\footnotesize" in out.read_text() and r"\setlength{\tabcolsep}{4pt}" in out.read_text()
    layout = write_table(wide_frame(12), out, "Twelve", "test", "n")
    assert len(layout.parts) >= 2 and all(p[0] == 0 for p in layout.parts)  # each part starts with Dataset
    assert sorted({c for p in layout.parts for c in p}) == list(range(13))
    tex = out.read_text()
    assert tex.count(r"\begin{tabular}{") == len(layout.parts) and tex.count("Dataset") == len(layout.parts)
    assert tex.splitlines()[0] == r"% needs: \usepackage{booktabs,graphicx,xcolor}"  # xcolor: the TEST DATA mark
    assert "Method 11 (quoted)" in (tmp_path / "wide.html").read_text()  # the HTML page holds the whole table
    # explicit parts and keys
    layout = write_table(
        wide_frame(4),
        out,
        "Parts",
        "quick",
        "n",
        parts=[["Method 0 (quoted)"], ["Method 1 (quoted)", "Method 2 (quoted)", "Method 3 (quoted)"]],
    )
    assert layout.parts == [[0, 1], [0, 2, 3, 4]]


def test_long_headers_wrap_onto_lines_and_cells_with_newlines_stack(tmp_path):
    df = pd.DataFrame({"k": ["a"], "a header long enough to wrap": ["1"], "b": ["two\nlines"]})
    df = pd.concat(
        [df]
        + [
            df.rename(columns={"b": f"b{i}", "a header long enough to wrap": f"long header {i} x y z"}).drop(
                columns="k"
            )
            for i in range(8)
        ],
        axis=1,
    )
    out = tmp_path / "h.tex"
    write_table(df, out, "Headers", "quick", "n")
    tex = out.read_text()
    assert r"\begin{tabular}[b]{@{}l@{}}a header" in tex  # wrapped header, bottom-aligned
    assert r"\begin{tabular}[t]{@{}l@{}}two \\ lines\end{tabular}" in tex


def test_paragraph_columns_need_array_and_keep_their_width(tmp_path):
    from reprokit.report.render.latex import PARAGRAPH_COLUMN

    out = tmp_path / "p.tex"
    df = pd.DataFrame({"Layer": ["conv"], "Specification": ["channels=20, kernel size=(5, 5), padding=2, " * 3]})
    layout = write_table(df, out, "Spec", "quick", "n", column_format="l" + PARAGRAPH_COLUMN.format(0.6))
    tex = out.read_text()
    assert "array" in needs_of(tex) and r"p{0.60\linewidth}" in tex
    assert len(layout.parts) == 1 and layout.width_pt <= TEXT_WIDTH_PT
    with pytest.raises(ValueError, match="one l/c/r"):
        write_table(df, out, "Bad", "quick", "n", column_format="l|l")


def test_n_per_entry_names_the_entries_off_the_common_count():
    assert n_per_entry({"Spambase": 1, "Telescope": 2, "MNIST": 1}) == "n = 1 seed per entry except Telescope (2)"
    assert n_per_entry({"a": 3, "b": 3}, "split") == "n = 3 splits per entry"
    assert n_per_entry({"a": 1, "b": 2}) == "n = 1 seed per entry except b (2)"  # a tie: the smaller n is common


@pytest.mark.parametrize(
    "n_cols,n_rows,min_factor",
    [(2, 3, 1.0), (6, 3, MIN_SHRINK - 0.1), (9, 8, MIN_SHRINK - 0.1), (14, 8, MIN_SHRINK - 0.1), (16, 40, 0.0)],
)
def test_write_tables_compile_and_fit(tmp_path, n_cols, n_rows, min_factor):
    """Synthetic tables from narrow to far too wide compile and fit; where write_table can split them, shrunk no more
    than its MIN_SHRINK (the estimate's error allowed for); too long to split (16 x 40), shrunk as far as it takes."""
    out = tmp_path / "t.tex"
    write_table(
        wide_frame(n_cols, n_rows),
        out,
        "A caption with R_0 & 60% and p < 0.05",
        "test",
        "note; 2 seed(s)",
        footnotes=["n/a: path config/experiments/some_file.yaml and https://example.org/~user/a_b.tar.gz"],
        label="tab:t",
    )
    assert_compiles_and_fits(out, tmp_path / "build", min_factor=min_factor)


# -- page height and caption length -----------------------------------------------------------------------------


def long_frame(n_rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"Dataset": [f"set {i}" for i in range(n_rows)], "Value": [f"0.{i:03d}" for i in range(n_rows)]}
    )


def test_a_table_taller_than_the_page_fails_the_check(tmp_path):
    out = tmp_path / "tall.tex"
    write_table(long_frame(80), out, "Eighty rows", "quick", "note")
    check = check_latex(out, tmp_path / "tall", pdflatex())
    assert check.text_height_pt == pytest.approx(TEXT_HEIGHT_PT)
    assert len(check.float_pt) == 1 and check.float_pt[0] > TEXT_HEIGHT_PT
    assert check.too_large_pt and check.too_large_pt[0] == pytest.approx(check.float_pt[0] - TEXT_HEIGHT_PT, abs=0.1)
    problems = check.problems(MAX_OVERFULL_PT, MIN_FACTOR)
    assert any("taller than the page" in p for p in problems) and any("Float too large" in p for p in problems)
    # the same table with fewer rows fits, and its height is measured
    write_table(long_frame(20), out, "Twenty rows", "quick", "note")
    check = check_latex(out, tmp_path / "short", pdflatex())
    assert check.problems(MAX_OVERFULL_PT, MIN_FACTOR) == [] and 100 < check.float_pt[0] < TEXT_HEIGHT_PT


def test_long_footnotes_make_a_table_too_tall_too(tmp_path):
    out = tmp_path / "notes.tex"
    write_table(long_frame(10), out, "Ten rows", "quick", "note", footnotes=["A long explanation. " * 60] * 6)
    problems = check_latex(out, tmp_path / "b", pdflatex()).problems(MAX_OVERFULL_PT, MIN_FACTOR)
    assert any("taller than the page" in p for p in problems), problems


def test_a_caption_over_the_bound_fails_the_check(tmp_path):
    out = tmp_path / "cap.tex"
    note = "quick scale; 1 seed(s)"

    def words(n: int) -> str:
        return ("word " * n)[: n - 1] + "z"

    write_table(long_frame(3), out, words(CAPTION_MAX_CHARS - len(note) - 3), "quick", note)  # " (" and ")"
    check = check_latex(out, tmp_path / "a", pdflatex())
    assert check.caption_chars == CAPTION_MAX_CHARS and check.problems(MAX_OVERFULL_PT, MIN_FACTOR) == []
    write_table(long_frame(3), out, words(CAPTION_MAX_CHARS - len(note) - 2), "quick", note)
    check = check_latex(out, tmp_path / "b", pdflatex())
    assert check.problems(MAX_OVERFULL_PT, MIN_FACTOR) == [
        f"caption {CAPTION_MAX_CHARS + 1} characters, over {CAPTION_MAX_CHARS}"
    ]


def test_caption_length_counts_printed_characters():
    assert caption_length(r"\caption{A \& B (quick; 2 seed(s))}") == len("A & B (quick; 2 seed(s))")
    assert caption_length(r"\caption{$\alpha$ \ensuremath{\pm} 1 {x}}") == len("a ± 1 x")  # a symbol: one character
    assert caption_length(r"\caption{\textcolor{red}{\textbf{TEST DATA}} T}") == len("TEST DATA T")
    assert caption_length("no caption") == 0


def test_the_data_goes_to_a_footnote_and_a_long_partial_note_too(tmp_path):
    out = tmp_path / "d.tex"
    write_table(long_frame(2), out, "Caption", "quick", "quick scale; 2 seed(s); data: MNIST (60k train)")
    tex = out.read_text()
    assert r"\caption{Caption (quick scale; 2 seed(s))}" in tex and r"\footnotesize{Data: MNIST (60k train).}" in tex
    notebook.set_partial({"fig2a": [2, 9]})
    try:
        write_table(long_frame(2), out, "Caption", "quick", "quick scale; 2 seed(s)")
        assert r"\caption{Caption (quick scale; 2 seed(s); PARTIAL GRID: fig2a 2 of 9 cells)}" in out.read_text()
        notebook.set_partial({f"experiment_{i}": [2, 9] for i in range(12)})  # too long for the caption
        write_table(long_frame(2), out, "Caption", "quick", "quick scale; 2 seed(s)")
        tex = out.read_text()
        assert "PARTIAL GRID (which cells: the first footnote)" in tex
        assert r"\footnotesize{PARTIAL GRID: experiment\_0 2 of 9 cells" in tex
        assert check_latex(out, tmp_path / "p", pdflatex()).problems(MAX_OVERFULL_PT, MIN_FACTOR) == []
    finally:
        notebook.set_partial(None)
