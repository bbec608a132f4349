"""Measure the seed spread of one cell per family and metric at a scale and commit it: figures/<scale>/seed_spread.json.

The verdicts' single-value noise band (report.verdicts.noise) falls back on this file where a claim's own
experiments ran fewer than 3 seeds (its family's: the experiments of the same kind); a notebook reads the same
file, so its figure's verdicts match the report's.

    python -m reprokit.report.commands.seed_spread --scale quick
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from ...config import load_pipeline_config
from ..verdicts import noise
from ..verdicts.results import Context


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reprokit.report.commands.seed_spread", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--scale", default="quick")
    p.add_argument("--results", default="results")
    p.add_argument("--root", default=".")
    args = p.parse_args(argv)
    config = load_pipeline_config(args.root)
    ctx = Context(args.results, args.scale, [], archive=(args.root, config))
    out = Path(args.root) / "figures" / args.scale / "seed_spread.json"
    kinds = {name: spec["kind"] for name, spec in config["experiments"].items()}
    rec = noise.write_families(ctx, kinds, datetime.date.today().isoformat(), out)
    for kind, metrics in rec["families"].items():
        for m, r in metrics.items():
            print(
                f"{kind} {m}: relative sd {r['rel_sd']:.2%}, {r['df']:g} df, {r['groups']} groups of >= "
                f"{noise.MIN_SEEDS} seeds ({', '.join(r['experiments'])})"
            )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
