"""The LaTeX table writer every table notebook uses, and the tables without experiments.

`write_table` writes a booktabs table whose caption ends with the provenance note (scale, seeds, data)
and marks test scale; plain text is escaped with `latex_escape`, and with ``escape=False`` cells may hold
LaTeX math such as ``$\\mathcal{O}(N_B P S)$`` (multi-level column headers are supported).
Every table states the scale it was built at: tables that do not depend on the scale (transcribed or
rendered from code) say so, and are still marked at test scale like every CI build.
Next to each `<name>.tex` it writes `<name>.html`, the same table, caption and footnotes as an HTML page:
the rendering Snakemake's report shows beside the figures (workflow/rules/artefacts.smk declares it).
Each .tex compiles in a plain `\\documentclass{article}` with the packages its first line names
(`% needs: \\usepackage{booktabs,graphicx,...}`) and fits its text width (`table_layout`: smaller type, tighter
columns, column parts, and \\resizebox as the last resort) and the page's height, with a caption of a few lines
(CAPTION_MAX_CHARS; the data in a footnote, a long explanation in the artefact's `notes`, printed by the
reproduction report); `check_latex` (and `python -m reprokit.report.render.tables FILE.tex ...`) compiles one with
pdflatex and reports errors, overfull boxes, shrinking, a table taller than the page and a caption over the bound
(tests/test_tables_latex.py).
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...atomic import atomic_write_text
from ..cells import SCALE_NOTE
from .notebook import artefact_statement, notes_pointer, with_partial

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",  # in the default OT1 font encoding a plain < prints as an inverted exclamation mark
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}


# Non-ASCII characters a caption or cell may hold, as LaTeX that works in text and in math mode: the .tex
# files are pure ASCII, so they compile with any engine and input encoding. Any other non-ASCII character is an
# error naming the table and the character (`ascii_latex`).
_ASCII_LATEX = {
    "±": r"\ensuremath{\pm}",
    "×": r"\ensuremath{\times}",
    "·": r"\ensuremath{\cdot}",
    "−": "-",
    "–": "--",
    "—": "---",
    "≤": r"\ensuremath{\leq}",
    "≥": r"\ensuremath{\geq}",
    "≈": r"\ensuremath{\approx}",
    "↑": r"\ensuremath{\uparrow}",
    "↓": r"\ensuremath{\downarrow}",
    "→": r"\ensuremath{\to}",
    "²": r"\ensuremath{^2}",
    "³": r"\ensuremath{^3}",
    "√": r"\ensuremath{\surd}",
    "°": r"\ensuremath{^\circ}",
    "α": r"\ensuremath{\alpha}",
    "β": r"\ensuremath{\beta}",
    "γ": r"\ensuremath{\gamma}",
    "λ": r"\ensuremath{\lambda}",
    "μ": r"\ensuremath{\mu}",
    "µ": r"\ensuremath{\mu}",
    "σ": r"\ensuremath{\sigma}",
    "Σ": r"\ensuremath{\Sigma}",
    "ψ": r"\ensuremath{\psi}",
    "θ": r"\ensuremath{\theta}",
    "π": r"\ensuremath{\pi}",
    "ε": r"\ensuremath{\varepsilon}",
    "…": r"\ldots{}",
    "’": "'",
    "‘": "`",
    "“": "``",
    "”": "''",
    "\u00a0": "~",
}


def ascii_latex(text: str, where: str = "table") -> str:
    """`text` (LaTeX) with every non-ASCII character replaced by its LaTeX (`_ASCII_LATEX`); a character without
    one is a ValueError naming `where` and the character."""
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ch in _ASCII_LATEX:
            out.append(_ASCII_LATEX[ch])
        else:
            raise ValueError(
                f"{where}: character {ch!r} (U+{ord(ch):04X}) has no ASCII LaTeX form; add it to "
                "reprokit.report.render.tables._ASCII_LATEX"
            )
    return "".join(out)


def latex_escape(text) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def static_note(scale: str, source: str) -> str:
    """Provenance line for a table/figure that does not depend on experiments or the scale."""
    built = SCALE_NOTE.get(scale, scale).split(" (")[0]
    return f"built at {built}; no experiment cells, identical at every scale; source: {source}"


def n_per_entry(counts: dict, unit: str = "seed") -> str:
    """How many `unit`s each table entry averages, from {entry label: n}: "n = 1 seed per entry", or "n = 1 seed per
    entry except Telescope (2)" naming the entries off the most common n (the smaller n on a tie)."""
    counts = {k: int(v) for k, v in counts.items()}
    if not counts:
        return f"n = 0 {unit}s"
    values = list(counts.values())
    common = min(set(values), key=lambda n: (-values.count(n), n))
    text = f"n = {common} {unit}{'s' if common != 1 else ''} per entry"
    off = [f"{k} ({n})" for k, n in counts.items() if n != common]
    return text + (" except " + ", ".join(off) if off else "")


