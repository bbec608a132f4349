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

Every step runs under the runtime's precision (reprokit.runtime.Runtime: device, fp32 | tf32 | bf16 =
autocast + channels_last for conv nets), as the training loop runs it. Repetitions alternate the steps
(order rotated each repetition), after warm-up; each step is timed with the wall clock between
`rt.synchronize()` calls; the table shows medians and the ratios of the per-repetition times.
All optimisers are Adam (the ResNets' paper runs use SGD; the step cost is dominated by the network).

    # CPU smoke run (this 2-core machine: a few seconds per model)
    python benchmarks/bench_throughput.py --device cpu --threads 1 --batch 4 --repeats 3 --warmup 1
    # a GPU, every precision, paper batch sizes, costs into the budget table
    python benchmarks/bench_throughput.py --precision all --write-costs --profile h100

Goals (issue 10, on a GPU): standard <= 1.1 x plain; bf16 >= 1.5 x faster than fp32 for the ResNets;
param <= 1.05 x standard.
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

from reprokit.augment.affine import build_augmentation
from reprokit.methods.augmented import SeededAugmentedModel
from reprokit.data.task import TaskData
from reprokit.methods.partitioned import PartitionedConfig, PartitionedTraining, hyper_update, param_update
from reprokit.methods.standard import OptimConfig, StandardTraining
from reprokit.models.registry import build_model
from reprokit.partition import partition
from reprokit.runtime import PRECISIONS, Runtime, RuntimeSettings

# model -> (paper batch, input shape, augmentation parametrisation)
MODELS = {
    "mnist_cnn": (200, (1, 28, 28), "schwobel"),
    "fixup_resnet8": (250, (3, 32, 32), "immer"),
    "fixup_resnet14": (250, (3, 32, 32), "immer"),
    "resnet50_gn": (250, (3, 64, 64), "immer"),  # Fig. 3c (TinyImageNet); not in the goals
    "wrn20_gn": (250, (3, 32, 32), "immer"),  # Table 3 (feature extractor as psi); not in the goals
}
GOAL_MODELS = ("mnist_cnn", "fixup_resnet8", "fixup_resnet14")
STEPS = ("plain", "standard", "param", "hyper")
GOAL_PIPELINE, GOAL_BF16, GOAL_PARAM = 1.1, 1.5, 1.05


def device_label(rt: Runtime, threads: int) -> str:
    if rt.is_cuda:
        return rt.device_name()
    from reprokit.experiments.update_timing import cpu_model_name

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
    plain_gen = rt.generator(seed + 10)
    perm_gen = rt.generator(seed + 11)

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
    std_net = SeededAugmentedModel(rt.model(base), aug_std, n_aug, rt.generator(seed + 3))
    std = StandardTraining(std_net, data, optim, 10**6, seed)

    # pipeline: partitioned network, psi = augmentation ranges (3 chunks, as Fig. 3)
    props = [0.8, 0.1, 0.1]
    pmodel = rt.model(partition(pbase, props, scheme="random", default="init", seed=seed))
    aug_p = rt.to(build_augmentation(aug_kind, init=0.1))
    p_net = SeededAugmentedModel(pmodel, aug_p, n_aug, rt.generator(seed + 3))
    chunks = torch.as_tensor([0] * (8 * n // 10) + [1] * (n // 10) + [2] * (n - 8 * n // 10 - n // 10))
    part = PartitionedTraining(p_net, pmodel, list(aug_p.parameters()), data, chunks,
                               PartitionedConfig(chunk_proportions=props, optim=optim), 10**6, seed)

    def param():
        k, idx = part.schedule.param_step(batch)
        param_update(part.pmodel, part.opt, k, part._batch_loss(idx), part.weight_params)

    def hyper():
        k, idx = part.schedule.hyper_step(batch)
        hyper_update(part.pmodel, part.hyper_opt, k, part._batch_loss(idx), part.hyper_params)

    std_net.train(), p_net.train()
    return {"plain": plain, "standard": lambda: std.train_step(0), "param": param, "hyper": hyper}


def time_steps(steps: dict, rt: Runtime, warmup: int, repeats: int) -> dict[str, list[float]]:
    names = list(steps)
    times = {s: [] for s in names}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for rep in range(warmup + repeats):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for s in order:
                rt.synchronize()
                t0 = time.perf_counter()
                with rt.autocast():
                    steps[s]()
                rt.synchronize()
                if rep >= warmup:
                    times[s].append(time.perf_counter() - t0)
    finally:
        if gc_was:
            gc.enable()
    return times


def ratio(times: dict, a: str, b: str) -> float:
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
            times = time_steps(make_steps(model, rt, batch, args.aug_samples, args.seed), rt, args.warmup, args.repeats)
            med = {s: 1e3 * statistics.median(t) for s, t in times.items()}
            rows.append({"device": dev, "precision": precision, "model": model, "batch": batch,
                         "aug_samples": args.aug_samples, "images": batch * args.aug_samples,
                         **{f"{s}_ms": med[s] for s in STEPS},
                         "partitioned_ms": med["param"] + med["hyper"],
                         "standard_over_plain": ratio(times, "standard", "plain"),
                         "param_over_standard": ratio(times, "param", "standard"),
                         "repeats": args.repeats, "torch": torch.__version__, "profile": args.profile or rt.device.type})
    print(f"device: {rows[0]['device']}; torch {torch.__version__}; {args.repeats} repetitions after {args.warmup} "
          f"warm-up, medians; images per step = batch x {args.aug_samples} augmentation samples")
    print(f"{'model':<16}{'prec':<6}{'batch':>6}{'plain ms':>10}{'standard':>10}{'param':>9}{'hyper':>9}"
          f"{'std/plain':>11}{'param/std':>11}")
    for r in rows:
        print(f"{r['model']:<16}{r['precision']:<6}{r['batch']:>6}{r['plain_ms']:>10.1f}{r['standard_ms']:>10.1f}"
              f"{r['param_ms']:>9.1f}{r['hyper_ms']:>9.1f}{r['standard_over_plain']:>11.3f}{r['param_over_standard']:>11.3f}")
    where = "" if rt.is_cuda else " - this ran on a CPU: the goals are for a GPU, shown for reference"
    print(f"goals (GPU): std/plain <= {GOAL_PIPELINE}; param/std <= {GOAL_PARAM}; "
          f"ResNets bf16 >= {GOAL_BF16}x faster than fp32 (plain step){where}")
    for r in rows:
        ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
        print(f"  {r['model']:<16}{r['precision']:<6}pipeline {ok(r['standard_over_plain'] <= GOAL_PIPELINE)}, "
              f"param update {ok(r['param_over_standard'] <= GOAL_PARAM)}")
    for model in args.models:
        fp32 = next((r for r in rows if r["model"] == model and r["precision"] == "fp32"), None)
        bf16 = next((r for r in rows if r["model"] == model and r["precision"] == "bf16"), None)
        if fp32 and bf16:
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
        write_costs([{"profile": r["profile"], "device": r["device"], "model": r["model"], "step": s,
                      "precision": r["precision"], "images": r["images"], "ms_per_step": r[f"{s}_ms"],
                      "source": f"benchmarks/bench_throughput.py (batch {r['batch']}, {r['repeats']} repeats)",
                      "date": today}
                     for r in rows for s in (*STEPS, "partitioned")])
        print("step costs written to reprokit/data/step_costs.tsv")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
