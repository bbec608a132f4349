"""The LaTeX table writer every table notebook uses, and the tables without experiments.

`write_table` writes a booktabs table whose caption ends with the provenance note (scale, seeds, data)
and marks test scale; plain text is escaped with `latex_escape`, and with ``escape=False`` cells may hold
LaTeX math such as ``$\\mathcal{O}(N_B P S)$`` (multi-level column headers are supported).
Every table states the scale it was built at: tables that do not depend on the scale (transcribed or
rendered from code) say so, and are still marked at test scale like every CI build.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..io import atomic_write_text
from .style import SCALE_NOTE

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
    """
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
    atomic_write_text(path, "\n".join(lines) + "\n")


# -- Tables 5-7: transcribed complexity tables --------------------------------------------------------

def load_yaml(path: str | Path) -> dict:
    import yaml

    with open(path) as f:
        return yaml.safe_load(f)


def complexity_table(data: dict, name: str) -> tuple[pd.DataFrame, dict]:
    """(frame of LaTeX cells, the table's spec) for ``table5|table6|table7`` of the complexity data.

    Table 5 (notation) has rows ``{symbol, meaning}``; Tables 6/7 have ``columns`` and ``rows`` as
    ``{method, cells}`` with ``highlight``: indices of cells the paper colours (rendered in
    `highlight_color`).
    """
    spec = data[name]
    if "symbol_rows" in spec:
        df = pd.DataFrame([{"Symbol": f"${r['symbol']}$", "Meaning": r["meaning"]} for r in spec["symbol_rows"]])
        return df, spec
    columns = list(spec["columns"])
    color = spec.get("highlight_color")
    rows = []
    for row in spec["rows"]:
        cells = list(row["cells"])
        if len(cells) != len(columns):
            raise ValueError(f"{name}: row {row['method']!r} has {len(cells)} cells for {len(columns)} columns")
        marked = set(row.get("highlight", []))
        out = {"Method": latex_escape(row["method"])}
        for i, (col, cell) in enumerate(zip(columns, cells)):
            text = f"${cell}$"
            out[latex_escape(col)] = rf"\textcolor{{{color}}}{{{text}}}" if i in marked and color else text
        rows.append(out)
    return pd.DataFrame(rows), spec


def write_complexity_table(data_path: str | Path, name: str, out_path: str | Path, scale: str) -> pd.DataFrame:
    """Render Table 5, 6 or 7 from the transcription in `data_path` (config/tables/complexity.yaml)."""
    data = load_yaml(data_path)
    df, spec = complexity_table(data, name)
    note = static_note(scale, f"transcribed from {data['source']} ({Path(data_path).as_posix()}), not computed")
    write_table(df, out_path, spec["caption"], scale, note, footnotes=spec.get("footnotes"),
                label=f"tab:{name}", escape=False)
    return df
