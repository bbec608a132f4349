"""Plan of the uci_regression kind (BALI Tables 1 / 7). Build: experiments/uci_regression.py."""

from __future__ import annotations

from dataclasses import dataclass

from . import KindPlan, Settings, register
from .bali_blocks import BaliKindSettings, BaliPriors

METHODS = ("bali", "bali_ystd", "dropout", "bbb")
BALI_METHODS = ("bali", "bali_ystd")


@dataclass(frozen=True)
class UciBaliBlock(BaliPriors):
    """Methods `bali` and `bali_ystd` (the same keys; Table 4)."""
    standardize_x: bool
    standardize_y: bool
    batch_size: int | str  # `full` (or 0): the whole training split
    n_steps: int
    reparam: str = "weight"
    scale_input_layer: bool = False


@dataclass(frozen=True)
class UciDropoutBlock(Settings):
    """Method `dropout` (MC dropout, Gal & Ghahramani 2016)."""
    standardize_x: bool
    standardize_y: bool
    p: float
    dropout_input: bool
    prior_lengthscale: float
    lr: float
    batch_size: int | str
    n_steps: int


@dataclass(frozen=True)
class UciBbbBlock(Settings):
    """Method `bbb` (Bayes by Backprop)."""
    standardize_x: bool
    standardize_y: bool
    kl_factor: float
    prior_sigma: float
    init_sigma: float
    lr: float
    batch_size: int | str
    n_steps: int


@dataclass(frozen=True)
class UciSettings(BaliKindSettings):
    """`seed` is the index of the standard split (it also seeds initialisation and minibatches)."""

    KIND = "uci_regression"
    VALID = {"method": METHODS}

    n_evals: int = 10  # curve evaluations per run (eval_every = n_steps // n_evals)
    eval_every: int | None = None  # overrides n_evals
    train_eval_size: int | None = None
    # one block per method; a cell needs only its own method's
    bali: UciBaliBlock | None = None
    bali_ystd: UciBaliBlock | None = None
    dropout: UciDropoutBlock | None = None
    bbb: UciBbbBlock | None = None

    @property
    def block(self) -> UciBaliBlock | UciDropoutBlock | UciBbbBlock:
        """The settings block of the cell's method."""
        return self.need(self.method)


class UciRegressionPlan(KindPlan):
    name = "uci_regression"
    Settings = UciSettings
    build_target = "reprokit.experiments.uci_regression:build"

    def cell_settings(self, cell) -> dict:
        """The settings this cell runs with: the shared ones and its own method's block. The other methods'
        blocks are dropped, so adding or changing one method leaves the other methods' cells untouched."""
        method = cell.coord_dict["method"]
        return {k: v for k, v in cell.settings.items() if k not in METHODS or k == method}

    def n_steps(self, cell) -> int:
        return int(self.settings(cell).block.n_steps)


PLAN = register(UciRegressionPlan())
