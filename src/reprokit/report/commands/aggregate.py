"""The aggregate rule's command: one experiment's finished cells -> its tidy CSVs (reprokit.report.store.aggregate).

    python -m reprokit.report.commands.aggregate --experiment fig2a --scale quick --spec '{...}' --results results \\
        --table results/quick/fig2a.csv --curves results/quick/fig2a_curves.csv
"""

from __future__ import annotations

import argparse
import json

from ...config import ExperimentGrid
from ..store.aggregate import write_aggregate


def main(argv: list[str] | None = None) -> int:
    """`python -m reprokit.report.commands.aggregate`: the aggregate rule's command (a process of its own that
    reads no config file: the rule hands over the experiment's spec and which cells are n/a)."""
    p = argparse.ArgumentParser(prog="python -m reprokit.report.commands.aggregate", description=main.__doc__)
    p.add_argument("--experiment", required=True)
    p.add_argument("--scale", required=True)
    p.add_argument("--spec", required=True, help="JSON: the experiment's config entry (kind, grid, settings, scales)")
    p.add_argument("--results", required=True, help="results folder (cells under <results>/<scale>/<experiment>/)")
    p.add_argument("--unavailable", default="{}", help="JSON {cell rel_dir: [dataset, ...]} of cells not run")
    p.add_argument("--reasons", default="{}", help="JSON {dataset: why it is unavailable}")
    p.add_argument("--table", required=True)
    p.add_argument("--curves", required=True)
    args = p.parse_args(argv)
    grid = ExperimentGrid(args.experiment, json.loads(args.spec), args.scale)
    write_aggregate(
        list(grid.cells()),
        args.results,
        args.table,
        args.curves,
        json.loads(args.unavailable),
        reasons=json.loads(args.reasons),
        axes=list(grid.axes),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
