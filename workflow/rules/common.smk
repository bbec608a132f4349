# Glue between the config and the package: the package decides what a cell is; rules stay thin.
import json
import os
import shlex
from pathlib import Path

from reprokit.config import ConfigError, grid_of, load_pipeline_config
from reprokit.config import unavailable_cells as find_unavailable
from reprokit.data.mirrors import is_available
from reprokit.plan import validate_cells
from reprokit.report.verdicts.papers import load as load_paper
from reprokit.report.verdicts.statement import experiments_read
from reprokit.job import cell_job, data_context
from reprokit.runtime_settings import cpu_isa_env

try:
    # What snakemake holds now is only --config / --configfile (the Snakefile names no configfile): the
    # package's loader merges the project's files under it, types command-line strings (snakemake reads a
    # nested `--config key='{a: true}'` with YAML's BaseLoader) and validates.
    _loaded = load_pipeline_config(".", dict(config))
except ConfigError as err:
    raise WorkflowError(str(err)) from None
config.clear()
config.update(_loaded)

SCALE = config["scale"]
RESULTS = config["paths"]["results"]
CHECKPOINTS = config["paths"]["checkpoints"]
LOGS = config["paths"]["logs"]
VARIANTS = config["data"]["variants_dir"]
MIRRORS = config["data"]["mirrors"]
EXPERIMENTS = sorted(config["experiments"])

CACHE = config["data"]["cache_dir"]
DOWNLOAD = config["data"]["download"]

# The `variant` and `dataset` rules' context; a training cell's job (reprokit.job.cell_job) adds the
# `run:` block's device / precision / determinism.
CONTEXT = data_context(config)

# The CPU instruction-set pin (`run.cpu_isa`, reprokit.runtime_settings): every job inherits it, SLURM jobs too (they parse
# this file again); `python -m reprokit.cell` sets it itself before torch loads. Not a cell parameter: switching
# it re-runs no finished cell, as a change of machine does not (each cell's provenance records it).
os.environ.update(cpu_isa_env(config["run"]["cpu_isa"]))


wildcard_constraints:
    scale="paper|quick|test",
    experiment="|".join(EXPERIMENTS),
    coords=r"([A-Za-z_][A-Za-z0-9_.]*~[^/]+/)*[A-Za-z_][A-Za-z0-9_.]*~[^/]+",


_GRIDS = {}
_STATUS = {}


def grid(name, scale):
    if (name, scale) not in _GRIDS:
        _GRIDS[name, scale] = grid_of(config, name, scale)
    return _GRIDS[name, scale]


def dataset_status_file(name):
    return f"{CACHE}/status/{name}.json"


def dataset_status(name, wait=True):
    """(available, reason) of a dataset. Found in a local mirror or the cache: available, no job (file
    presence and sizes, no hashing). Else, with data.download on, the `dataset` checkpoint fetches it
    once and records how it went; `wait` makes the caller (an input function) wait for that job
    (snakemake re-evaluates the DAG after it). With download off: n/a, saying so."""
    if name in _STATUS:
        return _STATUS[name]
    if is_available(name, MIRRORS, CACHE):
        status = (True, "")
    elif not DOWNLOAD:
        where = ", ".join(map(str, MIRRORS)) or "no mirrors"
        status = (
            False,
            f"not in the mirrors ({where}) or {CACHE}, and data.download is false",
        )
    else:
        if wait:
            checkpoints.dataset.get(dataset=name)
        path = Path(dataset_status_file(name))
        if not path.exists():
            return (False, "not fetched yet")
        record = json.loads(path.read_text())
        reason = record.get("reason", "")
        if not record["available"] and reason.startswith("download failed"):
            reason += f"; to try again: snakemake --forcerun dataset (or delete {path})"
        status = (bool(record["available"]), reason)
    _STATUS[name] = status
    return status


_CELLS = {}


def cell_of(wildcards):
    # Cached: several input functions ask for the same cell while the DAG is built.
    key = (wildcards.experiment, wildcards.scale, wildcards.coords)
    if key not in _CELLS:
        try:
            _CELLS[key] = grid(wildcards.experiment, wildcards.scale).parse(
                wildcards.coords
            )
        except ConfigError as err:
            raise WorkflowError(str(err)) from None
    return _CELLS[key]


def cell_dir(cell):
    return f"{RESULTS}/{cell.rel_dir}"


def unavailable_cells(name, scale, wait=True):
    return find_unavailable(grid(name, scale), lambda d: dataset_status(d, wait)[0])


def unavailable_reasons(name, scale):
    """{dataset: why it is n/a} for the experiment's unavailable datasets (after their fetch)."""
    missing = {
        d for ds in unavailable_cells(name, scale, wait=False).values() for d in ds
    }
    return {d: dataset_status(d, wait=False)[1] for d in sorted(missing)}


def available_cell_outputs(name, scale):
    skip = unavailable_cells(name, scale)
    return [
        f"{cell_dir(c)}/metrics.json"
        for c in grid(name, scale).cells()
        if c.rel_dir not in skip
    ]


def experiment_csv(name):
    return f"{RESULTS}/{SCALE}/{name}.csv"


PAPER_DOCS = {}


def paper_numbers_file(paper):
    """config/papers/<paper>.yaml (the paper's numbers and claims, read once), None when there is none."""
    path = f"config/papers/{paper}.yaml"
    if not Path(path).exists():
        return None
    if path not in PAPER_DOCS:
        try:
            PAPER_DOCS[path] = load_paper(path)
        except (ValueError, KeyError) as err:
            raise WorkflowError(str(err)) from None
    return path


def all_artefact_outputs():
    # every artefact in every declared format
    return [
        f"figures/{name}.{ext}"
        for name, spec in config["artefacts"].items()
        for ext in spec["outputs"]
    ]


# Every cell of this scale is checked before the DAG is built (its kind's plan: settings, allowed values,
# what its method needs), so a bad value fails `snakemake -n` naming the experiment, the cell and the key.
try:
    validate_cells(grid(name, SCALE) for name in EXPERIMENTS)
except ConfigError as err:
    raise WorkflowError(f"config: {err}") from None


# What the SLURM profile (slurm/config.yaml, under set-resources: cell:) says about cells: the two
# partitions, the GPU request, how many cells run at once on a GPU / CPU job. Read here, because a resource
# of rule `cell` (its partition, its group) depends on them; Snakemake hands set-resources to the processes
# it starts inside SLURM jobs too, so they all read the same. None where the profile (or a local run) gives none.
def profile_cell_setting(name, cast=str):
    res = (workflow.resource_settings.overwrite_resources or {}).get("cell") or {}
    if name not in res:
        return None
    value = str(getattr(res[name], "raw", res[name])).strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    try:
        return cast(value)
    except ValueError:
        raise WorkflowError(
            f"slurm/config.yaml: set-resources.cell.{name}: {value!r} is not a {cast.__name__}"
        ) from None
