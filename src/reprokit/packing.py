"""Small cells packed into SLURM jobs: which cells share a job, and running them there. Torch-free.

    python -m reprokit.packing run --pack MANIFEST <the arguments of `python -m reprokit.cell run`>

**The packing** (:func:`pack_jobs`). Each cell's cost comes from the cost model (`reprokit.budget.cell_costs`:
its estimate on the device it goes to, GPU or CPU, decided from the measured step costs). A cell whose
estimate is at least ``PackingSettings.long_minutes`` stays alone in its SLURM job. The others are packed,
per device, in the order given (experiment by experiment), into jobs of about ``PackingSettings.target_minutes``
estimated minutes (``min_minutes``-``max_minutes``): a job runs ``PackingSettings.cells_per_gpu`` (GPU) or
``PackingSettings.cells_per_cpu_job`` (CPU) of its cells at once. A GPU job's cells run no faster together
than one after another unless step_costs.tsv has rows measured with k cells sharing the GPU (step
``<step>@<k>``, written by benchmarks/gpu_packing.sh); on a CPU job each cell has its own cores.
Every packed cell also pays ``CELL_OVERHEAD_S`` (the Snakemake process that runs it in the job).

**The runner** (:func:`run`). Snakemake's SLURM plugin runs a group job's cells one after another (an
open issue of snakemake-executor-plugin-slurm, #469), so the first of them to start also starts the other
cells of its group that this Snakemake run wants (the MANIFEST the Snakefile writes when it starts),
`at_once` at a time, each its own `python -m reprokit.cell run` process with its own checkpoint, writing
into ``<checkpoint dir>/packed/``; when Snakemake then gets to one of those cells its job only installs
the result: one computed with the same arguments in this Snakemake run (the manifest's `run`), so a
requeued or retried job installs what an earlier attempt finished, and a later run computes afresh.
A lock per cell (``<checkpoint dir>/packed.lock``, held while the cell runs) keeps two processes from
ever running one cell. Outside a SLURM job, without a manifest, or for a cell alone, ``run`` is
exactly `python -m reprokit.cell run`.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .atomic import atomic_write_json

# ------------------------------------------------------------------------------------------------
# the packing

MARGIN, EXTRA_MINUTES, MAX_MINUTES = 1.5, 10, 24 * 60  # as reprokit.budget's wall times of a single cell
CELL_OVERHEAD_S = 10.0  # per packed cell: Snakemake starting it inside the job (~5 s measured on this CPU) + margin
JOB_OVERHEAD_S = 60.0  # per SLURM job, in allocated hours: node prolog, Snakemake and CUDA start (an assumption)
RESULT_FILES = ("config.json", "curve.csv", "metrics.json")  # what `reprokit.cell run` writes; metrics last


@dataclass(frozen=True)
class PackingSettings:
    """How cells are packed (slurm/config.yaml sets the first two; see docs/slurm.md)."""

    cells_per_gpu: int = 4  # cells running at once on a GPU job's one GPU
    cells_per_cpu_job: int = 8  # cells running at once on a CPU job (each with its own threads)
    min_minutes: float = 30.0  # estimated wall time of a packed job: at least (when there is that much work),
    target_minutes: float = 60.0  # about,
    max_minutes: float = 120.0  # at most
    long_minutes: float = 30.0  # a cell estimated at this or more runs alone

    def at_once(self, device: str) -> int:
        return max(1, int(self.cells_per_gpu if device == "gpu" else self.cells_per_cpu_job))


@dataclass(frozen=True)
class CellCost:
    """One cell as the packing sees it (reprokit.budget.cell_costs fills it from the step-cost table)."""

    rel_dir: str  # <scale>/<experiment>/<coords>
    experiment: str
    device: str  # "gpu" | "cpu": where it runs
    seconds: float  # estimated on that device (one cell alone)
    gpu_seconds: float  # estimated on the GPU profile (a cell per GPU job, as without packing)
    speedup: float  # CPU-core time / GPU time of its steps (the device decision)
    shared_seconds: dict = field(
        default_factory=dict, compare=False
    )  # {k: seconds with k cells sharing a GPU}, measured only


@dataclass
class Job:
    """One SLURM job of the packing."""

    id: str  # the Snakemake group id (empty for a cell alone)
    device: str
    cells: list[str]  # rel_dirs, in run order
    at_once: int
    wall_s: float  # estimated wall time
    share_s: dict[str, float]  # each cell's part of wall_s
    minutes: dict[str, int]  # each cell's part of the SLURM wall time (Snakemake adds a group's up)

    @property
    def runtime(self) -> int:
        """SLURM wall time asked (minutes)."""
        return sum(self.minutes.values())

    @property
    def alone(self) -> bool:
        return len(self.cells) == 1


def single_minutes(seconds: float) -> int:
    """SLURM wall time of a cell alone: MARGIN x its estimate + EXTRA_MINUTES, up to 5 min, at most 24 h."""
    return int(min(MAX_MINUTES, 5 * math.ceil((MARGIN * seconds / 60 + EXTRA_MINUTES) / 5)))


def member_minutes(share_s: float, n_cells: int) -> int:
    """A packed cell's part of its job's SLURM wall time when the job runs n_cells cells: MARGIN x its
    share of the wall time and an equal part of EXTRA_MINUTES, in whole minutes (Snakemake adds them up)."""
    return max(1, math.ceil(MARGIN * share_s / 60 + EXTRA_MINUTES / max(1, n_cells)))


def packed_share(cost: CellCost, k: int) -> float:
    """Seconds a packed cell adds to its job's wall time when k cells run at once."""
    if cost.device == "cpu":
        return cost.seconds / k + CELL_OVERHEAD_S
    shared = cost.shared_seconds.get(k)
    return (shared / k if shared else cost.seconds) + CELL_OVERHEAD_S


