"""Dump every cell's settings at every scale, and the artefacts' targets: a config refactor that should change no
cell (moving a value between a scale and a `per_<axis>` block, a generated list) changes nothing in the dump.

    python benchmarks/dump_settings.py > /tmp/before.json      # at the commit before (or a clone of it)
    python benchmarks/dump_settings.py > /tmp/after.json       # after the change
    cmp /tmp/before.json /tmp/after.json                       # or diff, to see which cell moved

For each cell (keyed by its path, `<scale>/<experiment>/<axis~value>/...`): the merged settings with its grid
coordinates applied (`Cell.settings_with_coords()`), its datasets, and its resolved settings (`KindPlan.resolved_settings`, what
it records and its re-run depends on); for each scale, the artefacts as loaded (targets generated). Cheap (no
torch, a few seconds). Standalone, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reprokit.config import SCALES, grid_of, load_pipeline_config
from reprokit.plan import kind


def dump(root: str | Path = ".") -> dict:
    out = {}
    for scale in SCALES:
        cfg = load_pipeline_config(root, {"scale": scale})
        for name in sorted(cfg["experiments"]):
            for cell in grid_of(cfg, name, scale).cells():
                out[cell.rel_dir] = {
                    "values": cell.settings_with_coords(),
                    "datasets": list(cell.datasets),
                    "resolved": kind(cell.kind).resolved_settings(cell),
                }
        out[f"artefacts@{scale}"] = cfg.get("artefacts")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="the repository root (default: here)")
    args = parser.parse_args(argv)
    # keys sorted: a cell's recorded settings follow its kind's settings model, whatever order the config merged in
    json.dump(dump(args.root), sys.stdout, indent=1, sort_keys=True, default=str)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
