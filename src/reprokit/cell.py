"""Config in, metrics out: the one entry point pipeline rules call.

    python -m reprokit.cell run --cell CELL_JSON --context CONTEXT_JSON --variants VARIANTS_JSON --out DIR --checkpoint FILE
    python -m reprokit.cell variant --dataset NAME --out FILE --context CONTEXT_JSON

`run` removes an earlier run's DIR/metrics.json and DIR/curve.csv, writes DIR/config.json (the resolved cell
config) first, DIR/curve.csv, and last, atomically, DIR/metrics.json. The checkpoint lives outside DIR because Snakemake deletes a job's declared outputs
before it starts; a cell killed by SIGTERM exits with 143 after checkpointing and, started again,
resumes to bit-identical metrics; a checkpoint that cannot be read (truncated, corrupt) is moved aside
to `<checkpoint>.unreadable-<time>` with a warning and the cell starts afresh. A diverged run
(non-finite loss) ends with status 'diverged', NaN metrics and exit code 0; a CUDA out-of-memory error
ends with status 'oom', NaN metrics and exit code 0 (tables print "OOM"). The context's `run` block
(device, precision, deterministic) decides where the cell computes (reprokit/runtime.py); metrics.json
records the device, precision, torch/CUDA versions, peak device memory and seconds per step. Run as a
module, it first pins the CPU instruction set (`run.cpu_isa`, handed over as REPROKIT_CPU_ISA; absent, the
default avx2) before torch loads, and metrics.json's provenance records the pin (reprokit/runtime_settings.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path

from .runtime_settings import cpu_isa_record, pin_cpu_isa

if __name__ == "__main__":  # `python -m reprokit.cell`: pin the CPU instruction set before torch loads (run.cpu_isa)
    pin_cpu_isa()

import torch

from . import __version__
from .atomic import atomic_write_json, atomic_write_text, rows_csv
from .builders import CellContext, Measurement
from .config import Cell
from .data import variants
from .data.checksums import overrides_for
from .data.mirrors import fetch_status
from .data.specs import dataset_info
from .loop import LoopConfig, LoopResult, run_loop
from .plan import kind
from .runtime import is_oom

log = logging.getLogger("reprokit.cell")


def cell_from_dict(d: dict) -> Cell:
    return Cell(
        scale=d["scale"],
        experiment=d["experiment"],
        coords=tuple(d["coords"].items()),
        settings=d["settings"],
        kind=d["kind"],
        datasets=tuple(d.get("datasets", ())),
    )


def context_from_dict(d: dict, variant_paths: dict | None = None) -> CellContext:
    """The cell's context: data mirrors, the `run` block (device, precision) and the variant files the
    pipeline resolved for it ({name: path}, as its plan's required_variants() declared them)."""
    return CellContext(
        mirrors=list(d["mirrors"]),
        cache_dir=d.get("cache_dir"),
        variants_dir=d["variants_dir"],
        download=bool(d.get("download", False)),
        checksums=dict(d.get("checksums") or {}),
        runtime_settings=dict(d.get("run") or {}),
        variant_paths=dict(variant_paths or {}),
    )


def _nan_metrics(metrics: dict) -> dict:
    return {
        k: (float("nan") if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in metrics.items()
    }


def _final_metrics(final, result: LoopResult) -> dict:
    """The method's final metrics; NaN ones (and status 'diverged') for a run that diverged; NaN for the
    curve's keys after an out-of-memory step (evaluating again would only run out of memory again)."""
    if result.status == "oom":
        return _nan_curve_keys(result.curve)
    if result.status == "completed":
        metrics = final()
        if any(isinstance(v, float) and not math.isfinite(v) for v in metrics.values()):
            result.status = "diverged"
            metrics = _nan_metrics(metrics)
        return metrics
    try:
        return _nan_metrics(final())
    except Exception:  # a diverged model may not even evaluate; keep the curve's keys
        return _nan_curve_keys(result.curve)


def _nan_curve_keys(curve: list) -> dict:
    return {k: float("nan") for row in curve for k in row if k != "step"}


def _cell_fingerprint(cell: Cell) -> str:
    return hashlib.sha256(json.dumps(cell.to_dict(), sort_keys=True, default=str).encode()).hexdigest()


def _guard_checkpoint(cell: Cell, checkpoint: Path) -> None:
    """A checkpoint resumes only the cell that wrote it: its sidecar `<checkpoint>.cell` holds the cell's
    fingerprint (coordinates and settings). A checkpoint without one (or with an unreadable one), or of
    other settings (the config changed since a run was killed), is removed with a warning and the cell
    starts afresh. A checkpoint of this cell that cannot be read is moved aside by the training loop
    (reprokit.loop.load_checkpoint)."""
    sidecar = checkpoint.with_name(checkpoint.name + ".cell")
    fingerprint = _cell_fingerprint(cell)
    if checkpoint.exists():
        try:
            found = sidecar.read_text().strip() if sidecar.exists() else None
        except (OSError, UnicodeDecodeError):  # a corrupt sidecar names no cell
            found = None
        if found != fingerprint:
            log.warning(
                "%s: checkpoint %s was written by %s; starting afresh",
                cell.rel_dir,
                checkpoint,
                "other settings" if found else "an unknown cell",
            )
            os.unlink(checkpoint)
    atomic_write_text(sidecar, fingerprint + "\n")


def run_cell(
    cell: Cell,
    ctx: CellContext,
    out_dir: str | Path,
    checkpoint: str | Path | None,
    checkpoint_every: int | None = None,
    log_every_seconds: float = 30.0,
) -> dict:
    """Run one cell; `checkpoint_every` None takes the context's `run.checkpoint_every`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # An earlier run's record (Snakemake deletes it before a job; benchmarks/run_cells.py does not) would sit
    # beside this run's config.json until this run ends: a reader would take it for this run's result.
    for stale in ("metrics.json", "curve.csv"):
        (out_dir / stale).unlink(missing_ok=True)
    atomic_write_json(
        out_dir / "config.json",
        {
            **cell.to_dict(),
            "context": {
                "mirrors": ctx.mirrors,
                "cache_dir": ctx.cache_dir,
                "variants": {k: str(v) for k, v in ctx.variant_paths.items()},
            },
        },
    )
    for name, path in ctx.variant_paths.items():
        if not Path(path).exists():
            raise FileNotFoundError(f"cell {cell.rel_dir}: variant '{name}' missing at {path} (build it first)")
    rt = ctx.runtime.apply()
    isa = cpu_isa_record()
    log.info(
        "%s: device %s (%s), precision %s, cpu_isa %s (torch dispatches to %s)",
        cell.rel_dir,
        rt.device,
        rt.device_name(),
        rt.precision,
        isa["requested"],
        isa["torch_capability"],
    )
    if checkpoint is not None:
        Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
        _guard_checkpoint(cell, Path(checkpoint))
    run, result, metrics = None, None, {}
    try:
        run = kind(cell.kind).build(cell, ctx)
        if isinstance(run, Measurement):  # a measuring kind (Table 8): no training loop
            t0 = time.monotonic()
            curve, metrics = run.measure()
            result = LoopResult(
                status="completed", steps=run.n_steps, curve=curve, resumed_from=0, seconds=time.monotonic() - t0
            )
            return _write_record(cell, rt, out_dir, checkpoint, run, result, metrics)
        if checkpoint_every is None:
            checkpoint_every = rt.settings.checkpoint_every
        loop = LoopConfig(
            n_steps=run.n_steps,
            eval_every=run.eval_every,
            eval_doubling_until=run.eval_doubling_until,
            evals_per_doubling=run.evals_per_doubling,
            checkpoint_every=checkpoint_every,
            log_every_seconds=log_every_seconds,
            label=cell.rel_dir,
        )
        result = run_loop(
            run.method,
            loop,
            Path(checkpoint) if checkpoint else None,
            precision=rt.autocast,
            evaluate=run.evaluation.curve,
        )
        with rt.autocast():
            metrics = _final_metrics(run.evaluation.final, result)
    except Exception as err:  # only out-of-memory is an outcome; anything else re-raises
        if not is_oom(err):
            raise
        log.error("%s: out of memory on %s: %s", cell.rel_dir, rt.device, str(err).splitlines()[0])
        curve = result.curve if result is not None else []
        steps = result.steps if result is not None else 0
        result = LoopResult(status="oom", steps=steps, curve=curve, resumed_from=0, seconds=0.0)
        metrics = _nan_curve_keys(curve)
        if rt.is_cuda:
            torch.cuda.empty_cache()
    return _write_record(cell, rt, out_dir, checkpoint, run, result, metrics)


def _write_record(cell: Cell, rt, out_dir: Path, checkpoint, run, result: LoopResult, metrics: dict) -> dict:
    """curve.csv, then metrics.json (last, atomically); the finished cell's checkpoint is removed."""
    atomic_write_text(out_dir / "curve.csv", rows_csv(result.curve))
    ran = max(1, result.steps - result.resumed_from)
    record = {
        "status": result.status,
        "scale": cell.scale,
        "experiment": cell.experiment,
        "coords": cell.coord_dict,
        "datasets": list(cell.datasets),
        "metrics": metrics,
        "steps": result.steps,
        "resumed_from_step": result.resumed_from,
        "seconds_this_run": round(result.seconds, 3),
        "seconds_per_step": result.seconds / ran if result.steps > result.resumed_from else None,
        "info": run.info if run is not None else {},
        "provenance": {
            "reprokit": __version__,
            "python": platform.python_version(),
            "host": platform.node(),
            **rt.provenance(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    }
    atomic_write_json(out_dir / "metrics.json", record)
    if checkpoint is not None:  # the cell is done; a re-run starts from scratch and gives the same numbers
        for path in (Path(checkpoint), Path(str(checkpoint) + ".cell")):
            if path.exists():
                os.unlink(path)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reprokit.cell", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="train and evaluate one grid cell")
    p_run.add_argument(
        "--cell", required=True, help="JSON of the resolved cell (scale, experiment, kind, coords, settings)"
    )
    p_run.add_argument("--context", required=True, help="JSON: mirrors, cache_dir, variants_dir, download")
    p_run.add_argument("--variants", default="{}", help="JSON {name: path} of the variant files the cell reads")
    p_run.add_argument("--out", required=True, help="output folder of the cell")
    p_run.add_argument("--checkpoint", default=None, help="checkpoint file (outside the output folder)")
    p_run.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="iterations between checkpoints (default: the context's run.checkpoint_every)",
    )
    p_run.add_argument("--threads", type=int, default=1)
    p_var = sub.add_parser("variant", help="build one dataset variant file")
    p_var.add_argument("--dataset", required=True)
    p_var.add_argument("--out", required=True)
    p_var.add_argument("--context", required=True)
    p_fetch = sub.add_parser("fetch", help="make a dataset available (verify, or download) and write its status")
    p_fetch.add_argument("--dataset", required=True)
    p_fetch.add_argument("--out", required=True, help="status JSON: available, or the reason it is not")
    p_fetch.add_argument("--context", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.command == "run":
        from . import _startup  # first: it patches torch before any optimiser import (see _startup)

        _startup.prepare()  # before any optimiser is built: keeps torch._dynamo (~1.5 s) out of the cell
        torch.set_num_threads(max(1, args.threads))
        cell = cell_from_dict(json.loads(args.cell))
        ctx = context_from_dict(json.loads(args.context), json.loads(args.variants))
        record = run_cell(cell, ctx, args.out, args.checkpoint, args.checkpoint_every)
        log.info("%s: %s after %d steps", cell.rel_dir, record["status"], record["steps"])
        return 0
    if args.command == "variant":
        ctx = context_from_dict(json.loads(args.context))
        checksums = overrides_for(dataset_info(args.dataset), ctx.checksums) or None
        load_kw = {} if dataset_info(args.dataset).synthetic else {"download": ctx.download, "checksums": checksums}
        variants.build_variant(args.dataset, Path(args.out).name, args.out, ctx.mirrors, ctx.cache_dir, **load_kw)
        return 0
    if args.command == "fetch":
        ctx = context_from_dict(json.loads(args.context))
        status = fetch_status(args.dataset, ctx.mirrors, ctx.cache_dir, download=ctx.download, checksums=ctx.checksums)
        status["checked"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        if status["available"]:
            log.info("dataset %s: available at %s", args.dataset, status["path"])
        else:
            log.warning("dataset %s: n/a (%s)\n%s", args.dataset, status["reason"], status["detail"])
        atomic_write_json(Path(args.out), status)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
