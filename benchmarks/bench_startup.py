"""Start-up cost of a cell process (per-cell start-up; 2026-11-23, commit 139f3db): wall time in fresh subprocesses.

    python benchmarks/bench_startup.py [--repeats 5] [--src DIR] [--importtime] [--check-bits]

Rows (median and min over --repeats fresh processes, seconds):
  python -c pass               the interpreter alone
  import torch
  import reprokit.cell         torch + the package modules a cell imports before it builds anything
  first Adam step (default)    import torch + tiny MLP + Adam + one step, as torch does it: building the
                               optimiser imports torch._dynamo (Optimizer.add_param_group is wrapped by
                               torch._disable_dynamo); the breakdown shows where the time goes
  first Adam step (prepared)   the same after reprokit._startup.prepare()
  cell run                     `python -m reprokit.cell run` on a test-scale synthetic cell (no dataset files;
                               BBB on sinc: Adam, 10 steps), exactly as the workflow rule calls it
  cell run, KEEP_DYNAMO        the same with REPROKIT_KEEP_DYNAMO_IMPORT=1 (prepare() switched off)

--src DIR puts DIR first on PYTHONPATH (a patched copy of src/) for every row; with it, rows marked
"(installed)" run the installed package in the same rounds, for a before/after comparison.
"KEEP_DYNAMO_IMPORT=1" differs from the row above only where the cell entry point calls prepare().
--importtime prints the costliest imports on the cell path (python -X importtime, cumulative).
--check-bits trains a small model with Adam (weight decay, cosine schedule) + SGD (momentum) for 50
steps, with and without prepare(), in fresh processes, and compares the parameters' bytes.
The machine's load matters: run it on an otherwise idle machine and compare medians.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FIRST_STEP = r"""
import sys, time, json
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
if {prepare}:
    from reprokit import _startup
    _startup.prepare()
t2 = time.perf_counter()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
x, y = torch.randn(64, 8), torch.randn(64, 1)
t3 = time.perf_counter()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
t4 = time.perf_counter()
dyn_ctor = "torch._dynamo" in sys.modules
opt.zero_grad()
((model(x) - y) ** 2).mean().backward()
t5 = time.perf_counter()
opt.step()
t6 = time.perf_counter()
print(json.dumps({{"import_torch": t1 - t0, "prepare": t2 - t1, "optimizer_ctor": t4 - t3, "fwd_bwd": t5 - t4,
                  "first_step": t6 - t5, "dynamo_after_ctor": dyn_ctor, "dynamo_after_step": "torch._dynamo" in sys.modules}}))
"""

BITS = r"""
import hashlib, sys, torch
if {prepare}:
    from reprokit import _startup
    _startup.prepare()
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
opts = [torch.optim.Adam(m[0].parameters(), lr=1e-2, weight_decay=1e-3), torch.optim.SGD(m[2].parameters(), lr=1e-2, momentum=0.9)]
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opts[0], T_max=50)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for i in range(50):
    for o in opts:
        o.zero_grad()
    ((m(x) - y) ** 2).mean().backward()
    for o in opts:
        o.step()
    sched.step()
    if i == 25:
        opts[0].load_state_dict(opts[0].state_dict())
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in m.parameters())).hexdigest(), "torch._dynamo" in sys.modules)
"""


def _env(src: str | None, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    env.pop("REPROKIT_KEEP_DYNAMO_IMPORT", None)
    env.update(extra or {})
    return env


def _timed(cmd: list[str], env: dict, cwd: str) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dt, proc.stdout


def bench_cell_json() -> str:
    """The test-scale BBB cell on `sinc` (synthetic: no dataset files), resolved from the repo's config."""
    from reprokit.config import grid_of, load_config

    files = [REPO / "config" / "config.yaml", *sorted(glob.glob(str(REPO / "config" / "experiments" / "*.yaml")))]
    cfg = load_config(files, REPO / "workflow" / "schemas" / "config.schema.yaml")
    cell = grid_of(cfg, "bali_bbb_synthetic", "test").parse("method~bbb/dataset~sinc/kl_factor~1/seed~0")
    return json.dumps(cell.to_dict())


def _row(name: str, times: list[float], note: str = "") -> None:
    print(f"{name:<34} {statistics.median(times):7.3f} {min(times):7.3f}  {note}", flush=True)


