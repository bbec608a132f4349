"""Typed settings (2026-11-23, commit f2f84e3) of the BALI paper's kinds (uci_regression, synthetic_predictive,
bali_classification). The dataclass holds the defaults, the JSON schema validates: this file keeps the
two in step, builds every configured cell's settings, and checks the errors and defaults."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from reprokit.config import ConfigError, experiment
from reprokit.plan import _settings_type as settings_type
from reprokit.plan import kind

REPO = Path(__file__).resolve().parents[1]
KINDS = ("uci_regression", "synthetic_predictive", "bali_classification")
SCALES = ("test", "quick", "paper")


@pytest.fixture(scope="module")
def config(pipeline_config):
    return pipeline_config()


def _schema(name: str) -> dict:
    return yaml.safe_load((REPO / "workflow" / "schemas" / "kinds" / f"{name}.schema.yaml").read_text())


def _resolve(node: dict, settings_schema: dict) -> dict:
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return settings_schema["$defs"][ref.rsplit("/", 1)[1]]
    return node


def _names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _test_cell(config, name: str, **coords):
    for c in experiment(config, name, "test").cells():
        if all(c.coord_dict[k] == v for k, v in coords.items()):
            return c
    raise LookupError(coords)


def _with(cell, **settings):
    """The cell with some settings replaced (None: the key removed)."""
    merged = {**cell.settings, **settings}
    return dataclasses.replace(cell, settings={k: v for k, v in merged.items() if v is not None})


@pytest.mark.parametrize("name", KINDS)
def test_fields_equal_the_schema_keys_and_grid_axes(name):
    """A key added to the schema and not to the dataclass (or the other way round) fails here, for the
    kind's settings and for each nested block."""
    schema = _schema(name)
    settings = schema["settings"]
    top = kind(name).Settings
    dotted = [a for a in schema["axes"] if "." in a]  # sweep axes that set a key of a nested block
    expected = {k for k in settings["properties"] if not k.startswith("per_")} | (set(schema["axes"]) - set(dotted))
    assert _names(top) == expected
    for axis in dotted:
        block, key = axis.split(".")
        assert key in _resolve(settings["properties"][block], settings)["properties"], axis
    hints = typing.get_type_hints(top)
    blocks = {f.name: settings_type(hints[f.name]) for f in dataclasses.fields(top)}
    blocks = {k: v for k, v in blocks.items() if v is not None}
    assert blocks, "every BALI kind has nested blocks"
    for key, cls in blocks.items():
        props = _resolve(settings["properties"][key], settings)["properties"]
        assert _names(cls) == set(props), (name, key, cls.__name__)


@pytest.mark.parametrize("name", KINDS)
def test_every_configured_cell_builds_typed_settings(config, name):
    experiments = [e for e, spec in config["experiments"].items() if spec["kind"] == name]
    assert experiments
    n = 0
    for exp in experiments:
        for scale in SCALES:
            for cell in experiment(config, exp, scale).cells():
                plan = kind(cell.kind)
                st = plan.settings(cell)
                assert st.method == cell.coord_dict["method"] and plan.n_steps(cell) > 0
                n += 1
    assert n > 0


@pytest.mark.parametrize("name,cell_coords,settings,bad", [
    ("bali_uci", {"method": "bali"}, {"n_evalz": 3}, "n_evalz"),
    ("bali_uci", {"method": "dropout"}, {"dropout": {"p": 0.05, "dropout_inptu": False}}, "dropout_inptu"),
    ("bali_synthetic", {"dataset": "sinc"}, {"final_sampels": 4}, "final_sampels"),
    ("bali_synthetic", {"dataset": "sinc"}, {"regression": {"sigma_init": 3.0, "sigma_r": 80.0, "sigma_u2": 1.0}},
     "sigma_u2"),
    ("bali_cls_uci", {"method": "map"}, {"standardise": True}, "standardise"),
    ("bali_cls_uci", {"method": "bali"}, {"bali": {"n_eff_divisr": 4}}, "n_eff_divisr"),
])
def test_a_misspelled_key_is_named(config, name, cell_coords, settings, bad):
    cell = _with(_test_cell(config, name, **cell_coords), **settings)
    with pytest.raises(ConfigError, match=bad):
        kind(cell.kind).settings(cell)


