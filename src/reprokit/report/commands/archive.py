"""Merge a scale's finished cells under results/ into the committed archive, figures/<scale>/cells/<experiment>.jsonl
(reprokit.report.store.archive: what a line holds, how merging and reading work).

    python -m reprokit.report.commands.archive --scale paper          # results/paper/* -> figures/paper/cells/
    python -m reprokit.report.commands.archive --scale paper --experiment bali_uci
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..store.archive import load, path_of, update


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprokit.report.commands.archive", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--scale", default="paper")
    parser.add_argument("--results", default="results")
    parser.add_argument("--root", default=".", help="repository root (the archive is <root>/figures/<scale>/cells)")
    parser.add_argument("--experiment", nargs="*", default=None, help="default: every experiment under results/<scale>")
    args = parser.parse_args(argv)
    try:
        summary = update(args.root, args.results, args.scale, args.experiment)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not summary:
        print(f"error: nothing under {Path(args.results) / args.scale} to archive", file=sys.stderr)
        return 2
    for name, (added, replaced, kept) in summary.items():
        total = len(load(path_of(args.root, args.scale, name)))
        print(
            f"{path_of(args.root, args.scale, name)}: {added} cells added, {replaced} replaced (re-run), "
            f"{total - added - replaced - kept} unchanged, {kept} kept (archived only); {total} cells in all"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
