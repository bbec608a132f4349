"""Compare two results/<scale> trees cell by cell: a refactor that should change no number changes no metrics.json.

    git worktree add /tmp/before <commit>; (cd /tmp/before && snakemake --cores 2 --config scale=test -- <targets>)
    python benchmarks/compare_cells.py /tmp/before/results/test results/test

Each metrics.json of BEFORE is compared with the one at the same path under AFTER: status, steps and every
metric (NaN equals NaN). Timing fields (names containing _s, _ms, ratio, cpu, wall, time, seconds) are skipped
in the update_timing kind's cells (`--timing-experiments`), whose numbers are measurements. Prints one line per
differing or missing cell and a count; exits 1 when any differs or is missing. Standalone, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

TIMING = ("_s", "_ms", "ratio", "cpu", "wall", "time", "seconds")


def differences(before: dict, after: dict, timing: bool) -> list[tuple]:
    """[(key, before, after)] where two metrics.json records differ (timing keys skipped when `timing`)."""
    out = []
    for key in ("status", "steps"):
        if before.get(key) != after.get(key):
            out.append((key, before.get(key), after.get(key)))
    a, b = before.get("metrics", {}), after.get("metrics", {})
    for key in sorted(set(a) | set(b)):
        if timing and any(t in key for t in TIMING):
            continue
        x, y = a.get(key), b.get(key)
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y:
            out.append((key, x, y))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--timing-experiments", nargs="*", default=["table8_timing"])
    args = parser.parse_args(argv)
    same = differ = missing = 0
    for path in sorted(args.before.rglob("metrics.json")):
        rel = path.relative_to(args.before)
        other = args.after / rel
        if not other.exists():
            missing += 1
            print(f"missing after: {rel}")
            continue
        timing = rel.parts[0] in args.timing_experiments
        diff = differences(json.loads(path.read_text()), json.loads(other.read_text()), timing)
        if diff:
            differ += 1
            print(f"differs: {rel}: {diff[:4]}")
        else:
            same += 1
    print(f"{same} identical, {differ} differ, {missing} missing after (of {same + differ + missing} cells before)")
    return int(bool(differ or missing))


if __name__ == "__main__":
    sys.exit(main())
