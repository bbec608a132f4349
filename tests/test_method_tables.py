"""One method table per experiment kind (plan/methods.py): every method a plan allows has every entry, and a new
method is one entry in its kind's table plus a builder function (docs/architecture.md, walk-through 1; the last
test here carries it out with a throwaway method)."""

import os
from typing import Literal, get_args

import pytest
import torch

from reprokit import budget
from reprokit.config import grid_of, load_pipeline_config
from reprokit.plan import KINDS, validate_cells
from reprokit.plan.methods import TABLES, MethodEntry, load_builder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# kind -> the render module whose METHODS / COLORS / LINE draw its methods
RENDER = {"bali_classification": "reprokit.report.render.bali_classification"}
# kind -> (render module, its {method: label}) where tables name a kind's methods
LABELS = {
    "bali_classification": ("reprokit.report.render.bali_classification", "METHODS"),
    "uci_regression": ("reprokit.report.render.bali_regression", "OURS"),
}


def allowed_methods(plan) -> tuple:
    return get_args(plan.Settings.model_fields["method"].annotation)


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_method_a_plan_allows_has_every_entry(kind):
    table, plan = TABLES[kind], KINDS[kind]
    assert tuple(table) == allowed_methods(plan)  # the method axis's values are the table's, in its order
    fields = set(plan.Settings.model_fields)
    for name, e in table.items():
        assert e.name == name and e.label, name
        if kind in RENDER:  # drawn side by side: each its colour and line
            assert e.colour and e.line, name
        assert set(e.blocks) <= fields, f"{name}: blocks {e.blocks} are not settings of {kind}"
        assert callable(load_builder(e)), f"{name}: builder {e.builder} does not import"


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_cell_of_a_tabled_kind_is_priced_without_the_fallback(kind):
    """Each method's steps have a measured row or a labelled estimate (budget.CostTable.price) on both profiles,
    never the 1000 ms-per-step FALLBACK that would misplace the cell between GPU and CPU."""
    for profile in ("cpu", "h100"):
        table = budget.default_table(profile)
        for scale in ("test", "paper"):
            cfg = load_pipeline_config(REPO, {"scale": scale})
            for name, spec in cfg["experiments"].items():
                if spec.get("kind") != kind:
                    continue
                for cell in grid_of(cfg, name, scale).cells():
                    est = budget.estimate(cell, table)
                    assert not est.fallback, f"{profile}: {cell.rel_dir}: {est.notes}"


@pytest.mark.parametrize("kind", sorted(RENDER))
def test_render_names_draws_and_styles_every_method_of_the_table(kind):
    import importlib

    render = importlib.import_module(RENDER[kind])
    for name, e in TABLES[kind].items():
        assert render.METHODS[name] == e.label and render.COLORS[name] == e.colour
        assert render.LINE[name] == dict(e.line)


@pytest.mark.parametrize("kind", sorted(LABELS))
def test_render_labels_every_method_of_the_table(kind):
    import importlib

    module, name = LABELS[kind]
    labels = getattr(importlib.import_module(module), name)
    assert {m: labels[m] for m in TABLES[kind]} == {m: e.label for m, e in TABLES[kind].items()}


def test_fig3_draws_each_of_its_methods_with_the_table_entry():
    from reprokit.report.render import invariance

    table = TABLES["affine_invariance"]
    assert tuple(invariance.METHOD_STYLE) == invariance.FIG3_ORDER
    for m, (label, colour, marker) in invariance.METHOD_STYLE.items():
        assert (label, colour, marker) == (table[m].label, table[m].colour, table[m].line["marker"])


@pytest.mark.parametrize("kind", ["affine_invariance", "input_selection", "federated"])
def test_a_kind_needs_its_methods_settings_and_drops_only_the_others_blocks(kind):
    plan, table = KINDS[kind], TABLES[kind]
    every_block = {k for e in table.values() for k in e.blocks}
    for name, e in table.items():
        others = plan.other_methods_keys(None, {"method": name})
        assert others == every_block - set(e.blocks), name
        assert set(e.needs) <= set(plan.Settings.model_fields), name


# ------------------------------------------------------------------------------------------ a new method


