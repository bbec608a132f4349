"""Size a scale's cells against their targets: run chosen cells with settings changed, into a scratch folder.

The quick budget is sized by design (each artefact's `targets:` in config/experiments/*.yaml say what its
cells must reach). This runs cells of one experiment at a scale with `--set key=value` overrides of that
scale's settings (values parsed as YAML), through the pipeline's own cell command and job
(reprokit.job.cell_job), into `--out` (results, checkpoints, logs), and prints each cell's learning
curve for `--metric`: how many iterations reach the target, before the config is changed.

    python benchmarks/size_cells.py --experiment sens_mnist_c2 --scale quick \\
        --where param_proportions=8-1 chunk_proportions=8-1 --set n_steps=3000 eval_every=250 --metric test_acc

Nothing it writes is a result of the pipeline: the scratch folder is outside results/ and never archived.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from run_cells import _matches, _run, build_variants, parse_where

from reprokit.config import grid_of, load_pipeline_config
from reprokit.job import cell_job, data_context
from reprokit.plan import kind


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experiment", required=True)
    p.add_argument("--scale", default="quick")
    p.add_argument("--where", nargs="*", default=[], help="axis=v1,v2 filters on the grid (values as in paths)")
    p.add_argument("--set", nargs="*", default=[], help="key=value overrides of the scale's settings (YAML values)")
    p.add_argument("--metric", default="test_acc", help="curve column to print")
    p.add_argument("--out", default="/tmp/size_cells", help="scratch folder for results, checkpoints and logs")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected key=value")
        overrides[key] = yaml.safe_load(value)
    cfg = load_pipeline_config(REPO, {"scale": args.scale})
    if args.experiment not in cfg["experiments"]:
        raise SystemExit(f"--experiment: no experiment '{args.experiment}'")
    scales = cfg["experiments"][args.experiment].setdefault("scales", {})
    block = scales.setdefault(args.scale, {}) or {}
    scales[args.scale] = {**block, "settings": {**(block.get("settings") or {}), **overrides}}
    out = Path(args.out)
    cfg["paths"] = {**cfg["paths"], "results": str(out / "results"), "checkpoints": str(out / "checkpoints")}

    where = parse_where(args.where)
    cells = [c for c in grid_of(cfg, args.experiment, args.scale).cells() if _matches(c, where)]
    if not cells:
        raise SystemExit("no cell matches --where")
    for c in cells:
        kind(c.kind).check(c)  # a bad override fails here, naming the key
    jobs = [(c, cell_job(c, cfg, download=False)) for c in cells]
    needed = {path: ds for _, job in jobs for path, ds in job.variant_datasets.items()}
    if build_variants(needed, data_context(cfg, download=False), out / "logs"):
        raise SystemExit(f"a variant file failed to build (logs under {out / 'logs' / 'variants'})")

    def run(cell_and_job):
        cell, job = cell_and_job
        rc, sec = _run(
            [sys.executable, "-m", "reprokit.cell", *job.argv(args.threads)],
            out / "logs" / f"{cell.rel_dir}.log",
            job.env,
        )
        return cell, job, rc, sec

    print(f"{len(cells)} cell(s) of {args.experiment} at {args.scale} with {overrides}; scratch {out}", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for cell, job, rc, sec in pool.map(run, jobs):
            print(f"\n{cell.rel_dir}: rc {rc}, {sec:.0f} s (log {out / 'logs' / cell.rel_dir}.log)", flush=True)
            curve = Path(job.out) / "curve.csv"
            if rc or not curve.exists():
                continue
            if not curve.read_text().strip():  # eval_every 0: no curve rows, only the final metrics
                print(json.loads((Path(job.out) / "metrics.json").read_text())["metrics"], flush=True)
                continue
            import pandas as pd

            df = pd.read_csv(curve)
            if args.metric in df:
                rows = df.dropna(subset=[args.metric])[["step", args.metric]]
                print(rows.to_string(index=False), flush=True)
            metrics = json.loads((Path(job.out) / "metrics.json").read_text())["metrics"]
            print(f"final {args.metric}: {metrics.get(args.metric)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
