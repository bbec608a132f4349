"""The reproduction report of a scale from what has run: every number the papers print next to ours and every
claim's verdict (reprokit.report.verdicts.reproduction), written with its z-score figure
(reprokit.report.render.reproduction). No training: it reads results/ and the committed archive.

    python -m reprokit.report.commands.reproduction --scale quick --results results --out figures/reproduction.md
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

from ..render.reproduction import write_report
from ..store.cells import SCALE_NOTE
from ..verdicts.reproduction import pipeline_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprokit.report.commands.reproduction", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--scale", default="quick", choices=sorted(SCALE_NOTE))
    parser.add_argument("--results", default="results")
    parser.add_argument("--out", default="figures/reproduction.md")
    parser.add_argument("--papers", nargs="*", default=None, help="paper files (default: config/papers/*.yaml)")
    parser.add_argument(
        "--root",
        default=".",
        help="repository root: its config gives the cells expected per experiment (partial experiments); '' to skip",
    )
    parser.add_argument(
        "--no-archive",
        action="store_true",
        help="read results/ only, not the committed cells of <root>/figures/<scale>/cells",
    )
    parser.add_argument(
        "--expected",
        default=None,
        help="JSON {experiment: cells in its grid} (the pipeline's "
        "report rule hands it over; default: from --root's config)",
    )
    parser.add_argument("--artefacts", default=None, help="JSON: the config's artefacts: (with --expected)")
    args = parser.parse_args(argv)
    files = args.papers or sorted(glob.glob(str(Path(args.root or ".") / "config" / "papers" / "*.yaml")))
    if not files:
        print("error: no paper files (config/papers/*.yaml)", file=sys.stderr)
        return 2
    if args.expected is not None:
        expected, artefacts, cfg = json.loads(args.expected), json.loads(args.artefacts or "null"), None
    else:
        expected, artefacts, cfg = pipeline_config(args.root, args.scale, True) if args.root else (None, None, None)
    archive = None if args.no_archive or cfg is None else (args.root, cfg)
    write_report(args.out, args.results, args.scale, files, expected, artefacts=artefacts, archive=archive)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
