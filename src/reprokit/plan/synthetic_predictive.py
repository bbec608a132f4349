"""Plan of the synthetic_predictive kind (BALI Figs. 1, 4-6). Build: experiments/synthetic_predictive.py."""

from __future__ import annotations

from . import KindPlan, register

METHODS = ("bali", "bbb")
DATASETS = ("sines_trend", "sinc", "two_moons")


class SyntheticPredictivePlan(KindPlan):
    name = "synthetic_predictive"
    build_target = "reprokit.experiments.synthetic_predictive:build"


PLAN = register(SyntheticPredictivePlan())
