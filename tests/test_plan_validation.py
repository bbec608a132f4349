"""Every cell of a scale is checked before any job starts (reprokit.plan.validate_cells), and a cell's job
is assembled in one place (reprokit.job.cell_job) for the Snakemake rule and benchmarks/run_cells.py."""

import json
from pathlib import Path

import pytest
import yaml

from reprokit.config import ConfigError, grid_of
from reprokit.job import cell_job
from reprokit.plan import validate_cells

REPO = Path(__file__).resolve().parents[1]


def _grids(cfg, scale):
    return [grid_of(cfg, name, scale) for name in sorted(cfg["experiments"])]


@pytest.mark.parametrize("scale", ["test", "quick", "paper"])
def test_every_shipped_cell_passes_its_plans_check(pipeline_config, scale):
    cfg = pipeline_config({"scale": scale})
    n = validate_cells(_grids(cfg, scale))
    assert n == sum(len(list(g.cells())) for g in _grids(cfg, scale))


def test_a_method_without_its_block_is_named_with_experiment_cell_and_key(pipeline_config):
    cfg = pipeline_config({"scale": "quick"})
    del cfg["experiments"]["bali_cls_image"]["settings"]["optim"]
    with pytest.raises(ConfigError) as err:
        validate_cells(_grids(cfg, "quick"))
    text = str(err.value)
    assert "experiment 'bali_cls_image'" in text and "method~dropout" in text and "'optim'" in text


def test_a_partitioned_cell_without_hyper_lr_fails_before_it_runs(pipeline_config):
    cfg = pipeline_config({"scale": "test"})
    spec = cfg["experiments"]["fig3a"]
    spec["settings"] = {**spec["settings"], "hyper_lr": None}
    for block in (spec["settings"].get("per_method") or {}).values():
        block.pop("hyper_lr", None)
    with pytest.raises(ConfigError, match=r"experiment 'fig3a', cell test/fig3a/.*needs the setting 'hyper_lr'"):
        validate_cells(_grids(cfg, "test"))


def test_snakemake_dry_run_fails_naming_the_cell_that_misses_a_method_setting(tmp_path):
    from test_pipeline import make_workdir, snakemake

    work = make_workdir(tmp_path)
    path = work / "config" / "experiments" / "bali_classification.yaml"
    doc = yaml.safe_load(path.read_text())
    del doc["experiments"]["bali_cls_image"]["settings"]["optim"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = snakemake(work, "-n", "--cores", "1", "--config", "scale=test", timeout=300)
    assert res.returncode != 0
    assert "experiment 'bali_cls_image', cell test/bali_cls_image/method~dropout" in res.stdout, res.stdout[-2000:]
    assert "needs the setting 'optim'" in res.stdout


def test_cell_job_carries_the_plans_settings_upstream_inputs_and_paths(pipeline_config):
    cfg = pipeline_config({"scale": "test"})
    grid = grid_of(cfg, "bali_uci", "test")
    cell = next(c for c in grid.cells() if c.coord_dict["method"] == "dropout")
    job = cell_job(cell, cfg)
    # only the cell's own method block travels, so editing BALI's block does not re-run a dropout cell
    assert "dropout" in job.cell["settings"] and "bali" not in job.cell["settings"]
    assert job.out == str(Path(cfg["paths"]["results"]) / cell.rel_dir)
    assert job.checkpoint.endswith(f"{cell.rel_dir}/checkpoint.pt")
    assert job.checkpoint_every == cfg["run"]["checkpoint_every"]
    # the context carries the run keys that change numbers, not those that only change how a run is kept
    assert set(job.context["run"]) == {"device", "precision", "deterministic"}
    argv = job.argv(threads=3)
    assert argv[0] == "run" and argv[argv.index("--threads") + 1] == "3"
    assert json.loads(argv[argv.index("--cell") + 1]) == job.cell


def test_cell_job_resolves_a_retrain_cells_upstream_metrics(pipeline_config):
    cfg = pipeline_config({"scale": "test"})
    for name, _spec in cfg["experiments"].items():
        grid = grid_of(cfg, name, "test")
        retrain = [c for c in grid.cells() if c.coord_dict.get("method") == "retrain"]
        if retrain:
            break
    else:
        pytest.skip("no retrain cell at test scale")
    job = cell_job(retrain[0], cfg)
    assert job.upstream and all(p.endswith("metrics.json") for p in job.upstream.values())
    assert job.cell["settings"]["_inputs"] == job.upstream
    for path in job.upstream.values():  # each names a cell of the test-scale grid
        rel = Path(path).relative_to(cfg["paths"]["results"]).parent
        grid_of(cfg, rel.parts[1], "test").parse("/".join(rel.parts[2:]))


@pytest.mark.parametrize("kind_name", ["federated", "update_timing"])
def test_every_augmentation_a_plan_admits_is_one_its_builder_can_build(kind_name):
    """The federated and timing builders build `build_augmentation(kind, init=...)`; Benton et al.'s own
    parametrisation takes `init_raw` instead (the affine kind builds it), so these plans must reject it up front
    rather than let a cell fail at build time."""
    from typing import get_args

    from reprokit.augment.affine import build_augmentation
    from reprokit.plan import kind

    values = get_args(kind(kind_name).Settings.model_fields["augmentation"].annotation)
    assert values and "augerino" not in values
    for value in values:
        assert build_augmentation(value, init=0.1) is not None