def importtime_top(cmd: list[str], env: dict, cwd: str, n: int = 15) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd[1:]], env=env, cwd=cwd, capture_output=True, text=True
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum_us, name = line.split("|")
        rows.append((int(cum_us), len(name) - len(name.lstrip()), name.strip()))
    top = sorted((r for r in rows if r[1] <= 3), reverse=True)[:n]  # top-level imports and their children
    print("\nCostliest imports on the cell path (python -X importtime, cumulative ms; indent = nesting):")
    for cum, depth, name in top:
        print(f"  {cum / 1000:8.1f}  {' ' * (depth - 1)}{name}")
    for mod in (
        "pandas",
        "matplotlib",
        "seaborn",
        "scipy",
        "laplace",
        "gpytorch",
        "torchvision",
        "sympy",
        "torch._dynamo",
    ):
        hit = [r for r in rows if r[2] == mod]
        print(f"  {mod:<14} {'%.1f ms' % (hit[0][0] / 1000) if hit else 'not imported'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--src", default=None, help="put this folder first on PYTHONPATH (a patched copy of src/)")
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--check-bits", action="store_true")
    ap.add_argument("--skip-cell", action="store_true")
    args = ap.parse_args(argv)
    py = sys.executable
    env = _env(args.src)
    work = tempfile.mkdtemp(prefix="bench_startup_")
    cell = bench_cell_json()
    context = json.dumps({"mirrors": [], "cache_dir": None, "variants_dir": os.path.join(work, "variants")})

    def cell_cmd(i: int) -> list[str]:
        return [
            py,
            "-m",
            "reprokit.cell",
            "run",
            "--cell",
            cell,
            "--context",
            context,
            "--out",
            os.path.join(work, f"out{i}"),
            "--checkpoint",
            os.path.join(work, f"ckpt{i}", "c.pt"),
        ]

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.repeats} fresh processes per row, "
        f"rows interleaved (one process of each row per round, so load drifts hit all rows alike)"
    )
    import torch

    print(f"torch {torch.__version__}; PYTHONPATH first: {args.src or '(installed package)'}")
    fs = lambda prepare: [py, "-c", FIRST_STEP.format(prepare=prepare)]  # noqa: E731
    installed, keep = {"src": None}, {"REPROKIT_KEEP_DYNAMO_IMPORT": "1"}
    rows = {
        "python -c pass": ([py, "-c", "pass"], {}),
        "import torch": ([py, "-c", "import torch"], {}),
        "import reprokit.cell": ([py, "-c", "import reprokit.cell"], {}),
        "first Adam step (default)": (fs(False), {}),
        "first Adam step (prepared)": (fs(True), {}),
    }
    if args.src:
        rows["import reprokit.cell (installed)"] = ([py, "-c", "import reprokit.cell"], installed)
    if not args.skip_cell:
        rows["cell run (test BBB sinc)"] = ("cell", {})
        rows["cell run, KEEP_DYNAMO_IMPORT=1"] = ("cell", keep)
        if args.src:
            rows["cell run (installed)"] = ("cell", installed)
    times = {name: [] for name in rows}
    parts = {name: [] for name in rows}
    for r in range(args.repeats):
        for name, (cmd, extra) in rows.items():
            extra = dict(extra)
            src = extra.pop("src", args.src)
            dt, out = _timed(cell_cmd(r) if cmd == "cell" else cmd, _env(src, extra), work)
            times[name].append(dt)
            if name.startswith("first Adam"):
                parts[name].append(json.loads(out))
    print(f"{'':<34} {'median':>7} {'min':>7}  (seconds)")
    for name in rows:
        note = ""
        if parts[name]:
            med = {
                k: statistics.median(p[k] for p in parts[name])
                for k in ("import_torch", "prepare", "optimizer_ctor", "fwd_bwd", "first_step")
            }
            note = ", ".join(f"{k} {v:.3f}" for k, v in med.items())
        _row(name, times[name], note)
        if parts[name]:
            p = parts[name][0]
            print(
                f"{'':<51}torch._dynamo imported: after ctor {p['dynamo_after_ctor']}, after step {p['dynamo_after_step']}"
            )
    if args.importtime:
        importtime_top(cell_cmd(99), env, work)
    if args.check_bits:
        out = {p: _timed([py, "-c", BITS.format(prepare=p)], env, work)[1].split() for p in (False, True)}
        same = out[False][0] == out[True][0]
        print(
            f"\nbit-identity after 50 Adam+SGD steps: default {out[False][0][:16]} (dynamo {out[False][1]}), "
            f"prepared {out[True][0][:16]} (dynamo {out[True][1]}): {'IDENTICAL' if same else 'DIFFERENT'}"
        )
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
