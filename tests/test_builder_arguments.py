"""No library default reaches a pipeline cell where the cell has a setting for it: each builder passes every
argument of the library call below from the cell's settings (intercepted before anything trains), and what it
passes is what the cell records (`KindPlan.resolved_settings`). The calls: BALI's `BaliConfig` in the three BALI
kinds, Bayes by Backprop (its likelihood noise), PBP's Gamma priors, Vadam's rates and selection, Augerino's regulariser and the last-layer GP's
initialisation. What a builder may leave to the library is listed per call with the reason."""

import dataclasses
import importlib
import inspect

import pytest

from reprokit.builders import CellContext
from reprokit.config import grid_of
from reprokit.data import variants
from reprokit.data.variants import variant_path
from reprokit.plan import kind
from reprokit.plan.bali_blocks import BaliOptions

# BaliConfig: the pipeline states U_0 through its factor of N_eff, and the prior row scale as sigma_r2 (the
# regression and classification tables) or sigma_r (App. H.1), one of the two.
BALI_DERIVED = {"sigma_u2", "sigma_r", "sigma_r2"}
# Method constructors: the data, evaluation chunking (how many test points per batch, no effect on a number but
# the order of Monte Carlo draws) and what the builder computes rather than reads.
BBB_LEFT = {"self", "eval_batch_size"}
CASES = [  # (experiment, method, module, name, left to the library, the cell's block)
    # builders import the library names at module level: intercept each where its builder looks it up
    ("bali_uci", "bali", "reprokit.builders.uci_regression", "BaliConfig", BALI_DERIVED, "bali"),
    ("bali_cls_uci", "bali", "reprokit.builders.bali_classification", "BaliConfig", BALI_DERIVED, "bali"),
    ("bali_synthetic", "bali", "reprokit.builders.synthetic_predictive", "BaliConfig", BALI_DERIVED, "bali"),
    ("bali_uci", "bbb", "reprokit.builders.uci_regression", "BBBMethod", BBB_LEFT, "bbb"),
    ("bali_uci", "pbp", "reprokit.builders.uci_regression", "PBPMethod", {"self"}, "pbp"),
    ("bali_uci", "vadam", "reprokit.builders.uci_regression", "VadamProtocol", BBB_LEFT, "vadam"),
    (
        "bali_bbb_synthetic",
        "bbb",
        "reprokit.builders.synthetic_predictive",
        "BBBMethod",
        BBB_LEFT | {"y_std", "train_eval_size"},
        "bbb",
    ),
    ("fig3a", "augerino", "reprokit.builders.affine_invariance", "AugerinoTraining", {"self"}, "augerino"),
    # the last-layer GP pulls in gpytorch: its builder imports it inside the function, from the method's module
    ("fig3a", "last_layer_ml", "reprokit.methods.last_layer_gp", "LastLayerGPConfig", set(), "last_layer_ml"),
]


class _Built(Exception):
    pass


def _arguments(cls) -> set:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set(inspect.signature(cls.__init__).parameters)


def _context(cell, plan, mirror, tmp_path):
    ctx = CellContext(
        mirrors=[mirror],
        cache_dir=None,
        variants_dir=str(tmp_path / "variants"),
        runtime_settings={"device": "cpu", "precision": "fp32"},
    )
    for var, (ds, fn) in plan.required_variants(cell).items():
        path = variant_path(ctx.variants_dir, ds, fn)
        path.parent.mkdir(parents=True, exist_ok=True)
        variants.build_variant(ds, fn, path, [mirror])
        ctx.variant_paths[var] = path
    return ctx


@pytest.mark.parametrize("name,method,module,attr,left,block", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_builders_pass_every_library_argument_from_the_cells_settings(
    name, method, module, attr, left, block, pipeline_config, shared_data, tmp_path, monkeypatch
):
    cfg = pipeline_config({"scale": "test"})
    cell = next(c for c in grid_of(cfg, name, "test").cells() if c.coord_dict.get("method") == method)
    plan = kind(cell.kind)
    ctx = _context(cell, plan, shared_data, tmp_path)
    target = importlib.import_module(module)
    real = getattr(target, attr)
    seen = {}

    def record(*args, **kwargs):
        bound = inspect.signature(real).bind_partial(*args, **kwargs) if not dataclasses.is_dataclass(real) else None
        seen.update(bound.arguments if bound else kwargs)
        raise _Built

    monkeypatch.setattr(target, attr, record)
    with pytest.raises(_Built):
        plan.build(cell, ctx)
    missing = _arguments(real) - set(seen) - left
    assert not missing, f"{attr}: left to the library's defaults: {sorted(missing)}"
    recorded = plan.resolved_settings(cell)[block]
    if attr == "BaliConfig":
        assert {k: seen[k] for k in BaliOptions.model_fields} == {k: recorded[k] for k in BaliOptions.model_fields}
        assert list(seen["beta_milestones"]) == recorded["beta_milestones"]
        assert seen["beta_decay"] == recorded["beta_decay"]
    elif attr == "BBBMethod":
        assert (seen["noise_std"], seen["init_noise_std"]) == (recorded["noise_std"], recorded["init_noise_std"])
    elif attr == "PBPMethod":
        assert (seen["prior_a"], seen["prior_b"]) == (recorded["prior_a"], recorded["prior_b"])
    elif attr == "VadamProtocol":
        assert seen["betas"] == (recorded["beta1"], recorded["beta2"])
        assert (seen["folds"], seen["val_samples"]) == (recorded["folds"], recorded["val_samples"])
    elif attr == "AugerinoTraining":
        assert seen["reg_threshold"] == recorded["reg_threshold"]
    else:
        assert (seen["jitter"], seen["lengthscale_init"]) == (recorded["jitter"], recorded["lengthscale_init"])
