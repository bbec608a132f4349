#!/usr/bin/env bash
# One call on a lent GPU (about 10 device-minutes) measuring what `--profile slurm`'s
# packing and `run.precision` are worth there. Not run yet: no GPU was lent to the session that wrote it.
#
#   OUT=/tmp/out MIRROR=.gpudata bash benchmarks/gpu_packing.sh        # carry MNIST (mirror: MNIST/, MANIFEST.tsv)
#   SMOKE=1 DEVICE=cpu OUT=/tmp/smoke bash benchmarks/gpu_packing.sh   # the same plumbing on a CPU (profile smoke)
#
# 1. k = 1, 2, 4, 8 processes timing the MNIST CNN's steps at once (Fig. 3a / the sensitivity grids: batch
#    200 x 20 augmentation samples): rows `<step>@k` (ms per step of one of k cells sharing the GPU) in the
#    step-cost table, which reprokit.packing.pack_jobs then uses for a GPU job of k cells; printed as cells per
#    hour for a Fig. 3a cell (n_train 1000, partitioned) and a sensitivity cell.
# 2. fp32 / tf32 / bf16 (bf16 = autocast + channels_last) steps of the CIFAR ResNet-14 and the Tiny ImageNet
#    ResNet-50: their h100 rows in the table (the cost model prices run.precision from them).
# 3. Whether bf16 moves a cell's metrics beyond its seed noise: Fig. 3a's MNIST cells (n_train 1000, baseline
#    and partitioned, seeds 0-2) at fp32 and at bf16, 12 cells at paper scale, PAR (12) at a time (cut at 7 min), into
#    $OUT/results_<precision>/; the comparison (mean and spread over seeds) in $OUT/bf16_vs_fp32.txt.
# The repository's table is not touched: $OUT/step_costs.tsv is it with the new rows. Copy that over
# src/reprokit/data/step_costs.tsv, and `python -m reprokit.budget --config scale=paper` prices packing and
# bf16 with them (and says how many GPU-hours the paper scale then allocates).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/gpu_packing}; MIRROR=${MIRROR:-../shared/data}; DEVICE=${DEVICE:-cuda}; PAR=${PAR:-12}
RESNETS="fixup_resnet14 resnet50_gn"
if [ "${SMOKE:-0}" = 1 ]; then REPEATS=2; WARMUP=1; BATCH="--batch 2"; SCALE=test; KS="1 2"; PROFILE=smoke
  RESNETS=fixup_resnet8
else REPEATS=20; WARMUP=3; BATCH=""; SCALE=paper; KS="1 2 4 8"; PROFILE=${PROFILE:-h100}; fi
mkdir -p "$OUT"; export COSTS="$OUT/step_costs.tsv"; cp src/reprokit/data/step_costs.tsv "$COSTS"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} > "$OUT/device.txt"

# 1. sharing
for k in $KS; do
  for i in $(seq 1 "$k"); do
    python3 benchmarks/bench_throughput.py --device "$DEVICE" --models mnist_cnn --steps standard param hyper \
      --repeats "$REPEATS" --warmup "$WARMUP" $BATCH --out "$OUT/share${k}_$i.csv" > "$OUT/share${k}_$i.log" 2>&1 &
  done
  wait
done
KS="$KS" PROFILE="$PROFILE" OUT="$OUT" python3 - <<'EOF' > "$OUT/sharing.txt" 2>&1
import csv, datetime, glob, os, statistics
from reprokit.budget import write_costs
rows, prof, out = [], os.environ["PROFILE"], os.environ["OUT"]
for k in map(int, os.environ["KS"].split()):
    runs = [next(csv.DictReader(open(f))) for f in sorted(glob.glob(f"{out}/share{k}_*.csv"))]
    if len(runs) < k:
        print(f"k={k}: only {len(runs)} of {k} processes finished"); continue
    for step in ("standard", "param", "hyper"):
        ms = statistics.median(float(r[f"{step}_ms"]) for r in runs)
        print(f"k={k} {step}: {ms:.2f} ms per step of each of {k} (1 alone: see k=1)")
        rows.append({"profile": prof, "device": runs[0]["device"], "model": "mnist_cnn", "step": f"{step}@{k}",
                     "precision": runs[0]["precision"], "images": int(runs[0]["images"]), "ms_per_step": ms,
                     "source": f"benchmarks/gpu_packing.sh ({k} processes at once, {len(runs)} medians)",
                     "date": datetime.date.today().isoformat()})
    part = [r for r in rows if r["step"] in (f"param@{k}", f"hyper@{k}")]
    if len(part) == 2:
        rows.append({**part[0], "step": f"partitioned@{k}", "ms_per_step": sum(r["ms_per_step"] for r in part)})
write_costs(rows, os.environ["COSTS"])
EOF

# 2. precision of the ResNet steps (rows as bench_throughput.py --write-costs writes them, into $COSTS)
timeout 300 python3 benchmarks/bench_throughput.py --device "$DEVICE" --precision all \
  --models $RESNETS --repeats "$REPEATS" --warmup "$WARMUP" $BATCH \
  --out "$OUT/precision.csv" > "$OUT/precision.log" 2>&1
