"""Run chosen cells of one experiment in parallel processes, without Snakemake.

For a lent GPU box that has PyTorch but no Snakemake: each cell is the same
`python -m reprokit.cell run ...` command the `cell` rule runs, from the same job
(reprokit.job.cell_job: cell JSON, context, variant files, checkpoint), and writes to the same `results/<scale>/<experiment>/...`
folder, so `snakemake` picks the results up afterwards (it re-runs them only if their inputs changed).
Variant files are built first with `python -m reprokit.cell variant`. A cell that reads upstream cells
(a retrain cell reading the hyperparameters a partitioned cell found) runs once those cells completed under
the same results folder (run their experiment first, with the same --root); until then it is refused,
naming them.

    python benchmarks/run_cells.py --experiment fig3a --scale paper --where n_train=1000,5000 seed=0 --jobs 8

The cells import whichever `reprokit` the interpreter finds: with an editable install that is the checkout it was
installed from, whatever the current folder. To keep a long queue on one version of the code while editing another
checkout (a `git worktree` of a commit, say), start it with `PYTHONPATH=<that worktree>/src`; the cell processes
inherit it.

Prints one line per finished cell (status, wall time) and a JSON summary to --summary. A cell whose
metrics.json says completed is skipped only while its config.json holds the config's current settings;
one that finished with other settings runs again (named, with the keys that differ), as Snakemake's
params trigger would.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHIVE_ROOT = REPO  # figures/<scale>/cells/ lives under it
sys.path.insert(0, str(REPO / "src"))

from reprokit.config import format_value, grid_of, load_pipeline_config
from reprokit.job import cell_job, data_context
from reprokit.report.store import archive
from reprokit.report.store.archive import differing_keys
from reprokit.runtime_settings import cpu_isa_env


def _matches(cell, where: dict[str, set[str]]) -> bool:
    coords = cell.coord_dict
    for axis, values in where.items():
        if axis not in coords:
            raise SystemExit(f"--where: '{axis}' is not an axis of this experiment (axes: {sorted(coords)})")
        if format_value(coords[axis]) not in values:
            return False
    return True


def parse_where(items: list[str]) -> dict[str, set[str]]:
    """`axis=v1,v2` filters (values as in paths) -> {axis: {values}}."""
    where = {}
    for item in items:
        axis, _, values = item.partition("=")
        where[axis] = set(values.split(","))
    return where


def build_variants(needed: dict, context: dict, logs: Path, env: dict | None = None) -> int:
    """Build each missing variant file ({path: dataset}) with the cell command's `variant` (`env`: a job's
    CPU instruction-set pin, CellJob.env); 0, or the first failing return code."""
    for path, dataset in needed.items():
        if not Path(path).exists():
            rc, sec = _run(
                [
                    sys.executable,
                    "-m",
                    "reprokit.cell",
                    "variant",
                    "--dataset",
                    dataset,
                    "--out",
                    path,
                    "--context",
                    json.dumps(context),
                ],
                logs / "variants" / (Path(path).name + ".log"),
                env,
            )
            print(f"variant {path}: rc {rc} in {sec:.1f} s", flush=True)
            if rc:
                return rc
    return 0


_LIVE: set[subprocess.Popen] = set()  # the cell processes running now
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()  # set by a signal: queued cells do not start


def _run(cmd: list[str], log: Path, env: dict | None = None) -> tuple[int, float]:
    """Run `cmd` with `env` added to this process's environment (a cell job's CPU instruction-set pin)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        with _LIVE_LOCK:
            if _STOPPING.is_set():
                return -signal.SIGTERM, 0.0
            proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, **(env or {})}
            )
            _LIVE.add(proc)
        try:
            rc = proc.wait()
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    return rc, time.perf_counter() - t0


def stop_cells(signum: int, _frame=None) -> None:
    """SIGTERM / SIGINT / SIGHUP (a `timeout`, Ctrl-C, a closed terminal): stop the cells this run started.

    Without it a killed run_cells.py leaves its cell processes running, unseen, writing to results/ and
    competing for the device. Each cell keeps its last checkpoint; running the same command again resumes it.
    """
    with _LIVE_LOCK:
        _STOPPING.set()
        procs = list(_LIVE)
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"stopped by signal {signum}: {len(procs)} running cell(s) terminated", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


NO_CONFIG = "<config.json>"


def _completed(metrics: Path) -> bool:
    return metrics.exists() and json.loads(metrics.read_text()).get("status") == "completed"


