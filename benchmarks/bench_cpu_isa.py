"""What pinning a CPU cell's instruction set costs: `run.cpu_isa` pinned (avx2) against native, side by side.

    python benchmarks/bench_cpu_isa.py [--rounds 3] [--steps 20] [--threads 1] [--settings native avx2 avx512]

Each setting runs in its own process (torch, oneDNN and MKL read the pin once, when torch loads:
reprokit.runtime_settings.pin_cpu_isa), `--rounds` times, the settings alternating so that a busy machine slows each
alike. A process times two representative CPU cell steps after warm-up, per step (median):

  cnn   the partitioned paper's MNIST CNN (Table 9, reprokit.models.MnistCNN): forward, cross-entropy,
        backward and Adam on a quick-scale batch (50 images x 2 augmentation samples = 100 images)
  bali  one BALI-W step (reprokit.bali.BaliTrainer) of the 2x256 Leaky-Tanh MLP on 256 MNIST-sized inputs

The table gives the median over the processes of each one's median step time, with their range (a shared
machine's noise), and digests, from fixed seeds, of the CNN's parameters after its steps and of the BALI model's
state: equal digests mean the settings give the same numbers on this CPU. It names the CPU, its vector flags and
torch's capability per setting, and says when the CPU has no AVX-512, where the avx2 pin is native and should
cost nothing. A setting the CPU lacks (avx512 on an AVX2 CPU) is left unpinned by pin_cpu_isa and so is skipped.
Measured on an AVX2 CPU only so far (docs/lab-notes.md, 2026-12-07); the cost on an AVX-512 CPU is still open.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from reprokit.runtime_settings import CPU_ISA_VARS, cpu_isas_supported, cpu_model, pin_cpu_isa


def _child(setting: str, steps: int, warmup: int, threads: int) -> dict:
    """One process of one setting: pin, then import torch and time the steps."""
    record = pin_cpu_isa(setting)  # before torch loads
    import hashlib

    import torch
    import torch.nn.functional as F

    from reprokit.bali import BaliConfig, BaliMLP, BaliTrainer
    from reprokit.models.mnist_cnn import MnistCNN
    from reprokit.runtime_settings import cpu_isa_record

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(100, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (100,), generator=gen)
    torch.manual_seed(0)
    cnn = MnistCNN()
    opt = torch.optim.Adam(cnn.parameters(), lr=1e-3)

    def cnn_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(cnn(x), y).backward()
        opt.step()

    xb = torch.rand(256, 784, generator=gen)
    yb = torch.randint(0, 10, (256,), generator=gen)
    cfg = BaliConfig(
        wishart_n="n_eff", alpha=0.25, beta=0.1, sigma_r2=10.0, n_eff=60000 / 50, n_iterations=30000, batch_size=256
    )
    torch.manual_seed(0)
    bali = BaliMLP(784, [256, 256], 10, "leaky_tanh", "classification", cfg)
    trainer = BaliTrainer(bali, generator=torch.Generator().manual_seed(0))

    def bali_step():
        trainer.step(xb, yb)

    def timed(fn) -> list[float]:
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    def digest(tensors) -> str:
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.detach().contiguous().numpy().tobytes())
        return h.hexdigest()[:16]

    t_cnn, t_bali = timed(cnn_step), timed(bali_step)
    return {
        "setting": setting,
        "cpu_isa": {**record, **cpu_isa_record()},
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cnn_ms": 1e3 * statistics.median(t_cnn),
        "bali_ms": 1e3 * statistics.median(t_bali),
        "cnn_digest": digest(cnn.parameters()),
        "bali_digest": digest(bali.state_dict().values()),
    }


def cpu_flags() -> list[str]:
    """The CPU's vector-extension flags (avx*, fma, amx*) from /proc/cpuinfo; [] where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return sorted(f for f in line.split(":", 1)[-1].split() if f.startswith(("avx", "fma", "amx")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", nargs="+", default=["native", "avx2", "avx512"])
    p.add_argument("--rounds", type=int, default=3, help="processes per setting, alternating")
    p.add_argument("--steps", type=int, default=20, help="timed steps per step kind and process")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write the result as JSON here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.steps, args.warmup, args.threads)))
        return 0

    has = cpu_isas_supported()
    settings = [s for s in args.settings if s == "native" or has is None or s in has]
    skipped = [s for s in args.settings if s not in settings]
    env = {k: v for k, v in os.environ.items() if k not in (*CPU_ISA_VARS, "REPROKIT_CPU_ISA")}  # each child pins
    runs: dict[str, list[dict]] = {s: [] for s in settings}
    for r in range(args.rounds):
        for s in settings if r % 2 == 0 else settings[::-1]:
            cmd = [sys.executable, __file__, "--child", s, "--steps", str(args.steps), "--warmup", str(args.warmup)]
            out = subprocess.run(
                [*cmd, "--threads", str(args.threads)], capture_output=True, text=True, env=env, check=True
            )
            runs[s].append(json.loads(out.stdout.strip().splitlines()[-1]))

    flags = cpu_flags()
    print(f"CPU: {cpu_model(with_family=True)}; vector flags: {' '.join(flags) or 'unknown'}")
    if "avx512f" not in flags:
        print("This CPU has no AVX-512: native dispatch is AVX2 already, so the avx2 pin is expected to cost nothing.")
    if skipped:
        print(f"Skipped (this CPU lacks them, pin_cpu_isa would leave them unpinned): {', '.join(skipped)}")
    first = runs[settings[0]][0]
    print(f"torch {first['torch']}, {first['threads']} thread(s); {args.rounds} processes x {args.steps} steps each")
    print()
    print(
        f"{'setting':<8} {'torch ISA':<9} {'ATEN / ONEDNN / MKL_ENABLE / MKL_CBWR':<36} "
        f"{'cnn ms (range)':>20} {'bali ms (range)':>20}  digests"
    )
    summary = {}
    for s in settings:
        rs = runs[s]
        isa = rs[0]["cpu_isa"]
        cnn = statistics.median(r["cnn_ms"] for r in rs)
        bali = statistics.median(r["bali_ms"] for r in rs)
        digests = sorted({(r["cnn_digest"], r["bali_digest"]) for r in rs})
        envs = " / ".join(str(isa[k]) for k in CPU_ISA_VARS)
        spread = {k: (min(r[k] for r in rs), max(r[k] for r in rs)) for k in ("cnn_ms", "bali_ms")}
        print(
            f"{s:<8} {isa['torch_capability']!s:<9} {envs:<36} "
            + "".join(
                f"{m:8.1f} ({lo:5.1f}-{hi:5.1f})"
                for m, (lo, hi) in ((cnn, spread["cnn_ms"]), (bali, spread["bali_ms"]))
            )
            + "  "
            + ", ".join(f"{c}/{b}" for c, b in digests)
        )
        summary[s] = {"cnn_ms": cnn, "bali_ms": bali, "digests": digests, "cpu_isa": isa, "runs": rs}
    if "native" in summary:
        print()
        base = summary["native"]
        for s in settings:
            if s == "native":
                continue
            same = summary[s]["digests"] == base["digests"]
            print(
                f"{s} / native: cnn {summary[s]['cnn_ms'] / base['cnn_ms']:.3f}x, "
                f"bali {summary[s]['bali_ms'] / base['bali_ms']:.3f}x time per step; "
                f"numbers {'identical' if same else 'DIFFERENT'} to native's on this CPU"
            )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"cpu": cpu_model(with_family=True), "flags": flags, "settings": summary}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
