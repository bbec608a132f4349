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
