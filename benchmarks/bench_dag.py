"""CPU and wall time of planning the whole paper-scale DAG (`snakemake -n --config scale=paper`), in fresh processes.

    python benchmarks/bench_dag.py [--repeats 3] [--scale paper]

Each repeat is one fresh `snakemake -n --quiet` process in the repository root (Python start, snakemake, every
experiment's grid and cell settings); CPU time (user + system of the process and its children) does not grow with
the machine's load the way wall time does. Prints the machine, each repeat and the medians. What the planning does
per cell is counted (not timed) by tests/test_pipeline.py::test_paper_scale_dag_plans_each_cell_once; this script
is where its time is read.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(scale: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--quiet", "--config", f"scale={scale}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"snakemake -n failed (exit {res.returncode}):\n{res.stdout[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scale", default="paper")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; scale {args.scale}")
    runs = [one_run(args.scale) for _ in range(args.repeats)]
    for i, (cpu, wall) in enumerate(runs):
        print(f"run {i}: cpu {cpu:.2f} s, wall {wall:.2f} s")
    print(
        f"median: cpu {statistics.median(c for c, _ in runs):.2f} s, wall {statistics.median(w for _, w in runs):.2f} s"
    )


if __name__ == "__main__":
    main()
