"""Typed settings of the BALI paper's kinds (uci_regression, synthetic_predictive, bali_classification): one
pydantic model per kind holds every default and allowed value, and the kind's JSON schema is generated from
it. This file checks that the config is held to the model before any cell exists, builds every configured
cell's settings, and checks the errors and defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from reprokit.config import ConfigError, grid_of, load_pipeline_config
from reprokit.plan import kind, kind_schema

REPO = Path(__file__).resolve().parents[1]
KINDS = ("uci_regression", "synthetic_predictive", "bali_classification")
SCALES = ("test", "quick", "paper")


@pytest.fixture(scope="module")
def config(pipeline_config):
    return pipeline_config()


def _block_schema(name: str, block: str) -> dict:
    """The generated schema of one nested block (`bali`, ...) of kind `name` (its $ref resolved)."""
    settings = kind_schema(name)["settings"]
    node = settings["properties"][block]
    for option in node.get("anyOf", [node]):
        ref = option.get("$ref", "")
        if ref.startswith("#/$defs/"):
            return settings["$defs"][ref.rsplit("/", 1)[1]]
    raise LookupError(block)


def _test_cell(config, name: str, **coords):
    for c in grid_of(config, name, "test").cells():
        if all(c.coord_dict[k] == v for k, v in coords.items()):
            return c
    raise LookupError(coords)


def _with(cell, **settings):
    """The cell with some settings replaced (None: the key removed)."""
    merged = {**cell.settings, **settings}
    return dataclasses.replace(cell, settings={k: v for k, v in merged.items() if v is not None})


@pytest.mark.parametrize(
    "experiment_name,settings,where",
    [
        ("bali_uci", {"bali": {"alpha": -0.3}}, "experiments.bali_uci.settings.bali.alpha"),
        ("bali_uci", {"bali": {"wishart_n": "n_train"}}, "experiments.bali_uci.settings.bali.wishart_n"),
        ("bali_synthetic", {"bbb": {"lr": 0}}, "experiments.bali_synthetic.settings.bbb.lr"),
        ("bali_cls_uci", {"activation": "sigmoid"}, "experiments.bali_cls_uci.settings.activation"),
        (
            "bali_cls_uci",
            {"per_dataset": {"spambsae": {"n_steps": 3}}},
            "experiments.bali_cls_uci.settings.per_dataset",
        ),
    ],
)
def test_the_config_is_held_to_the_model_before_any_cell_exists(experiment_name, settings, where):
    """The kind's schema, generated from its model, rejects a bad value (or a per-dataset block of a dataset the
    kind does not know) in a settings block at load time, naming where it is."""
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        load_pipeline_config(REPO, {"experiments": {experiment_name: {"settings": settings}}})


@pytest.mark.parametrize("name", KINDS)
def test_a_scale_may_override_one_key_and_each_dotted_axis_names_a_nested_key(name):
    """Scale blocks are partial: the generated schema accepts one key of the kind or of a nested block (the
    merged cell is checked by the model), not an unknown one; a dotted sweep axis (bali.wishart_n, bali.alpha)
    names a key of the nested block it sets."""
    import jsonschema

    schema = kind_schema(name)
    validator = jsonschema.Draft202012Validator(schema["settings"])
    assert validator.is_valid({"final_samples": 4}) and validator.is_valid({"bali": {"alpha": 0.5}})
    assert not validator.is_valid({"final_sampels": 4}) and not validator.is_valid({"bali": {"alpah": 0.5}})
    for axis in (a for a in schema["axes"] if "." in a):
        block, key = axis.split(".")
        assert key in _block_schema(name, block)["properties"], axis


@pytest.mark.parametrize("name", KINDS)
def test_every_configured_cell_builds_typed_settings(config, name):
    experiments = [e for e, spec in config["experiments"].items() if spec["kind"] == name]
    assert experiments
    n = 0
    for exp in experiments:
        for scale in SCALES:
            for cell in grid_of(config, exp, scale).cells():
                plan = kind(cell.kind)
                st = plan.typed_settings(cell)
                assert st.method == cell.coord_dict["method"] and plan.n_steps(cell) > 0
                n += 1
    assert n > 0


@pytest.mark.parametrize(
    "name,cell_coords,settings,bad",
    [
        ("bali_uci", {"method": "bali"}, {"n_evalz": 3}, "n_evalz"),
        ("bali_uci", {"method": "dropout"}, {"dropout": {"p": 0.05, "dropout_inptu": False}}, "dropout_inptu"),
        ("bali_synthetic", {"dataset": "sinc"}, {"final_sampels": 4}, "final_sampels"),
        (
            "bali_synthetic",
            {"dataset": "sinc"},
            {"regression": {"sigma_init": 3.0, "sigma_r": 80.0, "sigma_u2": 1.0}},
            "sigma_u2",
        ),
        ("bali_cls_uci", {"method": "map"}, {"standardise": True}, "standardise"),
        ("bali_cls_uci", {"method": "bali"}, {"bali": {"n_eff_divisr": 4}}, "n_eff_divisr"),
    ],
)
def test_a_misspelled_key_is_named(config, name, cell_coords, settings, bad):
    cell = _with(_test_cell(config, name, **cell_coords), **settings)
    with pytest.raises(ConfigError, match=bad):
        kind(cell.kind).typed_settings(cell)


def test_uci_regression_defaults(config):
    cell = _test_cell(config, "bali_uci", method="bali", dataset="uci_yacht")
    bali = {k: v for k, v in cell.settings["bali"].items() if k not in ("reparam", "scale_input_layer")}
    st = kind(cell.kind).typed_settings(_with(cell, n_evals=None, bali=bali))
    assert st.n_evals == 10 and st.eval_every is None and st.block.reparam == "weight"
    assert st.block.scale_input_layer is False and st.block.wishart_n == "n_eff"
    # wishart_n has no default (a default would not show in a cell's recorded settings): a block without it is
    # refused, naming the key
    with pytest.raises(ConfigError, match="wishart_n"):
        kind(cell.kind).typed_settings(_with(cell, bali={k: v for k, v in bali.items() if k != "wishart_n"}))
    # a method's block matters only to that method's cells; a cell without its own block is told so
    dropout = _with(_test_cell(config, "bali_uci", method="dropout"), dropout=None)
    with pytest.raises(ConfigError, match="'dropout'"):
        kind(dropout.kind).n_steps(dropout)
    assert kind(cell.kind).typed_settings(_with(cell, dropout=None)).dropout is None


def test_synthetic_predictive_defaults(config):
    cell = _test_cell(config, "bali_synthetic", dataset="sines_trend")
    st = kind(cell.kind).typed_settings(_with(cell, batch_size=None, data=None))
    assert st.batch_size is None  # full batch
    assert st.data_kwargs() == {"seed": cell.settings["data_seed"]}  # the generator's own defaults
    sinc = kind(cell.kind).typed_settings(_test_cell(config, "bali_synthetic", dataset="sinc"))
    assert sinc.data_kwargs() == {"seed": 0, "n_train": 256}
    with pytest.raises(ConfigError, match="'regression'"):
        kind(cell.kind).typed_settings(_with(cell, regression=None)).need("regression")


def test_bali_classification_defaults(config):
    cell = _test_cell(config, "bali_cls_uci", method="dropout", dataset="spambase")
    st = kind(cell.kind).typed_settings(_with(cell, standardize=None, train_subset=None))
    assert st.standardize is False and st.train_subset is None and st.ood_dataset is None
    # eval_every overrides eval_every_epochs; without either the missing key is named
    assert st.eval_every_steps(4096) == cell.settings["eval_every"]
    epochs = kind(cell.kind).typed_settings(_with(cell, eval_every=None))
    assert epochs.eval_every_steps(4096) == round(
        cell.settings["eval_every_epochs"] * 4096 / cell.settings["batch_size"]
    )
    with pytest.raises(ConfigError, match="eval_every_epochs"):
        kind(cell.kind).typed_settings(_with(cell, eval_every=None, eval_every_epochs=None)).eval_every_steps(4096)
    with pytest.raises(ConfigError, match="dropout_p"):
        kind(cell.kind).typed_settings(_with(cell, dropout_p=None)).need("dropout_p")


def test_every_wishart_n_the_config_may_hold_runs_in_the_library_with_its_own_count():
    """`wishart_n` (the N in u = u_0 + N, Eq. 16d): required in the settings model (no default, so every cell's
    recorded settings name it) as in the library's BaliConfig, and each value both kinds' generated schemas allow
    builds a BaliConfig that counts its own N (n: the training-set size, n_eff: N_eff)."""
    from reprokit.bali.config import BaliConfig
    from reprokit.plan.bali_blocks import BaliPriors

    assert BaliPriors.model_fields["wishart_n"].is_required()
    for name, block in (("uci_regression", "bali"), ("bali_classification", "bali")):
        schema = _block_schema(name, block)
        assert "default" not in schema["properties"]["wishart_n"]  # (schemas require nothing: settings come in layers)
        values = schema["properties"]["wishart_n"]["enum"]
        counts = {v: BaliConfig(wishart_n=v, n_eff=10.0, n_data=500.0).wishart_count for v in values}
        assert counts == {"n": 500.0, "n_eff": 10.0}


@pytest.mark.parametrize(
    "name,coords,value",
    [
        ("bali_uci", {"method": "bali"}, {"method": "mcmc"}),
        ("bali_synthetic", {"dataset": "sinc"}, {"dataset": "spirals"}),
        ("bali_cls_uci", {"method": "map"}, {"dataset": "cifar10"}),
    ],
)
def test_unknown_method_or_dataset_is_named(config, name, coords, value):
    cell = _test_cell(config, name, **coords)
    cell = dataclasses.replace(cell, coords=tuple((a, value.get(a, v)) for a, v in cell.coords))
    with pytest.raises(ConfigError, match=next(iter(value.values()))):
        kind(cell.kind).typed_settings(cell)
