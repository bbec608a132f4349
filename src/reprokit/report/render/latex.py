"""The LaTeX of the tables: escaping, and the layout engine that fits a table to the page.

Plain text is escaped with `latex_escape`; every non-ASCII character becomes ASCII LaTeX (`ascii_latex`), so the
.tex files compile with any engine and input encoding. `table_layout` estimates each column's width from Computer
Modern glyph widths (`text_width_pt`) and picks the font size, \\tabcolsep and, where a table is far too wide,
column parts for a plain 10pt `article`; `latex_needs` names the packages a table's LaTeX needs and
`caption_length` its caption's printed length. The table writers (`tables.write_table`) set tables with it;
`latex_check.check_latex` compiles one and reads the log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

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
                "reprokit.report.render.latex._ASCII_LATEX"
            )
    return "".join(out)


def latex_escape(text) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


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


def stacked(latex: str, align: str, pos: str) -> str:
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


def fitted(tabular: str) -> str:
    """`tabular` set in a box, shrunk to \\linewidth only where it is wider."""
    return (
        "\\sbox0{%\n" + tabular + "}%\n"
        r"\ifdim\wd0>\linewidth\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi"
    )


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
