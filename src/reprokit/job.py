"""A cell's job: everything `python -m reprokit.cell run` is given, assembled in one place.

The Snakemake `cell` rule (workflow/rules/cells.smk) and benchmarks/run_cells.py both call
:func:`cell_job`, so a cell run either way gets the same cell JSON (its plan's `resolved_settings`, plus the
upstream results it reads), the same context (data mirrors and the `run:` block) and the same variant
files, checkpoint and output folder, and the same environment (the CPU instruction-set pin, `run.cpu_isa`,
which the cell sets before torch loads). Torch-free; it sits below `config` and `plan` (it asks both), which
never import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import format_value, grid_of
from .data.variant_names import variant_path
from .errors import ConfigError
from .plan import kind
from .runtime_settings import RuntimeSettings, cpu_isa_env


def data_context(config: dict, *, mirrors: list | None = None, download: bool | None = None) -> dict:
    """The `data:` part of a job's context (what the `variant` and `dataset` rules get too)."""
    data = config["data"]
    return {
        "mirrors": list(mirrors if mirrors is not None else data["mirrors"]),
        "cache_dir": data["cache_dir"],
        "variants_dir": data["variants_dir"],
        "download": bool(data["download"] if download is None else download),
        "checksums": dict(data.get("checksums") or {}),
    }


def upstream_metrics(cell, config: dict, grid=None) -> dict:
    """{name: metrics.json path} of the cells this cell reads (its plan's `required_cells(cell)`,
    {name: (experiment, coords)}, e.g. a retrain cell reading the hyperparameters another cell found).
    `grid(experiment, scale)` may hand out cached grids (the DAG asks for many cells)."""
    grid = grid or (lambda name, scale: grid_of(config, name, scale))
    out = {}
    for name, (exp, coords) in kind(cell.kind).required_cells(cell).items():
        try:
            src = grid(exp, cell.scale)
            missing = [a for a in src.axes if a not in coords]
            if missing:
                raise ConfigError(f"needs a cell of '{exp}' but does not give its axes {missing}")
            rel = "/".join(f"{a}~{format_value(coords[a])}" for a in src.axes)
            out[name] = str(Path(config["paths"]["results"]) / src.parse(rel).rel_dir / "metrics.json")
        except ConfigError as err:
            raise ConfigError(f"{cell.rel_dir}: input '{name}': {err}") from None
    return out


@dataclass(frozen=True)
class CellJob:
    cell: dict  # the cell JSON: scale, experiment, kind, coords, datasets, settings (the plan's resolved_settings)
    context: dict  # data_context(config) plus the `run:` keys that change numbers (RuntimeSettings.numeric_dict)
    variants: dict  # {name: path} of the variant files the cell reads
    variant_datasets: dict  # {path: dataset} of those files (to build one that is missing)
    upstream: dict  # {name: metrics.json} of the cells it reads (they run first)
    out: str  # results/<scale>/<experiment>/<coords>
    checkpoint: str  # checkpoints/<scale>/<experiment>/<coords>/checkpoint.pt
    checkpoint_every: int
    env: (
        dict  # environment variables the cell process gets: REPROKIT_CPU_ISA and its pin (runtime_settings.cpu_isa_env)
    )

    def argv(self, threads: int) -> list[str]:
        """`python -m reprokit.cell run ...` arguments after the module name."""
        import json

        return [
            "run",
            "--cell",
            json.dumps(self.cell),
            "--context",
            json.dumps(self.context),
            "--variants",
            json.dumps(self.variants),
            "--out",
            self.out,
            "--checkpoint",
            self.checkpoint,
            "--checkpoint-every",
            str(self.checkpoint_every),
            "--threads",
            str(threads),
        ]


def cell_job(cell, config: dict, grid=None, **data_kw) -> CellJob:
    """The job of one cell. The results of the cells it reads (:func:`upstream_metrics`) reach it as
    settings["_inputs"]. The plan's `resolved_settings(cell)` keeps only the settings the cell uses, so a
    change elsewhere (another method's block) does not mark it changed. `data_kw`: see data_context."""
    plan = kind(cell.kind)
    upstream = upstream_metrics(cell, config, grid)
    d = cell.to_dict()
    d["settings"] = plan.resolved_settings(cell)
    if upstream:
        d["settings"] = {**d["settings"], "_inputs": dict(upstream)}
    run = RuntimeSettings.from_dict(config.get("run"))  # the `run:` block, read once per job
    context = {**data_context(config, **data_kw), "run": run.numeric_dict()}
    variants, datasets = {}, {}
    for name, (dataset, filename) in plan.required_variants(cell).items():
        path = str(variant_path(context["variants_dir"], dataset, filename))
        variants[name], datasets[path] = path, dataset
    return CellJob(
        cell=d,
        context=context,
        variants=variants,
        variant_datasets=datasets,
        upstream=upstream,
        out=str(Path(config["paths"]["results"]) / cell.rel_dir),
        checkpoint=str(Path(config["paths"]["checkpoints"]) / cell.rel_dir / "checkpoint.pt"),
        checkpoint_every=run.checkpoint_every,
        env=cpu_isa_env(run.cpu_isa),
    )
