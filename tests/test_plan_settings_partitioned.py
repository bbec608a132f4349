"""The typed settings (2026-11-23, commit 5a15684) of the input_selection (Fig. 2) and update_timing (Table 8) kinds.

The dataclass (reprokit.plan.<kind>) supplies the defaults, the JSON schema
(workflow/schemas/kinds/<kind>.schema.yaml) validates: the two must name the same keys.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import yaml

from reprokit.config import ConfigError, experiment, load_pipeline_config
from reprokit.plan import kind
from reprokit.plan.federated import FederatedSettings
from reprokit.plan.input_selection import InputSelectionSettings
from reprokit.plan.update_timing import UpdateTimingSettings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = {"input_selection": InputSelectionSettings, "update_timing": UpdateTimingSettings,
         "federated": FederatedSettings}


def _schema(name: str) -> dict:
    with open(os.path.join(REPO, "workflow", "schemas", "kinds", f"{name}.schema.yaml")) as f:
        return yaml.safe_load(f)


def _config() -> dict:
    return load_pipeline_config(REPO)


def _cells(cfg: dict, name: str):
    for exp, spec in sorted(cfg["experiments"].items()):
        if spec["kind"] == name:
            for scale in ("test", "quick", "paper"):
                yield from experiment(cfg, exp, scale).cells()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_dataclass_fields_are_the_schemas_settings_plus_the_grid_axes(name):
    schema = _schema(name)
    settings = {k for k in schema["settings"]["properties"] if not k.startswith("per_")}  # per_<axis>: config.py
    fields = {f.name for f in dataclasses.fields(KINDS[name])}
    assert kind(name).Settings is KINDS[name]
    # an axis may also be a setting (a sweep over it, e.g. input_selection's mask_init_keep)
    assert fields - settings == set(schema["axes"]) - settings, "dataclass fields the schema does not allow"
    assert settings - fields == set(), "schema settings the dataclass does not know"


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_configured_cell_builds_typed_settings(name):
    cells = list(_cells(_config(), name))
    assert cells
    plan = kind(name)
    for cell in cells:
        st = plan.settings(cell)
        assert isinstance(st, KINDS[name])
        assert plan.n_steps(cell) > 0
        plan.required_variants(cell)


def _first_cell(name: str, exp: str, cfg=None):
    return next(iter(experiment(cfg or _config(), exp, "test").cells()))


@pytest.mark.parametrize("name,exp", [("input_selection", "fig2a"), ("update_timing", "table8_timing")])
def test_a_misspelled_key_is_named(name, exp):
    cfg = _config()
    cfg["experiments"][exp]["settings"]["bach_size"] = 3  # not validated here: the dataclass names it too
    with pytest.raises(ConfigError, match="bach_size"):
        kind(name).settings(_first_cell(name, exp, cfg))


def test_update_timing_default_comes_from_the_dataclass():
    cfg = _config()
    settings = cfg["experiments"]["table8_timing"]["settings"]
    assert "schedule_examples" not in settings and "n_classes" in settings
    del settings["n_classes"]
    st = kind("update_timing").settings(_first_cell("update_timing", "table8_timing", cfg))
    assert st.n_classes == 10 and st.schedule_examples == 1000
    assert st.n_steps == st.n_warmup + st.n_repeats


def test_input_selection_default_and_the_settings_a_method_needs():
    cfg = _config()
    del cfg["experiments"]["fig2a"]["settings"]["dataset"]
    cell = _first_cell("input_selection", "fig2a", cfg)
    st = kind("input_selection").settings(cell)
    assert st.dataset == "input_selection"
    assert kind("input_selection").required_variants(cell)["chunks"][0] == "input_selection"
    # laplace_prior_steps is optional for the partitioned methods, required by laplace
    del cfg["experiments"]["fig2a"]["settings"]["laplace_prior_steps"]
    del cfg["experiments"]["fig2a"]["scales"]["test"]["settings"]["laplace_prior_steps"]
    cells = list(experiment(cfg, "fig2a", "test").cells())
    kind("input_selection").settings(next(c for c in cells if c.coord_dict["method"] == "partitioned"))
    with pytest.raises(ConfigError, match="laplace_prior_steps"):
        kind("input_selection").settings(next(c for c in cells if c.coord_dict["method"] == "laplace"))


def test_unknown_method_is_named():
    with pytest.raises(ConfigError, match="'lapalce'"):
        InputSelectionSettings.from_dict({"method": "lapalce", "seed": 0, "n_inputs": 1, "n_train": 10, "n_test": 10,
                                          "data_seed": 0, "hidden": [4], "activation": "gelu", "lr": 0.1,
                                          "batch_size": 4, "weight_decay": 0.0, "n_steps": 1, "eval_every": 0,
                                          "laplace_prior_steps": 1})
