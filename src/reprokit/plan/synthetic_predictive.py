"""Plan of the synthetic_predictive kind (BALI Figs. 1, 4-6). Build: experiments/synthetic_predictive.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import KindPlan, Settings, register
from .bali_blocks import BaliKindSettings
from .costs import CellWork, bali_step, mlp_cell

METHODS = ("bali", "bbb")
DATASETS = ("sines_trend", "sinc", "two_moons")


@dataclass(frozen=True)
class PriorBlock(Settings):
    """BALI priors of one task (`regression` / `classification` blocks; App. H.1)."""
    sigma_init: float
    sigma_r: float
    sigma_u2_factor: float  # sigma_u^2 = sigma_u2_factor * N_eff


@dataclass(frozen=True)
class SyntheticBaliBlock(Settings):
    alpha: float
    beta: float
    reparam: str = "weight"


@dataclass(frozen=True)
class SyntheticBbbBlock(Settings):
    lr: float
    prior_sigma: float
    init_sigma: float


@dataclass(frozen=True)
class SyntheticDataBlock(Settings):
    """Generator keywords per dataset (n_train, noise, ...; data/registry.py); None: the generator's defaults."""
    sines_trend: dict | None = None
    sinc: dict | None = None
    two_moons: dict | None = None


@dataclass(frozen=True)
class SyntheticSettings(BaliKindSettings):
    KIND = "synthetic_predictive"
    VALID = {"method": METHODS, "dataset": DATASETS}

    kl_factor: float  # grid axis: Bayes by Backprop's KL factor (ignored by BALI)
    data_seed: int  # the data sample (`seed` does not change it)
    n_steps: int
    eval_every: int
    batch_size: int | None = None  # 0 / None: full batch
    data: SyntheticDataBlock = field(default_factory=SyntheticDataBlock)
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
    Settings = SyntheticSettings
    build_target = "reprokit.experiments.synthetic_predictive:build"

    def needs(self, st) -> tuple:
        """BALI: its block and the priors of the dataset's task; Bayes by Backprop: its block."""
        from ..data.specs import dataset_info

        return ("bali", dataset_info(st.dataset).task) if st.method == "bali" else ("bbb",)


    def cost_parts(self, cell) -> CellWork:
        st = self.settings(cell)
        step = bali_step(st.need("bali").reparam) if st.method == "bali" else st.method
        images = int(st.batch_size) if st.batch_size else None  # 0: full batch
        return mlp_cell(int(st.n_steps), st.hidden, st.dataset, step, images)


PLAN = register(SyntheticPredictivePlan())
