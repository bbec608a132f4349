"""What the archived cells of a scale cost: cells and device-hours per experiment and device, from the archive.

Each archived line records the seconds its last run took, the steps it ran and where it ran
(`provenance.device`, `provenance.device_name`, `provenance.threads`). A cell resumed from a checkpoint
records only its last run's seconds, so a cell's time is estimated as `seconds_per_step x steps` (the last
run's pace over all its steps); a cell without a per-step pace counts its `seconds_this_run`. Hours are
wall-clock hours of one cell process (one thread unless `threads` says otherwise), summed over cells:
CPU cells on the same machine often shared its cores, so the sum is an upper bound on the machine's time.

    python -m reprokit.report.commands.compute --scale paper                  # prints the table
    python -m reprokit.report.commands.compute --scale paper --out figures/paper/compute.md

Publishing a scale's build (`python -m reprokit.report.commands.provenance --scale paper`) rewrites that file too.

Torch-free; reads only figures/<scale>/cells/*.jsonl.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ...atomic import atomic_write_text
from ..store import archive


@dataclass
class Spent:
    """The cells of one experiment on one kind of device, and their estimated seconds each."""

    experiment: str
    device: str
    seconds: list[float] = field(default_factory=list)
    untimed: int = 0  # cells whose line records no timing (e.g. the BALI UCI lines finished 2026-11-24)

    @property
    def hours(self) -> float:
        return sum(self.seconds) / 3600.0


def cell_seconds(line: dict) -> float | None:
    """A cell's estimated seconds (module docstring); None when the line records no timing."""
    pace, steps = line.get("seconds_per_step"), line.get("steps")
    if pace is not None and steps:
        return float(pace) * float(steps)
    ran = line.get("seconds_this_run")
    return None if ran is None else float(ran)


def device_of(line: dict) -> str:
    """'cpu (AMD EPYC), 1 thread', 'cuda:0 (NVIDIA H200)': where a cell ran, as its provenance names it."""
    prov = line.get("provenance") or {}
    kind_ = prov.get("device") or "unknown device"
    name = prov.get("device_name")
    label = f"{kind_} ({name})" if name else kind_
    threads = prov.get("threads")
    if threads and kind_ == "cpu":
        label += f", {threads} thread" + ("s" if int(threads) > 1 else "")
    return label


def spent(cells_dir: str | Path) -> list[Spent]:
    """One Spent per (experiment, device) over every archive file in `cells_dir` (figures/<scale>/cells), in
    name order; lines without timing are counted as untimed, never dropped."""
    out: dict[tuple[str, str], Spent] = {}
    for path in sorted(Path(cells_dir).glob("*.jsonl")):
        for line in archive.load(path).values():
            seconds = cell_seconds(line)
            key = (path.stem, device_of(line))
            row = out.setdefault(key, Spent(*key))
            if seconds is None:
                row.untimed += 1
            else:
                row.seconds.append(seconds)
    return [out[k] for k in sorted(out)]


def markdown(rows: list[Spent], scale: str) -> str:
    """The table, with a line saying how it was estimated and the totals per device kind."""
    head = (
        f"# Compute spent on the archived {scale}-scale cells\n\n"
        f"Written by `python -m reprokit.report.commands.compute --scale {scale}` from figures/{scale}/cells/*.jsonl. "
        "A cell's time is its last run's seconds per step times its steps (a resumed cell's earlier runs at the "
        "same pace); hours are summed over cells, so CPU cells that shared a machine's cores count each one's "
        "wall-clock time.\n\n"
        "| experiment | device | cells | hours | median minutes per cell |\n|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r.experiment} | {r.device} | {len(r.seconds) + r.untimed}"
        + (f" ({r.untimed} untimed)" if r.untimed else "")
        + f" | {r.hours:.2f} | "
        + (f"{statistics.median(r.seconds) / 60:.1f}" if r.seconds else "n/a")
        + " |\n"
        for r in rows
    )
    totals: dict[str, float] = {}
    for r in rows:
        kind_ = r.device.split(" ")[0].split(":")[0]
        totals[kind_] = totals.get(kind_, 0.0) + r.hours
    tail = ("\nTotal: " + ", ".join(f"{k} {h:.1f} h" for k, h in sorted(totals.items())) + ".\n") if rows else ""
    return head + body + tail


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="paper")
    p.add_argument("--root", default=".", help="repository root (holds figures/<scale>/cells/)")
    p.add_argument("--out", help="write the table here (atomically) instead of printing it")
    args = p.parse_args(argv)
    text = markdown(spent(Path(args.root) / "figures" / args.scale / "cells"), args.scale)
    if args.out:
        atomic_write_text(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
