"""Step costs of the MLP kinds (BALI, UCI regression, synthetic sets, input selection) and of a cell's
start-up, measured with the pipeline's own cells, into reprokit's step-cost table (reprokit.budget).

For every distinct (model, step) the cost model prices at paper scale (`reprokit.budget.cell_work`), the
first such cell of the paper-scale config is built with its kind's `build` (real data from the mirrors,
variants built into a temporary folder) on the chosen device, and its `train_step` is timed: warm-up, then
steps until `--seconds` have passed (at least 3); the median goes into the table. The start-up row is a
fresh `python` importing reprokit.cell and taking one Adam step (torch._dynamo loads on the first step).
The conv nets' rows come from bench_throughput.py --write-costs.

    python benchmarks/measure_step_costs.py --threads 1                 # this CPU, profile "cpu"
    python benchmarks/measure_step_costs.py --list                      # what would be measured
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MLP_KINDS = ("input_selection", "uci_regression", "bali_classification", "synthetic_predictive")
STARTUP = (
    "import torch, reprokit.cell\n"
    "m = torch.nn.Linear(2, 1); o = torch.optim.Adam(m.parameters())\n"
    "m(torch.zeros(1, 2)).sum().backward(); o.step()\n"
)


def representative_cells(config: dict, kinds=MLP_KINDS, experiments=None) -> dict:
    """{(model, step): (first paper-scale cell priced with it, its Part)}."""
    from reprokit.budget import cell_work
    from reprokit.config import grid_of

    out = {}
    for name in sorted(config["experiments"]):
        if config["experiments"][name]["kind"] not in kinds or (experiments and name not in experiments):
            continue
        for cell in grid_of(config, name, config["scale"]).cells():
            for part in cell_work(cell).parts:
                out.setdefault((part.model, part.step), (cell, part))
    return out


def time_cell(cell, mirrors: list[str], device: str, seconds: float, warmup: int) -> tuple[float, int | None]:
    """(median ms per train_step, rows per step) of one cell built by its kind."""
    import torch

    from reprokit.builders import CellContext
    from reprokit.data.variants import build_variant, variant_path
    from reprokit.plan import kind as plan_of

    kind = plan_of(cell.kind)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = CellContext(mirrors=mirrors, cache_dir=None, variants_dir=tmp, runtime_settings={"device": device})
        for vname, (dataset, filename) in kind.required_variants(cell).items():
            path = variant_path(tmp, dataset, filename)
            path.parent.mkdir(parents=True, exist_ok=True)
            build_variant(dataset, filename, path, mirrors)
            ctx.variant_paths[vname] = path
        run = kind.build(cell, ctx)
    rt = ctx.runtime
    times, step = [], 0
    t_end = None
    while True:
        rt.synchronize()
        t0 = time.perf_counter()
        with rt.autocast():
            run.method.train_step(step)
        rt.synchronize()
        dt = time.perf_counter() - t0
        step += 1
        if step <= warmup:
            continue
        times.append(dt)
        t_end = t_end or (time.perf_counter() + seconds)
        if len(times) >= 3 and time.perf_counter() >= t_end:
            break
    del torch
    return 1e3 * statistics.median(times), run.info.get("batch_size")


def startup_ms(repeats: int = 3) -> float:
    """Median CPU time (user + system) of a fresh process's start-up: on an idle machine its wall time (it
    is single-threaded), and unlike wall time not inflated by other work on a shared machine."""
    import resource

    times = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", STARTUP], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return 1e3 * statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (a cell's run.threads_per_cell)")
    p.add_argument("--profile", default=None, help="profile of the written rows (default: the device type)")
    p.add_argument("--mirrors", nargs="+", default=[str(REPO.parent / "shared" / "data")])
    p.add_argument("--seconds", type=float, default=2.0, help="time per (model, step) after warm-up")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--experiment", action="append", default=None, help="only cells of this experiment")
    p.add_argument("--no-startup", action="store_true")
    p.add_argument("--startup-only", action="store_true", help="measure only the start-up row")
    p.add_argument("--list", action="store_true", help="list what would be measured, measure nothing")
    args = p.parse_args(argv)

    from reprokit.config import load_pipeline_config, write_costs

    config = load_pipeline_config(REPO, {"scale": "paper"})
    cells = {} if args.startup_only else representative_cells(config, experiments=args.experiment)
    if args.list:
        for (model, step), (cell, _) in cells.items():
            print(f"{model:<32}{step:<12}{cell.rel_dir}")
        return 0

    import torch

    from reprokit.builders.update_timing import cpu_model_name
    from reprokit.runtime import Runtime
    from reprokit.runtime_settings import RuntimeSettings

    torch.set_num_threads(args.threads)
    rt = Runtime(RuntimeSettings(device=args.device)).apply()
    device = rt.device_name() if rt.is_cuda else f"{cpu_model_name()}, {args.threads} thread{'s' * (args.threads != 1)}"
    profile = args.profile or rt.device.type
    today = datetime.date.today().isoformat()
    rows = []
    if not args.no_startup:
        ms = startup_ms()
        rows.append(
            {
                "profile": profile,
                "device": device,
                "model": "python",
                "step": "startup",
                "precision": "fp32",
                "images": None,
                "ms_per_step": ms,
                "date": today,
                "source": "benchmarks/measure_step_costs.py (python -c: import reprokit.cell, one Adam step; CPU time)",
            }
        )
        print(f"{'start-up (ms per cell)':<44}{ms:>10.0f}")
    for (model, step), (cell, part) in cells.items():
        ms, rows_per_step = time_cell(cell, args.mirrors, args.device, args.seconds, args.warmup)
        rows_per_step = rows_per_step or part.images
        rows.append(
            {
                "profile": profile,
                "device": device,
                "model": model,
                "step": step,
                "precision": "fp32",
                "images": rows_per_step,
                "ms_per_step": ms,
                "date": today,
                "source": f"benchmarks/measure_step_costs.py ({cell.rel_dir})",
            }
        )
        print(f"{model:<32}{step:<12}{ms:>10.2f} ms  (batch {rows_per_step})", flush=True)
    write_costs(rows)
    print(f"{len(rows)} rows written to reprokit/data/step_costs.tsv (profile {profile}, {device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
