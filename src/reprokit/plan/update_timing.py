"""Plan of the update_timing kind (partitioned paper Table 8). Build: builders/update_timing.py.

The config's `per_model` block (settings per architecture) is merged into a cell's settings by
config.py before the cell exists; it is not a setting.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import KindPlan, Settings, register
from .costs import CellWork, Part


class TimingAugerinoBlock(Settings):
    """Augerino's update (App. I.4)."""

    reg: float = Field(0.01, ge=0, description="strength of the (safe) width regulariser in its update")


class TimingDiffLaplaceBlock(Settings):
    """Diff. Laplace's hyper update costs ~10-2000 standard updates: timed in fewer repetitions."""

    n_warmup: int = Field(
        1, ge=0, description="warm-up hyper updates (in the last warm-up repetitions; at most n_warmup)"
    )
    n_repeats: int | None = Field(
        None, ge=0, description="timed repetitions with its hyper update (the first ones; None: all n_repeats; 0: none)"
    )


class UpdateTimingSettings(Settings):
    # grid axes
    model: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="a name of reprokit.models.registry")
    seed: int = Field(description="initialisation, partition assignment, synthetic batch, k draws")
    # the fixed batch: synthetic N(0, 1) images of input_shape, random labels
    batch_size: int = Field(ge=1)
    input_shape: list[Annotated[int, Field(ge=1)]] = Field(min_length=1)
    n_classes: int = Field(10, ge=2)
    n_aug_samples: int = Field(ge=1)
    model_kwargs: dict = Field(default_factory=dict)
    # partitioning
    chunk_proportions: list[Annotated[float, Field(gt=0)]] = Field(min_length=2)
    partition_scheme: Literal["random", "node"] = "random"
    partition_default: Literal["init", "zero"] = "init"
    schedule_examples: int = Field(1000, ge=2, description="virtual examples whose chunk assignment drives the k draws")
    # augmentation and optimisers
    augmentation: Literal["schwobel", "immer"]  # Benton et al.'s own (`augerino`): the affine kind only
    augmentation_init: float = Field(0.1, ge=0)
    optimizer: Literal["adam", "sgd"]
    lr: float = Field(gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    wd_scaling: Literal["reciprocal", "sqrt", "none"] = "reciprocal"
    hyper_lr: float = Field(1e-3, gt=0)
    augerino: TimingAugerinoBlock = Field(default_factory=TimingAugerinoBlock)
    # measurement
    n_warmup: int = Field(ge=0)
    n_repeats: int = Field(ge=1)
    num_threads: int = Field(1, ge=1)
    timer: Literal["auto", "cpu", "wall"] = Field(
        "auto", description="auto: wall clock on CUDA, process CPU time elsewhere"
    )
    backward: Literal["minimal", "full"] = "minimal"
    diff_laplace: TimingDiffLaplaceBlock = Field(default_factory=TimingDiffLaplaceBlock)

    @property
    def dl_warmup(self) -> int:
        """Warm-up repetitions that run the Diff. Laplace hyper update (the last ones)."""
        return min(int(self.diff_laplace.n_warmup), int(self.n_warmup))

    @property
    def dl_repeats(self) -> int:
        """Timed repetitions that run the Diff. Laplace hyper update (the first ones)."""
        n = int(self.n_repeats)
        return n if self.diff_laplace.n_repeats is None else min(int(self.diff_laplace.n_repeats), n)

    @property
    def n_steps(self) -> int:
        """Loop steps: every repetition, warm-up included."""
        return int(self.n_warmup) + int(self.n_repeats)


class UpdateTimingPlan(KindPlan):
    name = "update_timing"
    title = "update_timing experiments (Table 8 of the partitioned-networks paper, App. D.2)"
    Settings = UpdateTimingSettings
    axes = ("model", "seed")
    build_target = "reprokit.builders.update_timing:build"

    def cost_parts(self, cell) -> CellWork:
        st = self.typed_settings(cell)
        model = str(st.model)
        B, S = int(st.batch_size), int(st.n_aug_samples)
        n = st.n_steps
        # standard, Augerino and Diff. Laplace param updates cost a standard step; the Diff. Laplace hyper update
        # runs in dl_warmup + dl_repeats repetitions only
        return CellWork(
            n,
            [
                Part(model, "standard", B * S, 3 * n),
                Part(model, "param", B * S, n),
                Part(model, "hyper", B * S, n),
                Part(model, "lila_hyper", B * S, st.dl_warmup + st.dl_repeats),
            ],
        )


PLAN = register(UpdateTimingPlan())
