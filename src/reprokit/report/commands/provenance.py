"""Publish a scale's build: copy the artefacts built at that scale, their provenance records and the reproduction
report from figures/ into the committed figures/<scale>/, and rewrite its compute.md from the archive.

    python -m reprokit.report.commands.provenance --scale paper

The provenance record itself (what an artefact was built from) is reprokit.report.store.provenance.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ...atomic import atomic_write_text
from ..store.provenance import SUFFIX
from . import compute


def publish(src: str | Path, dst: str | Path, scale: str) -> list[Path]:
    """Copy the artefacts built at `scale` (those whose record in `src` names that scale: the record and every
    `<artefact>.*` beside it) and the reproduction report (with its z-score figure) into `dst`
    (`figures/<scale>/`), the folder that is committed, and rewrite `dst/compute.md` from the archive in
    `dst/cells` (what the archived cells cost). The pipeline never writes there, so a committed build does not
    make Snakemake skip a fresh clone's build (an existing output with missing inputs counts as up to date).
    Returns the written paths."""
    src, dst = Path(src), Path(dst)
    records = sorted(src.glob(f"*{SUFFIX}"))
    if not records:
        raise FileNotFoundError(f"no {SUFFIX} records in {src}: build the artefacts first (snakemake --cores 2)")
    report = src / "reproduction.md"
    if not report.exists() or f"# Reproduction report: {scale} scale" not in report.read_text():
        raise FileNotFoundError(f"{report}: missing or not built at scale {scale} (snakemake {report})")
    dst.mkdir(parents=True, exist_ok=True)
    copied = []
    for rec_path in records:
        rec = json.loads(rec_path.read_text())
        if rec.get("scale") != scale:
            continue
        name = rec["artefact"]
        for path in sorted(src.glob(f"{name}.*")):
            if path.name == f"{name}{SUFFIX}" or path.suffix in (".pdf", ".png", ".tex", ".html", ".csv"):
                target = dst / path.name
                target.write_bytes(path.read_bytes())
                copied.append(target)
    (dst / report.name).write_bytes(report.read_bytes())
    copied.append(dst / report.name)
    z = src / "reproduction_z.png"  # the report's z-score figure, written beside it by the same command
    if z.exists():
        (dst / z.name).write_bytes(z.read_bytes())
        copied.append(dst / z.name)
    if any((dst / "cells").glob("*.jsonl")):  # the archive's cost table, kept in step with the report it feeds
        table = dst / "compute.md"
        atomic_write_text(table, compute.markdown(compute.spent(dst / "cells"), scale))
        copied.append(table)
    return copied


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description="Copy the artefacts of one scale's build and its reproduction report "
        "from figures/ into the committed figures/<scale>/."
    )
    p.add_argument("--scale", default="quick")
    p.add_argument("--src", default="figures")
    p.add_argument("--dst", default=None, help="default: <src>/<scale>")
    args = p.parse_args(argv)
    copied = publish(args.src, args.dst or Path(args.src) / args.scale, args.scale)
    print(f"copied {len(copied)} files to {args.dst or Path(args.src) / args.scale}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