OUT="$OUT" PROFILE="$PROFILE" python3 - <<'EOF' >> "$OUT/precision.log" 2>&1
import csv, datetime, os
from reprokit.budget import write_costs
rows = [{"profile": os.environ["PROFILE"], "device": r["device"], "model": r["model"], "step": s,
         "precision": r["precision"], "images": int(r["images"]), "ms_per_step": float(r[f"{s}_ms"]),
         "source": f"benchmarks/gpu_packing.sh: bench_throughput.py (batch {r['batch']}, {r['repeats']} repeats)",
         "date": datetime.date.today().isoformat()}
        for r in csv.DictReader(open(f"{os.environ['OUT']}/precision.csv"))
        for s in ("plain", "standard", "param", "hyper", "partitioned") if r.get(f"{s}_ms")]
write_costs(rows, os.environ["COSTS"])
print(f"{len(rows)} rows into {os.environ['COSTS']}")
EOF

# cells per hour with k sharing, from the table as it now is
SCALE=$SCALE KS="$KS" PROFILE="$PROFILE" python3 - <<'EOF' >> "$OUT/sharing.txt" 2>&1
import os
from reprokit.budget import CostTable, cell_costs, read_costs
from reprokit.config import grid_of, load_pipeline_config
scale = os.environ["SCALE"]
cfg = load_pipeline_config(".", {"scale": scale})
table = CostTable(read_costs(os.environ["COSTS"]), os.environ["PROFILE"])
ks = tuple(map(int, os.environ["KS"].split()))
for name in ("fig3a", "sens_mnist_c2"):
    cell = next(c for c in grid_of(cfg, name, scale).cells() if c.coord_dict.get("method") == "partitioned")
    for k in ks:
        c = cell_costs([cell], cfg, gpu=table, shared=(k,))[0]
        s = c.shared_seconds.get(k)
        print(f"{cell.rel_dir}: {k} at once: " + (f"{3600 * k / s:.1f} cells/hour ({s / 60:.1f} min each)" if s
              else "no @k rows") + f"; alone {3600 / c.seconds:.1f} cells/hour")
EOF

# 3. bf16 against fp32 on Fig. 3a's MNIST cells
MIRROR="$MIRROR" OUT="$OUT" SCALE=$SCALE PAR=$PAR timeout 420 python3 - <<'EOF' > "$OUT/bf16_vs_fp32.txt" 2>&1
import json, os, statistics, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
sys.path.insert(0, "benchmarks")
from run_cells import build_variants
from reprokit.config import grid_of, load_pipeline_config
from reprokit.job import cell_job, data_context
out, scale = os.environ["OUT"], os.environ["SCALE"]
jobs = []
for prec in ("fp32", "bf16"):
    cfg = load_pipeline_config(".", {"scale": scale, "run": {"precision": prec},
                                     "paths": {"results": f"{out}/results_{prec}", "checkpoints": f"{out}/ckpt_{prec}",
                                               "logs": f"{out}/logs_{prec}"}})
    kw = {"mirrors": [os.environ["MIRROR"]], "download": False}
    cells = [c for c in grid_of(cfg, "fig3a", scale).cells()
             if not c.coord_dict["rotated"] and c.coord_dict["method"] in ("baseline", "partitioned")]
    n0 = min(c.coord_dict["n_train"] for c in cells)  # the smallest training set: 1000 at paper scale
    for c in cells:
        if c.coord_dict["n_train"] == n0:
            j = cell_job(c, cfg, **kw)
            build_variants(j.variant_datasets, data_context(cfg, **kw), Path(f"{out}/logs_{prec}"))
            jobs.append((prec, c, j))
def run(item):
    prec, c, j = item
    os.makedirs(f"{out}/logs_{prec}", exist_ok=True)
    with open(f"{out}/logs_{prec}/{c.rel_dir.replace('/', '_')}.log", "w") as log:
        subprocess.run([sys.executable, "-m", "reprokit.cell", *j.argv(1)], stdout=log, stderr=subprocess.STDOUT)
    m = os.path.join(j.out, "metrics.json")
    return prec, c, json.load(open(m)) if os.path.exists(m) else None
with ThreadPoolExecutor(int(os.environ["PAR"])) as pool:
    done = list(pool.map(run, jobs))
by = {}
for prec, c, rec in done:
    if rec:
        print(prec, c.rel_dir, rec["status"], f"{rec['seconds_per_step'] * 1e3:.2f} ms/step", json.dumps(rec["metrics"]))
        by.setdefault((c.coord_dict["method"], prec), []).append(rec["metrics"])
for method in ("baseline", "partitioned"):
    for key in ("test_acc", "test_ll"):
        vals = {p: [m[key] for m in by.get((method, p), []) if key in m] for p in ("fp32", "bf16")}
        if all(len(v) >= 2 for v in vals.values()):
            f, b = vals["fp32"], vals["bf16"]
            print(f"{method} {key}: fp32 {statistics.mean(f):.4f} +- {statistics.stdev(f):.4f} (seeds), "
                  f"bf16 {statistics.mean(b):.4f} +- {statistics.stdev(b):.4f}; difference "
                  f"{statistics.mean(b) - statistics.mean(f):+.4f} "
                  f"({'within' if abs(statistics.mean(b) - statistics.mean(f)) <= 2 * max(statistics.stdev(f), statistics.stdev(b)) else 'BEYOND'} 2 seed s.d.)")
EOF
tail -n 30 "$OUT/sharing.txt" "$OUT/bf16_vs_fp32.txt"; grep -E "bf16 speed-up|^(fixup|resnet)" "$OUT/precision.log"
