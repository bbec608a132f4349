"""Build one artefact from the cells of its grid that ran so far: results/ and the committed archive.

The `artefact_<name>` rule needs every cell of its experiments, which at paper scale finish over weeks on
several machines (or only some run, as on a CPU). This builds the same artefact with the same notebook from
the cells that ran with the config's current settings (results/<scale>/ first, then
figures/<scale>/cells/<experiment>.jsonl; a cell whose settings differ is not used), and says so: the
notebook's footer or caption gets "PARTIAL GRID: <experiment> n of m cells" (report/render/notebook.py) and the
provenance record a `partial` entry {experiment: [n, m]}. A cell that did not run is absent from the tidy
CSV, not an n/a row; an experiment none of whose cells ran gives an empty table (an error only when that is true
of every experiment of the artefact).

    python -m reprokit.report.commands.build_partial --artefact fig2 --scale paper      # -> figures/fig2.pdf/.png
    python -m reprokit.report.commands.provenance --scale paper                         # then copy into figures/paper/

Torch-free itself; the notebook imports what it imports.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import tempfile
import types
from pathlib import Path

import pandas as pd

from ...config import grid_of, load_pipeline_config
from ..render import notebook
from ..store import aggregate, archive, cells, provenance
from ..verdicts import papers
from ..verdicts.results import unavailable
from ..verdicts.statement import experiments_read

REPO = Path(__file__).resolve().parents[4]


def found_lines(config: dict, experiment: str, scale: str, results: str | Path, root: str | Path) -> list[dict]:
    """Archive-format lines of the cells of `experiment` that ran with the config's current settings: results/
    wins over the archive for a cell in both where its settings are current; otherwise the archived line is used
    (for example one migrated after the run, while results/ still holds the run's own config.json)."""
    current = archive.current_settings(config, scale, experiment)
    chosen = {
        line["cell"]: line for line in archive.split(archive.load(archive.path_of(root, scale, experiment)), current)[0]
    }
    if (Path(results) / scale / experiment).is_dir():
        chosen.update(
            {line["cell"]: line for line in archive.split(archive.from_results(results, scale, experiment), current)[0]}
        )
    return [chosen[cell] for cell in sorted(chosen)]


def tables(
    config: dict, experiment: str, scale: str, lines: list[dict], missing: dict[str, list[str]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tidy metrics and curves tables of `lines`, as the aggregate rule writes them for a whole grid; each cell of
    `missing` ({rel_dir: [datasets]}) is an n/a row naming its datasets."""
    grid = grid_of(config, experiment, scale)
    rows, curves, found = [], [], []
    for line in lines:
        cell = grid.parse(line["cell"].split("/", 2)[2])
        found.append(cell)
        rows.append(cells.row(line, cell.coord_dict))
        if line.get("curve"):
            curves.append(aggregate.with_coords(pd.DataFrame(line["curve"]), cell))
    reason = "not in the data mirrors or the cache of the machine that built this artefact"
    for cell in grid.cells():
        if cell.rel_dir in (missing or {}):
            found.append(cell)
            reasons = dict.fromkeys(missing[cell.rel_dir], reason)
            rows.append(aggregate.unavailable_row(cell, missing[cell.rel_dir], reasons))
    return aggregate.tidy(rows, curves, found, list(grid.axes))


def build(
    name: str,
    scale: str,
    results: str | Path = "results",
    root: str | Path = REPO,
    out_dir: str | Path | None = None,
    archive_root: str | Path | None = None,
    na_only: bool = False,
) -> dict:
    """Run artefact `name`'s notebook on the cells found; returns the provenance record it wrote. `root`: the
    repository (config, notebooks); `archive_root`: where figures/<scale>/cells/ lives (default `root`).
    `na_only`: also build an artefact none of whose cells ran because its datasets are missing here (all n/a),
    as a full build does; otherwise that is a FileNotFoundError."""
    root = Path(root)
    config = load_pipeline_config(root, {"scale": scale})
    if name not in config["artefacts"]:
        raise KeyError(f"no artefact '{name}' in the config (known: {', '.join(sorted(config['artefacts']))})")
    spec = config["artefacts"][name]
    out_dir = Path(out_dir or root / "figures")
    with tempfile.TemporaryDirectory(prefix=f"partial-{name}-") as tmp:  # the tidy CSVs live as long as the notebook
        rec = _build(name, scale, config, spec, results, root, out_dir, Path(archive_root or root), Path(tmp), na_only)
    return rec


def _build(
    name, scale, config, spec, results, root: Path, out_dir: Path, archive_root: Path, tmp: Path, na_only: bool = False
) -> dict:

    partial, inputs, csvs, ran = {}, {}, [], 0
    claims_read = experiments_read(spec, name, config["experiments"], root / "config" / "papers")
    for exp in [*spec["experiments"], *claims_read]:  # the claims' experiments: inputs, not the artefact's grid
        lines = found_lines(config, exp, scale, results, archive_root)
        missing = unavailable(config, exp, scale, {line["cell"] for line in lines})
        table, curves = tables(config, exp, scale, lines, missing)
        inputs[exp], inputs[f"{exp}_curves"] = str(tmp / f"{exp}.csv"), str(tmp / f"{exp}_curves.csv")
        table.to_csv(inputs[exp], index=False)
        curves.to_csv(inputs[f"{exp}_curves"], index=False)
        if exp in claims_read:
            continue
        ran += len(lines)
        partial[exp] = [len(lines) + len(missing), sum(1 for _ in grid_of(config, exp, scale).cells())]
        csvs.append(inputs[exp])
    accounted = sum(n for n, _ in partial.values())  # ran, or n/a for want of data
    if spec["experiments"] and not ran and not (na_only and accounted):
        raise FileNotFoundError(
            f"artefact {name}: no cell of experiment(s) {', '.join(partial)} ran at scale {scale} "
            f"with the config's settings (results/{scale}/<experiment>, figures/{scale}/cells/)"
        )
    numbers = root / "config" / "papers" / f"{spec['paper']}.yaml"
    if numbers.exists():
        if name in papers.load(numbers)["artefacts"]:
            inputs["paper_numbers"] = str(numbers)
    inputs.update({k: str(root / v) for k, v in (spec.get("data") or {}).items()})
    outputs = {ext: str(out_dir / f"{name}.{ext}") for ext in spec["outputs"]}
    smk = types.SimpleNamespace(
        input=inputs,
        output=outputs,
        config=config,
        wildcards={},
        log=[],
        params={"scale": scale, "notebook": spec["notebook"], "partial": partial, "root": str(root)},
        rule=f"artefact_{name}",
    )

    try:
        runpy.run_path(
            str(root / "workflow" / "notebooks" / spec["notebook"]),
            init_globals={"snakemake": smk},
            run_name="__main__",
        )
    finally:
        notebook.set_partial(None)  # the next artefact built in this process is not partial unless it says so
    missing = [p for p in outputs.values() if not Path(p).exists()]
    if missing:
        raise RuntimeError(f"artefact {name}: the notebook did not write {', '.join(missing)}")
    rec = provenance.record(config, name, scale, provenance.devices_of(csvs), root=root)
    rec["partial"] = partial
    provenance.write(out_dir / f"{name}{provenance.SUFFIX}", rec)
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reprokit.report.commands.build_partial", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--artefact", nargs="+", help="artefact names (default with --all: every artefact of the config)")
    p.add_argument(
        "--all",
        action="store_true",
        help="every artefact of the config; those none of whose cells ran are skipped, named",
    )
    p.add_argument(
        "--with-na",
        action="store_true",
        help="also build artefacts whose cells are all n/a for want of data on this machine (as a full build "
        "does: the quick scale's committed build)",
    )
    p.add_argument("--scale", default="paper")
    p.add_argument("--results", default="results")
    p.add_argument("--root", default=str(REPO))
    args = p.parse_args(argv)
    if not args.artefact and not args.all:
        p.error("name --artefact, or give --all")
    names = args.artefact
    if args.all:
        names = names or list(load_pipeline_config(args.root, {"scale": args.scale})["artefacts"])
    for name in names:
        try:
            rec = build(name, args.scale, args.results, args.root, na_only=args.with_na)
        except FileNotFoundError as err:
            if not args.all:
                print(f"error: {err}", file=sys.stderr)
                return 1
            print(f"{name}: skipped ({err})")
            continue
        except (KeyError, RuntimeError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"{name}: built from " + ", ".join(f"{e} {n} of {m} cells" for e, (n, m) in rec["partial"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
