"""Gal's dropout grid (the BALI tables' DO baseline) trained one point after another vs side by side.

    python benchmarks/gal_grid_parallel.py [--dataset uci_kin8nm] [--split 0] [--steps 300] [--device cpu|cuda]

Both protocols are built on the same real split with the paper-scale config's grid (bali_uci's `dropout`
block: rates x the dataset's taus, epochs, batch size, learning rate) and run `--steps` optimiser steps of their grid phase in this one process: the sequential grid
trains one network per step, the parallel grid (`parallel_grid: true`) all G of them. Prints one JSON
line: device, G, seconds per step of each, and the ratio of the time to advance the whole grid by one step
(sequential G steps vs parallel one step). Standalone script, not a test.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from reprokit.builders import CellContext
from reprokit.builders.uci_regression import load_task
from reprokit.config import load_pipeline_config
from reprokit.methods.gal_dropout import GalDropoutProtocol
from reprokit.runtime import synchronize

REPO = Path(__file__).resolve().parents[1]


def seconds_per_step(m: GalDropoutProtocol, steps: int, device: torch.device) -> float:
    m.train_step(0)  # builds the phase (and warms up)
    synchronize(device)
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        m.train_step(step)
    synchronize(device)
    return (time.perf_counter() - t0) / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cfg = load_pipeline_config(REPO, {"scale": "paper"})
    block = cfg["experiments"]["bali_uci"]["settings"]["dropout"]  # bali_uci_protein uses the same block
    ap.add_argument("--dataset", default="uci_kin8nm", choices=sorted(block["taus"]))
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mirror", default=str(REPO / cfg["data"]["mirrors"][0]))
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    ctx = CellContext(
        mirrors=[args.mirror], cache_dir=None, variants_dir="", runtime_settings={"device": args.device}
    )  # the Runtime places data and generators
    data, _, _ = load_task(args.dataset, args.split, False, False, ctx)
    data = ctx.runtime.to(data)
    kw = {
        "rates": block["rates"],
        "taus": block["taus"][args.dataset],
        "epochs": int(block["epochs"]),
        "seed": args.split,
        "batch_size": int(block["batch_size"]),
        "lr": float(block["lr"]),
    }
    seq = GalDropoutProtocol(data, [args.hidden], **kw)
    par = GalDropoutProtocol(data, [args.hidden], parallel_grid=True, **kw)
    g = len(seq.grid)
    if args.steps >= seq.inner_steps:
        raise SystemExit(f"--steps {args.steps} must stay inside one grid point ({seq.inner_steps} steps)")
    t_seq, t_par = seconds_per_step(seq, args.steps, device), seconds_per_step(par, args.steps, device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu {platform.machine()}"
    print(
        json.dumps(
            {
                "device": name,
                "threads": torch.get_num_threads(),
                "dataset": args.dataset,
                "split": args.split,
                "grid_points": g,
                "n_inner": seq.n_inner,
                "steps_timed": args.steps,
                "sequential_s_per_step": t_seq,
                "parallel_s_per_step": t_par,
                "grid_speedup": g * t_seq / t_par,
                "cell_steps_sequential": seq.n_steps,
                "cell_steps_parallel": par.n_steps,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