# -- Page width -----------------------------------------------------------------------------------------
# Every table fits the text width of a plain 10pt `article` (345pt): `table_layout` picks the font size and, where
# a table is far too wide, splits its columns into stacked tabulars (each repeating the key columns), from an
# estimate of the columns' widths (Computer Modern character widths); each tabular is then set in a box and
# shrunk to \linewidth by \resizebox only if it is still wider, so it never overflows whatever the estimate
# says (graphicx). The packages a table needs are named on its first line: `% needs: \usepackage{...}`.

TEXT_WIDTH_PT = 345.0  # \textwidth of \documentclass{article} at 10pt
TEXT_HEIGHT_PT = 550.0  # \textheight of \documentclass{article} at 10pt (US letter, TeX Live's default paper)
COLSEP_PT = 6.0  # \tabcolsep (LaTeX's default)
# The sizes write_table sets a table in, and the width of their text relative to 10pt (cmr9 and cmr8 are wider
# than scaled cmr10; measured on this pipeline's tables); \tabcolsep does not scale.
SIZES = {"normalsize": 1.0, "small": 0.925, "footnotesize": 0.85}
# How write_table sets a table that does not fit at normal size, in order: (font size, \tabcolsep in pt)
STEPS = [("normalsize", COLSEP_PT), ("small", COLSEP_PT), ("small", 4.0), ("footnotesize", 4.0)]
MIN_SHRINK = 0.85  # below this \resizebox factor (set as tight as STEPS go) a table is split rather than shrunk
MAX_PARTS = 3
MAX_SPLIT_ROWS = 30  # a split table repeats its rows in every part: no more than this many in all (page height)
# A column whose text wraps onto lines, ragged right, {} of the line wide (needs array): for column_format
PARAGRAPH_COLUMN = r">{{\raggedright\arraybackslash}}p{{{:.2f}\linewidth}}"
NEEDS_PREFIX = "% needs: "
# -- Page height and caption --------------------------------------------------------------------------------
# A table (caption, tabulars and footnotes) is no taller than the page's text (TEXT_HEIGHT_PT: check_latex
# measures every float and reads LaTeX's "Float too large for page" warning), and it may go on a page of floats
# of its own (p) where it is too tall for the top of a text page. Its caption is a few lines: at most
# CAPTION_MAX_CHARS printed characters (about four and a half lines of the text width), the provenance note
# included; the data a table comes from is a footnote, and a long explanation goes to the artefact's `notes`
# (its config entry), which the reproduction report prints in the artefact's section (the table points there).
PLACEMENT = "tp"
CAPTION_MAX_CHARS = 350
DATA_SEP = "; data: "  # style.source_note's note: "<scale>; <n> seed(s); data: <data>"

# Computer Modern Roman 10pt widths (pt) of the characters tables hold; anything else counts 5pt.
_CHAR_PT = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        (
            5.0,
            5.56,
            4.44,
            5.56,
            4.44,
            3.06,
            5.0,
            5.56,
            2.78,
            3.06,
            5.28,
            2.78,
            8.33,
            5.56,
            5.0,
            5.56,
            5.28,
            3.92,
            3.94,
            3.89,
            5.56,
            5.28,
            7.22,
            5.28,
            5.28,
            4.44,
        ),
    )
)
_CHAR_PT.update(
    dict(
        zip(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            (
                7.5,
                7.08,
                7.22,
                7.64,
                6.81,
                6.53,
                7.85,
                7.5,
                3.61,
                5.14,
                7.78,
                6.25,
                9.17,
                7.5,
                7.78,
                6.81,
                7.78,
                7.36,
                5.56,
                7.22,
                7.5,
                7.5,
                10.28,
                7.5,
                7.5,
                6.11,
            ),
        )
    )
)
_CHAR_PT.update(dict.fromkeys("0123456789", 5.0))
_CHAR_PT.update(
    {
        " ": 3.33,
        ".": 2.78,
        ",": 2.78,
        ":": 2.78,
        ";": 2.78,
        "(": 3.89,
        ")": 3.89,
        "[": 2.78,
        "]": 2.78,
        "-": 3.33,
        "/": 5.0,
        "+": 7.78,
        "=": 7.78,
        "%": 8.33,
        "&": 7.78,
        "'": 2.78,
        "*": 5.0,
        "<": 7.78,
        ">": 7.78,
        "|": 2.78,
        "!": 2.78,
        "?": 4.72,
        "#": 8.33,
        "~": 5.0,
        "±": 7.78,
        "×": 7.78,
        "·": 2.78,
        "−": 7.78,
        "–": 5.0,
        "—": 10.0,
        "≤": 7.78,
        "≥": 7.78,
        "≈": 7.78,
        "↑": 5.0,
        "↓": 5.0,
        "→": 10.0,
        "²": 3.5,
        "³": 3.5,
        "…": 8.34,
    }
)
_TEXT_SYMBOLS = {
    "textless": "<",
    "textgreater": ">",
    "textbar": "|",
    "textasciitilde": "~",
    "textasciicircum": "^",
    "textbackslash": "/",
    "ldots": "...",
    "pm": "±",
    "times": "×",
    "cdot": "·",
    "leq": "≤",
    "geq": "≥",
    "approx": "≈",
    "uparrow": "↑",
    "downarrow": "↓",
    "to": "→",
}
_NO_WIDTH = {
    "ensuremath",
    "textbf",
    "textit",
    "emph",
    "mathcal",
    "mathrm",
    "mathbf",
    "text",
    "textrm",
    "mathit",
    "left",
    "right",
    "big",
    "Big",
    "centering",
    "raggedright",
}