def build_sgd(st, data, info):
    """The throwaway method's builder (a trivial library call): the MAP network trained with plain SGD."""
    from reprokit.methods.mc_dropout import MAP
    from reprokit.methods.standard import OptimConfig

    o = st.need("optim")
    optim = OptimConfig(optimizer="sgd", lr=float(o.lr), momentum=0.0, batch_size=int(st.batch_size))
    info.update({"optimizer": "sgd", "lr": optim.lr})
    return MAP(data, list(st.hidden), st.activation, optim, int(st.n_steps), int(st.seed))


def _fake_uci(name, mirrors=(), **kw):
    from reprokit.data import registry

    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 57, generator=g)
    y = (x[:, 0] > 0).long()
    return registry.Bundle(x[:60], y[:60], x[60:], y[60:], "classification", 2, name)


def test_a_new_method_is_one_table_entry_and_a_builder(monkeypatch, tmp_path):
    """Walk-through 1 carried out: a plain SGD baseline `sgd` on bali_cls_uci, registered as one entry (and the
    grid's method axis), is allowed by the plan, priced, trained by `build`, aggregated and drawn in Fig. 2."""
    from reprokit.builders import CellContext
    from reprokit.builders import bali_classification as bcx
    from reprokit.cell import run_cell
    from reprokit.plan import bali_classification as pbc
    from reprokit.report.render import bali_classification as bc
    from reprokit.report.store.aggregate import aggregate

    sgd = MethodEntry(
        "sgd",
        label="SGD",
        colour="tab:red",
        line={"lw": 1.2, "zorder": 3, "marker": "x"},
        blocks=("optim",),
        builder=f"{__name__}:build_sgd",
        cost_step="map",  # the same network and step as MAP
    )
    monkeypatch.setitem(pbc.METHOD_TABLE, "sgd", sgd)
    # the `method` literal is read from the table when the plan module loads: widen it as a new entry would
    widened = pydantic_subclass(pbc.ClassificationSettings, Literal[tuple(pbc.METHOD_TABLE)])
    monkeypatch.setattr(pbc.PLAN, "Settings", widened)

    cfg = load_pipeline_config(
        REPO, {"experiments": {"bali_cls_uci": {"grid": {"method": ["bali", "dropout", "map", "sgd"]}}}}
    )
    grid = grid_of(cfg, "bali_cls_uci", "test")
    assert validate_cells([grid]) > 0  # the planner's check of every cell (`snakemake -n` runs it)
    by_method = {
        c.coord_dict["method"]: c
        for c in grid.cells()
        if c.coord_dict["dataset"] == "spambase" and c.coord_dict["seed"] == 0
    }
    cell, map_cell = by_method["sgd"], by_method["map"]
    resolved = pbc.PLAN.resolved_settings(cell)
    assert "optim" in resolved and "bali" not in resolved and "dropout_p" not in resolved
    assert "sgd" not in str(pbc.PLAN.resolved_settings(map_cell))  # other cells untouched
    assert budget.cell_work(cell) == budget.cell_work(map_cell)  # priced as its step, not the 1000 ms fallback
    assert not budget.estimate(cell, budget.default_table("cpu")).fallback

    monkeypatch.setattr(bcx.registry, "load", _fake_uci)
    ctx = CellContext(mirrors=["nowhere"], cache_dir=None, variants_dir="unused")
    rec = run_cell(cell, ctx, tmp_path / cell.rel_dir, None)
    assert rec["status"] == "completed" and "test_acc" in rec["metrics"]
    table, curves = aggregate([cell], tmp_path)
    assert set(table["optimizer"]) == {"sgd"}  # what the builder recorded

    assert bc.METHODS["sgd"] == "SGD" and bc.COLORS["sgd"] == "tab:red"
    fig, axes = bc.nll_figure(table, curves, order=["spambase"])
    labels = {ln.get_label() for ax in axes for ln in ax.get_lines()}
    assert {"SGD train", "SGD test"} <= labels
    t2 = bc.table2(table)
    assert "SGD" in t2.columns


def pydantic_subclass(model, method_type):
    """`model` with its `method` field's type replaced (what the widened literal of a new table entry gives)."""
    import pydantic

    return pydantic.create_model(model.__name__, __base__=model, method=(method_type, ...))
