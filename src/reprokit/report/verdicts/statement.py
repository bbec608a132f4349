"""What every figure and table says about itself: the paper artefact it rebuilds, and each claim the paper makes
about that artefact with its verdict at the scale it was built at.

The verdicts come from the same claim code as the reproduction report (reprokit/report/verdicts/claims.py), over the
cells the artefact's notebook was handed (`results.InputsContext`), so a figure that contradicts its paper says
so on the figure, in the report's words. `notebook.start_log` records the artefact being built; `style.finish_figure`
and `tables.write_table` ask `for_artefact` for the lines to print.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from . import claims as claim_checks
from . import decide, papers
from .results import InputsContext

PAPER_NAMES = {
    "partitioned": "Partitioned networks (Mlodozeniec, Reisser, Louizos, ICLR 2023)",
    "bali": "BALI (Kurle, Klushyn, Herbrich)",
}
PAPERS_DIR = Path("config") / "papers"
_NUMBERED = re.compile(r"^(?:bali_)?(fig|table)(\d+)$")


def rebuilds(name: str, spec: dict) -> str:
    """'Fig. 5 of Partitioned networks (...)', from the artefact's name (fig<N>, table<N>, bali_fig<N>,
    bali_table<N>) or its config's `rebuilds:` text ("none: ..." for an artefact of ours)."""
    paper = PAPER_NAMES.get(spec.get("paper"), spec.get("paper", "?"))
    if spec.get("rebuilds"):
        text = str(spec["rebuilds"])
        return (
            f"no artefact of {paper}: {text.removeprefix('none:').strip()}"
            if text.startswith("none")
            else f"{text} of {paper}"
        )
    m = _NUMBERED.match(name)
    if not m:
        raise ValueError(
            f"artefact '{name}': its name does not say which paper figure or table it rebuilds; give "
            "it a `rebuilds:` text in its config entry (artefacts.<name>.rebuilds)"
        )
    return f"{'Fig.' if m.group(1) == 'fig' else 'Table'} {m.group(2)} of {paper}"


@dataclass
class Statement:
    """The artefact's source line and its claims' verdicts, as printed on it."""

    artefact: str
    scale: str
    source: str
    verdicts: list = field(default_factory=list)  # [(papers.Claim, claims.Verdict)]

    def claim_lines(self, measured_chars: int = 240) -> list[str]:
        """One line per claim: the paper's words, the verdict at this scale and what was measured (cut at
        `measured_chars`; the report has it whole; 0: left to the report, as a table prints it)."""
        out = []
        for claim, v in self.verdicts:
            measured = (
                v.measured if len(v.measured) <= measured_chars else v.measured[:measured_chars].rstrip() + " ..."
            )
            n = f"n = {v.n}" if v.n else "n = 0"
            head = f"Variant ({claim.variant}), claim" if claim.variant else "Claim"
            head += " about a baseline" if claim.about == "baseline" else ""
            subset = f"; on a subset: {v.subset}" if v.subset and measured_chars else ""
            shown = f"; {measured}" if measured_chars else ""
            out.append(f'{head} "{claim.words}": {v.label.upper()} at {self.scale} scale ({n}{subset}{shown}).')
        return out

    def lines(self, measured_chars: int = 240) -> list[str]:
        """The source line, then a line per claim (or that the paper makes no claim we check about it);
        `measured_chars` as in `claim_lines`."""
        head = f"Rebuilds {self.source}."
        if not self.verdicts:
            return [head + " The paper makes no claim in words about it that we check."]
        counts = {s: sum(v.status == s for c, v in self.verdicts if not c.variant) for s in decide.STATUSES}
        plural = {decide.HOLDS: "hold", decide.FAILS: "do not hold"}
        tally = ", ".join(f"{n} {plural.get(s, s) if n > 1 else s}" for s, n in counts.items() if n)
        return [
            f"{head} Its claims at {self.scale} scale: {tally} (full reasons: figures/{self.scale}/reproduction.md)."
        ] + self.claim_lines(measured_chars)

    def wrapped(self, width: int = 150) -> str:
        return "\n".join(textwrap.fill(line, width) for line in self.lines())


def for_artefact(name: str, spec: dict, scale: str, inputs: dict, papers_dir: str | Path = PAPERS_DIR) -> Statement:
    """The statement of artefact `name` (its config entry `spec`) built at `scale` from `inputs` ({experiment: tidy
    CSV, "<experiment>_curves": curves CSV}, as the artefact rule hands them over)."""
    source = rebuilds(name, spec)
    path = Path(papers_dir) / f"{spec.get('paper')}.yaml"
    if not path.exists():
        return Statement(name, scale, source)
    doc = papers.load(path)
    mine = [c for c in papers.claims(doc) if c.artefact == name]
    if not mine:
        return Statement(name, scale, source)
    ctx = InputsContext(inputs, scale, [doc])
    return Statement(name, scale, source, [(c, claim_checks.verdict(ctx, c)) for c in mine])


_CLAIMS: dict = {}


def _claims(path: Path) -> list:
    """The claims of a paper file, read once per process (the Snakefile asks for every artefact)."""
    key = (str(Path(path).resolve()), Path(path).stat().st_mtime_ns)
    if key not in _CLAIMS:
        _CLAIMS[key] = papers.claims(papers.load(path))
    return _CLAIMS[key]


def experiments_read(spec: dict, name: str, experiments: set | list, papers_dir: str | Path = PAPERS_DIR) -> list[str]:
    """The experiments the claims about artefact `name` read beyond its own `experiments` (e.g. Fig. 7's claim
    compares its retrained cells with Fig. 5's sensitivity cells), so the artefact's inputs include them."""
    path = Path(papers_dir) / f"{spec.get('paper')}.yaml"
    if not path.exists():
        return []
    known, own = set(experiments), set(spec.get("experiments") or [])
    found = [e for c in _claims(path) if c.artefact == name for e in papers.claim_experiments(c, known)]
    return [e for e in dict.fromkeys(found) if e not in own]