def _visible(latex: str) -> str:
    """Roughly the characters `latex` prints (for width estimates): commands dropped or one character wide."""
    s = re.sub(r"\\(?:textcolor|color)\{[^{}]*\}", "", str(latex))
    s = re.sub(r"\\([%&#_{}$])", lambda m: {"_": "-", "$": "S", "{": "(", "}": ")"}.get(m.group(1), m.group(1)), s)
    s = re.sub(r"\\[,;: ]", " ", s)
    s = re.sub(
        r"\\([a-zA-Z]+)\*?(?:\{\})?", lambda m: _TEXT_SYMBOLS.get(m.group(1), "" if m.group(1) in _NO_WIDTH else "x"), s
    )
    return re.sub(r"[{}$^_]", "", s).replace("~", " ")


def text_width_pt(latex) -> float:
    """Estimated natural width (pt, 10pt Computer Modern) of a cell or header; a stacked one ("\\n") its widest line."""
    return max(sum(_CHAR_PT.get(ch, 5.0) for ch in _visible(line)) for line in str(latex).split("\n"))


def _words(latex: str) -> list[str]:
    """`latex` split at the spaces outside braces and math (where a header may break onto a new line)."""
    words, cur, depth, math = [], "", 0, False
    for i, ch in enumerate(latex):
        escaped = i > 0 and latex[i - 1] == "\\"
        if ch == "$" and not escaped:
            math = not math
        elif ch == "{" and not escaped:
            depth += 1
        elif ch == "}" and not escaped:
            depth -= 1
        if ch == " " and depth == 0 and not math and not escaped:
            words.append(cur)
            cur = ""
        else:
            cur += ch
    return [w for w in words + [cur] if w]


def wrap_header(latex: str, width_pt: float, max_lines: int = 3) -> str:
    """`latex` broken at spaces into lines ("\\n") of at most `width_pt` (the longest word wider), at most
    `max_lines` lines (wider lines where needed)."""
    words = _words(str(latex))
    width = max([width_pt] + [text_width_pt(w) for w in words])
    while True:
        lines = []
        for w in words:
            if lines and text_width_pt(lines[-1] + " " + w) <= width:
                lines[-1] += " " + w
            else:
                lines.append(w)
        if len(lines) <= max_lines:
            return "\n".join(lines)
        width *= 1.15


def _stacked(latex: str, align: str, pos: str) -> str:
    """A cell of several lines ("\\n"): a borderless nested tabular, aligned `align` (l/c/r) at `pos` (t/b)."""
    if "\n" not in latex:
        return latex
    # a line starting with "[" would be read as the optional argument of the \\ before it: an empty group first
    lines = [("{}" + line if i and line.startswith("[") else line) for i, line in enumerate(latex.split("\n"))]
    return rf"\begin{{tabular}}[{pos}]{{@{{}}{align}@{{}}}}" + r" \\ ".join(lines) + r"\end{tabular}"


@dataclass
class TableLayout:
    """How write_table sets a table: font `size` (None: normal), \\tabcolsep `colsep_pt`, the column positions of
    each stacked tabular (`parts`, every one starting with the key columns), the (wrapped) bottom-level headers, and
    the estimated natural width (pt) of the widest part as set (\\resizebox shrinks it where it exceeds the line)."""

    size: str | None
    colsep_pt: float
    parts: list[list[int]]
    headers: list[str]
    width_pt: float


_COLUMN_SPEC = re.compile(r"(?:>\{(?:[^{}]|\{[^{}]*\})*\})?(?:[lcr]|[pmb]\{[^{}]*\})")
_UNIT_PT = {"pt": 1.0, "mm": 2.845, "cm": 28.45, "in": 72.27, "em": 10.0, "ex": 4.3}


def column_specs(column_format: str | None, n: int) -> list[str] | None:
    """The `n` columns' specifiers of a tabular preamble ("l", "r", "p{3cm}", ">{\\raggedright}p{3cm}"), None
    without one; a preamble with rules or @-expressions, or for another number of columns, is a ValueError."""
    if not column_format:
        return None
    specs = _COLUMN_SPEC.findall(column_format)
    if "".join(specs) != column_format or len(specs) != n:
        raise ValueError(
            f"column_format {column_format!r}: give one l/c/r/p{{..}} specifier per column ({n}), "
            "optionally with >{...}, and nothing else"
        )
    return specs


