"""Plan of the update_timing kind (partitioned paper Table 8). Build: experiments/update_timing.py.

The config's `per_model` block (settings per architecture) is merged into a cell's settings by
config.py before the cell exists; it is not a setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import ConfigError
from . import KindPlan, Settings, register
from .costs import CellWork, Part

BACKWARDS = ("minimal", "full")
TIMERS = ("auto", "cpu", "wall")


@dataclass(frozen=True, kw_only=True)  # keyword-only: fields grouped by topic, defaults anywhere
class UpdateTimingSettings(Settings):
    # grid axes
    model: str  # a name of reprokit.models.registry
    seed: int  # initialisation, partition assignment, synthetic batch, k draws
    # the fixed batch: synthetic N(0, 1) images of input_shape, random labels
    batch_size: int
    input_shape: list
    n_classes: int = 10
    n_aug_samples: int
    model_kwargs: dict = field(default_factory=dict)
    # partitioning
    chunk_proportions: list
    partition_scheme: str = "random"
    partition_default: str = "init"
    schedule_examples: int = 1000  # virtual examples whose chunk assignment drives the k draws
    # augmentation and optimisers
    augmentation: str
    augmentation_init: float = 0.1
    optimizer: str
    lr: float
    momentum: float = 0.9
    weight_decay: float = 0.0
    wd_scaling: str = "reciprocal"
    hyper_lr: float = 1e-3
    augerino_reg: float = 0.01  # strength of Augerino's (safe) width regulariser in its update (App. I.4)
    # measurement
    n_warmup: int
    n_repeats: int
    num_threads: int = 1
    timer: str = "auto"  # auto: wall clock on CUDA, process CPU time elsewhere
    backward: str = "minimal"
    # Diff. Laplace's hyper update costs ~10-2000 standard updates: timed in fewer repetitions
    dl_n_warmup: int = 1  # warm-up Diff. Laplace hyper updates (in the last warm-up repetitions; at most n_warmup)
    dl_n_repeats: int | None = None  # timed repetitions with it (the first ones; None: all n_repeats; 0: not timed)

    def __post_init__(self):
        if self.backward not in BACKWARDS:
            raise ConfigError(f"update_timing: backward '{self.backward}' unknown (valid: {', '.join(BACKWARDS)})")
        if self.timer not in TIMERS:
            raise ConfigError(f"update_timing: timer '{self.timer}' unknown (valid: {', '.join(TIMERS)})")

    @property
    def dl_warmup(self) -> int:
        """Warm-up repetitions that run the Diff. Laplace hyper update (the last ones)."""
        return min(int(self.dl_n_warmup), int(self.n_warmup))

    @property
    def dl_repeats(self) -> int:
        """Timed repetitions that run the Diff. Laplace hyper update (the first ones)."""
        n = int(self.n_repeats)
        return n if self.dl_n_repeats is None else min(int(self.dl_n_repeats), n)

    @property
    def n_steps(self) -> int:
        """Loop steps: every repetition, warm-up included."""
        return int(self.n_warmup) + int(self.n_repeats)


class UpdateTimingPlan(KindPlan):
    name = "update_timing"
    Settings = UpdateTimingSettings
    build_target = "reprokit.experiments.update_timing:build"


    def cost_parts(self, cell) -> CellWork:
        st = self.settings(cell)
        model = str(st.model)
        B, S = int(st.batch_size), int(st.n_aug_samples)
        n = st.n_steps
        # standard, Augerino and Diff. Laplace param updates cost a standard step; the Diff. Laplace hyper update
        # runs in dl_warmup + dl_repeats repetitions only
        return CellWork(n, [Part(model, "standard", B * S, 3 * n), Part(model, "param", B * S, n),
                            Part(model, "hyper", B * S, n),
                            Part(model, "lila_hyper", B * S, st.dl_warmup + st.dl_repeats)])


PLAN = register(UpdateTimingPlan())
