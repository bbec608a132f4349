"""CPU cost of one paper-scale Partitioned step on MNIST, per phase, against plain torch and the CPU's throughput.

The cell's objects are built by the pipeline's own builder (`builders.affine_invariance.build_partitioned`) from the
paper-scale settings of a Fig. 3a Partitioned cell (MNIST CNN, batch 200, 20 augmentation samples, Schwoebel
augmentation, chunks [0.8, 0.1, 0.1], Adam), on synthetic MNIST-shaped data (no dataset read). One step of
`PartitionedHPO.train_step` is timed with process CPU time (one intra-op thread: not inflated by other
processes on a shared machine), its phases marked by wrapping the step's own calls (schedule draws, the
network's forward hooks, the optimisers' zero_grad / step), so the pipeline's code path runs unchanged:

  param step   draw      k and the minibatch indices (PartitionSchedule.param_step)
               augment   affine grid + grid_sample of S x B images (SeededAugmentedModel -> augmentation)
               forward   the partitioned CNN on S x B images, log-mean-softmax over S, the loss
               backward  gradients of the weights (psi is not differentiated)
               optimiser PartitionedAdam.step(k) (and the lr schedule, the loss's .item())
  psi step     the hyperparameter step: draw, augment, forward (subnetwork k-1), backward to psi, Adam on psi

Next to it, on the same machine and in the same process:
  plain   the same arithmetic in plain torch: the unpartitioned CNN (same shapes) on S x B pre-augmented
          images, forward + cross-entropy, backward, torch.optim.Adam; and for the psi step a forward and a
          backward to the input images only (what the psi step's backward computes, less the grid_sample)
  ideal   the FLOPs of the plain step (torch.utils.flop_counter) at the CPU's measured matmul rate (an
          achievable peak); the conv layers' own measured rates are printed beside it
  glibc   the pipeline's step under glibc's default malloc settings (large blocks mmapped and unmapped when
          freed, so every step page-faults its activations in again), i.e. without
          `runtime.retain_freed_memory`, which `Runtime.apply()` sets for a CPU cell since 2026-12-07. A
          heap cannot be put back as it was once it holds large free blocks, so this step runs in a child
          process that restores the defaults before its first step; its steps alternate with the others.

Timing runs in process CPU time (user + system: the kernel's page faults count); the plain step runs under the
same malloc settings as the pipeline's (retained).

    PYTHONPATH=src python benchmarks/bench_partitioned_step.py                # ~4 min on a busy 2-core CPU
    PYTHONPATH=src python benchmarks/bench_partitioned_step.py --repeats 1 --batch 20   # smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
CLOCK = time.process_time
PARAM_PHASES = ("draw", "augment", "forward", "backward", "optimiser")
PSI_PHASES = ("psi draw", "psi augment", "psi forward", "psi backward", "psi Adam")


def paper_cell(n_train: int = 1000, experiment: str = "fig3a"):
    """The paper-scale Partitioned cell (MNIST, not rotated, seed 0, n_train) and its typed settings."""
    from reprokit.config import grid_of, load_pipeline_config
    from reprokit.plan.affine_invariance import PLAN

    config = load_pipeline_config(REPO, {"scale": "paper"})
    for cell in grid_of(config, experiment, "paper").cells():
        c = cell.coord_dict
        if (c.get("method"), c.get("n_train"), bool(c.get("rotated")), c.get("seed")) == (
            "partitioned",
            n_train,
            False,
            0,
        ):
            return cell, PLAN.typed_settings(cell)
    raise SystemExit(f"no paper-scale {experiment} Partitioned cell with n_train={n_train}")


def build_partitioned(cell, st, batch: int, aug_samples: int, seed: int = 0):
    """`PartitionedHPO` of the cell, built by the pipeline's builder on random MNIST-shaped data."""
    from reprokit import seeds
    from reprokit.builders import affine_invariance as ai
    from reprokit.data.task import TaskData
    from reprokit.data.variants import chunk_assignment
    from reprokit.methods.standard import OptimConfig
    from reprokit.runtime import Runtime
    from reprokit.runtime_settings import RuntimeSettings

    rt = Runtime(RuntimeSettings(device="cpu")).apply()
    n = int(st.n_train)
    g = torch.Generator().manual_seed(seed)
    x, y = torch.rand((n, 1, 28, 28), generator=g), torch.randint(0, 10, (n,), generator=g)
    data = TaskData(x, y, x[:10], y[:10], task="classification", n_classes=10)
    chunk_ids = torch.as_tensor(chunk_assignment(n, st.chunks, seed)).long()
    optim = OptimConfig(optimizer=st.optimizer, lr=float(st.lr), weight_decay=float(st.weight_decay), batch_size=batch)
    torch.manual_seed(seeds.stream_seed(seed, "init"))
    gen = seeds.generator(seed, "augment", rt.device)
    no_eval = lambda *a, **k: None  # noqa: E731
    shared = ai.Shared(
        st, cell, rt, data, chunk_ids, optim, int(st.steps), 10**9, seed, aug_samples, None, 0, gen, {}, no_eval
    )
    return ai.build_partitioned(shared).method


