"""Why is a BALI classifier over- or under-confident? Re-evaluate one BALI cell's checkpoint with its posterior
changed after the fact, side by side, in one process:

* ``as trained``: the cell's own predictive (posterior weight samples, BALI-W);
* ``mean weights``: the posterior mean only (no weight noise), a MAP-like predictive;
* ``Sigma x n/n_eff``: every layer's Sigma (the inverse-Wishart mode, Eq. 21) scaled by its
  (u_0 + N + d_y + 1) / (u_0 + N_eff + d_y + 1), what `wishart_n: n_eff` would give the same means and the same U
  (35-49 on MNIST, N / N_eff = 50) -- a post-hoc look at that reading, not a run of it: under n_eff training the
  pseudo-targets also see the wider samples, so the means differ too; ``Sigma x k`` for further factors --k.

For each: test NLL, accuracy, ECE and the OOD AUROC (negative predictive entropy, ID test split positive, the
OOD dataset's test split negative), with the cell's own evaluation code (same subsets, streams and sample
counts unless --samples is given). Prints a table and writes --out (JSON). Standalone, not a test:

    python benchmarks/bali_ood_diagnostic.py --experiment bali_cls_image --scale paper \\
        --cell method~bali/dataset~mnist/seed~0 [--checkpoint checkpoints/paper/.../checkpoint.pt] [--k 50]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from reprokit.cell import context_from_dict
from reprokit.config import grid_of, load_pipeline_config
from reprokit.job import cell_job
from reprokit.plan import kind as plan_of_kind


def n_eff_ratio(layer, n: float, n_eff: float) -> float:
    """Sigma under `wishart_n: n` over Sigma under `n_eff` for the same U: (u_0 + N + d_y + 1) / (u_0 + N_eff + d_y + 1)."""
    return (layer.u0 + n + layer.dy + 1) / (layer.u0 + n_eff + layer.dy + 1)


def scaled(model, k: float | None, n: float, n_eff: float):
    """Scale every BALI layer's Sigma by k (None: by its own n / n_eff ratio) in place; returns a function that
    undoes it."""
    saved = [(layer, layer.sigma.clone(), layer.chol_sigma.clone()) for layer in model.layers]
    for layer in model.layers:
        f = n_eff_ratio(layer, n, n_eff) if k is None else k
        layer.sigma.mul_(f)
        layer.chol_sigma.mul_(f**0.5)

    def undo():
        for layer, s, c in saved:
            layer.sigma.copy_(s)
            layer.chol_sigma.copy_(c)

    return undo


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiment", default="bali_cls_image")
    p.add_argument("--scale", default="paper")
    p.add_argument(
        "--cell", required=True, help="the cell's coordinates as in its path, e.g. method~bali/dataset~mnist/seed~0"
    )
    p.add_argument(
        "--checkpoint", default=None, help="default: the config's checkpoints/<scale>/<experiment>/<cell>/checkpoint.pt"
    )
    p.add_argument("--k", type=float, nargs="*", default=[], help="further Sigma factors, the same in every layer")
    p.add_argument("--samples", type=int, default=None, help="posterior samples (default: the cell's final_samples)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    cfg = load_pipeline_config(REPO, {"scale": args.scale})
    cell = grid_of(cfg, args.experiment, args.scale).parse(args.cell)
    plan = plan_of_kind(cell.kind)
    job = cell_job(cell, cfg, download=False)  # what the cell rule runs
    ctx = context_from_dict(job.context, job.variants)
    ctx.runtime.apply()
    run = plan.build(cell, ctx)
    method = run.method
    ckpt_path = Path(args.checkpoint or job.checkpoint)
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    method.load_state_dict(ckpt["method"])
    model = method.model
    n, n_eff = method.config.n_data, method.config.n_eff
    ratios = [n_eff_ratio(layer, n, n_eff) for layer in model.layers]
    ev = run.evaluation.final.__self__  # the cell's ClassificationEvaluation
    if args.samples is not None:
        ev.final_samples = int(args.samples)
    print(
        f"{cell.rel_dir}: checkpoint step {ckpt['step']} of {run.n_steps}; wishart_n {method.config.wishart_n}; "
        f"N {n:g}, N_eff {n_eff:g}; n/n_eff Sigma ratio per layer {', '.join(f'{r:.1f}' for r in ratios)}; "
        f"{ev.final_samples} samples",
        flush=True,
    )

    rows = {}
    t0 = time.monotonic()
    rows["as trained"] = ev.final_metrics()
    method.eval_reparam = "mean"
    rows["mean weights"] = ev.final_metrics()
    method.eval_reparam = None
    for k in [None, *args.k]:
        undo = scaled(model, k, n, n_eff)
        rows["Sigma x n/n_eff" if k is None else f"Sigma x {k:g}"] = ev.final_metrics()
        undo()
    keys = ["test_nll", "test_acc", "test_ece", "ood_auroc", "ood_entropy_id", "ood_entropy_ood"]
    print(f"{'predictive':>16} " + " ".join(f"{k:>15}" for k in keys))
    for name, m in rows.items():
        print(f"{name:>16} " + " ".join(f"{m.get(k, float('nan')):>15.4f}" for k in keys))
    print(f"({time.monotonic() - t0:.0f} s; device cpu, {args.threads} thread(s))")
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "cell": cell.rel_dir,
                    "step": int(ckpt["step"]),
                    "n_steps": run.n_steps,
                    "samples": ev.final_samples,
                    "ratios": ratios,
                    "rows": rows,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