def _fixed_width_pt(spec: str | None, text_width: float) -> float | None:
    """The width of a p/m/b{<length>} column (a length in pt/mm/cm/in/em/ex or a fraction of \\linewidth), else None."""
    m = re.search(r"[pmb]\{([0-9.]*)\s*(\\linewidth|\\textwidth|\\columnwidth|[a-z]{2})\}$", spec or "")
    if not m:
        return None
    factor = float(m.group(1) or 1.0)
    return factor * (text_width if m.group(2).startswith("\\") else _UNIT_PT.get(m.group(2), 1.0))


def _column_widths(cells: pd.DataFrame, headers: list[str], fixed: list[float | None]) -> list[float]:
    return [
        0.0 if fixed[i] is not None else max([text_width_pt(h)] + [text_width_pt(v) for v in cells.iloc[:, i]])
        for i, h in enumerate(headers)
    ]


def _part_width(
    cols: list[int],
    widths: list[float],
    fixed: list[float | None],
    tops: list | None,
    factor: float = 1.0,
    colsep: float = COLSEP_PT,
) -> float:
    """Estimated width of a tabular of columns `cols` with text set at `factor` (SIZES) of 10pt."""
    pad = 2 * colsep
    text = sum(widths[i] for i in cols)
    if tops:  # a group header (\multicolumn) wider than the columns it spans widens them
        for top in dict.fromkeys(tops[i] for i in cols):
            span = [i for i in cols if tops[i] == top]
            have = sum(widths[i] + (fixed[i] or 0.0) / factor for i in span) + pad * (len(span) - 1) / factor
            text += max(0.0, text_width_pt(top) - have)
    return factor * text + sum(fixed[i] or 0.0 for i in cols) + pad * len(cols)


def _contiguous_splits(n: int, k: int):
    """Every way to cut range(n) into k non-empty contiguous runs, as lists of (start, stop)."""
    if k == 1:
        yield [(0, n)]
        return
    for cut in range(1, n - k + 2):
        for rest in _contiguous_splits(n - cut, k - 1):
            yield [(0, cut)] + [(a + cut, b + cut) for a, b in rest]


def table_layout(
    cells: pd.DataFrame,
    headers: list[str],
    tops: list | None = None,
    keys: int = 1,
    size: str | None = "auto",
    parts: list[list[int]] | None = None,
    specs: list[str] | None = None,
    text_width: float = TEXT_WIDTH_PT,
) -> TableLayout:
    """The layout of a table whose cells (LaTeX strings) are `cells`, bottom-level headers `headers`, with grouped
    columns group headers `tops` (one per column), and column specifiers `specs` (a p{<width>} column is that wide).

    Where the table is wider than `text_width`, headers are wrapped onto lines; then, with `size` "auto", the fewest
    parts (at most MAX_PARTS contiguous column groups, each repeating the first `keys` columns; a group header's
    columns kept together unless that cannot fit; no more than MAX_SPLIT_ROWS body rows in all) whose widest part
    needs no more shrinking than MIN_SHRINK set as tight as STEPS go, else the parts that need the least; then the
    first of STEPS (font size, \\tabcolsep) at which they fit unshrunk, else the last. `size` (None or a key of
    SIZES; \\tabcolsep stays at its default) and `parts` (column positions, keys excluded) fix either."""
    n = len(headers)
    keys = min(keys, n - 1) if n > 1 else 0
    fixed = [_fixed_width_pt(s, text_width) for s in (specs or [None] * n)]
    widths = _column_widths(cells, headers, fixed)
    if _part_width(list(range(n)), widths, fixed, tops) > text_width:
        cell_w = _column_widths(cells, [""] * n, fixed)
        headers = [h if fixed[i] is not None else wrap_header(h, max(cell_w[i], 30.0)) for i, h in enumerate(headers)]
        widths = _column_widths(cells, headers, fixed)
    key_cols = list(range(keys))
    grouped: list[list[int]] = []  # columns under one group header
    for i in range(keys, n):
        if grouped and tops and tops[i] == tops[grouped[-1][-1]] and tops[i] != "":
            grouped[-1].append(i)
        else:
            grouped.append([i])

    def widest(groups, step) -> float:
        return max(_part_width(g, widths, fixed, tops, SIZES[step[0]], step[1]) for g in groups)

    def best_split(units: list[list[int]], k: int) -> list[list[int]]:
        splits = (
            [key_cols + [c for u in units[a:b] for c in u] for a, b in cuts]
            for cuts in _contiguous_splits(len(units), k)
        )
        return min(splits, key=lambda groups: widest(groups, STEPS[0]))

    tight = STEPS[-1]
    if parts is not None:
        groups = [key_cols + [c for c in p if c not in key_cols] for p in parts]
    elif size != "auto" or not grouped:
        groups = [list(range(n))]
    else:  # a group header's columns split only where keeping them together does not fit
        tries = [
            best_split(units, k)
            for units in (grouped, [[c] for u in grouped for c in u])
            for k in range(1, min(MAX_PARTS, len(units)) + 1)
            if k == 1 or k * len(cells) <= MAX_SPLIT_ROWS
        ]
        groups = next(
            (g for g in tries if widest(g, tight) * MIN_SHRINK <= text_width),
            min(tries, key=lambda g: (widest(g, tight), len(g))),
        )
    if size == "auto":
        step = next((s for s in STEPS if widest(groups, s) <= text_width), tight)
    else:
        step = (size or "normalsize", COLSEP_PT)
    return TableLayout(None if step[0] == "normalsize" else step[0], step[1], groups, headers, widest(groups, step))


