"""Plan of the input_selection kind (partitioned paper Fig. 2). Build: experiments/input_selection.py."""

from __future__ import annotations

from ..data import variant_names as variants
from . import KindPlan, register

METHODS = ("partitioned", "laplace", "partitioned_mask")


class InputSelectionPlan(KindPlan):
    name = "input_selection"
    build_target = "reprokit.experiments.input_selection:build"

    def required_variants(self, cell) -> dict:
        if cell.coord_dict["method"] not in ("partitioned", "partitioned_mask"):
            return {}
        s = cell.settings
        name = variants.variant_filename("chunks", n=s["n_train"], proportions=s["chunk_proportions"],
                                         seed=cell.coord_dict["seed"])
        return {"chunks": ("input_selection", name)}


PLAN = register(InputSelectionPlan())
