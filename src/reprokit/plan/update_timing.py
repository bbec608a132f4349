"""Plan of the update_timing kind (partitioned paper Table 8). Build: experiments/update_timing.py."""

from __future__ import annotations

from . import KindPlan, register


class UpdateTimingPlan(KindPlan):
    name = "update_timing"
    build_target = "reprokit.experiments.update_timing:build"

    def n_steps(self, cell) -> int:
        return int(cell.settings["n_warmup"]) + int(cell.settings["n_repeats"])


PLAN = register(UpdateTimingPlan())