def latex_needs(tex: str) -> list[str]:
    """The packages a table's LaTeX needs beyond the article class: booktabs, graphicx (\\resizebox), array where
    a column has a >{...} declaration, and xcolor where it colours text."""
    needs = ["booktabs"]
    if r"\resizebox" in tex or r"\includegraphics" in tex:
        needs.append("graphicx")
    if r"\arraybackslash" in tex or re.search(r"\\begin\{tabular\}(\[[tcb]\])?\{[^\n]*>\{", tex):
        needs.append("array")
    if r"\textcolor" in tex or r"\color" in tex:
        needs.append("xcolor")
    return needs


def _fitted(tabular: str) -> str:
    """`tabular` set in a box, shrunk to \\linewidth only where it is wider."""
    return (
        "\\sbox0{%\n" + tabular + "}%\n"
        r"\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi"
    )


def write_table(
    df: pd.DataFrame,
    path: str | Path,
    caption: str,
    scale: str,
    note: str,
    footnotes: list[str] | None = None,
    label: str | None = None,
    escape: bool = True,
    column_format: str | None = None,
    size: str | None = "auto",
    keys: int | None = None,
    parts: list[list] | None = None,
) -> TableLayout:
    """A booktabs table; the caption ends with the provenance `note` and test scale is marked.

    With ``escape=False`` the caption, cells, headers and footnotes are written as given (LaTeX);
    escape their plain-text parts with `latex_escape`. The provenance `note` is always escaped.
    A cell or header holding "\\n" is set on several lines.
    The table fits the text width (`table_layout`): `size` ("auto", None or a key of SIZES) and `parts` (lists of
    column labels, key columns excluded) override its choices; `keys`: the leading columns each part repeats
    (default: the leading columns of an empty group header, else 1). The first line names the packages it needs
    (`latex_needs`). The data part of the provenance note ("...; data: <data>", `split_note`) is the first footnote.
    In an artefact build (notebook.start_log), a last footnote names the report's section that holds the
    artefact's notes (its config entry's `notes`, if any), the paper artefact it rebuilds and its claims' words and
    verdicts (report/verdicts/statement.py; what each measured is in the report). The caption should stay within
    CAPTION_MAX_CHARS (a warning in the log otherwise; check_latex fails it). Also writes the HTML rendering `path`
    with suffix .html (`write_table_html`). Returns the layout.
    """
    note, data = split_note(note)
    data_line = f"Data: {data if escape else latex_escape(data)}."
    footnotes = ([data_line] if data else []) + list(footnotes or [])
    partial = with_partial("").removeprefix("; ")  # built from part of its grid: which cells, in the caption
    cap = caption if not escape else latex_escape(caption)
    with_cells = rf"\caption{{{cap} ({latex_escape(note)}; {latex_escape(partial)})}}"
    if partial and caption_length(with_cells) > CAPTION_MAX_CHARS:
        footnotes.insert(0, f"{partial}." if escape else f"{latex_escape(partial)}.")  # too long there: a footnote
        partial = "PARTIAL GRID (which cells: the first footnote)"
    note = f"{note}; {partial}" if partial else note
    # In an artefact build: where the report has the notes of its config entry, what it rebuilds and its claims'
    # words and verdicts (what was measured is in the report, which the first line names), as one last footnote
    statement = artefact_statement()
    last = [notes_pointer()] + (statement.lines(measured_chars=0) if statement is not None else [])
    if any(last):
        text = " ".join(line for line in last if line)
        footnotes.append(text if escape else latex_escape(text))
    multicol = isinstance(df.columns, pd.MultiIndex)
    esc = latex_escape if escape else str
    cells = df.copy()
    for i in range(cells.shape[1]):  # strings escaped here, numbers left to pandas' formatting
        cells.isetitem(i, cells.iloc[:, i].map(lambda v: esc(v) if isinstance(v, str) else v, na_action="ignore"))
    labels = list(df.columns)
    bottom = [esc(c[-1] if multicol else c) for c in labels]
    tops = [esc(c[0]) for c in labels] if multicol else None
    if keys is None:
        keys = next((i for i, t in enumerate(tops) if t != ""), len(tops)) if multicol and tops[0] == "" else 1
    shown = cells.map(
        lambda v: v if isinstance(v, str) else "n/a" if pd.isna(v) else f"{v:.6f}" if isinstance(v, float) else str(v)
    )
    specs = column_specs(column_format, df.shape[1])
    layout = table_layout(
        shown, bottom, tops, keys, size, None if parts is None else [[labels.index(c) for c in p] for p in parts], specs
    )
    align = [("r" if pd.api.types.is_numeric_dtype(df.iloc[:, i]) else "l") for i in range(df.shape[1])]
    if specs:
        align = [s[-1] if s[-1] in "lcr" else "l" for s in specs]
    cells = cells.map(lambda v: _stacked(v, "l", "t") if isinstance(v, str) else v)
    headers = [_stacked(h, align[i], "b") for i, h in enumerate(layout.headers)]
    cells.columns = (
        pd.MultiIndex.from_tuples([tuple(esc(x) for x in c[:-1]) + (headers[i],) for i, c in enumerate(labels)])
        if multicol
        else headers
    )
    mark = r"\textcolor{red}{\textbf{TEST DATA}} " if scale == "test" else ""
    lines = [rf"\begin{{table}}[{PLACEMENT}]", r"\centering", rf"\caption{{{mark}{cap} ({latex_escape(note)})}}"]
    if label:
        lines.append(rf"\label{{{label}}}")
    if layout.size:
        lines.append("\\" + layout.size)
    if layout.colsep_pt != COLSEP_PT:
        lines.append(rf"\setlength{{\tabcolsep}}{{{layout.colsep_pt:g}pt}}")
    for j, cols in enumerate(layout.parts):
        fmt = "".join(specs[i] for i in cols) if specs else None
        body = cells.iloc[:, cols].to_latex(
            index=False, escape=False, na_rep="n/a", multicolumn=multicol, multicolumn_format="c", column_format=fmt
        )
        if j:
            lines.append(r"\par\medskip")
        lines.append(_fitted(body.strip()))
    for fn in footnotes or []:
        lines.append(rf"\par\footnotesize{{{latex_escape(fn) if escape else fn}}}")
    lines.append(r"\end{table}")
    text = "\n".join(lines) + "\n"
    text = NEEDS_PREFIX + r"\usepackage{" + ",".join(latex_needs(text)) + "}\n" + text
    atomic_write_text(path, ascii_latex(text, str(path)))
    logging.getLogger("reprokit.artefact").info(
        "%s: %s size, tabcolsep %gpt, %d part(s) of columns %s, widest estimated %.0fpt (text width %.0fpt)",
        Path(path).name,
        layout.size or "normal",
        layout.colsep_pt,
        len(layout.parts),
        layout.parts,
        layout.width_pt,
        TEXT_WIDTH_PT,
    )
    caption_chars = caption_length(lines[2])
    if caption_chars > CAPTION_MAX_CHARS:
        logging.getLogger("reprokit.artefact").warning(
            "%s: caption %d characters, over %d: move its explanation to the footnotes or the artefact's notes",
            Path(path).name,
            caption_chars,
            CAPTION_MAX_CHARS,
        )
    write_table_html(df, Path(path).with_suffix(".html"), caption, scale, note, footnotes, latex=not escape)
    return layout


