"""Compare the UCI regression cells finished so far with the paper's numbers, before a table can be built.

A table needs every cell of its grid; at paper scale the cells finish over hours (or only some were run,
as on a laptop). This reads every metrics.json under `results/<scale>/<experiment>/` that exists now and
prints, per dataset and method, the number of splits found, our mean ± s.e., the paper's, and
z = (ours - paper) / paper's s.e. Nothing here is a table of the reproduction: the header says how many
cells were found, at which scale.

    python -m reprokit.report.partial results/paper/bali_uci --paper config/papers/bali.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from . import bali_regression, reproduction
from .stats import format_pm


def finished_cells(experiment_dir: str | Path) -> pd.DataFrame:
    """One row per metrics.json under `experiment_dir`: its coords, scale, status, metrics (and info, device)."""
    root = Path(experiment_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder {root} (expected results/<scale>/<experiment>)")
    df = reproduction.finished_cells(root)
    if df.empty:
        raise FileNotFoundError(f"no metrics.json under {root}: no cell of this experiment has finished")
    return df


def compare(df: pd.DataFrame, paper: dict) -> pd.DataFrame:
    """RMSE and log-likelihood of our finished cells against the paper's, one row per (dataset, method)."""
    parts = []
    for metric, label in (("rmse", "RMSE"), ("ll", "LL")):
        z = bali_regression.within_two_se(df, paper, metric)
        if z.empty:
            continue
        z.insert(2, "metric", label)
        parts.append(z)
    if not parts:
        raise ValueError("none of the finished cells has a paper value to compare with")
    out = pd.concat(parts, ignore_index=True)
    order = {d: i for i, d in enumerate(bali_regression.DATASETS)}
    out["_order"] = out["dataset"].map(order)
    out["_metric"] = out["metric"].map({"RMSE": 0, "LL": 1})
    out = out.sort_values(["_order", "method", "_metric"], kind="stable")
    return out.drop(columns=["_order", "_metric"]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reprokit.report.partial", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment_dir", help="results/<scale>/<experiment>, e.g. results/paper/bali_uci")
    parser.add_argument("--paper", default="config/papers/bali.yaml", help="the paper's values")
    args = parser.parse_args(argv)
    try:
        df = finished_cells(args.experiment_dir)
        table = compare(df, bali_regression.paper_values(args.paper))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    scales = sorted(set(df["scale"]))
    print(
        f"{len(df)} finished cells under {args.experiment_dir} (scale {', '.join(scales)}); "
        "mean ± s.e. over the splits found; z in units of the paper's s.e."
    )
    shown = table.assign(
        ours=[format_pm(m, s) for m, s in zip(table["ours"], table["ours_se"])],
        paper=[format_pm(m, s) for m, s in zip(table["paper"], table["paper_se"])],
        z=[f"{z:+.1f}" for z in table["z_paper_se"]],
    )[["dataset", "method", "metric", "n", "ours", "paper", "z", "within_2se"]]
    print(shown.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
