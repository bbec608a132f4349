"""Plan of the bali_classification kind (BALI Table 2, Figs. 2, 3, 7). Build: experiments/bali_classification.py."""

from __future__ import annotations

from . import KindPlan, register

METHODS = ("bali", "dropout", "map")
UCI = ("spambase", "magic", "cdc_diabetes")
IMAGES = ("mnist", "fashion_mnist")
# Settings only one method reads; `cell_settings` drops the other methods' keys from a cell's parameters.
METHOD_KEYS = {"bali": ("bali",), "dropout": ("optim", "dropout_p"), "map": ("optim",)}


class BaliClassificationPlan(KindPlan):
    name = "bali_classification"
    build_target = "reprokit.experiments.bali_classification:build"

    def cell_settings(self, cell) -> dict:
        """The settings this cell runs with: the shared ones and its own method's keys (BALI: `bali`; DO:
        `optim`, `dropout_p`; MAP: `optim`), so editing one method's settings leaves the others' cells untouched."""
        own = set(METHOD_KEYS[cell.coord_dict["method"]])
        other = {k for keys in METHOD_KEYS.values() for k in keys} - own
        return {k: v for k, v in cell.settings.items() if k not in other}


PLAN = register(BaliClassificationPlan())
