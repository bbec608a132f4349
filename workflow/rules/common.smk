# Glue between the config and the package: the package decides what a cell is; rules stay thin.
import json
import shlex
from pathlib import Path

from reprokit.config import ConfigError, experiment, validate_config
from reprokit.config import unavailable_cells as find_unavailable
from reprokit.data.mirrors import is_available
from reprokit.data.specs import dataset_names
from reprokit.data.variant_names import variant_path
from reprokit.plan import kind as plan_of_kind
from reprokit.report.papers import load as load_paper
from reprokit.runtime import RuntimeSettings

try:
    validate_config(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
except ConfigError as err:
    raise WorkflowError(str(err)) from None

SCALE = config["scale"]
RESULTS = config["paths"]["results"]
CHECKPOINTS = config["paths"]["checkpoints"]
LOGS = config["paths"]["logs"]
VARIANTS = config["data"]["variants_dir"]
MIRRORS = config["data"]["mirrors"]
EXPERIMENTS = sorted(config["experiments"])

CONTEXT = {
    "mirrors": MIRRORS,
    "cache_dir": config["data"]["cache_dir"],
    "variants_dir": VARIANTS,
    "download": config["data"]["download"],
}
# Training cells also get the `run:` block's device / precision / determinism (reprokit/runtime.py
# decides what they mean; checked here, torch-free, before any job starts).
try:
    CELL_CONTEXT = {**CONTEXT, "run": RuntimeSettings.from_dict(config["run"]).to_dict()}
except ValueError as err:
    raise WorkflowError(f"config: {err}") from None

wildcard_constraints:
    scale="paper|quick|test",
    experiment="|".join(EXPERIMENTS),
    coords=r"([A-Za-z_]+~[^/]+/)*[A-Za-z_]+~[^/]+",


_GRIDS = {}
_AVAILABLE = {}


def grid(name, scale):
    if (name, scale) not in _GRIDS:
        _GRIDS[name, scale] = experiment(config, name, scale)
    return _GRIDS[name, scale]


def dataset_available(name):
    # Decided once, before any job runs (cheap: file presence and sizes, no hashing).
    if name not in _AVAILABLE:
        _AVAILABLE[name] = is_available(name, MIRRORS) or (
            config["data"]["download"] and name in dataset_names()
        )
    return _AVAILABLE[name]


_CELLS = {}


def cell_of(wildcards):
    # Cached: several input functions ask for the same cell while the DAG is built.
    key = (wildcards.experiment, wildcards.scale, wildcards.coords)
    if key not in _CELLS:
        try:
            _CELLS[key] = grid(wildcards.experiment, wildcards.scale).parse(wildcards.coords)
        except ConfigError as err:
            raise WorkflowError(str(err)) from None
    return _CELLS[key]


def cell_dir(cell):
    return f"{RESULTS}/{cell.rel_dir}"


def unavailable_cells(name, scale):
    return find_unavailable(grid(name, scale), dataset_available)


def available_cell_outputs(name, scale):
    skip = unavailable_cells(name, scale)
    return [f"{cell_dir(c)}/metrics.json" for c in grid(name, scale).cells() if c.rel_dir not in skip]


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
    return [f"figures/{name}.{ext}" for name, spec in config["artefacts"].items() for ext in spec["outputs"]]
