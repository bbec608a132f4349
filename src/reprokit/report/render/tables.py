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
reproduction report). The LaTeX itself (escaping, the layout engine and its glyph widths) is `latex.py`;
`latex_check.check_latex` (and `python -m reprokit.report.commands.check_latex FILE.tex ...`) compiles a table with
pdflatex and reports errors, overfull boxes, shrinking, a table taller than the page and a caption over the bound
(tests/test_tables_latex.py).
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path

import pandas as pd

from ...atomic import atomic_write_text
from ..store.cells import SCALE_NOTE
from .latex import (
    CAPTION_MAX_CHARS,
    COLSEP_PT,
    NEEDS_PREFIX,
    PARAGRAPH_COLUMN,
    PLACEMENT,
    TEXT_WIDTH_PT,
    TableLayout,
    ascii_latex,
    caption_length,
    column_specs,
    fitted,
    latex_escape,
    latex_needs,
    stacked,
    table_layout,
)
from .notebook import artefact_statement, notes_pointer, with_partial

DATA_SEP = "; data: "  # style.source_note's note: "<scale>; <n> seed(s); data: <data>"


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
    cells = cells.map(lambda v: stacked(v, "l", "t") if isinstance(v, str) else v)
    headers = [stacked(h, align[i], "b") for i, h in enumerate(layout.headers)]
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
        lines.append(fitted(body.strip()))
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
