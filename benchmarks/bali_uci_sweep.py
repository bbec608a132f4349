"""Diagnostic (not part of the pipeline): BALI on UCI splits at Table 4 settings with one or more overrides.

Used to probe which knob could move our BALI towards the paper's Table 1 / 7 numbers (from 2026-11-22,
commit 9fa45f9; the findings are comments in config/experiments/bali_regression.yaml).
Prints one JSON line per split: test / train RMSE and test log-likelihood in original units.

    python benchmarks/bali_uci_sweep.py --dataset uci_concrete --splits 0-4 --name neff4 --set n_eff_frac=0.25
    python benchmarks/bali_uci_sweep.py --dataset uci_concrete --splits 0,3 --set reparam=mean --set std_y=true

Overrides: any BaliConfig field (alpha, beta, sigma_u2_factor, n_iterations, reparam, ...), plus
`n_eff_frac` (N_eff = frac * N; `wishart_n=n|n_eff` picks the N of Eq. 16d), `batch` (minibatch size, default N), `std_x` / `std_y` (z-score inputs /
targets, default true / false) and `hidden` (comma-separated widths, default 50).
Data: the standard Hernandez-Lobato splits from the first mirror (default ../shared/data).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from reprokit import seeds
from reprokit.bali import BaliConfig
from reprokit.builders import CellContext
from reprokit.builders.uci_regression import load_task
from reprokit.methods.bali import BaliMethod


def parse_splits(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b) + 1) if b else [int(a)])
    return out


def parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--splits", default="0")
    ap.add_argument("--name", default="table4")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--mirror", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--eval-samples", type=int, default=100)
    ap.add_argument(
        "--replicate",
        type=int,
        default=0,
        help="0: the pipeline's seed (the split index); R >= 1: an independent base seed, the named "
        "stream 'replicate' of the split's seed, sub-stream R",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set expects KEY=VALUE, got '{item}'")
        overrides[key] = parse_value(value)
    std_x, std_y = bool(overrides.pop("std_x", True)), bool(overrides.pop("std_y", False))
    n_eff_frac = float(overrides.pop("n_eff_frac", 1.0))
    batch = overrides.pop("batch", None)
    hidden = [int(h) for h in str(overrides.pop("hidden", 50)).split(",")]
    ctx = CellContext(mirrors=[args.mirror], cache_dir=None, variants_dir="")
    for split in parse_splits(args.splits):
        t0 = time.time()
        data, y_std, _ = load_task(args.dataset, split, std_x, std_y, ctx)
        n = data.n_train
        bs = n if batch is None else int(batch)
        # BaliConfig's defaults are Table 4 (alpha 0.3, beta 0.2 decayed 5x at 60/80 %, 20000 iterations, ...)
        cfg = BaliConfig(**{"n_eff": n * n_eff_frac, "n_data": n, "batch_size": bs, "wishart_n": "n", **overrides})
        seed = split if args.replicate == 0 else seeds.stream_seed(split, "replicate", keys=(args.replicate,))
        method = BaliMethod(data, hidden, "relu", cfg, bs, seed, n_eval_samples=args.eval_samples, y_std=y_std)
        for step in range(cfg.n_iterations):
            method.train_step(step)
        r = method.evaluate(cfg.n_iterations)
        row = {
            "name": args.name,
            "dataset": args.dataset,
            "split": split,
            "seed": seed,
            **{k: round(float(r[k]), 4) for k in ("train_rmse", "test_rmse", "test_ll")},
            "noise_sd": round(float(method.noise_cov()[0, 0].sqrt()) * (y_std or 1.0), 4),
            "seconds": round(time.time() - t0),
        }
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