def caption_length(tex: str) -> int:
    """The printed characters (roughly: `_visible`) of the first \\caption{...} in `tex`; 0 without one."""
    start = tex.find("\\caption{")
    if start < 0:
        return 0
    i, depth = start + len("\\caption{"), 1
    begin = i
    while i < len(tex) and depth:
        if tex[i] == "\\":
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(tex[i], 0)
        i += 1
    return len(_visible(tex[begin : i - 1]))


def split_note(note: str) -> tuple[str, str]:
    """(scale and seeds, data) of a provenance note (`style.source_note`: "<scale>; <n> seed(s); data: <data>"):
    write_table keeps the first in the caption and states the data in a footnote; ("note", "") without data."""
    head, sep, data = str(note).partition(DATA_SEP)
    return (head, data.strip()) if sep else (str(note), "")


_LATEX_MARKUP = [  # (pattern on HTML-escaped LaTeX, replacement): the few commands the tables' LaTeX cells use
    (re.compile(r"\\textcolor\{([a-zA-Z]+)\}\{((?:[^{}]|\{[^{}]*\})*)\}"), r'<span style="color:\1">\2</span>'),
    (re.compile(r"\\textbf\{((?:[^{}]|\{[^{}]*\})*)\}"), r"<b>\1</b>"),
    (re.compile(r"\\([%&#_{}])"), r"\1"),
    (re.compile(r"\\ "), " "),
    (re.compile(r"(?<!\\)~"), "&nbsp;"),
    (
        re.compile(r"\\text(less|greater|bar|asciitilde)\{\}"),
        lambda m: {"less": "&lt;", "greater": "&gt;", "bar": "|", "asciitilde": "&#126;"}[m.group(1)],
    ),
]


def _latex_html(text) -> str:
    """HTML of a LaTeX cell: colour and bold become HTML, escaped specials plain text; math stays as written."""
    out = html.escape(str(text), quote=False)
    for pattern, repl in _LATEX_MARKUP:
        out = pattern.sub(repl, out)
    return out


