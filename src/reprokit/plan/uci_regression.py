"""Plan of the uci_regression kind (BALI Tables 1 / 7). Build: builders/uci_regression.py."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from ..errors import ConfigError
from ..methods.cv_protocol import epoch_steps, protocol_steps
from ..methods.gal_protocol import gal_protocol_steps
from .bali_blocks import BaliKindSettings, BaliPriors, BbbNoise
from .base import KindPlan, Settings, register
from .costs import CellWork, bali_step, mlp_cell
from .methods import MethodEntry, register_methods, table

_BUILD = "reprokit.builders.uci_regression:"


def _bali_step(st) -> str:
    return bali_step(st.block.reparam)


def _entry(name: str, label: str, builder: str, cost_step) -> MethodEntry:
    """Each method reads one settings block, named after it."""
    return MethodEntry(name, label=label, blocks=(name,), builder=_BUILD + builder, cost_step=cost_step)


# The kind's methods, in the order tables list them (plan/methods.py). `n_steps` and `cost_parts` still say how
# dropout / vadam (protocol steps), nng (epochs x minibatches) and pbp (a step is an epoch) count their steps.
METHOD_TABLE = register_methods(
    "uci_regression",
    table(
        _entry("bali", "BALI", "build_bali", _bali_step),
        _entry("bali_yraw", "BALI raw-y", "build_bali", _bali_step),
        _entry("dropout", "DO", "build_dropout", "dropout"),
        _entry("bbb", "BBB", "build_bbb", "bbb"),
        _entry("pbp", "PBP", "build_pbp", "pbp"),
        _entry("vadam", "VADAM", "build_vadam", "vadam"),
        _entry("nng", "NNG-MVG", "build_nng", "nng"),
    ),
)
Method = Literal[tuple(METHOD_TABLE)]
METHODS = get_args(Method)
Positive = Annotated[float, Field(gt=0)]
Batch = Annotated[
    Annotated[int, Field(ge=1)] | Literal["full"],
    Field(description="minibatch size, or `full` for the whole training split"),
]
STD_X = "z-score inputs with training-split statistics"
STD_Y = "z-score targets (metrics are still reported in original units)"


class UciBaliBlock(BaliPriors):
    """Methods `bali` and `bali_yraw` (the same keys; Table 4)."""

    standardize_x: bool = Field(description=STD_X)
    standardize_y: bool = Field(description=STD_Y)
    batch_size: Batch
    n_steps: int = Field(ge=1)
    reparam: Literal["weight", "local", "mean"] = "weight"


class UciDropoutBlock(Settings):
    """Method `dropout` (MC dropout, Gal & Ghahramani 2016). `protocol: gal` runs Gal's DropoutUncertaintyExps
    protocol in the cell (grid over `rates` x `taus` on an inner split, retraining; methods/gal_dropout.py:
    its own standardisation, input dropout, L2 from `prior_lengthscale` and tau; `epochs` fix the steps);
    `learned_noise` trains one network with `p`, a learned noise scale and `n_steps` steps."""

    standardize_x: bool = Field(description="learned_noise only (gal standardises each phase itself)")
    standardize_y: bool = Field(description="learned_noise only")
    prior_lengthscale: float = Field(ge=0)
    lr: float = Field(gt=0)
    batch_size: Batch
    protocol: Literal["gal", "learned_noise"] = Field(
        "gal",
        description="gal: Gal's grid search + retraining in the cell; learned_noise: one run with p and a "
        "learned noise",
    )
    # learned_noise
    p: float | None = Field(None, ge=0, lt=1, description="learned_noise only")
    dropout_input: bool = Field(False, description="learned_noise only (gal always drops inputs)")
    n_steps: int | None = Field(
        None, ge=1, description="learned_noise only (gal's steps follow epochs, N and batch_size)"
    )
    # gal
    rates: tuple[Annotated[float, Field(ge=0, lt=1)], ...] = Field(
        (0.005, 0.01, 0.05, 0.1), min_length=1, description="gal's dropout-rate grid"
    )
    taus: dict[str, list[Positive]] | list[Positive] | None = Field(
        None,
        description="gal's model-precision grid (original units): {dataset: grid} (Gal's grids are per "
        "dataset), or one grid for every dataset",
    )
    epochs: int = Field(
        4000, ge=1, description="gal's epochs per network (40 x --epochx 100, config/experiments/bali_regression.yaml)"
    )
    val_fraction: float = Field(0.2, gt=0, lt=1, description="gal's held-out share of the training split")
    predictive_samples: int = Field(
        10000, ge=1, description="gal's T (dropout passes of the validation and final predictives)"
    )
    parallel_grid: bool = Field(
        False,
        description="gal: train the grid's networks side by side (same draws, fewer steps; methods/gal_dropout.py)",
    )

    def taus_for(self, dataset: str) -> list[float]:
        grid = self.taus.get(dataset) if isinstance(self.taus, dict) else self.taus
        if not grid:
            raise ConfigError(f"dropout (protocol gal): no tau grid for {dataset} (set dropout.taus.{dataset})")
        return [float(t) for t in grid]

    def total_steps(self, dataset: str) -> int:
        """Optimiser steps of the cell: `n_steps`, or Gal's grid points x inner epochs + the retraining's."""
        if self.protocol == "learned_noise":
            return int(self.n_steps)
        n_train = UCI_N_TRAIN[dataset]
        batch = batch_size_of(self.batch_size, n_train)
        inner, full = gal_protocol_steps(n_train, int(self.epochs), batch, float(self.val_fraction))
        return (1 if self.parallel_grid else len(self.rates) * len(self.taus_for(dataset))) * inner + full


FULL_BATCH = (
    "full",
    0,
    None,
)  # a batch_size meaning the whole training split (Table 4: B = N for yacht, concrete, energy)


def batch_size_of(value, n_train: int) -> int:
    """Rows per step of a `batch_size` setting: `full` (or 0) = the whole training split, else at most that."""
    return int(n_train) if value in FULL_BATCH else min(int(value), int(n_train))


# training rows of every standard split (Gal's redistribution; the plan cannot read the data): Gal's step count
UCI_N_TRAIN = {
    "uci_yacht": 277,
    "uci_concrete": 927,
    "uci_energy": 691,
    "uci_redwine": 1439,
    "uci_kin8nm": 7373,
    "uci_powerplant": 8611,
    "uci_protein": 41157,
}


class UciBbbBlock(BbbNoise):
    """Method `bbb` (Bayes by Backprop)."""

    standardize_x: bool = Field(description=STD_X)
    standardize_y: bool = Field(description=STD_Y)
    kl_factor: float = Field(ge=0)
    prior_sigma: float = Field(gt=0)
    init_sigma: float = Field(gt=0)
    lr: float = Field(gt=0)
    batch_size: Batch
    n_steps: int = Field(ge=1)


class UciPbpBlock(Settings):
    """Method `pbp` (probabilistic backpropagation, Hernandez-Lobato & Adams 2015; methods/pbp.py). A step is one
    epoch: an ADF pass over the training rows, then an EP sweep over the prior factors."""

    standardize_x: bool = Field(description=STD_X)
    standardize_y: bool = Field(description=STD_Y)
    epochs: int = Field(ge=1, description="ADF passes over the training rows (the paper's UCI runs: 40)")
    prior_a: float = Field(6.0, gt=1, description="shape of the Gamma priors on the noise and weight precisions")
    prior_b: float = Field(6.0, gt=0, description="rate of those Gamma priors")


class UciVadamBlock(Settings):
    """Method `vadam` (Khan et al. 2018; methods/vadam.py): Vadam runs of `epochs` epochs, the noise and prior
    precisions chosen per split on a grid by `folds`-fold cross-validated log-likelihood, then a final run on
    all training rows. One grid point: no selection."""

    standardize_x: bool = Field(description=STD_X)
    standardize_y: bool = Field(description=STD_Y)
    lr: float = Field(gt=0)
    beta1: float = Field(0.9, ge=0, lt=1, description="Adam's momentum rate")
    beta2: float = Field(0.99, ge=0, lt=1, description="the squared-gradient (precision) average's rate")
    batch_size: Annotated[int, Field(ge=1)]
    epochs: int = Field(ge=1, description="epochs of every run (selection and final)")
    mc_samples: int = Field(ge=1, description="weight draws per training step")
    log_noise_prec: list[float] = Field(min_length=1, description="grid of log tau (noise precision, trained units)")
    log_prior_prec: list[float] = Field(min_length=1, description="grid of log lambda (prior precision)")
    folds: int = Field(5, ge=2, description="cross-validation folds of the selection")
    val_samples: int = Field(100, ge=1, description="weight draws of each validation predictive")

    def grid_points(self) -> int:
        return len(self.log_noise_prec) * len(self.log_prior_prec)

    def total_steps(self, dataset: str) -> int:
        """Optimiser steps of the cell: grid points x folds x epochs of the selection, plus the final run's."""
        n_train = UCI_N_TRAIN[dataset]
        select, final = protocol_steps(n_train, self.epochs, self.batch_size, self.folds, self.grid_points())
        return select + final


