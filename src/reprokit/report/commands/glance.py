"""The README's "Results at a glance": per paper and scale, the claims per verdict and the numbers within 2 s.e.,
written from the committed reproduction reports (their `<!-- glance: {...} -->` lines, reproduction.glance), so the
README cannot drift from them. tests/test_artefact_statements.py fails when it does.

    python -m reprokit.report.commands.glance            # rewrite the block in README.md from figures/{quick,paper}/
    python -m reprokit.report.commands.glance --check    # exit 1 when README.md's block differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ...atomic import atomic_write_text
from ..verdicts.reproduction import GLANCE_TAG, SHORT_NAMES, WITHIN_Z, bottom_line

START, END = "<!-- results-at-a-glance:start -->", "<!-- results-at-a-glance:end -->"
SCALES = ("paper", "quick")
_LINE = re.compile(rf"^<!-- {GLANCE_TAG}: (\{{.*\}}) -->$", re.M)


def read(report: str | Path) -> list[dict]:
    """The glance records of one reproduction report, one per paper."""
    text = Path(report).read_text()
    found = [json.loads(m) for m in _LINE.findall(text)]
    if not found:
        raise ValueError(
            f"{report}: no '<!-- {GLANCE_TAG}: ... -->' line (rebuild it with python -m reprokit.report.commands.reproduction)"
        )
    return found


def block(root: str | Path = ".") -> str:
    """The README block (between START and END, markers excluded) from figures/<scale>/reproduction.md."""
    rows, sentences = [], []
    for scale in SCALES:
        report = Path(root) / "figures" / scale / "reproduction.md"
        for g in read(report):
            name = SHORT_NAMES.get(g["paper"], g["paper"])
            for who, claims, c, within, compared in (
                (g.get("method", name), g["claims"], g["counts"], g["within"], g["compared"]),
                (
                    "its baselines",
                    g.get("baseline_claims", 0),
                    g.get("baseline_counts") or {},
                    g.get("baseline_within", 0),
                    g.get("baseline_compared", 0),
                ),
            ):
                if not claims and not compared:
                    continue
                rows.append(
                    f"| {name} | {scale} | {who} | {claims} | {c.get('holds', 0)} | {c.get('inconclusive', 0)} | "
                    f"{c.get('does not hold', 0)} | {c.get('not comparable', 0)} | {c.get('by construction', 0)} | "
                    f"{c.get('not run', 0) + c.get('not testable', 0)} | {within} / {compared} |"
                )
            sentences.append(f"- {bottom_line(g)} ([{scale}-scale report](figures/{scale}/reproduction.md))")
    head = [
        "| paper | scale | claims about | claims | hold | inconclusive | do not hold | not comparable | "
        f"by construction | not tested | numbers within {WITHIN_Z:g} s.e. / compared |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    note = (
        "Written by `python -m reprokit.report.commands.glance` from the committed reports; paper scale counts only "
        "the cells that have run (most of the partitioned paper's need GPUs); quick-scale numbers are never "
        "paper-scale numbers. A claim about the paper's method and one about a baseline it compares against are "
        'counted apart; "by construction" checks hold whatever was trained and are no evidence.'
    )
    return "\n".join(["", *head, *rows, "", *sentences, "", note, ""])


def splice(readme: str, new_block: str) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"README.md lacks the markers {START} / {END}")
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return before + START + new_block + END + after


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reprokit.report.commands.glance", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=".")
    p.add_argument("--check", action="store_true", help="exit 1 when README.md's block differs from the reports")
    args = p.parse_args(argv)
    path = Path(args.root) / "README.md"
    text = path.read_text()
    new = splice(text, block(args.root))
    if args.check:
        if new != text:
            print(
                "README.md's results block differs from figures/*/reproduction.md: run python -m "
                "reprokit.report.commands.glance",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        atomic_write_text(path, new)
    print(f"wrote the results block of {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
