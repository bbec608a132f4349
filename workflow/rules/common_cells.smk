# What the rule `cell` (workflow/rules/cells.smk) asks of the package, as functions and settings only
# (snakemake --lint wants rules and functions in separate files): each cell's job
# (reprokit.job.cell_job), its wall time, and where it runs on SLURM and with which cells it is packed.
# The Snakefile includes this after common.smk and before the rules.

import sys
import uuid

from reprokit import packing
from reprokit.budget import cell_costs, runtime_minutes

_JOBS = {}


def job_of(wildcards):
    """The cell's job (reprokit.job.cell_job: cell JSON, context, variant files, checkpoint), built once."""
    cell = cell_of(wildcards)
    key = id(cell)  # cells live as long as the DAG (cell_of caches them)
    if key not in _JOBS:
        try:
            _JOBS[key] = cell_job(cell, config, grid)
        except ConfigError as err:
            raise WorkflowError(str(err)) from None
    return _JOBS[key]


def cell_variants(wildcards):
    return list(job_of(wildcards).variants.values())


def cell_upstream_inputs(wildcards):
    return list(job_of(wildcards).upstream.values())


def cell_runtime(wildcards, attempt):
    # SLURM wall time (minutes): the cost model's estimate of this cell x 1.5 + 10 min (reprokit.budget;
    # `python -m reprokit.budget` prints the totals). Torch-free, priced from data/step_costs.tsv; a cell
    # sent to the CPU partition (below) with the CPU profile. Packed: the cell's part of its group job's
    # wall time, for as many of the group's cells as this run wants (Snakemake adds the parts up), more
    # on each retry.
    if PACK is not None:
        job = pack_of(wildcards)
        if job is not None:
            wanted = sum(
                not Path(f"{RESULTS}/{rel}/metrics.json").exists()
                for rel in _PACKED_HERE.get(job.id, ())
            )
            return attempt * packing.member_minutes(
                job.share_s[cell_of(wildcards).rel_dir], wanted
            )
    if placement(wildcards).device == "cpu":
        return packing.single_minutes(placement(wildcards).seconds)
    return runtime_minutes(cell_of(wildcards), config)


# --- SLURM: the node each cell asks for, and packing (docs/slurm.md). The package decides both
# (reprokit.budget.cell_costs: GPU or CPU from the measured step costs; reprokit.packing.pack_jobs: which cells
# share a SLURM job); the profile names the partitions and turns packing on (cells_per_gpu, cells_per_cpu_job).
GPU_PARTITION = profile_cell_setting("gpu_partition")
CPU_PARTITION = profile_cell_setting("cpu_partition")
GPU_GRES = profile_cell_setting(
    "gpu_gres"
)  # e.g. gpu:a100:1 where a site wants --gres; else --gpus=1
_per_gpu, _per_cpu = profile_cell_setting("cells_per_gpu", int), profile_cell_setting(
    "cells_per_cpu_job", int
)
PACK = None
if _per_gpu is not None or _per_cpu is not None:
    _default = packing.PackingSettings()
    PACK = packing.PackingSettings(
        cells_per_gpu=_per_gpu or _default.cells_per_gpu,
        cells_per_cpu_job=_per_cpu or _default.cells_per_cpu_job,
    )
PACK_DIR = f"{CHECKPOINTS}/{SCALE}/.packing"
PACK_RUN = (
    uuid.uuid4().hex
)  # this Snakemake run, in its manifests: a packed result is installed only in its own run
_PLAN = {}
_PLACE = {}
_PACKED_HERE = (
    {}
)  # group id -> {rel_dir: wildcards} of the cells this Snakemake process put in a group


def placement(wildcards):
    """reprokit.packing.CellCost of the cell: where it runs (device) and its estimates."""
    cell = cell_of(wildcards)
    if (
        cell.rel_dir not in _PLACE
    ):  # priced once for every cell of the scale (one call: its tables read once)
        if cell.scale == SCALE and not _PLACE:
            _PLACE.update(
                {
                    c.rel_dir: c
                    for c in cell_costs(
                        [c for n in EXPERIMENTS for c in grid(n, SCALE).cells()], config
                    )
                }
            )
        if cell.rel_dir not in _PLACE:
            _PLACE[cell.rel_dir] = cell_costs([cell], config)[0]
    return _PLACE[cell.rel_dir]