class UciNngBlock(Settings):
    """Method `nng` (NNG-MVG: noisy K-FAC, Zhang et al. 2018; methods/nng.py): a matrix-variate Gaussian posterior
    per layer fitted by noisy natural gradient, the noise precision by a Gamma posterior."""

    standardize_x: bool = Field(description=STD_X)
    standardize_y: bool = Field(description=STD_Y)
    epochs: int = Field(ge=1)
    batch_size: Annotated[int, Field(ge=1)]
    lr: float = Field(gt=0, description="step size of the mean update (alpha)")
    ema: float = Field(gt=0, le=1, description="weight of each step's statistics in the Kronecker factors (beta)")
    mc_samples: int = Field(ge=1, description="weight draws per training step")
    kl_weight: float = Field(1.0, gt=0, description="lambda, the ELBO's KL weight")
    prior_var: float = Field(1.0, gt=0, description="eta, the variance of the N(0, eta I) weight prior")
    damping: float = Field(0.0, ge=0, description="extrinsic damping added to the mean update's")
    decay_epoch: int | None = Field(
        500, ge=1, description="lr and ema are multiplied by decay from this epoch's last step on"
    )
    decay: float = Field(0.1, gt=0, le=1)
    noise_prior_a: float = Field(6.0, gt=0, description="shape of the Gamma prior on the noise precision")
    noise_prior_b: float = Field(6.0, gt=0, description="rate of that prior")
    noise_lr: float = Field(1.0e-3, gt=0, description="Adam step size of q(tau)'s parameters")

    def total_steps(self, dataset: str) -> int:
        return int(self.epochs) * epoch_steps(UCI_N_TRAIN[dataset], self.batch_size)


