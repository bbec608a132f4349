"""Time one BALI step against one Adam step on the same 2x256 MLP (MNIST-sized, random data).

    python benchmarks/bench_bali_step.py [--batch 2048] [--device cpu|cuda] [--threads N] [--out result.json]

Reports the median wall time per step of Adam, of BALI with the batch Gram products in float64 (the
library default) and in float32 (`gram_dtype`, the EMAs stay float64), side by side in one process, their
ratios, and (from torch.profiler, a separate run) the share of the float64 BALI step spent in Cholesky
factorisations, triangular solves and matrix products. Standalone script, not a test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from reprokit.bali import BaliConfig, BaliMLP, BaliTrainer
from reprokit.bali.activations import LeakyTanh
from reprokit.runtime import synchronize


def _time(fn, device, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def _profile_shares(fn, device, repeats: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(repeats):
            fn()
        synchronize(device)
    rows = prof.key_averages()

    cuda = device.type == "cuda"

    def self_time(ev):
        if cuda:
            return float(getattr(ev, "self_device_time_total", getattr(ev, "self_cuda_time_total", 0.0)))
        return float(ev.self_cpu_time_total)

    def incl_time(ev):  # inclusive: cholesky_ex calls tril etc. internally
        if cuda:
            return float(getattr(ev, "device_time_total", getattr(ev, "cuda_time_total", 0.0)))
        return float(ev.cpu_time_total)

    total = sum(self_time(ev) for ev in rows)
    chol = sum(incl_time(ev) for ev in rows if ev.key in ("aten::linalg_cholesky_ex", "aten::cholesky"))
    tri = sum(incl_time(ev) for ev in rows if ev.key == "aten::linalg_solve_triangular")
    mm = sum(incl_time(ev) for ev in rows if ev.key in ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm"))
    return {
        "cholesky_share": chol / total if total else float("nan"),
        "triangular_solve_share": tri / total if total else float("nan"),
        "matmul_share": mm / total if total else float("nan"),
        "profiled_time_basis": "device time" if cuda else "CPU time",
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--in-features", type=int, default=784)
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--reparam", default="weight", choices=["weight", "local", "mean"])
    p.add_argument("--stats-dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the result as JSON here")
    args = p.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    x = torch.rand(args.batch, args.in_features, device=device)
    y = torch.randint(0, args.classes, (args.batch,), device=device)

    # Adam on a standard MLP of the same shape and activation (2x256 Leaky-Tanh, Sec. 5.3).
    dims = [args.in_features, *args.hidden, args.classes]
    mods: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        if i > 0:
            mods.append(LeakyTanh())
        mods.append(nn.Linear(a, b))
    mlp = nn.Sequential(*mods).to(device)
    opt = torch.optim.Adam(mlp.parameters(), lr=2e-3, weight_decay=1e-4)

    def adam_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(mlp(x), y).backward()
        opt.step()

    def bali_stepper(gram_dtype: str):
        cfg = BaliConfig(
            wishart_n="n",
            alpha=0.25,
            beta=0.1,
            sigma_r2=10.0,
            n_eff=60000 / 50,
            n_iterations=30000,
            batch_size=args.batch,
            reparam=args.reparam,
            stats_dtype=args.stats_dtype,
            gram_dtype=gram_dtype,
        )
        torch.manual_seed(args.seed)
        model = BaliMLP(args.in_features, args.hidden, args.classes, "leaky_tanh", "classification", cfg).to(device)
        trainer = BaliTrainer(model)
        return lambda: trainer.step(x, y)

    bali_step, bali_step32 = bali_stepper(args.stats_dtype), bali_stepper("float32")
    t_adam = _time(adam_step, device, args.warmup, args.repeats)
    t_bali = _time(bali_step, device, args.warmup, args.repeats)
    t_bali32 = _time(bali_step32, device, args.warmup, args.repeats)
    shares = _profile_shares(bali_step, device, max(3, args.repeats // 2))

    res = {
        "device": str(device) if device.type != "cuda" else f"cuda ({torch.cuda.get_device_name(device)})",
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "batch": args.batch,
        "architecture": f"{args.in_features}-" + "-".join(map(str, args.hidden)) + f"-{args.classes} leaky_tanh",
        "reparam": args.reparam,
        "stats_dtype": args.stats_dtype,
        "repeats": args.repeats,
        "adam_ms": 1e3 * statistics.median(t_adam),
        "bali_ms": 1e3 * statistics.median(t_bali),
        "bali_gram32_ms": 1e3 * statistics.median(t_bali32),
    }
    res["ratio_bali_over_adam"] = res["bali_ms"] / res["adam_ms"]
    res["ratio_bali_gram32_over_adam"] = res["bali_gram32_ms"] / res["adam_ms"]
    res["speedup_gram32"] = res["bali_ms"] / res["bali_gram32_ms"]
    res.update(shares)

    print(
        f"device {res['device']}, {res['threads']} threads, torch {res['torch']}, batch {res['batch']}, "
        f"{res['architecture']}, BALI-{args.reparam[0].upper()}, stats {args.stats_dtype}"
    )
    print(f"{'':<28}{'value':>12}")
    print(f"{'Adam step [ms]':<28}{res['adam_ms']:>12.2f}")
    print(f"{'BALI step [ms]':<28}{res['bali_ms']:>12.2f}")
    print(f"{'BALI step, float32 Gram [ms]':<28}{res['bali_gram32_ms']:>12.2f}")
    print(f"{'ratio BALI / Adam':<28}{res['ratio_bali_over_adam']:>12.2f}")
    print(f"{'ratio BALI f32 Gram / Adam':<28}{res['ratio_bali_gram32_over_adam']:>12.2f}")
    print(f"{'speed-up of float32 Gram':<28}{res['speedup_gram32']:>12.2f}")
    print(f"{'Cholesky share of BALI':<28}{100 * res['cholesky_share']:>11.1f}%")
    print(f"{'tri. solve share of BALI':<28}{100 * res['triangular_solve_share']:>11.1f}%")
    print(f"{'matmul share of BALI':<28}{100 * res['matmul_share']:>11.1f}%")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=2)
    return res


if __name__ == "__main__":
    main()
