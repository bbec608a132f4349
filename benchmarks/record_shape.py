"""One-off archive migration (2026-11-28): add Fig. 1's shape reading to synthetic cells archived before cells
recorded it.

Since commit "Cells record BALI Fig. 1's shape" a synthetic_predictive cell computes `reprokit.shape.of_cell` when
it finishes and records it as `shape_<name>` metrics, which the report reads instead of regenerating the training
data. The archived cells ran before that: their reading is computed here, once, by the same function from what
they recorded (their predictive on the plotting grid, their noise sd, their `data_kwargs`), added to each line's
metrics, and a `migrations` entry says so. Nothing else in a line changes; a line that already has the numbers is
left alone.

    python benchmarks/record_shape.py --scale quick paper          # dry run: what would change
    python benchmarks/record_shape.py --scale quick paper --apply
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reprokit import shape
from reprokit.report.records import archive

EXPERIMENTS = ("bali_synthetic", "bali_fig1_sweep", "bali_bbb_synthetic")
ENTRY = {
    "date": "2026-11-28",
    "migration": "shape_metrics",
    "what": "shape_<name> metrics computed by reprokit.shape.of_cell from the cell's recorded grid predictive and "
    "data_kwargs (what a cell now records when it finishes)",
}


def migrate(line: dict) -> dict | None:
    """The line with its shape metrics added; None when it needs none (not completed, or already has them)."""
    if line["status"] != "completed" or any(k.startswith(shape.PREFIX) for k in line["metrics"]):
        return None
    row = {**(line.get("info") or {}), **line["coords"], **line["metrics"], "status": line["status"]}
    reading = shape.of_cell(row)
    if not reading:
        return None
    return {
        **line,
        "metrics": {**line["metrics"], **shape.as_metrics(reading)},
        "migrations": [*(line.get("migrations") or []), ENTRY],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", nargs="+", default=["quick", "paper"])
    p.add_argument("--root", default=".")
    p.add_argument("--apply", action="store_true")
    args = p.parse_args(argv)
    for scale in args.scale:
        for experiment in EXPERIMENTS:
            path = archive.path_of(Path(args.root), scale, experiment)
            lines = archive.load(path)
            changed = {c: new for c, line in lines.items() if (new := migrate(line)) is not None}
            print(f"{path}: {len(changed)} of {len(lines)} lines get shape metrics")
            if args.apply and changed:
                archive.write(path, {**lines, **changed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
