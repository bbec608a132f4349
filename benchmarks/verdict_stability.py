"""Are a scale's verdicts machine-stable? Re-run the cells behind some claims with another thread count and compare.

Another `--threads` changes the order of floating-point reductions, a cheap stand-in for another CPU (the same
cell re-run with the same threads on one machine is bit-identical). The chosen experiments run again with
benchmarks/run_cells.py under `--root` (results, checkpoints and logs of their own, nothing of results/ or the
archive touched); then every claim whose cells all come from those experiments is decided twice, from the
committed archive (`figures/<scale>/cells/`) and from the re-run, and each verdict pair is printed and written as
JSON (`--out`, default `figures/<scale>/verdict_stability.json`, which the reproduction report quotes; runs on
other experiments are merged in). A claim that changes is machine-sensitive at that scale: its noise band is too
narrow for its evidence. The record also holds each experiment's machine spread per metric (`machine_spread`:
the median over re-run cells of |archive - re-run| / sqrt(2) / |mean|), which report.verdicts.noise takes as a
single value's noise where it is larger than the seed spread.

    python benchmarks/verdict_stability.py --scale quick --threads 2 \\
        --experiments bali_synthetic bali_bbb_synthetic bali_uci bali_uci_protein

Slow by design (it trains): a benchmark run by hand, not a test.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def claim_experiments(claim, doc: dict) -> set[str]:
    """The experiments a claim reads: those its check's arguments name, else its artefact's (table entries)."""
    found = set()

    def walk(value):
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("experiment", "experiments", "fast_experiments"):
                    found.update([v] if isinstance(v, str) else list(v))
                elif k == "pairs":  # paired_gap: [[a, b], ...]
                    found.update(e for pair in v for e in pair)
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(claim.args)
    if not found:
        spec = doc["artefacts"].get(claim.artefact) or {}
        walk(spec.get("ours") or {})
        for group in ("rows", "columns", "ours_columns"):
            walk(spec.get(group) or {})
    return found


def verdicts(results: Path, scale: str, config: dict, docs: list[dict], archive: bool) -> dict:
    """{claim id: (status, measured)} at `scale` from `results` (and the archive when `archive`)."""
    from reprokit.report.verdicts import claims as checks
    from reprokit.report.verdicts import papers
    from reprokit.report.verdicts.results import Context

    ctx = Context(results, scale, docs, artefacts=config.get("artefacts"), archive=(REPO, config) if archive else None)
    out = {}
    for doc in docs:
        for claim in papers.claims(doc):
            v = checks.verdict(ctx, claim)
            out[claim.id] = (v.status, v.measured)
    return out


def machine_spread(results: Path, scale: str, experiments) -> dict:
    """{experiment: {metric: {rel_sd, pairs}}}: each re-run cell against its archived line, |a - b| / sqrt(2) over
    |mean| per metric (the sd of one cell across the two machines), the median over the experiment's cells."""
    import math

    import numpy as np

    from reprokit.report.store import archive, cells

    out = {}
    for experiment in experiments:
        lines = archive.load(archive.path_of(REPO, scale, experiment))
        rels: dict[str, list[float]] = {}
        for cell_dir, record in cells.records(results / scale / experiment):
            line = lines.get(cell_dir.relative_to(results).as_posix())
            if not line or line.get("status") != "completed" or record.get("status") != "completed":
                continue
            for metric, b in (record.get("metrics") or {}).items():
                a = line["metrics"].get(metric)
                if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (a, b)):
                    continue
                mean = (a + b) / 2
                if abs(mean) > 1e-12:
                    rels.setdefault(metric, []).append(abs(a - b) / math.sqrt(2) / abs(mean))
        out[experiment] = {m: {"rel_sd": float(np.median(v)), "pairs": len(v)} for m, v in sorted(rels.items())}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="quick")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads of the re-run (the archive's: 1)")
    p.add_argument("--experiments", nargs="+", required=True)
    p.add_argument("--root", default=None, help="where the re-run writes (default: a temporary folder)")
    p.add_argument("--out", default=None)
    p.add_argument("--skip-run", action="store_true", help="compare an existing --root without training")
    args = p.parse_args(argv)

    from reprokit.config import load_pipeline_config
    from reprokit.report.verdicts import papers

    config = load_pipeline_config(REPO, {"scale": args.scale})
    docs = [papers.load(f) for f in sorted((REPO / "config" / "papers").glob("*.yaml"))]
    root = Path(args.root or tempfile.mkdtemp(prefix="verdict_stability_"))
    if not args.skip_run:
        for experiment in args.experiments:
            cmd = [sys.executable, str(REPO / "benchmarks" / "run_cells.py"), "--experiment", experiment]
            cmd += ["--scale", args.scale, "--jobs", "1", "--threads", str(args.threads), "--root", str(root)]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, cwd=REPO)
    chosen = set(args.experiments)
    ids = {c.id for doc in docs for c in papers.claims(doc) if (exps := claim_experiments(c, doc)) and exps <= chosen}
    empty = Path(tempfile.mkdtemp(prefix="no_results_"))  # the archive alone: no results/ of this machine
    before = verdicts(empty, args.scale, config, docs, archive=True)
    after = verdicts(root / "results", args.scale, config, docs, archive=False)
    rows = [
        {"claim": i, "archive": before[i][0], "rerun": after[i][0], "stable": before[i][0] == after[i][0]}
        for i in sorted(ids)
    ]
    for r in rows:
        print(f"{r['claim']}: {r['archive']} -> {r['rerun']}{'' if r['stable'] else '  CHANGED'}")
    out = Path(args.out or REPO / "figures" / args.scale / "verdict_stability.json")
    # earlier runs on other experiments are kept: a claim or experiment re-checked now replaces its entry
    old = json.loads(out.read_text()) if out.exists() else {}
    kept = [r for r in old.get("claims", []) if r["claim"] not in ids]
    rows = sorted(kept + rows, key=lambda r: r["claim"])
    spread = {**old.get("machine_spread", {}), **machine_spread(root / "results", args.scale, chosen)}
    record = {
        "date": _dt.date.today().isoformat(),
        "scale": args.scale,
        "rerun": f"threads_per_cell {args.threads} (archive: 1)",
        "experiments": sorted(chosen | set(old.get("experiments", []))),
        "claims": rows,
        "stable": sum(r["stable"] for r in rows),
        "of": len(rows),
        "machine_spread": dict(sorted(spread.items())),
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{record['stable']} of {record['of']} verdicts unchanged; wrote {out}")
    return 0 if record["stable"] == record["of"] else 1


if __name__ == "__main__":
    sys.exit(main())
