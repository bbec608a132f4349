"""Throughput of one training step: the pipeline's own methods next to a plain hand-written torch step.

For each model (MNIST CNN, FixUp ResNet-8, ResNet-14) at the paper's batch (200 MNIST, 250 CIFAR-10;
config/experiments/mnist_invariance.yaml) x 20 augmentation samples, one process times, on random
images of the model's input shape:

  plain     hand-written: sample S affine augmentations with the same module (same generator stream
            kind), forward S x B images, cross-entropy on every augmented image, backward, Adam step
  standard  the pipeline's baseline step: StandardTraining.train_step on a SeededAugmentedModel
            (augmentation held fixed, predictive probabilities averaged over the S samples)
  param     partitioned parameter update: methods.partitioned.param_update of a partition()-ed copy
            (PartitionedTraining's own schedule, optimiser and loss)
  hyper     partitioned hyperparameter update: methods.partitioned.hyper_update (psi only)
  lila_hyper  Diff. Laplace hyperparameter step (only with --steps ... lila_hyper): DiffLaplaceTraining's own
            hyper_step, the KFAC(+ diagonal)-GGN marginal likelihood of a batch x S augmentation samples,
            differentiated w.r.t. (psi, log prior precision), one Adam step; it costs 10-20 standard steps
            on a CPU, so it runs in the last --lila-warmup warm-up and the first --lila-repeats repetitions

Every step runs under the runtime's precision (reprokit.runtime.Runtime: device, fp32 | tf32 | bf16 =
autocast + channels_last for conv nets), as the training loop runs it. Repetitions alternate the steps
(order rotated each repetition), after warm-up; each step is timed with the wall clock (--clock cpu: process CPU time) between
`rt.synchronize()` calls; the table shows medians and the ratios of the per-repetition times.
All optimisers are Adam (the ResNets' paper runs use SGD; the step cost is dominated by the network).

    # CPU smoke run (this 2-core machine: a few seconds per model)
    python benchmarks/bench_throughput.py --device cpu --threads 1 --batch 4 --repeats 3 --warmup 1
    # the Diff. Laplace hyper step next to the standard one, into the budget table (CPU profile)
    python benchmarks/bench_throughput.py --device cpu --threads 1 --clock cpu --batch 20 \
        --steps standard lila_hyper --repeats 5 --warmup 1 --lila-repeats 3 --write-costs --cost-steps lila_hyper
    # a GPU, every precision, paper batch sizes, costs into the budget table
    python benchmarks/bench_throughput.py --precision all --write-costs --profile h100

Goals (on a GPU; stated 2026-11-23, commit e95b00c): standard <= 1.1 x plain; bf16 >= 1.5 x faster than fp32
for the ResNets; param <= 1.05 x standard.
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime
import gc
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from reprokit import seeds
from reprokit.augment.affine import build_augmentation
from reprokit.data.task import TaskData
from reprokit.methods.augmented import SeededAugmentedModel
from reprokit.methods.diff_laplace import DiffLaplaceTraining
from reprokit.methods.partitioned import PartitionedConfig, PartitionedTraining, hyper_update, param_update
from reprokit.methods.standard import OptimConfig, StandardTraining
from reprokit.models.registry import build_model
from reprokit.partition import partition
from reprokit.runtime import Runtime
from reprokit.runtime_settings import PRECISIONS, RuntimeSettings

# model -> (paper batch, input shape, augmentation parametrisation)
MODELS = {
    "mnist_cnn": (200, (1, 28, 28), "schwobel"),
    "fixup_resnet8": (250, (3, 32, 32), "immer"),
    "fixup_resnet14": (250, (3, 32, 32), "immer"),
    "resnet50_gn": (250, (3, 64, 64), "immer"),  # Fig. 3c (TinyImageNet); not in the goals above
    "resnet9_gn": (32, (3, 32, 32), "immer"),  # Table 4 (federated CIFAR10, batch 32); 2026-11-23, commit 0e6871d
    "wrn20_gn": (250, (3, 32, 32), "immer"),  # Table 3 (feature extractor as psi); not in the goals above
}
GOAL_MODELS = ("mnist_cnn", "fixup_resnet8", "fixup_resnet14")
STEPS = ("plain", "standard", "param", "hyper")
OPTIONAL_STEPS = ("lila_hyper",)
GOAL_PIPELINE, GOAL_BF16, GOAL_PARAM = 1.1, 1.5, 1.05


def device_label(rt: Runtime, threads: int) -> str:
    if rt.is_cuda:
        return rt.device_name()
    from reprokit.builders.update_timing import cpu_model_name

    return f"{cpu_model_name()}, {threads} thread{'s' if threads != 1 else ''}"


def make_steps(model_name: str, rt: Runtime, batch: int, n_aug: int, seed: int) -> dict:
    """{step: no-argument function running one step} for one model, all on `rt`'s device."""
    _, shape, aug_kind = MODELS[model_name]
    torch.manual_seed(seed)
    n = 10 * batch  # a few batches of random images, on the device once (every chunk non-empty)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((n, *shape), generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    data = rt.to(TaskData(x, y, x[:batch], y[:batch], task="classification", n_classes=10))
    optim = OptimConfig(optimizer="adam", lr=1e-3, batch_size=batch)

    # plain torch
    plain_net = rt.model(build_model(model_name))
    plain_aug = rt.to(build_augmentation(aug_kind, init=0.1))
    plain_opt = torch.optim.Adam(plain_net.parameters(), lr=1e-3)
    plain_gen = rt.generator(seeds.stream_seed(seed, "augment"))
    perm_gen = rt.generator(seeds.stream_seed(seed, "minibatches"))

    def plain():
        idx = torch.randint(0, n, (batch,), device=rt.device, generator=perm_gen)
        xb, yb = data.x_train[idx], data.y_train[idx]
        with torch.no_grad():
            xa = plain_aug(xb, n_aug, generator=plain_gen).reshape(n_aug * batch, *shape)
        loss = F.cross_entropy(plain_net(xa), yb.repeat(n_aug))
        plain_opt.zero_grad(set_to_none=True)
        loss.backward()
        plain_opt.step()

    # pipeline: standard training with a fixed augmentation (baseline / retrain / random cells' step)
    base = build_model(model_name)
    pbase = copy.deepcopy(base)
    aug_std = rt.to(build_augmentation(aug_kind, init=0.1))
    aug_std.set_fixed(aug_std.ranges())
    std_net = SeededAugmentedModel(rt.model(base), aug_std, n_aug, rt.generator(seeds.stream_seed(seed, "augment")))
    std = StandardTraining(std_net, data, optim, 10**6, seed)

    # pipeline: partitioned network, psi = augmentation ranges (3 chunks, as Fig. 3)
    props = [0.8, 0.1, 0.1]
    pmodel = rt.model(partition(pbase, props, scheme="random", default="init", seed=seed))
    aug_p = rt.to(build_augmentation(aug_kind, init=0.1))
    p_net = SeededAugmentedModel(pmodel, aug_p, n_aug, rt.generator(seeds.stream_seed(seed, "augment")))
    chunks = torch.as_tensor([0] * (8 * n // 10) + [1] * (n // 10) + [2] * (n - 8 * n // 10 - n // 10))
    part = PartitionedTraining(
        p_net,
        pmodel,
        list(aug_p.parameters()),
        data,
        chunks,
        PartitionedConfig(chunk_proportions=props, optim=optim),
        10**6,
        seed,
    )

    def param():
        k, idx = part.schedule.param_step(batch)
        param_update(part.pmodel, part.opt, k, part._batch_loss(idx), part.weight_params)

    def hyper():
        k, idx = part.schedule.hyper_step(batch)
        hyper_update(part.pmodel, part.hyper_opt, k, part._batch_loss(idx), part.hyper_params)

    # pipeline: Diff. Laplace (LILA), psi = augmentation ranges, one prior precision per parameter tensor
    aug_dl = rt.to(build_augmentation(aug_kind, init=0.1))
    dl_net = SeededAugmentedModel(
        rt.model(build_model(model_name)), aug_dl, n_aug, rt.generator(seeds.stream_seed(seed, "augment"))
    )
    dl = DiffLaplaceTraining(
        dl_net, data, optim, 10**6, seed, marglik_batch_size=batch, n_aug_marglik=n_aug, evaluate_fn=dict
    )

    std_net.train(), p_net.train(), dl_net.train()
    return {
        "plain": plain,
        "standard": lambda: std.train_step(0),
        "param": param,
        "hyper": hyper,
        "lila_hyper": dl.hyper_step,
    }


def time_steps(
    steps: dict,
    rt: Runtime,
    warmup: int,
    repeats: int,
    limits: dict[str, tuple[int, int]] | None = None,
    clock=time.perf_counter,
) -> dict[str, list[float]]:
    """Per step, its timed repetitions' seconds. `limits`: step -> (warm-up, timed) repetitions that run it
    (the last warm-up and the first timed ones); every other step runs in all of them. `clock`: the wall
    clock, or time.process_time (CPU time: on a shared CPU with one intra-op thread, not inflated by
    other processes)."""
    names = list(steps)
    times = {s: [] for s in names}
    limits = limits or {}

    def runs(s, rep):
        lw, lr = limits.get(s, (warmup, repeats))
        return warmup - lw <= rep < warmup + lr

    gc_was = gc.isenabled()
    gc.disable()
    try:
        for rep in range(warmup + repeats):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for s in [s for s in order if runs(s, rep)]:
                rt.synchronize()
                t0 = clock()
                with rt.autocast():
                    steps[s]()
                rt.synchronize()
                if rep >= warmup:
                    times[s].append(clock() - t0)
    finally:
        if gc_was:
            gc.enable()
    return times


def ratio(times: dict, a: str, b: str) -> float:
    """Median per-repetition ratio a / b (over the repetitions both ran: a limited step runs in the first ones)."""
    if a not in times or b not in times:
        return float("nan")
    return statistics.median(ta / tb for ta, tb in zip(times[a], times[b]))


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--precision", default="fp32", help=f"{', '.join(PRECISIONS)} or all")
    p.add_argument("--models", nargs="+", default=list(GOAL_MODELS), choices=list(MODELS))
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the paper's per model)")
    p.add_argument("--aug-samples", type=int, default=20)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="also write the table as CSV here")
    p.add_argument("--write-costs", action="store_true", help="add the medians to reprokit's step-cost table")
    p.add_argument("--profile", default=None, help="profile name of the written rows (default: cpu or cuda)")
    p.add_argument(
        "--steps",
        nargs="+",
        default=list(STEPS),
        choices=[*STEPS, *OPTIONAL_STEPS],
        help="steps to time (lila_hyper: the Diff. Laplace hyper step, not timed by default)",
    )
    p.add_argument("--lila-warmup", type=int, default=1, help="warm-up repetitions with lila_hyper (the last ones)")
    p.add_argument("--lila-repeats", type=int, default=3, help="timed repetitions with lila_hyper (the first ones)")
    p.add_argument(
        "--clock",
        default="wall",
        choices=["wall", "cpu"],
        help="wall clock (after synchronisation), or process CPU time (CPU only; use with --threads 1)",
    )
    p.add_argument(
        "--cost-steps",
        nargs="+",
        default=None,
        help="with --write-costs: write only these steps' rows (default: every step timed)",
    )
    args = p.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    precisions = list(PRECISIONS) if args.precision == "all" else [args.precision]
    rows = []
    for precision in precisions:
        rt = Runtime(RuntimeSettings(device=args.device, precision=precision)).apply()
        dev = device_label(rt, torch.get_num_threads())
        for model in args.models:
            batch = args.batch or MODELS[model][0]
            all_steps = make_steps(model, rt, batch, args.aug_samples, args.seed)
            steps = {s: all_steps[s] for s in args.steps}
            limits = {"lila_hyper": (min(args.lila_warmup, args.warmup), min(args.lila_repeats, args.repeats))}
            if args.clock == "cpu" and rt.is_cuda:
                raise SystemExit("--clock cpu cannot time CUDA kernels; use --clock wall")
            clock = time.process_time if args.clock == "cpu" else time.perf_counter
            times = time_steps(steps, rt, args.warmup, args.repeats, limits, clock)
            med = {s: 1e3 * statistics.median(t) for s, t in times.items()}
            if "param" in med and "hyper" in med:
                med["partitioned"] = med["param"] + med["hyper"]
            rows.append(
                {
                    "device": dev,
                    "precision": precision,
                    "model": model,
                    "batch": batch,
                    "aug_samples": args.aug_samples,
                    "images": batch * args.aug_samples,
                    **{f"{s}_ms": v for s, v in med.items()},
                    "standard_over_plain": ratio(times, "standard", "plain"),
                    "param_over_standard": ratio(times, "param", "standard"),
                    "lila_hyper_over_standard": ratio(times, "lila_hyper", "standard"),
                    "repeats": args.repeats,
                    "repeats_of": {s: len(t) for s, t in times.items()},
                    "torch": torch.__version__,
                    "profile": args.profile or rt.device.type,
                }
            )
    print(
        f"device: {rows[0]['device']}; torch {torch.__version__}; {args.repeats} repetitions after {args.warmup} "
        f"warm-up ({args.lila_repeats} after {args.lila_warmup} for lila_hyper), medians; images per step = "
        f"batch x {args.aug_samples} augmentation samples; clock: {args.clock}"
    )
    shown = [s for s in (*STEPS, *OPTIONAL_STEPS) if s in args.steps]
    print(
        f"{'model':<16}{'prec':<6}{'batch':>6}"
        + "".join(f"{s + ' ms':>14}" for s in shown)
        + f"{'std/plain':>11}{'param/std':>11}{'lila/std':>10}"
    )
    for r in rows:
        print(
            f"{r['model']:<16}{r['precision']:<6}{r['batch']:>6}"
            + "".join(f"{r[s + '_ms']:>14.1f}" for s in shown)
            + f"{r['standard_over_plain']:>11.3f}{r['param_over_standard']:>11.3f}{r['lila_hyper_over_standard']:>10.2f}"
        )
    where = "" if rt.is_cuda else " - this ran on a CPU: the goals are for a GPU, shown for reference"
    print(
        f"goals (GPU): std/plain <= {GOAL_PIPELINE}; param/std <= {GOAL_PARAM}; "
        f"ResNets bf16 >= {GOAL_BF16}x faster than fp32 (plain step){where}"
    )
    for r in rows if {"plain", "standard", "param"} <= set(args.steps) else []:
        ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
        print(
            f"  {r['model']:<16}{r['precision']:<6}pipeline {ok(r['standard_over_plain'] <= GOAL_PIPELINE)}, "
            f"param update {ok(r['param_over_standard'] <= GOAL_PARAM)}"
        )
    for model in args.models:
        fp32 = next((r for r in rows if r["model"] == model and r["precision"] == "fp32"), None)
        bf16 = next((r for r in rows if r["model"] == model and r["precision"] == "bf16"), None)
        if fp32 and bf16 and "plain" in args.steps:
            speedup = fp32["plain_ms"] / bf16["plain_ms"]
            goal = f"goal >= {GOAL_BF16}" if model.startswith("fixup") else "no goal"
            print(f"  {model:<16}bf16 speed-up over fp32 (plain): {speedup:.2f}x ({goal})")
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if args.write_costs:
        from reprokit.budget import write_costs

        today = datetime.date.today().isoformat()
        write_costs(
            [
                {
                    "profile": r["profile"],
                    "device": r["device"],
                    "model": r["model"],
                    "step": s,
                    "precision": r["precision"],
                    "images": r["images"],
                    "ms_per_step": r[f"{s}_ms"],
                    "source": f"benchmarks/bench_throughput.py (batch {r['batch']}, "
                    f"{r['repeats_of'].get(s, r['repeats'])} repeats"
                    + (", process CPU time)" if args.clock == "cpu" else ")"),
                    "date": today,
                }
                for r in rows
                for s in (*STEPS, "partitioned", *OPTIONAL_STEPS)
                if f"{s}_ms" in r and (args.cost_steps is None or s in args.cost_steps)
            ]
        )
        print("step costs written to reprokit/data/step_costs.tsv")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