class UciSettings(BaliKindSettings):
    """`seed` is the index of the standard split (it also seeds initialisation and minibatches)."""

    KIND = "uci_regression"
    method: Method
    dataset: str = Field(pattern=r"^uci_[a-z0-9_]+$")

    n_evals: int = Field(10, ge=1, description="curve evaluations per run (eval_every = n_steps / n_evals)")
    eval_every: int | None = Field(None, ge=1, description="curve period in iterations; overrides n_evals")
    train_eval_size: int | None = Field(None, ge=1)
    # one block per method; a cell needs only its own method's
    bali: UciBaliBlock | None = None
    bali_yraw: UciBaliBlock | None = None
    dropout: UciDropoutBlock | None = None
    bbb: UciBbbBlock | None = None
    pbp: UciPbpBlock | None = None
    vadam: UciVadamBlock | None = None
    nng: UciNngBlock | None = None

    @property
    def block(self) -> UciBaliBlock | UciDropoutBlock | UciBbbBlock | UciPbpBlock | UciVadamBlock | UciNngBlock:
        """The settings block of the cell's method."""
        return self.need(self.method)


class UciRegressionPlan(KindPlan):
    name = "uci_regression"
    title = "uci_regression experiments (BALI paper Sec. 5.2, Tables 1, 4, 7)"
    Settings = UciSettings
    axes = ("method", "dataset", "seed", "bali.wishart_n", "bali_yraw.wishart_n")  # the *_wishart sweeps
    build_target = "reprokit.builders.uci_regression:build"

    def needs(self, st) -> tuple:
        return METHOD_TABLE[st.method].blocks  # the method's own block

    def n_steps(self, cell) -> int:
        st = self.typed_settings(cell)
        if st.method in ("dropout", "vadam", "nng"):
            return st.block.total_steps(str(st.dataset))
        if st.method == "pbp":
            return int(st.block.epochs)
        return int(st.block.n_steps)

    def cost_parts(self, cell) -> CellWork:
        st = self.typed_settings(cell)
        m = st.block
        n = self.n_steps(cell)  # dropout with Gal's protocol: grid points x epochs x batches, plus the retraining
        step = METHOD_TABLE[st.method].step(st)
        if st.method == "pbp":  # a step is an epoch of per-point updates: as measured on that dataset
            return mlp_cell(n, st.hidden, st.dataset, step, None)
        if st.method in ("vadam", "nng"):  # a step draws mc_samples weights for its minibatch
            return mlp_cell(n, st.hidden, st.dataset, step, int(m.batch_size) * int(m.mc_samples))
        images = None if m.batch_size in FULL_BATCH else int(m.batch_size)  # full batch: as measured on that dataset
        return mlp_cell(n, st.hidden, st.dataset, step, images)


PLAN = register(UciRegressionPlan())
