"""Plan of the uci_regression kind (BALI Tables 1 / 7). Build: experiments/uci_regression.py."""

from __future__ import annotations

from . import KindPlan, register

METHODS = ("bali", "bali_ystd", "dropout", "bbb")
BALI_METHODS = ("bali", "bali_ystd")


class UciRegressionPlan(KindPlan):
    name = "uci_regression"
    build_target = "reprokit.experiments.uci_regression:build"

    def cell_settings(self, cell) -> dict:
        """The settings this cell runs with: the shared ones and its own method's block. The other methods'
        blocks are dropped, so adding or changing one method leaves the other methods' cells untouched."""
        method = cell.coord_dict["method"]
        return {k: v for k, v in cell.settings.items() if k not in METHODS or k == method}

    def n_steps(self, cell) -> int:
        return int(cell.settings[cell.coord_dict["method"]]["n_steps"])


PLAN = register(UciRegressionPlan())