def pack_of(wildcards):
    """The cell's packed SLURM job (reprokit.packing.Job), None when it runs alone. Planned once, over every
    cell of the scale (so every Snakemake process, here or inside a SLURM job, plans the same groups).
    """
    if not _PLAN:
        cells = [c for name in EXPERIMENTS for c in grid(name, SCALE).cells()]
        costs = cell_costs(cells, config, shared=(PACK.cells_per_gpu,))
        _PLACE.update({c.rel_dir: c for c in costs})
        jobs = packing.pack_jobs(costs, PACK, prefix=f"pack_{SCALE}")
        _PLAN.update(packing.index(jobs))
        if not workflow.remote_exec:
            print(
                f"reprokit.packing: the {len(costs)} cells of scale {SCALE} make {len(jobs)} SLURM jobs "
                f"({sum(not j.alone for j in jobs)} packed, {sum(j.alone for j in jobs)} single cells; "
                f"python -m reprokit.budget --config scale={SCALE} details them)",
                file=sys.stderr,
            )
    job = _PLAN.get(cell_of(wildcards).rel_dir)
    return None if job is None or job.alone else job


def cell_group(wildcards):
    if PACK is None or wildcards.scale != SCALE:
        return None
    job = pack_of(wildcards)
    if job is None:
        return None
    if not workflow.remote_exec and not (
        workflow.group_settings.group_components.get("cells")
        and workflow.global_resources.get("pack_slot") is not None
    ):
        raise WorkflowError(
            "slurm/config.yaml sets cells_per_gpu / cells_per_cpu_job, but not `group-components: "
            "[cells=100000]` and `resources: [pack_slot=1]` (with `set-resource-scopes: "
            "[pack_slot=local]`), without which Snakemake does not pack cells into one job"
        )
    # `group-components: [cells=...]` (the profile) makes all the cells of one group id one SLURM job:
    # Snakemake looks the count up under a group's parent name, as it records for `group: "x_{wildcard}"`
    workflow.parent_groupids[job.id] = "cells"
    _PACKED_HERE.setdefault(job.id, {})[cell_of(wildcards).rel_dir] = wildcards
    if (
        _STARTED
    ):  # a cell the DAG gained after a checkpoint (a dataset fetched): its group's manifest anew
        write_pack_manifest(job.id)
    return job.id


def cell_pack(wildcards):
    # the group's manifest, for `reprokit.packing run` (a string: the same for each cell of a group job)
    job = pack_of(wildcards) if PACK is not None and wildcards.scale == SCALE else None
    return f"{PACK_DIR}/{job.id}.json" if job is not None else "none"


def cell_slurm_resources():
    """Resources only `--profile slurm` uses: partition, GPU, packing."""
    out = {}
    on_gpu = lambda w: placement(w).device == "gpu"
    if GPU_GRES:
        out["gres"] = lambda wildcards: GPU_GRES if on_gpu(wildcards) else ""
    else:
        out["gpu"] = lambda wildcards: int(on_gpu(wildcards))
    if GPU_PARTITION or CPU_PARTITION:
        out["slurm_partition"] = (
            lambda wildcards: (GPU_PARTITION if on_gpu(wildcards) else CPU_PARTITION)
            or ""
        )
    if PACK is not None:
        out["pack_slot"] = (
            1  # with the profile's pack_slot=1 (local scope): Snakemake sizes a group job per cell
        )
        out["pack"] = cell_pack
    return out


def cell_cpus(wildcards, threads):
    # a packed cell's job runs `at_once` cells of `threads` threads each
    job = pack_of(wildcards) if PACK is not None and wildcards.scale == SCALE else None
    return threads * (job.at_once if job is not None else 1)


def write_pack_manifest(gid):
    """The cells of group `gid` that this run wants (their outputs are missing), for reprokit.packing run."""
    threads = config["run"]["threads_per_cell"]
    cells = _PACKED_HERE[gid]
    entries = []
    for rel, w in sorted(cells.items()):
        job = job_of(w)
        if not Path(job.out, "metrics.json").exists():
            entries.append(
                {
                    "out": job.out,
                    "checkpoint": job.checkpoint,
                    "argv": job.argv(threads)[1:],
                    "inputs": [*job.variants.values(), *job.upstream.values()],
                }
            )
    packing.write_manifest(
        f"{PACK_DIR}/{gid}.json",
        gid,
        _PLAN[next(iter(cells))].at_once,
        entries,
        PACK_RUN,
    )


_STARTED = []