def test_uci_regression_defaults(config):
    cell = _test_cell(config, "bali_uci", method="bali", dataset="uci_yacht")
    bali = {k: v for k, v in cell.settings["bali"].items() if k not in ("reparam", "scale_input_layer")}
    st = kind(cell.kind).settings(_with(cell, n_evals=None, bali=bali))
    assert st.n_evals == 10 and st.eval_every is None and st.block.reparam == "weight"
    assert st.block.scale_input_layer is False and st.block.wishart_n == "n"
    # a method's block matters only to that method's cells; a cell without its own block is told so
    dropout = _with(_test_cell(config, "bali_uci", method="dropout"), dropout=None)
    with pytest.raises(ConfigError, match="'dropout'"):
        kind(dropout.kind).n_steps(dropout)
    assert kind(cell.kind).settings(_with(cell, dropout=None)).dropout is None


def test_synthetic_predictive_defaults(config):
    cell = _test_cell(config, "bali_synthetic", dataset="sines_trend")
    st = kind(cell.kind).settings(_with(cell, batch_size=None, data=None))
    assert st.batch_size is None  # full batch
    assert st.data_kwargs() == {"seed": cell.settings["data_seed"]}  # the generator's own defaults
    sinc = kind(cell.kind).settings(_test_cell(config, "bali_synthetic", dataset="sinc"))
    assert sinc.data_kwargs() == {"seed": 0, "n_train": 256}
    with pytest.raises(ConfigError, match="'regression'"):
        kind(cell.kind).settings(_with(cell, regression=None)).need("regression")


def test_bali_classification_defaults(config):
    cell = _test_cell(config, "bali_cls_uci", method="dropout", dataset="spambase")
    st = kind(cell.kind).settings(_with(cell, standardize=None, train_subset=None))
    assert st.standardize is False and st.train_subset is None and st.ood_dataset is None
    # eval_every overrides eval_every_epochs; without either the missing key is named
    assert st.eval_every_steps(4096) == cell.settings["eval_every"]
    epochs = kind(cell.kind).settings(_with(cell, eval_every=None))
    assert epochs.eval_every_steps(4096) == round(cell.settings["eval_every_epochs"] * 4096 / cell.settings["batch_size"])
    with pytest.raises(ConfigError, match="eval_every_epochs"):
        kind(cell.kind).settings(_with(cell, eval_every=None, eval_every_epochs=None)).eval_every_steps(4096)
    with pytest.raises(ConfigError, match="dropout_p"):
        kind(cell.kind).settings(_with(cell, dropout_p=None)).need("dropout_p")


def test_every_wishart_n_the_config_may_hold_runs_in_the_library_with_its_own_count():
    """`wishart_n` (commit 015830c; the N in u = u_0 + N, Eq. 16d): its one default is BaliPriors' (the
    library's BaliConfig has none), and each value both kinds' schemas allow builds a BaliConfig that counts
    its own N (n: the training-set size, n_eff: N_eff)."""
    from reprokit.bali.config import BaliConfig
    from reprokit.plan.bali_blocks import BaliPriors
    default = {f.name: f.default for f in dataclasses.fields(BaliPriors)}["wishart_n"]
    for name, block in (("uci_regression", "bali"), ("bali_classification", "bali")):
        settings = _schema(name)["settings"]
        values = _resolve(settings["properties"][block], settings)["properties"]["wishart_n"]["enum"]
        assert default in values
        counts = {v: BaliConfig(wishart_n=v, n_eff=10.0, n_data=500.0).wishart_count for v in values}
        assert counts == {"n": 500.0, "n_eff": 10.0}


@pytest.mark.parametrize("name,coords,value", [
    ("bali_uci", {"method": "bali"}, {"method": "mcmc"}),
    ("bali_synthetic", {"dataset": "sinc"}, {"dataset": "spirals"}),
    ("bali_cls_uci", {"method": "map"}, {"dataset": "cifar10"}),
])
def test_unknown_method_or_dataset_is_named(config, name, coords, value):
    cell = _test_cell(config, name, **coords)
    cell = dataclasses.replace(cell, coords=tuple((a, value.get(a, v)) for a, v in cell.coords))
    with pytest.raises(ConfigError, match=next(iter(value.values()))):
        kind(cell.kind).settings(cell)
