"""The typed settings of the input_selection (Fig. 2), update_timing (Table 8) and federated (Table 4) kinds.

One pydantic model per kind (reprokit.plan.<kind>) holds the defaults and allowed values; the kind's JSON
schema, which checks the config's blocks at load time, is generated from it.
"""

from __future__ import annotations

import os

import pytest

from reprokit.config import ConfigError, grid_of, load_pipeline_config
from reprokit.plan import kind
from reprokit.plan.federated import FederatedSettings
from reprokit.plan.input_selection import InputSelectionSettings
from reprokit.plan.update_timing import UpdateTimingSettings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = {
    "input_selection": InputSelectionSettings,
    "update_timing": UpdateTimingSettings,
    "federated": FederatedSettings,
}


def _config() -> dict:
    return load_pipeline_config(REPO)


def _cells(cfg: dict, name: str):
    for exp, spec in sorted(cfg["experiments"].items()):
        if spec["kind"] == name:
            for scale in ("test", "quick", "paper"):
                yield from grid_of(cfg, exp, scale).cells()


@pytest.mark.parametrize(
    "exp,settings,where,what",
    [
        ("fig2a", {"activation": "swish"}, "experiments.fig2a.settings.activation", "swish"),
        (
            "table8_timing",
            {"per_model": {"mnist_cnn": {"bach_size": 3}}},
            "experiments.table8_timing.settings.per_model.mnist_cnn",
            "bach_size",
        ),
        (
            "table4_mnist",
            {"client_batching": "batched"},
            "experiments.table4_mnist.settings.client_batching",
            "batched",
        ),
    ],
)
def test_the_config_is_held_to_the_model_at_load_time(exp, settings, where, what):
    """A bad value or key in a settings block fails when the config loads, naming where it is and what."""
    with pytest.raises(ConfigError, match=where.replace(".", r"\.") + ".*" + what):
        load_pipeline_config(REPO, {"experiments": {exp: {"settings": settings}}})


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_configured_cell_builds_typed_settings(name):
    cells = list(_cells(_config(), name))
    assert cells
    plan = kind(name)
    for cell in cells:
        st = plan.typed_settings(cell)
        assert isinstance(st, KINDS[name])
        assert plan.n_steps(cell) > 0
        plan.required_variants(cell)


def _first_cell(name: str, exp: str, cfg=None):
    return next(iter(grid_of(cfg or _config(), exp, "test").cells()))


@pytest.mark.parametrize("name,exp", [("input_selection", "fig2a"), ("update_timing", "table8_timing")])
def test_a_misspelled_key_is_named(name, exp):
    cfg = _config()
    cfg["experiments"][exp]["settings"]["bach_size"] = 3  # not validated here: the model names it too
    with pytest.raises(ConfigError, match="bach_size"):
        kind(name).typed_settings(_first_cell(name, exp, cfg))


def test_update_timing_default_comes_from_the_model():
    cfg = _config()
    settings = cfg["experiments"]["table8_timing"]["settings"]
    assert "schedule_examples" not in settings and "n_classes" in settings
    del settings["n_classes"]
    st = kind("update_timing").typed_settings(_first_cell("update_timing", "table8_timing", cfg))
    assert st.n_classes == 10 and st.schedule_examples == 1000
    assert st.n_steps == st.n_warmup + st.n_repeats


def test_input_selection_default_and_the_settings_a_method_needs():
    cfg = _config()
    del cfg["experiments"]["fig2a"]["settings"]["dataset"]
    cell = _first_cell("input_selection", "fig2a", cfg)
    st = kind("input_selection").typed_settings(cell)
    assert st.dataset == "input_selection"
    assert kind("input_selection").required_variants(cell)["chunks"][0] == "input_selection"
    # laplace_prior_steps is optional for the partitioned methods, required by laplace
    del cfg["experiments"]["fig2a"]["settings"]["laplace_prior_steps"]
    del cfg["experiments"]["fig2a"]["scales"]["test"]["settings"]["laplace_prior_steps"]
    cells = list(grid_of(cfg, "fig2a", "test").cells())
    kind("input_selection").check(next(c for c in cells if c.coord_dict["method"] == "partitioned"))
    with pytest.raises(ConfigError, match="laplace_prior_steps"):
        kind("input_selection").check(next(c for c in cells if c.coord_dict["method"] == "laplace"))


def test_unknown_method_is_named():
    with pytest.raises(ConfigError, match="'lapalce'"):
        InputSelectionSettings.from_dict(
            {
                "method": "lapalce",
                "seed": 0,
                "n_inputs": 1,
                "n_train": 10,
                "n_test": 10,
                "data_seed": 0,
                "hidden": [4],
                "activation": "gelu",
                "lr": 0.1,
                "batch_size": 4,
                "weight_decay": 0.0,
                "n_steps": 1,
                "eval_every": 0,
                "laplace_prior_steps": 1,
            }
        )
