"""The `reprokit` command: one subcommand per module entry point of the package.

    reprokit report --scale quick --out figures/quick/reproduction.md
    reprokit glance --check
    reprokit build-partial --artefact fig2 --scale paper
    reprokit budget --config scale=paper
    reprokit cell run --cell ... --context ... --out DIR --checkpoint FILE

`reprokit <name> ARGS` runs what `python -m <module> ARGS` runs (COMMANDS: name -> module); those forms keep
working. `python -m reprokit <name> ARGS` is the same without the installed script. A subcommand's module is
imported only when it runs, so `reprokit --help` and the torch-free subcommands never load torch.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module whose main(argv) runs it, what it does)
COMMANDS = {
    "report": ("reprokit.report.commands.reproduction", "the reproduction report of a scale, with its z-score figure"),
    "glance": ("reprokit.report.commands.glance", "the README's results-at-a-glance block from the committed reports"),
    "build-partial": ("reprokit.report.commands.build_partial", "artefacts from the cells of their grid that ran"),
    "archive": ("reprokit.report.commands.archive", "merge results/<scale> into the committed cell archive"),
    "provenance": ("reprokit.report.commands.provenance", "publish a scale's build into figures/<scale>/"),
    "compute": ("reprokit.report.commands.compute", "the cells and device-hours the archive holds"),
    "seed-spread": ("reprokit.report.commands.seed_spread", "measure the seed spread per family (seed_spread.json)"),
    "aggregate": ("reprokit.report.commands.aggregate", "one experiment's cells -> its tidy CSVs (the aggregate rule)"),
    "check-latex": ("reprokit.report.commands.check_latex", "compile tables with pdflatex and list their problems"),
    "budget": ("reprokit.budget", "cells, iterations and device-hours of a scale (the cost model)"),
    "cell": ("reprokit.cell", "run one cell, build a dataset variant, fetch a dataset (the cell rules)"),
    "packing": ("reprokit.packing", "run a packed SLURM job's cell (and the others of its group)"),
    "checksums": ("reprokit.data.make_checksums", "regenerate the packaged dataset checksums"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: reprokit <command> [args ...]   (reprokit <command> --help)\n\ncommands:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"reprokit: unknown command '{name}'\n\n{usage()}", file=sys.stderr)
        return 2
    if name == "cell":  # as `python -m reprokit.cell` does: pin the CPU instruction set before torch loads
        from .runtime_settings import pin_cpu_isa

        pin_cpu_isa()
    return importlib.import_module(COMMANDS[name][0]).main(rest)
