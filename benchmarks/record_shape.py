"""One-off archive migrations (2026-11-28, 2026-11-29): add what synthetic cells now record to the lines archived
before they recorded it.

* `shape_metrics` (2026-11-28): since commit "Cells record BALI Fig. 1's shape" a synthetic_predictive cell
  computes `reprokit.predictive_shape.of_cell` when it finishes and records it as `shape_<name>` metrics, which the report
  reads instead of regenerating the training data. For archived lines the reading is computed here, once, by the
  same function from what they recorded (their predictive on the plotting grid, their noise sd, their
  `data_kwargs`).
* `plot_points` (2026-11-29): since commit "Synthetic cells record the points their figure draws" a cell also
  records `reprokit.predictive_shape.plot_points` (training points, plotting grid, true f), which the Fig. 1 and Figs. 4-6
  notebooks draw instead of regenerating the data. For archived lines the same function runs here, once, on the
  data regenerated from the line's `data_kwargs` (synthetic data are deterministic: the cell drew the same).

Each adds to a line's metrics and a `migrations` entry says so. Nothing else in a line changes; a line that already
has the numbers, or did not complete, is left alone.

    python benchmarks/record_shape.py --migration plot_points --scale quick paper          # dry run
    python benchmarks/record_shape.py --migration plot_points --scale quick paper --apply
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reprokit import predictive_shape
from reprokit.report.store import archive

EXPERIMENTS = {  # the experiments each migration touches: the sweep is a table and draws no points
    "shape_metrics": ("bali_synthetic", "bali_fig1_sweep", "bali_bbb_synthetic"),
    "plot_points": ("bali_synthetic", "bali_bbb_synthetic"),
}
ENTRIES = {
    "shape_metrics": {
        "date": "2026-11-28",
        "migration": "shape_metrics",
        "what": "shape_<name> metrics computed by reprokit.predictive_shape.of_cell from the cell's recorded grid predictive "
        "and data_kwargs (what a cell now records when it finishes)",
    },
    "plot_points": {
        "date": "2026-11-29",
        "migration": "plot_points",
        "what": "plot_<name> metrics (training points, plotting grid, true f) computed by "
        "reprokit.predictive_shape.plot_points on the data regenerated from the line's data_kwargs (what a cell now records "
        "when it finishes)",
    },
}


def shape_metrics(row: dict) -> dict:
    return predictive_shape.as_metrics(predictive_shape.of_cell(row))


def plot_points(row: dict) -> dict:
    from reprokit.data import registry

    return predictive_shape.plot_points(registry.load(str(row["dataset"]), **json.loads(row["data_kwargs"])))


PREFIXES = {
    "shape_metrics": (predictive_shape.PREFIX, shape_metrics),
    "plot_points": (predictive_shape.PLOT, plot_points),
}


def migrate(line: dict, migration: str = "shape_metrics") -> dict | None:
    """The line with the migration's metrics added; None when it needs none (not completed, or already has them)."""
    prefix, compute = PREFIXES[migration]
    if line["status"] != "completed" or any(k.startswith(prefix) for k in line["metrics"]):
        return None
    row = {**(line.get("info") or {}), **line["coords"], **line["metrics"], "status": line["status"]}
    added = compute(row)
    if not added:
        return None
    return {
        **line,
        "metrics": {**line["metrics"], **added},
        "migrations": [*(line.get("migrations") or []), ENTRIES[migration]],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--migration", choices=sorted(ENTRIES), default="shape_metrics")
    p.add_argument("--scale", nargs="+", default=["quick", "paper"])
    p.add_argument("--root", default=".")
    p.add_argument("--apply", action="store_true")
    args = p.parse_args(argv)
    for scale in args.scale:
        for experiment in EXPERIMENTS[args.migration]:
            path = archive.path_of(Path(args.root), scale, experiment)
            lines = archive.load(path)
            changed = {c: new for c, line in lines.items() if (new := migrate(line, args.migration)) is not None}
            print(f"{path}: {len(changed)} of {len(lines)} lines get {args.migration}")
            if args.apply and changed:
                archive.write(path, {**lines, **changed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
