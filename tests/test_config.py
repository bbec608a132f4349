"""Config validation names the bad key/value; grids expand and cell paths round-trip."""

import copy
from pathlib import Path

import pytest

from reprokit.config import ConfigError, ExperimentGrid, format_value, grid_of, validate_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture
def config(pipeline_config):
    return pipeline_config()


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


SPEC = {
    "kind": "k",
    "grid": {"method": ["a", "b"], "seed": {"range": [0, 2]}},
    "settings": {"n_steps": 10, "opt": {"lr": 0.1, "momentum": 0.9}, "per_method": {"b": {"opt": {"lr": 0.5}}}},
    "scales": {"quick": {"grid": {"seed": [0]}, "settings": {"n_steps": 3}}},
}


def test_grid_is_the_product_of_its_axes_in_order():
    cells = list(ExperimentGrid("e", SPEC, "paper").cells())
    assert [c.coords for c in cells] == [(("method", m), ("seed", s)) for m in ("a", "b") for s in (0, 1, 2)]
    assert [c.rel_dir for c in cells[:2]] == ["paper/e/method~a/seed~0", "paper/e/method~a/seed~1"]


def test_scale_override_replaces_axes_and_settings_of_that_scale_only():
    quick = list(ExperimentGrid("e", SPEC, "quick").cells())
    assert [c.coord_dict for c in quick] == [{"method": "a", "seed": 0}, {"method": "b", "seed": 0}]
    assert all(c.settings["n_steps"] == 3 for c in quick)
    assert all(c.settings["n_steps"] == 10 for c in ExperimentGrid("e", SPEC, "paper").cells())


def test_per_axis_block_overrides_one_key_of_its_cells_and_is_not_a_setting():
    a, b = (ExperimentGrid("e", SPEC, "quick").parse(f"method~{m}/seed~0").settings for m in "ab")
    assert a == {"n_steps": 3, "opt": {"lr": 0.1, "momentum": 0.9}}
    assert b == {"n_steps": 3, "opt": {"lr": 0.5, "momentum": 0.9}}  # nested merge keeps momentum
    assert SPEC["settings"]["opt"] == {"lr": 0.1, "momentum": 0.9}  # the config itself is not mutated


def test_per_block_on_an_axis_the_grid_lacks_is_named_not_ignored():
    spec = copy.deepcopy(SPEC)
    spec["settings"]["per_dataset"] = {"mnist": {"n_steps": 99}}  # no `dataset` axis: it would never apply
    with pytest.raises(
        ConfigError, match=r"experiments\.e \(scale quick\): settings\.per_dataset .*'dataset'.*axes: method, seed"
    ):
        ExperimentGrid("e", spec, "quick")
    spec["settings"]["per_dataset"] = {}  # an empty block (a scale clearing an inherited one) is fine
    assert len(list(ExperimentGrid("e", spec, "quick").cells())) == 2


def test_a_scales_own_value_wins_over_the_experiments_per_axis_block():
    """Layers in order: the experiment's settings, its per_<axis> blocks, the scale's settings, the scale's own
    per_<axis> blocks. A value the scale sets applies to every cell of that scale, whatever the experiment's
    per-axis blocks say, and only the scale's own per-axis block refines it."""
    spec = copy.deepcopy(SPEC)
    spec["settings"]["per_method"]["b"]["n_steps"] = 20
    spec["scales"]["test"] = {"settings": {"n_steps": 4, "per_method": {"b": {"n_steps": 5}}}}

    def steps(scale):
        return {c.coord_dict["method"]: c.settings["n_steps"] for c in ExperimentGrid("e", spec, scale).cells()}

    assert steps("paper") == {"a": 10, "b": 20}
    assert steps("quick") == {"a": 3, "b": 3}  # the scale's n_steps, once, over the per_method block
    assert steps("test") == {"a": 4, "b": 5}  # the scale's own per_method block wins over its n_steps
    b = ExperimentGrid("e", spec, "quick").parse("method~b/seed~0").settings
    assert b["opt"] == {"lr": 0.5, "momentum": 0.9}  # what the scale does not set, the per_method block still does


def test_a_for_each_target_is_one_target_per_combination_naming_the_experiments_that_have_it():
    from reprokit.config import expand_targets

    plain = {"experiments": ["e1"], "metric": "m", "at_least": 0.5, "why": "w"}
    config = {
        "experiments": {
            "e1": {"grid": {"method": ["a", "b"], "dataset": ["x", "y"], "seed": {"range": [0, 1]}}},
            "e2": {"grid": {"method": ["a", "b", "c"], "dataset": ["z"]}},
        },
        "artefacts": {
            "t": {
                "experiments": ["e1", "e2"],
                "targets": {
                    "quick": [
                        {
                            "for_each": {"method": ["a", "b"], "dataset": ["x", "z"]},
                            "experiments": ["e1", "e2"],
                            "where": {"seed": 0},
                            "metric": "m",
                            "at_most": 1.0,
                            "why": "w",
                        },
                        plain,
                    ]
                },
            }
        },
    }
    rows = expand_targets(config)["artefacts"]["t"]["targets"]["quick"]
    assert [(r["experiments"], r["where"]) for r in rows[:-1]] == [
        (["e1"], {"seed": 0, "method": "a", "dataset": "x"}),
        (["e2"], {"seed": 0, "method": "a", "dataset": "z"}),
        (["e1"], {"seed": 0, "method": "b", "dataset": "x"}),
        (["e2"], {"seed": 0, "method": "b", "dataset": "z"}),
    ]
    assert all(r["metric"] == "m" and r["at_most"] == 1.0 and "for_each" not in r for r in rows[:-1])
    assert rows[-1] is plain and "for_each" in config["artefacts"]["t"]["targets"]["quick"][0]  # not mutated
    bad = copy.deepcopy(config)
    bad["artefacts"]["t"]["targets"]["quick"][0]["for_each"]["dataset"] = ["x", "zz"]  # a misspelt value
    with pytest.raises(ConfigError, match=r"targets\.quick\[0\]\.for_each': .* has dataset=zz in its grid"):
        expand_targets(bad)
    bad["artefacts"]["t"]["targets"]["quick"][0]["for_each"] = {"seed": [0]}  # also in `where`
    with pytest.raises(ConfigError, match=r"\['seed'\] also in the target's `where`"):
        expand_targets(bad)