def _split(items: list[tuple[CellCost, float]], n: int) -> list[list[tuple[CellCost, float]]]:
    """`items` cut into n runs of consecutive items of about equal summed share."""
    total = sum(s for _, s in items)
    chunks, current, acc = [], [], 0.0
    for item in items:
        current.append(item)
        acc += item[1]
        if len(chunks) < n - 1 and acc >= total * (len(chunks) + 1) / n:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def pack_jobs(costs: list[CellCost], settings: PackingSettings = PackingSettings(), prefix: str = "pack") -> list[Job]:
    """The SLURM jobs for `costs` (in their order): long cells alone, the rest packed per device."""
    jobs: list[Job] = []
    packable: dict[str, list[tuple[CellCost, float]]] = {"gpu": [], "cpu": []}
    for c in costs:
        k = settings.at_once(c.device)
        share = packed_share(c, k)
        if c.seconds >= settings.long_minutes * 60:
            jobs.append(
                Job(
                    "",
                    c.device,
                    [c.rel_dir],
                    1,
                    c.seconds,
                    {c.rel_dir: c.seconds},
                    {c.rel_dir: single_minutes(c.seconds)},
                )
            )
        else:
            packable[c.device].append((c, share))
    for device, items in packable.items():
        if not items:
            continue
        total_min = sum(s for _, s in items) / 60
        n = max(1, round(total_min / settings.target_minutes), math.ceil(total_min / settings.max_minutes))
        if total_min >= settings.min_minutes:
            n = min(n, int(total_min // settings.min_minutes))
        n = min(n, len(items))
        for i, chunk in enumerate(_split(items, n)):
            if len(chunk) == 1:  # nothing to pack it with
                c = chunk[0][0]
                jobs.append(
                    Job(
                        "",
                        device,
                        [c.rel_dir],
                        1,
                        c.seconds,
                        {c.rel_dir: c.seconds},
                        {c.rel_dir: single_minutes(c.seconds)},
                    )
                )
                continue
            k = settings.at_once(device)
            wall = sum(s for _, s in chunk)
            minutes = {c.rel_dir: member_minutes(s, len(chunk)) for c, s in chunk}
            jobs.append(
                Job(
                    f"{prefix}_{device}{i:03d}",
                    device,
                    [c.rel_dir for c, _ in chunk],
                    k,
                    wall,
                    {c.rel_dir: s for c, s in chunk},
                    minutes,
                )
            )
    return jobs


def index(jobs: list[Job]) -> dict[str, Job]:
    """{rel_dir: its job}."""
    return {rel: job for job in jobs for rel in job.cells}


# ------------------------------------------------------------------------------------------------
# the manifest: what the Snakefile hands the runner (written once per Snakemake run, by its main process)


def write_manifest(path: str | Path, job_id: str, at_once: int, entries: list[dict], run: str) -> None:
    """`entries`: {"out", "checkpoint", "argv" (of `reprokit.cell run`, after `run`), "inputs"} per cell
    of the group that this Snakemake run wants; `run`: a token of this Snakemake run."""

    atomic_write_json(Path(path), {"group": job_id, "at_once": int(at_once), "run": run, "cells": entries})


def _fingerprint(argv: list[str]) -> str:
    return hashlib.sha256(json.dumps(list(argv)).encode()).hexdigest()


def _arg(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv[:-1]):
        if a == name:
            return argv[i + 1]
    return None


def _with_out(argv: list[str], out: str) -> list[str]:
    argv = list(argv)
    argv[argv.index("--out") + 1] = out
    return argv


@dataclass
class _Cell:
    argv: list[str]  # as its own job would run it
    out: Path
    checkpoint_dir: Path
    inputs: list[str] = field(default_factory=list)

    @property
    def staging(self) -> Path:
        return self.checkpoint_dir / "packed"

    @property
    def receipt(self) -> Path:
        return self.staging / "receipt.json"

    def finished_here(self, run: str) -> bool:
        """Its result, run with these arguments in this Snakemake run, waits in the staging folder."""
        try:
            r = json.loads(self.receipt.read_text())
        except (OSError, ValueError):
            return False
        return (
            bool(run)
            and r.get("fingerprint") == _fingerprint(self.argv)
            and r.get("run") == run
            and all((self.staging / f).exists() for f in RESULT_FILES)
        )

    def install(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for name in RESULT_FILES:  # metrics.json last: its presence means the cell is done
            tmp = self.out / f".{name}.installing"
            shutil.copyfile(self.staging / name, tmp)
            os.replace(tmp, self.out / name)


class _Lock:
    """An exclusive lock on `<checkpoint dir>/packed.lock` (flock: released when its process dies)."""

    def __init__(self, cell: _Cell):
        cell.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(cell.checkpoint_dir / "packed.lock", os.O_RDWR | os.O_CREAT, 0o666)

    def acquire(self, wait: bool) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            return True
        except BlockingIOError:
            return False

    def release(self) -> None:
        os.close(self.fd)  # drops the flock


def _cell_from_argv(argv: list[str]) -> _Cell:
    checkpoint = _arg(argv, "--checkpoint")
    out = _arg(argv, "--out")
    if not checkpoint or not out:
        raise SystemExit("reprokit.packing run: a packed cell needs --out and --checkpoint")
    return _Cell(list(argv), Path(out), Path(checkpoint).parent)


def _log(msg: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} reprokit.packing: {msg}", file=sys.stderr, flush=True)


def _exec_cell(argv: list[str]) -> int:
    os.execv(sys.executable, [sys.executable, "-m", "reprokit.cell", "run", *argv])
    return 1  # not reached


def run(pack: str, argv: list[str]) -> int:
    """Run the cell of `argv` (the arguments of `reprokit.cell run`) inside its packed SLURM job."""
    slurm_job = os.environ.get("SLURM_JOB_ID", "")
    manifest = Path(pack) if pack else None
    if not slurm_job or manifest is None or not manifest.is_file():
        return _exec_cell(argv)
    doc = json.loads(manifest.read_text())
    run_id = str(doc.get("run", ""))
    me = _cell_from_argv(argv)
    lock = _Lock(me)
    lock.acquire(wait=True)  # another process runs this cell: wait for it, then see what it left
    try:
        if me.finished_here(run_id):
            done = json.loads(me.receipt.read_text()).get("slurm_job")
            _log(
                f"{me.out}: finished earlier in SLURM job {done} of this run (packed with another cell); installing it"
            )
            sys.stderr.write((me.staging / "cell.log").read_text() if (me.staging / "cell.log").exists() else "")
            me.install()
            return 0
        others, locks = [], []
        for e in doc.get("cells", []):
            c = _Cell(list(e["argv"]), Path(e["out"]), Path(e["checkpoint"]).parent, list(e.get("inputs", [])))
            if c.out == me.out or (c.out / "metrics.json").exists() or c.finished_here(run_id):
                continue
            if not all(Path(p).exists() for p in c.inputs):
                continue  # its own job runs it once its inputs are there
            other = _Lock(c)
            if other.acquire(wait=False):
                others.append(c)
                locks.append(other)
            else:
                other.release()
        at_once = max(1, int(doc.get("at_once", 1)))
        _log(
            f"{me.out}: group {doc.get('group')} in SLURM job {slurm_job}: this cell and {len(others)} more of "
            f"its group, {at_once} at a time"
        )
        return _run_pool(me, others, at_once, {"run": run_id, "slurm_job": slurm_job})
    finally:
        lock.release()


def _run_pool(me: _Cell, others: list[_Cell], at_once: int, stamp: dict) -> int:
    """Run `me` and `others`, at_once at a time; `me`'s output goes to this process's stderr, the others'
    to their staging folders. Returns `me`'s exit status."""
    queue = [me, *others]
    running: dict[subprocess.Popen, _Cell] = {}
    status: dict[Path, int] = {}
    stopping = False

    def stop(signum, _frame):
        nonlocal stopping
        stopping = True
        for p in running:
            if p.poll() is None:
                p.send_signal(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while queue or running:
            while queue and len(running) < at_once and not stopping:
                c = queue.pop(0)
                shutil.rmtree(c.staging, ignore_errors=True)
                c.staging.mkdir(parents=True, exist_ok=True)
                cmd = [sys.executable, "-m", "reprokit.cell", "run", *_with_out(c.argv, str(c.staging))]
                if c is me:
                    p = subprocess.Popen(cmd)
                else:
                    with open(c.staging / "cell.log", "w") as log:
                        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
                running[p] = c
            if stopping:
                queue.clear()
            for p in [p for p in running if p.poll() is not None]:
                c = running.pop(p)
                status[c.out] = p.returncode
                if p.returncode == 0 and all((c.staging / f).exists() for f in RESULT_FILES):
                    atomic_write_json(
                        c.receipt, {"fingerprint": _fingerprint(c.argv), **stamp, "host": os.uname().nodename}
                    )
                    if c is me:
                        me.install()
                if c is not me:
                    _log(
                        f"{c.out}: exit {p.returncode}"
                        + ("" if p.returncode == 0 else f" (log: {c.staging / 'cell.log'})")
                    )
            time.sleep(0.2)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return status.get(me.out, 143 if stopping else 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reprokit.packing", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run one cell of a packed SLURM job (and the others of its group)")
    p_run.add_argument("--pack", default="", help="the group's manifest (empty: the cell runs alone)")
    args, rest = p.parse_known_args(argv)
    if args.command == "run":
        return run(args.pack, rest)
    return 2


if __name__ == "__main__":
    sys.exit(main())
