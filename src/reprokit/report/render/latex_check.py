"""The compile check of a table: `check_latex` sets one .tex in a plain `\\documentclass{article}` with the packages its
first line names, runs pdflatex and reads the log: errors, overfull boxes, how far \\resizebox shrank each tabular,
each float's height against the page and the caption's printed length (tests/test_tables_latex.py;
`python -m reprokit.report.commands.check_latex FILE.tex ...`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .latex import CAPTION_MAX_CHARS, NEEDS_PREFIX, TEXT_HEIGHT_PT, caption_length


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