def write_table_html(
    df: pd.DataFrame,
    path: str | Path,
    caption: str,
    scale: str,
    note: str,
    footnotes: list[str] | None = None,
    latex: bool = False,
) -> None:
    """The table as an HTML page: caption (marked TEST DATA at test scale) with the provenance `note`, the
    table (missing values n/a) and the footnotes. `latex`: caption, cells, headers and footnotes hold LaTeX
    (`write_table(escape=False)`); its colour, bold and escaped characters are rendered, math is shown as written."""
    text = _latex_html if latex else (lambda t: html.escape(str(t), quote=False))
    shown = df.copy()
    if latex:
        for i in range(shown.shape[1]):
            shown.isetitem(i, shown.iloc[:, i].map(_latex_html, na_action="ignore"))
        shown.columns = shown.columns.map(
            lambda c: tuple(map(_latex_html, c)) if isinstance(c, tuple) else _latex_html(c)
        )
    body = shown.to_html(index=False, na_rep="n/a", escape=not latex, border=0)
    mark = '<b style="color:red">TEST DATA</b> ' if scale == "test" else ""
    notes = "".join(f'<p class="footnote">{text(fn)}</p>\n' for fn in footnotes or [])
    page = (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(Path(path).stem)}</title>\n"
        "<style>body{font-family:sans-serif;font-size:14px;margin:1em}table{border-collapse:collapse}"
        "th,td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}.footnote{font-size:12px;color:#444}"
        "</style>\n</head>\n<body>\n"
        f'<p class="caption">{mark}{text(caption)} ({html.escape(note, quote=False)})</p>\n{body}\n{notes}'
        "</body>\n</html>\n"
    )
    atomic_write_text(path, page)


# -- Tables 5-7: transcribed complexity tables --------------------------------------------------------


def load_yaml(path: str | Path) -> dict:
    import yaml

    with open(path) as f:
        return yaml.safe_load(f)


def complexity_table(doc: dict, name: str) -> tuple[pd.DataFrame, dict]:
    """(frame of LaTeX cells, the table's spec) for ``table5|table6|table7`` of the paper file
    (config/papers/partitioned.yaml, `artefacts.<name>`).

    Table 5 (notation, `symbols: true`) has one row per symbol with its ``Meaning``; Tables 6/7 have one row
    per method with LaTeX math per column and, per row, ``highlight``: the columns the paper colours (rendered
    in `highlight_color`).
    """
    spec = doc["artefacts"][name]
    numbers, columns = spec["numbers"], list(spec["columns"])
    if spec.get("symbols"):
        df = pd.DataFrame([{"Symbol": f"${sym}$", "Meaning": vals["Meaning"]} for sym, vals in numbers.items()])
        return df, spec
    color = spec.get("highlight_color")
    rows = []
    for method, cells in numbers.items():
        if set(cells) != set(columns):
            raise ValueError(f"{name}: row {method!r} has cells {sorted(cells)} for columns {columns}")
        marked = set(((spec.get("rows") or {}).get(method) or {}).get("highlight", []))
        out = {"Method": latex_escape(method)}
        for col in columns:
            text = f"${cells[col]}$"
            out[latex_escape(col)] = rf"\textcolor{{{color}}}{{{text}}}" if col in marked and color else text
        rows.append(out)
    return pd.DataFrame(rows), spec


def write_complexity_table(paper_path: str | Path, name: str, out_path: str | Path, scale: str) -> pd.DataFrame:
    """Render Table 5, 6 or 7 from the transcription in the paper file `paper_path` (config/papers/partitioned.yaml)."""
    doc = load_yaml(paper_path)
    df, spec = complexity_table(doc, name)
    note = static_note(
        scale, f"transcribed from {doc['source']}, App. D.1 ({Path(paper_path).as_posix()}), not computed"
    )
    # Tables 6/7: the long big-O terms break after a + within their columns (ragged right), the Method column as wide
    # as its text
    n = df.shape[1] - 1
    columns = None if spec.get("symbols") else "l" + PARAGRAPH_COLUMN.format(0.69 / n) * n
    write_table(
        df,
        out_path,
        spec["caption"],
        scale,
        note,
        footnotes=spec.get("footnotes"),
        label=f"tab:{name}",
        escape=False,
        column_format=columns,
    )
    return df


# -- Compile check -------------------------------------------------------------------------------------


@dataclass
class LatexCheck:
    """`check_latex`'s reading of one table: pdflatex's errors, the overfull \\hbox widths (pt), the factor by which
    \\resizebox shrank each tabular, the height (pt) of each float (table) and the text height it must fit, the
    excess of each float LaTeX found too large for the page ("Float too large for page by ..."), the log, and the
    printed length of the table's caption (`caption_length`)."""

    errors: list[str]
    overfull_pt: list[float]
    shrink: list[float]
    log: str
    float_pt: list[float] = field(default_factory=list)
    text_height_pt: float = TEXT_HEIGHT_PT
    too_large_pt: list[float] = field(default_factory=list)
    caption_chars: int = 0

    def problems(
        self, max_overfull_pt: float = 3.0, min_shrink: float = 0.0, max_caption_chars: int = CAPTION_MAX_CHARS
    ) -> list[str]:
        out = list(self.errors)
        if self.caption_chars > max_caption_chars:
            out.append(f"caption {self.caption_chars} characters, over {max_caption_chars}")
        out += [f"overfull \\hbox {w:g}pt too wide" for w in self.overfull_pt if w > max_overfull_pt]
        out += [f"tabular shrunk to {s:.2f} of its width (below {min_shrink:g})" for s in self.shrink if s < min_shrink]
        out += [
            f"table {h:g}pt tall, taller than the page's text ({self.text_height_pt:g}pt)"
            for h in self.float_pt
            if h > self.text_height_pt
        ]
        out += [f"LaTeX: Float too large for page by {w:g}pt" for w in self.too_large_pt]
        return out


