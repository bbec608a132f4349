"""Plan of the synthetic_predictive kind (BALI Figs. 1, 4-6). Build: builders/synthetic_predictive.py."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from ..data.specs import dataset_info
from .bali_blocks import BaliKindSettings, BaliOptions, BbbNoise, Fraction
from .base import KindPlan, Settings, register
from .costs import CellWork, bali_step, mlp_cell
from .methods import MethodEntry, register_methods, table

_BUILD = "reprokit.builders.synthetic_predictive:"
# The kind's methods (plan/methods.py): each figure draws one method, so no colour or line of their own
METHOD_TABLE = register_methods(
    "synthetic_predictive",
    table(
        MethodEntry(
            "bali",
            label="BALI",
            blocks=("bali",),  # and the priors of the dataset's task (`needs`)
            builder=_BUILD + "build_bali",
            cost_step=lambda st: bali_step(st.need("bali").reparam),
        ),
        MethodEntry("bbb", label="BBB", blocks=("bbb",), builder=_BUILD + "build_bbb", cost_step="bbb"),
    ),
)
Method = Literal[tuple(METHOD_TABLE)]
Dataset = Literal["sines_trend", "sinc", "two_moons"]
METHODS, DATASETS = get_args(Method), get_args(Dataset)


class PriorBlock(Settings):
    """BALI priors of one task (`regression` / `classification` blocks; App. H.1)."""

    sigma_init: float = Field(gt=0)
    sigma_r: float = Field(gt=0)
    sigma_u2_factor: float = Field(gt=0, description="sigma_u^2 = sigma_u2_factor * N_eff")


class SyntheticBaliBlock(BaliOptions):
    alpha: float = Field(gt=0)
    beta: float = Field(gt=0, le=1)
    # Fig. 1's schedule is not stated; these are BALI's Table 4 / 5 schedule, which every cell so far ran with
    beta_milestones: list[Fraction] = Field(
        [0.6, 0.8], description="beta / beta_decay after each fraction of the iterations"
    )
    beta_decay: float = Field(5.0, gt=0)
    reparam: Literal["weight", "local", "mean"] = "weight"


class SyntheticBbbBlock(BbbNoise):
    lr: float = Field(gt=0)
    prior_sigma: float = Field(gt=0)
    init_sigma: float = Field(gt=0)


class SyntheticDataBlock(Settings):
    """Generator keywords per dataset (n_train, noise, ...; data/registry.py); None: the generator's defaults."""

    sines_trend: dict | None = None
    sinc: dict | None = None
    two_moons: dict | None = None


class SyntheticSettings(BaliKindSettings):
    KIND = "synthetic_predictive"
    method: Method
    dataset: Dataset

    kl_factor: float = Field(description="grid axis: Bayes by Backprop's KL factor (ignored by BALI)")
    data_seed: int = Field(ge=0, description="the data sample (`seed` does not change it)")
    n_steps: int = Field(ge=1)
    eval_every: int = Field(ge=0)
    batch_size: int | None = Field(None, ge=0, description="0 / None: full batch")
    data: SyntheticDataBlock = Field(
        default_factory=SyntheticDataBlock,
        description="generator keywords per dataset (n_train, noise, ...; see data/registry.py)",
    )
    # BALI priors per task (the dataset's task picks one) and per-method blocks
    regression: PriorBlock | None = None
    classification: PriorBlock | None = None
    bali: SyntheticBaliBlock | None = None
    bbb: SyntheticBbbBlock | None = None

    def data_kwargs(self) -> dict:
        """Generator keywords of the cell's dataset: `data_seed` and the dataset's `data` block."""
        return {"seed": int(self.data_seed), **(getattr(self.data, self.dataset) or {})}


class SyntheticPredictivePlan(KindPlan):
    name = "synthetic_predictive"
    title = "synthetic_predictive experiments (BALI paper Sec. 5.1 Fig. 1, App. I.2 Figs. 4-6)"
    Settings = SyntheticSettings
    # bali.alpha, bali.beta, n_steps: optional sweep axes (a dotted axis sets that key of a nested block)
    axes = ("method", "dataset", "kl_factor", "seed", "bali.alpha", "bali.beta", "n_steps")
    build_target = "reprokit.builders.synthetic_predictive:build"

    def needs(self, st) -> tuple:
        """BALI: its block and the priors of the dataset's task; Bayes by Backprop: its block."""

        task = (dataset_info(st.dataset).task,) if st.method == "bali" else ()
        return (*METHOD_TABLE[st.method].blocks, *task)

    def other_methods_keys(self, cell, resolved: dict) -> set:
        """The method and task blocks the cell does not read (`needs`: BALI reads `bali` and its dataset's task
        block, BBB `bbb`), so editing BBB's settings leaves the BALI cells untouched and the reverse."""
        every = {k for e in METHOD_TABLE.values() for k in e.blocks} | {"regression", "classification"}
        return every - set(self.needs(self.typed_settings(cell)))

    def cost_parts(self, cell) -> CellWork:
        st = self.typed_settings(cell)
        step = METHOD_TABLE[st.method].step(st)
        images = int(st.batch_size) if st.batch_size else None  # 0: full batch
        return mlp_cell(int(st.n_steps), st.hidden, st.dataset, step, images)


PLAN = register(SyntheticPredictivePlan())