def phase_step(m):
    """(function running one train_step and returning {phase: s}) with marks placed by wrappers."""
    marks: list[tuple[str, float]] = []
    state = {"psi": False}
    mark = lambda name: marks.append((name, CLOCK()))  # noqa: E731
    sched, net, opt, hopt = m.schedule, m.net, m.opt, m.hyper_opt

    def around(obj, name, before=None, after=None):
        fn = getattr(obj, name)

        def wrapped(*a, **k):
            if before:
                mark(before)
            out = fn(*a, **k)
            if after:
                mark(after)
            return out

        setattr(obj, name, wrapped)

    def param_draw(*a, **k):
        state["psi"] = False
        return draw_p(*a, **k)

    def hyper_draw(*a, **k):
        mark("optimiser")  # the parameter step's optimiser, lr schedule and .item() end here
        state["psi"] = True
        return draw_h(*a, **k)

    draw_p, draw_h = sched.param_step, sched.hyper_step
    sched.param_step, sched.hyper_step = param_draw, hyper_draw
    around(sched, "param_step", after="draw")
    around(sched, "hyper_step", after="psi draw")
    net.model.register_forward_pre_hook(lambda *_: mark("psi augment" if state["psi"] else "augment"))
    around(opt, "zero_grad", before="forward")
    around(opt, "step", before="backward")
    around(hopt, "zero_grad", before="psi forward")
    around(hopt, "step", before="psi backward", after="psi Adam")

    def run() -> dict[str, float]:
        marks.clear()
        t0 = CLOCK()
        m.train_step(0)
        t1 = CLOCK()
        out, prev = {}, t0
        for name, t in marks:
            out[name] = out.get(name, 0.0) + t - prev
            prev = t
        out["psi Adam"] = out.get("psi Adam", 0.0) + t1 - prev  # the psi loss's .item()
        out["total"] = t1 - t0
        return out

    return run


def _glibc_default_worker(conn, n_train: int, batch: int, aug_samples: int, threads: int) -> None:
    from reprokit.runtime import retain_freed_memory

    torch.set_num_threads(threads)
    cell, st = paper_cell(n_train)
    step = phase_step(build_partitioned(cell, st, batch, aug_samples))  # Runtime.apply() retains: undo it
    retain_freed_memory(False)  # before the first large block: glibc's defaults, as a cell before 2026-12-07
    while conn.recv():
        conn.send(step())


class GlibcDefaultStep:
    """The pipeline's step under glibc's default malloc settings, in a child process, one step per call."""

    def __init__(self, n_train: int, batch: int, aug_samples: int, threads: int):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_glibc_default_worker, args=(theirs, n_train, batch, aug_samples, threads))
        self.proc.start()

    def step(self) -> dict[str, float]:
        self.conn.send(True)
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(False)
        self.proc.join()


def plain_steps(n_images: int, seed: int = 0):
    """{name: fn} of the same arithmetic in plain torch on `n_images` pre-augmented images, phases timed."""
    from reprokit.models.registry import build_model

    torch.manual_seed(seed)
    net = build_model("mnist_cnn")
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.rand(n_images, 1, 28, 28)
    y = torch.randint(0, 10, (n_images,))
    params = list(net.parameters())

    def param() -> dict[str, float]:
        t0 = CLOCK()
        loss = F.cross_entropy(net(x), y)
        t1 = CLOCK()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = CLOCK()
        opt.step()
        t3 = CLOCK()
        return {"forward": t1 - t0, "backward": t2 - t1, "optimiser": t3 - t2}

    def psi() -> dict[str, float]:
        xi = x.detach().requires_grad_(True)
        t0 = CLOCK()
        loss = F.cross_entropy(net(xi), y)
        t1 = CLOCK()
        loss.backward(inputs=[xi])  # no weight gradients, as the psi step
        t2 = CLOCK()
        return {"psi forward": t1 - t0, "psi backward": t2 - t1}

    def flops() -> dict[str, int]:
        from torch.utils.flop_counter import FlopCounterMode

        out = {}
        for name, fn in (("param", param), ("psi", psi)):
            with FlopCounterMode(display=False) as fc:
                fn()
            out[name] = fc.get_total_flops()
        for p in params:
            p.grad = None
        return out

    return {"param": param, "psi": psi, "flops": flops}


