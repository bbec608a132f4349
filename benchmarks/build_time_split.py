"""Where a pipeline build's time went: per rule, and for cells training against everything else.

    snakemake --cores 2 > build.log 2>&1
    python benchmarks/build_time_split.py build.log [--results results] [--top 12]

Reads Snakemake's own log (each job's start and finish time stamp, its rule and wildcards) and each cell's
metrics.json (`seconds_this_run`: the training loop's wall time, evaluations included). A cell job's wall
time minus its loop is its overhead: process start, imports, data loading, the final metrics and the writes.
Prints job-seconds per rule (the sum over jobs; with 2 cores the wall time is about half), the cells' loop
against their overhead, the wall time from the first job's start to the last job's finish, and the
costliest experiments. Job time stamps have one-second resolution.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def parse_log(lines) -> list[dict]:
    """[{jobid, rule, wildcards, start, end}] of every job that finished, in finishing order."""
    stamp, pending, jobs, open_jobs = None, None, [], {}
    for line in lines:
        line = line.rstrip("\n")
        m = STAMP.match(line)
        if m:
            stamp = dt.datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
            continue
        m = START.match(line)
        if m:
            pending = {"rule": m.group(1), "start": stamp, "wildcards": {}}
            continue
        m = JOBID.match(line)
        if m and pending is not None:
            open_jobs[m.group(1)] = pending
            pending["jobid"] = m.group(1)
            continue
        m = WILDCARDS.match(line)
        if m and pending is not None:
            pending["wildcards"] = dict(kv.split("=", 1) for kv in m.group(1).split(", ") if "=" in kv)
            continue
        m = FINISHED.match(line)
        if m and m.group(1) in open_jobs:
            job = open_jobs.pop(m.group(1))
            job["end"], job["rule"] = stamp, m.group(2)
            jobs.append(job)
    return jobs


def split(jobs: list[dict], results: Path) -> dict:
    per_rule = defaultdict(float)
    per_experiment = defaultdict(float)
    loop = overhead = 0.0
    cells = 0
    for job in jobs:
        seconds = (job["end"] - job["start"]).total_seconds()
        per_rule[job["rule"]] += seconds
        if job["rule"] != "cell":
            continue
        w = job["wildcards"]
        per_experiment[w.get("experiment", "?")] += seconds
        cells += 1
        metrics = results / w.get("scale", "") / w.get("experiment", "") / w.get("coords", "") / "metrics.json"
        ran = json.loads(metrics.read_text()).get("seconds_this_run", 0.0) if metrics.exists() else 0.0
        loop += min(float(ran or 0.0), seconds)
        overhead += max(seconds - float(ran or 0.0), 0.0)
    wall = (max(j["end"] for j in jobs) - min(j["start"] for j in jobs)).total_seconds() if jobs else 0.0
    return {
        "jobs": len(jobs),
        "wall_s": wall,
        "per_rule": dict(per_rule),
        "per_experiment": dict(per_experiment),
        "cells": cells,
        "cell_loop_s": loop,
        "cell_overhead_s": overhead,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", help="Snakemake's log of the build (its stdout/stderr)")
    p.add_argument("--results", default="results")
    p.add_argument("--top", type=int, default=12, help="experiments to list")
    args = p.parse_args(argv)
    with open(args.log) as f:
        out = split(parse_log(f), Path(args.results))
    print(f"{out['jobs']} jobs finished; wall {out['wall_s'] / 60:.1f} min from the first start to the last finish")
    total = sum(out["per_rule"].values())
    print(f"job time {total / 60:.1f} min (summed over jobs; 2 cores in parallel)")
    groups = defaultdict(float)
    for rule, s in out["per_rule"].items():
        groups["artefact (notebooks)" if rule.startswith("artefact_") else rule] += s
    for rule, s in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {rule:24s} {s / 60:7.1f} min")
    per = out["cell_overhead_s"] / max(out["cells"], 1)
    print(
        f"{out['cells']} cells: training loop {out['cell_loop_s'] / 60:.1f} min, everything else in a cell job "
        f"(start-up, imports, data, final metrics, writes) {out['cell_overhead_s'] / 60:.1f} min ({per:.1f} s a cell)"
    )
    print("costliest experiments (cell job time):")
    for name, s in sorted(out["per_experiment"].items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {name:28s} {s / 60:6.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