def test_bali_table1s_quick_targets_are_one_per_method_and_dataset(config):
    rows = config["artefacts"]["bali_table1"]["targets"]["quick"]
    assert len(rows) == 21 and len({(r["where"]["method"], r["where"]["dataset"]) for r in rows}) == 21
    for r in rows:
        assert r["experiments"] == ["bali_uci_protein" if r["where"]["dataset"] == "uci_protein" else "bali_uci"]


def test_cell_path_round_trip(config):
    grid = grid_of(config, "fig2a", "paper")
    for cell in list(grid.cells())[::17]:
        coord_path = cell.rel_dir.split("/", 2)[2]
        assert grid.parse(coord_path) == cell


def test_cell_path_outside_grid_is_named(config):
    grid = grid_of(config, "fig2a", "test")
    with pytest.raises(ConfigError, match=r"n_inputs='7'.*valid: 1, 15, 30"):
        grid.parse("method~partitioned/n_inputs~7/seed~0")


def test_format_value():
    assert format_value([0.8, 0.1, 0.1]) == "0.8-0.1-0.1"
    assert format_value(1e-3) == "0.001"
    with pytest.raises(ConfigError):
        format_value("a/b")


def test_a_scale_can_exclude_grid_points_and_names_them():
    """`scales.<scale>.exclude` leaves matching grid points out (costly methods at fewer sizes); asking for
    an excluded cell's path is an error naming the exclusion; an unknown axis is named."""
    from reprokit.config import ConfigError, ExperimentGrid

    spec = {
        "kind": "k",
        "grid": {"method": ["a", "b"], "n": [1, 2, 3], "p": [[1, 2], [3, 4]], "seed": [0]},
        "settings": {},
        "scales": {"quick": {"exclude": [{"method": "b", "n": [2, 3]}, {"p": [3, 4], "n": 1}]}},
    }
    quick = ExperimentGrid("e", spec, "quick")
    kept = {(c.coord_dict["method"], c.coord_dict["n"], tuple(c.coord_dict["p"])) for c in quick.cells()}
    assert ("b", 2, (1, 2)) not in kept and ("b", 3, (3, 4)) not in kept and ("a", 1, (3, 4)) not in kept
    assert ("b", 1, (1, 2)) in kept and ("a", 3, (3, 4)) in kept and len(kept) == 12 - 4 - 2
    with pytest.raises(ConfigError, match="left out"):
        quick.parse("method~b/n~2/p~1-2/seed~0")
    assert len(list(ExperimentGrid("e", spec, "paper").cells())) == 12  # other scales keep every point
    bad = {**spec, "scales": {"quick": {"exclude": [{"size": 1}]}}}
    with pytest.raises(ConfigError, match=r"exclude\[0\]: no such axis \['size'\]"):
        ExperimentGrid("e", bad, "quick")


def test_a_dotted_axis_sets_one_key_of_a_nested_block_and_names_its_path():
    spec = {**SPEC, "grid": {"method": ["a"], "opt.lr": [0.01, 0.2], "seed": [0]}}
    cells = list(ExperimentGrid("e", spec, "paper").cells())
    assert [c.rel_dir for c in cells] == ["paper/e/method~a/opt.lr~0.01/seed~0", "paper/e/method~a/opt.lr~0.2/seed~0"]
    values = cells[1].settings_with_coords()
    assert values["opt"] == {"lr": 0.2, "momentum": 0.9} and "opt.lr" not in values  # siblings kept
    assert cells[1].settings["opt"]["lr"] == 0.1  # the cell's shared settings are not changed
    grid = ExperimentGrid("e", spec, "paper")
    assert grid.parse("method~a/opt.lr~0.2/seed~0") == cells[1]


def test_the_cell_wildcard_matches_every_cell_path(config):
    """The `coords` wildcard constraint of workflow/rules/common.smk accepts every configured cell's path
    (a dotted sweep axis included), so no cell is unreachable by asking for its output file."""
    import re

    text = (REPO / "workflow" / "rules" / "common.smk").read_text()
    pattern = re.search(r'coords=r"([^"]+)"', text).group(1)
    names = [e for e in config["experiments"] if any("." in a for a in config["experiments"][e]["grid"])]
    assert names, "a configured experiment has a dotted axis"
    for name in config["experiments"]:
        for cell in grid_of(config, name, "test").cells():
            coords = cell.rel_dir.split("/", 2)[2]
            assert re.fullmatch(pattern, coords), coords
