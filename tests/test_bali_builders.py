"""Every BALI cell states all of BALI's settings: each of the three BALI builders passes every field of the
library's `BaliConfig` from the cell's settings, so no library default reaches a pipeline cell, and what it
passes is what the cell records (`KindPlan.cell_settings`)."""

import dataclasses

import pytest

import reprokit.bali
from reprokit.builders import CellContext
from reprokit.config import experiment
from reprokit.data import variants
from reprokit.data.variants import variant_path
from reprokit.plan import kind
from reprokit.plan.bali_blocks import BaliOptions

# BaliConfig fields a builder may leave out, and why: the pipeline states U_0 through its factor of N_eff, and the
# prior row scale as sigma_r2 (the regression and classification tables) or sigma_r (App. H.1), one of the two.
DERIVED = {"sigma_u2", "sigma_r", "sigma_r2"}


class _Built(Exception):
    pass


@pytest.mark.parametrize("name,block", [("bali_uci", "bali"), ("bali_cls_uci", "bali"), ("bali_synthetic", "bali")])
def test_bali_builders_pass_every_baliconfig_field_from_the_cells_settings(name, block, pipeline_config, shared_data,
                                                                          tmp_path, monkeypatch):
    cfg = pipeline_config({"scale": "test"})
    cell = next(c for c in experiment(cfg, name, "test").cells() if c.coord_dict.get("method") == "bali")
    plan = kind(cell.kind)
    ctx = CellContext(mirrors=[shared_data], cache_dir=None, variants_dir=str(tmp_path / "variants"),
                      runtime_settings={"device": "cpu", "precision": "fp32"})
    for var, (ds, fn) in plan.required_variants(cell).items():
        path = variant_path(ctx.variants_dir, ds, fn)
        path.parent.mkdir(parents=True, exist_ok=True)
        variants.build_variant(ds, fn, path, [shared_data])
        ctx.variant_paths[var] = path
    seen = {}

    def record(**kwargs):
        seen.update(kwargs)
        raise _Built

    monkeypatch.setattr(reprokit.bali, "BaliConfig", record)
    with pytest.raises(_Built):
        plan.build(cell, ctx)
    fields = {f.name for f in dataclasses.fields(reprokit.bali.config.BaliConfig)}
    assert fields - set(seen) <= DERIVED, f"left to the library's defaults: {sorted(fields - set(seen) - DERIVED)}"
    recorded = plan.cell_settings(cell)[block]
    assert {k: seen[k] for k in BaliOptions.model_fields} == {k: recorded[k] for k in BaliOptions.model_fields}
    assert list(seen["beta_milestones"]) == recorded["beta_milestones"] and seen["beta_decay"] == recorded["beta_decay"]