def changed_settings(config_json: Path, settings: dict) -> list[str]:
    """Top-level settings keys where a finished cell's config.json differs from `settings` (the config's now);
    a missing or unreadable config.json counts as all of them."""
    try:
        stored = json.loads(config_json.read_text())["settings"]
    except (OSError, ValueError, KeyError):
        return [NO_CONFIG]
    return differing_keys(stored, settings)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experiment", required=True)
    p.add_argument("--scale", default="paper")
    p.add_argument("--where", nargs="*", default=[], help="axis=v1,v2 filters on the grid (values as in paths)")
    p.add_argument("--jobs", type=int, default=4, help="cells at a time (they share the device)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per cell (CPU), as the rule's threads")
    p.add_argument("--mirror", action="append", default=None, help="dataset folder (default: config's mirrors)")
    p.add_argument("--summary", default=None, help="write a JSON summary here")
    p.add_argument("--first", nargs="*", default=[], help="start cells whose path contains one of these first")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--rerun", action="store_true", help="also run cells whose metrics.json says completed")
    p.add_argument(
        "--root",
        default=None,
        help="write results, checkpoints and logs under this folder instead of the config's paths (a second run "
        "of the same cells beside the first, e.g. benchmarks/verdict_stability.py)",
    )
    args = p.parse_args(argv)

    overrides = {"scale": args.scale}
    if args.root:
        overrides["paths"] = {k: str(Path(args.root) / k) for k in ("results", "checkpoints", "logs")}
    cfg = load_pipeline_config(REPO, overrides)
    where = parse_where(args.where)
    cells = [c for c in grid_of(cfg, args.experiment, args.scale).cells() if _matches(c, where)]
    if not cells:
        raise SystemExit("no cell matches")
    data_kw = {"mirrors": args.mirror, "download": False}  # args.mirror None: the config's mirrors
    context = data_context(cfg, **data_kw)
    logs = Path(cfg["paths"]["logs"])

    # 1. variant files, each once
    needed = {}
    jobs, skipped, stale, kept = [], [], [], []
    # a cell archived with these settings (figures/<scale>/cells/, e.g. run on another machine) is not run again
    # unless --rerun; a run under --root is a second run beside the first, which runs every cell it is asked for
    archived = (
        {} if args.rerun or args.root else archive.load(archive.path_of(ARCHIVE_ROOT, args.scale, args.experiment))
    )
    for c in cells:
        job = cell_job(c, cfg, **data_kw)
        missing = [p for p in job.upstream.values() if not _completed(Path(p))]
        if missing:
            raise SystemExit(
                f"{c.rel_dir} reads upstream cells that have not completed under {cfg['paths']['results']}: "
                f"{', '.join(missing)} (run their experiment first, with the same --root)"
            )
        out = Path(job.out)
        metrics = out / "metrics.json"
        line = archived.get(c.rel_dir)
        if not _completed(metrics) and line and line.get("status") == "completed":
            if not differing_keys(line.get("settings") or {}, job.cell["settings"]):
                kept.append(c.rel_dir)
                continue
        if not args.rerun and _completed(metrics):
            changed = changed_settings(out / "config.json", job.cell["settings"])
            if not changed:
                skipped.append(c.rel_dir)  # its variant files are not built either
                continue
            stale.append(c.rel_dir)
            why = (
                "no readable config.json" if changed == [NO_CONFIG] else f"{', '.join(changed)} differ from the config"
            )
            print(f"{c.rel_dir}: completed with other settings ({why}): running it again", flush=True)
        needed.update(job.variant_datasets)
        cmd = [sys.executable, "-m", "reprokit.cell", *job.argv(args.threads)]
        jobs.append((c.rel_dir, cmd, logs / f"{c.rel_dir}.log", metrics, job.env))
    jobs.sort(key=lambda j: min([i for i, f in enumerate(args.first) if f in j[0]], default=len(args.first)))
    also_archived = sum(1 for rel in skipped if (archived.get(rel) or {}).get("status") == "completed")
    print(
        f"{len(jobs)} cells of {args.experiment} at scale {args.scale} to run ({len(stale)} completed with other "
        f"settings); {len(skipped)} already completed under results/ with these settings ({also_archived} of them "
        f"also archived) and {len(kept)} archived only (skipped; --rerun runs them again); {len(needed)} variant files",
        flush=True,
    )
    if args.dry_run:
        for rel, *_ in jobs:
            print("  ", rel)
        return 0
    rc = build_variants(needed, context, logs, cpu_isa_env(cfg["run"]["cpu_isa"]))
    if rc:
        return rc

    # 2. the cells, --jobs at a time
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop_cells)
    summary, t0 = [], time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(_run, cmd, log, env): (rel, metrics) for rel, cmd, log, metrics, env in jobs}
        for fut in as_completed(futures):
            rel, metrics = futures[fut]
            rc, sec = fut.result()
            rec = json.loads(metrics.read_text()) if metrics.exists() and rc == 0 else {}
            final = rec.get("metrics", {})
            row = {
                "cell": rel,
                "rc": rc,
                "status": rec.get("status"),
                "wall_s": round(sec, 1),
                "seconds_per_step": rec.get("seconds_per_step"),
                "device": rec.get("provenance", {}).get("device_name"),
                **{k: v for k, v in final.items() if isinstance(v, (int, float))},
            }
            if rc < 0:  # killed by a signal: say which, and where to look (the cell's log has its last step)
                name = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
                row["killed_by"] = name + (
                    " (the kernel's out-of-memory killer sends it; see dmesg)" if rc == -9 else ""
                )
            summary.append(row)
            print(json.dumps(row), flush=True)
    print(
        f"all {len(jobs)} cells in {time.perf_counter() - t0:.0f} s; results/ is not committed: keep them with "
        f"`python -m reprokit.report.commands.archive --scale {args.scale} --experiment {args.experiment}` "
        f"(figures/{args.scale}/cells)",
        flush=True,
    )
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=1))
    return int(any(r["rc"] for r in summary))


if __name__ == "__main__":
    sys.exit(main())