def throughput(n_images: int, repeats: int = 3) -> dict[str, float]:
    """GFLOP/s of an fp32 matmul (2048^3) and of the CNN's two conv layers' forward at its shapes."""

    def rate(fn, flop):
        fn()
        times = []
        for _ in range(repeats):
            t0 = CLOCK()
            fn()
            times.append(CLOCK() - t0)
        return flop / statistics.median(times) / 1e9

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    x1, w1 = torch.randn(n_images, 1, 28, 28), torch.randn(20, 1, 5, 5)
    x2, w2 = torch.randn(n_images, 20, 14, 14), torch.randn(50, 20, 5, 5)
    return {
        "matmul": rate(lambda: a @ b, 2 * 2048**3),
        "conv1": rate(lambda: F.conv2d(x1, w1, padding=2), 2 * n_images * 20 * 28 * 28 * 25),
        "conv2": rate(lambda: F.conv2d(x2, w2, padding=2), 2 * n_images * 50 * 14 * 14 * 500),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=None, help="minibatch (default: the cell's, 200)")
    p.add_argument("--aug-samples", type=int, default=None, help="augmentation samples (default: the cell's, 20)")
    p.add_argument("--n-train", type=int, default=1000, help="which Fig. 3a cell (its training-set size)")
    p.add_argument("--repeats", type=int, default=2, help="timed steps (medians), after --warmup")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (a cell's)")
    p.add_argument(
        "--no-compare-heap",
        dest="compare_heap",
        action="store_false",
        help="skip the step under glibc's default malloc settings (a child process)",
    )
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    from reprokit.builders.update_timing import cpu_model_name

    cell, st = paper_cell(args.n_train)
    batch = args.batch or int(st.batch_size)
    s = args.aug_samples or int(st.aug_samples)
    images = batch * s
    step = phase_step(build_partitioned(cell, st, batch, s))
    plain = plain_steps(images)
    runs = {"pipeline": [], "plain": [], "glibc": []}
    child = GlibcDefaultStep(args.n_train, batch, s, args.threads) if args.compare_heap else None
    for rep in range(args.warmup + args.repeats):  # alternate them, so all see the same contention
        out = {"pipeline": step(), "plain": {**plain["param"](), **plain["psi"]()}}
        if child is not None:
            out["glibc"] = child.step()
        if rep >= args.warmup:
            for kind, r in out.items():
                runs[kind].append(r)
    if child is not None:
        child.close()
    flops = plain["flops"]()
    rates = throughput(images)

    def med(kind, phase):
        vals = [r.get(phase, 0.0) for r in runs[kind]]
        return 1e3 * statistics.median(vals)

    phases = (*PARAM_PHASES, *PSI_PHASES)
    total = med("pipeline", "total")
    plain_total = sum(med("plain", ph) for ph in ("forward", "backward", "optimiser", "psi forward", "psi backward"))
    plain_param = sum(med("plain", ph) for ph in ("forward", "backward", "optimiser"))
    param_total = sum(med("pipeline", ph) for ph in PARAM_PHASES)
    ideal = {k: 1e3 * v / (rates["matmul"] * 1e9) for k, v in flops.items()}
    ideal_total = sum(ideal.values())

    print(
        f"device: {cpu_model_name()}, {torch.get_num_threads()} intra-op thread(s); torch {torch.__version__}; "
        f"cell {cell.rel_dir} (batch {batch} x {s} augmentation samples = {images} images per forward); "
        f"process CPU time, medians of {args.repeats} steps after {args.warmup} warm-up"
    )
    print(
        f"throughput: matmul 2048^3 {rates['matmul']:.1f} GFLOP/s; conv1 (1->20, 5x5, 28x28) {rates['conv1']:.1f}, "
        f"conv2 (20->50, 5x5, 14x14) {rates['conv2']:.1f} GFLOP/s (forward, batch {images}); "
        f"plain step FLOPs: param {flops['param'] / 1e9:.1f} G, psi {flops['psi'] / 1e9:.1f} G"
    )
    glibc = args.compare_heap
    print(f"{'phase':<16}{'ms':>10}{'share':>8}{'plain ms':>11}" + (f"{'glibc-default ms':>18}" if glibc else ""))
    for ph in phases:
        pl = med("plain", ph) if ph in runs["plain"][0] else float("nan")
        row = f"{ph:<16}{med('pipeline', ph):>10.0f}{med('pipeline', ph) / total:>8.1%}{pl:>11.0f}"
        print(row + (f"{med('glibc', ph):>18.0f}" if glibc else ""))
    row = f"{'step (total)':<16}{total:>10.0f}{1:>8.0%}{plain_total:>11.0f}"
    print(row + (f"{med('glibc', 'total'):>18.0f}" if glibc else ""))
    ratios = {
        "step/plain": total / plain_total,
        "param/plain_param": param_total / plain_param,
        "step/ideal": total / ideal_total,
        "plain/ideal": plain_total / ideal_total,
    }
    print(
        f"ideal (plain FLOPs at the matmul rate): param {ideal['param']:.0f} ms + psi {ideal['psi']:.0f} ms = "
        f"{ideal_total:.0f} ms"
    )
    if glibc:
        ratios["glibc_default/step"] = statistics.median(
            g["total"] / r["total"] for g, r in zip(runs["glibc"], runs["pipeline"])
        )
    print("ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return {"total_ms": total, "plain_ms": plain_total, "ideal_ms": ideal_total, "rates": rates, **ratios}


if __name__ == "__main__":
    main(sys.argv[1:])
