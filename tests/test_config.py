"""Config validation names the bad key/value; grids expand and cell paths round-trip."""

import copy
from pathlib import Path

import pytest
import yaml

from reprokit.config import ConfigError, experiment, format_value, load_config, validate_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


CONFIG_FILES = [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "experiments").glob("*.yaml"))]


@pytest.fixture
def config():
    return load_config(CONFIG_FILES, SCHEMA)


def test_shipped_config_is_valid(config):
    validate_config(config, SCHEMA)


def test_misspelled_setting_is_named(config):
    bad = copy.deepcopy(config)
    bad["experiments"]["fig2a"]["settings"]["learning_rate"] = 0.1
    with pytest.raises(ConfigError, match="learning_rate"):
        validate_config(bad, SCHEMA)


def test_bad_value_is_named(config):
    bad = copy.deepcopy(config)
    bad["experiments"]["fig2a"]["settings"]["lr"] = -1
    with pytest.raises(ConfigError, match=r"experiments\.fig2a\.settings\.lr"):
        validate_config(bad, SCHEMA)


def test_bad_scale_is_named(config):
    bad = dict(config, scale="huge")
    with pytest.raises(ConfigError, match="huge"):
        validate_config(bad, SCHEMA)


def test_unknown_axis_in_scale_override_is_named(config):
    bad = copy.deepcopy(config)
    bad["experiments"]["fig2a"]["scales"]["quick"]["grid"]["seeds"] = [0]
    with pytest.raises(ConfigError, match="seeds"):
        validate_config(bad, SCHEMA)


def test_unknown_kind_is_named(config):
    bad = copy.deepcopy(config)
    bad["experiments"]["fig2a"]["kind"] = "input_selektion"
    with pytest.raises(ConfigError, match="input_selektion"):
        validate_config(bad, SCHEMA)


def test_grid_expansion_and_scale_override(config):
    paper = list(experiment(config, "fig2a", "paper").cells())
    quick = list(experiment(config, "fig2a", "quick").cells())
    assert len(paper) == 2 * 30 * 3
    assert len(quick) == 2 * 30 * 1
    assert quick[0].settings["n_steps"] == 2000 and paper[0].settings["n_steps"] == 10000


def test_cell_path_round_trip(config):
    grid = experiment(config, "fig2a", "paper")
    for cell in list(grid.cells())[::17]:
        coord_path = cell.rel_dir.split("/", 2)[2]
        assert grid.parse(coord_path) == cell


def test_cell_path_outside_grid_is_named(config):
    grid = experiment(config, "fig2a", "test")
    with pytest.raises(ConfigError, match=r"n_inputs='7'.*valid: 1, 15, 30"):
        grid.parse("method~partitioned/n_inputs~7/seed~0")


def test_format_value():
    assert format_value([0.8, 0.1, 0.1]) == "0.8-0.1-0.1"
    assert format_value(1e-3) == "0.001"
    with pytest.raises(ConfigError):
        format_value("a/b")