def needs_of(tex: str) -> list[str]:
    """The packages a table's `% needs: \\usepackage{a,b}` line names (booktabs when it has none)."""
    for line in tex.splitlines():
        if line.startswith(NEEDS_PREFIX):
            found = re.findall(r"\\usepackage(?:\[[^\]]*\])?\{([^}]*)\}", line)
            return [p.strip() for group in found for p in group.split(",") if p.strip()]
    return ["booktabs"]


def check_latex(path: str | Path, workdir: str | Path, pdflatex: str = "pdflatex", timeout: float = 120) -> LatexCheck:
    """Compile table `path` with `pdflatex` in a plain `\\documentclass{article}` that loads the packages its
    `% needs:` line names (`needs_of`), in `workdir`, and read the log: errors ("! ..."), overfull \\hbox widths,
    for each \\resizebox the factor it shrank by, each float's height and LaTeX's "Float too large" warnings; and
    the caption's printed length from the source."""
    import subprocess

    path, workdir = Path(path).resolve(), Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    doc = "\n".join(
        [
            r"\documentclass{article}",
            r"\usepackage{" + ",".join(needs_of(path.read_text(encoding="ascii", errors="replace"))) + "}",
            r"\begin{document}",
            # each \resizebox (graphicx) logs the natural width of what it shrinks; a table without graphicx has none
            r"\makeatletter\@ifpackageloaded{graphicx}{\let\reprokitResize\resizebox"
            r"\renewcommand{\resizebox}[3]{\sbox2{#3}\typeout{reprokit-resize: \the\wd2\space to \the\linewidth}"
            r"\reprokitResize{#1}{#2}{\usebox2}}}{}\makeatother",
            # each float logs its height before LaTeX checks it against the page ("Float too large for page by ...")
            r"\makeatletter\let\reprokitFloatCheck\@largefloatcheck\def\@largefloatcheck{%",
            r"\typeout{reprokit-float: \the\ht\@currbox\space of \the\textheight}\reprokitFloatCheck}\makeatother",
            r"\input{" + path.as_posix() + "}",
            r"\end{document}",
            "",
        ]
    )
    (workdir / "wrapper.tex").write_text(doc)
    res = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "wrapper.tex"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    log_path = workdir / "wrapper.log"
    log = log_path.read_text(errors="replace") if log_path.exists() else res.stdout
    errors = [line for line in log.splitlines() if line.startswith("! ")]
    if res.returncode != 0 and not errors:
        errors = [f"pdflatex exited {res.returncode}"]
    overfull = [float(w) for w in re.findall(r"Overfull \\hbox \(([0-9.]+)pt too wide\)", log)]
    shrink = [float(to) / float(wd) for wd, to in re.findall(r"reprokit-resize: ([0-9.]+)pt ?to ([0-9.]+)pt", log)]
    floats = re.findall(r"reprokit-float: ([0-9.]+)pt of ([0-9.]+)pt", log)
    too_large = [float(w) for w in re.findall(r"Float too large for page by ([0-9.]+)pt", log)]
    return LatexCheck(
        errors,
        overfull,
        shrink,
        log,
        [float(h) for h, _ in floats],
        float(floats[0][1]) if floats else TEXT_HEIGHT_PT,
        too_large,
        caption_length(path.read_text(encoding="ascii", errors="replace")),
    )


def main(argv: list[str] | None = None) -> int:
    """python -m reprokit.report.render.tables FILE.tex ...: compile each table (`check_latex`) and print its problems."""
    import argparse
    import tempfile

    p = argparse.ArgumentParser(prog="python -m reprokit.report.render.tables", description=main.__doc__)
    p.add_argument("tex", nargs="+")
    p.add_argument("--max-overfull", type=float, default=3.0)
    args = p.parse_args(argv)
    bad = 0
    for tex in args.tex:
        with tempfile.TemporaryDirectory(prefix="reprokit-latex-") as tmp:
            check = check_latex(tex, tmp)
        problems = check.problems(args.max_overfull)
        shrink = ", ".join(f"{s:.2f}" for s in check.shrink) or "none"
        height = ", ".join(f"{h:.0f}pt" for h in check.float_pt) or "n/a"
        print(
            f"{tex}: {'; '.join(problems) if problems else 'ok'} (shrunk: {shrink}; height {height} of "
            f"{check.text_height_pt:.0f}pt; caption {check.caption_chars} characters)"
        )
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
