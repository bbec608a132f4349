"""The LaTeX table writer every table notebook uses, and the tables without experiments.

`write_table` writes a booktabs table whose caption ends with the provenance note (scale, seeds, data)
and marks test scale; plain text is escaped with `latex_escape`, and with ``escape=False`` cells may hold
LaTeX math such as ``$\\mathcal{O}(N_B P S)$`` (multi-level column headers are supported).
Every table states the scale it was built at: tables that do not depend on the scale (transcribed or
rendered from code) say so, and are still marked at test scale like every CI build.
Next to each `<name>.tex` it writes `<name>.html`, the same table, caption and footnotes as an HTML page:
the rendering Snakemake's report shows beside the figures (workflow/rules/artefacts.smk declares it).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from ..io import atomic_write_text
from .style import SCALE_NOTE, with_partial

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
}


# Non-ASCII characters a caption or cell may hold, as LaTeX that works in text and in math mode: the .tex
# files are pure ASCII, so they compile with any engine and input encoding. Any other non-ASCII character is an
# error naming the table and the character (`ascii_latex`).
_ASCII_LATEX = {
    "±": r"\ensuremath{\pm}", "×": r"\ensuremath{\times}", "·": r"\ensuremath{\cdot}", "−": "-", "–": "--",
    "—": "---", "≤": r"\ensuremath{\leq}", "≥": r"\ensuremath{\geq}", "≈": r"\ensuremath{\approx}",
    "↑": r"\ensuremath{\uparrow}", "↓": r"\ensuremath{\downarrow}", "→": r"\ensuremath{\to}",
    "²": r"\ensuremath{^2}", "³": r"\ensuremath{^3}", "√": r"\ensuremath{\surd}", "°": r"\ensuremath{^\circ}",
    "α": r"\ensuremath{\alpha}", "β": r"\ensuremath{\beta}", "γ": r"\ensuremath{\gamma}",
    "λ": r"\ensuremath{\lambda}", "μ": r"\ensuremath{\mu}", "µ": r"\ensuremath{\mu}",
    "σ": r"\ensuremath{\sigma}", "Σ": r"\ensuremath{\Sigma}", "ψ": r"\ensuremath{\psi}",
    "θ": r"\ensuremath{\theta}", "π": r"\ensuremath{\pi}", "ε": r"\ensuremath{\varepsilon}",
    "…": r"\ldots{}", "’": "'", "‘": "`", "“": "``", "”": "''", "\u00a0": "~",
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
            raise ValueError(f"{where}: character {ch!r} (U+{ord(ch):04X}) has no ASCII LaTeX form; add it to "
                             "reprokit.report.tables._ASCII_LATEX")
    return "".join(out)


def latex_escape(text) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def static_note(scale: str, source: str) -> str:
    """Provenance line for a table/figure that does not depend on experiments or the scale."""
    built = SCALE_NOTE.get(scale, scale).split(" (")[0]
    return f"built at {built}; no experiment cells, identical at every scale; source: {source}"


def write_table(df: pd.DataFrame, path: str | Path, caption: str, scale: str, note: str,
                footnotes: list[str] | None = None, label: str | None = None, escape: bool = True,
                column_format: str | None = None) -> None:
    """A booktabs table; the caption ends with the provenance `note` and test scale is marked.

    With ``escape=False`` the caption, cells, headers and footnotes are written as given (LaTeX);
    escape their plain-text parts with `latex_escape`. The provenance `note` is always escaped.
    Also writes the HTML rendering `path` with suffix .html (`write_table_html`).
    """
    note = with_partial(note)
    multicol = isinstance(df.columns, pd.MultiIndex)
    body = df.to_latex(index=False, escape=escape, na_rep="n/a", multicolumn=multicol,
                       multicolumn_format="c", column_format=column_format)
    mark = r"\textcolor{red}{\textbf{TEST DATA}} " if scale == "test" else ""
    cap = caption if not escape else latex_escape(caption)
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{mark}{cap} ({latex_escape(note)})}}"]
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(body.strip())
    for fn in footnotes or []:
        lines.append(rf"\par\footnotesize{{{latex_escape(fn) if escape else fn}}}")
    lines.append(r"\end{table}")
    atomic_write_text(path, ascii_latex("\n".join(lines) + "\n", str(path)))
    write_table_html(df, Path(path).with_suffix(".html"), caption, scale, note, footnotes, latex=not escape)


_LATEX_MARKUP = [  # (pattern on HTML-escaped LaTeX, replacement): the few commands the tables' LaTeX cells use
    (re.compile(r"\\textcolor\{([a-zA-Z]+)\}\{((?:[^{}]|\{[^{}]*\})*)\}"), r'<span style="color:\1">\2</span>'),
    (re.compile(r"\\textbf\{((?:[^{}]|\{[^{}]*\})*)\}"), r"<b>\1</b>"),
    (re.compile(r"\\([%&#_{}])"), r"\1"),
    (re.compile(r"\\ "), " "),
    (re.compile(r"(?<!\\)~"), "&nbsp;"),
]


def _latex_html(text) -> str:
    """HTML of a LaTeX cell: colour and bold become HTML, escaped specials plain text; math stays as written."""
    out = html.escape(str(text), quote=False)
    for pattern, repl in _LATEX_MARKUP:
        out = pattern.sub(repl, out)
    return out


def write_table_html(df: pd.DataFrame, path: str | Path, caption: str, scale: str, note: str,
                     footnotes: list[str] | None = None, latex: bool = False) -> None:
    """The table as an HTML page: caption (marked TEST DATA at test scale) with the provenance `note`, the
    table (missing values n/a) and the footnotes. `latex`: caption, cells, headers and footnotes hold LaTeX
    (`write_table(escape=False)`); its colour, bold and escaped characters are rendered, math is shown as written."""
    text = _latex_html if latex else (lambda t: html.escape(str(t), quote=False))
    shown = df.copy()
    if latex:
        for i in range(shown.shape[1]):
            shown.isetitem(i, shown.iloc[:, i].map(_latex_html, na_action="ignore"))
        shown.columns = shown.columns.map(
            lambda c: tuple(map(_latex_html, c)) if isinstance(c, tuple) else _latex_html(c))
    body = shown.to_html(index=False, na_rep="n/a", escape=not latex, border=0)
    mark = '<b style="color:red">TEST DATA</b> ' if scale == "test" else ""
    notes = "".join(f"<p class=\"footnote\">{text(fn)}</p>\n" for fn in footnotes or [])
    page = (
        "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(Path(path).stem)}</title>\n"
        "<style>body{font-family:sans-serif;font-size:14px;margin:1em}table{border-collapse:collapse}"
        "th,td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}.footnote{font-size:12px;color:#444}"
        "</style>\n</head>\n<body>\n"
        f"<p class=\"caption\">{mark}{text(caption)} ({html.escape(note, quote=False)})</p>\n{body}\n{notes}"
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
    note = static_note(scale, f"transcribed from {doc['source']}, App. D.1 ({Path(paper_path).as_posix()}), not computed")
    write_table(df, out_path, spec["caption"], scale, note, footnotes=spec.get("footnotes"),
                label=f"tab:{name}", escape=False)
    return df
