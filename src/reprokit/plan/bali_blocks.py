"""Settings shared by the BALI paper's kinds (uci_regression, synthetic_predictive, bali_classification).

* :class:`BaliKindSettings`, the base of the three kinds' settings: the keys all three have (grid axes
  method / dataset / seed, the MLP, the Monte Carlo sample counts; each kind narrows `method` and `dataset`
  to its own values), and a setting that only some methods (or tasks) need, named when a cell lacks it;
* :class:`BaliPriors`, the BALI hyperparameters of Tables 4 / 5, which uci_regression's `bali` /
  `bali_yraw` blocks and bali_classification's `bali` block extend with the keys only their kind has.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from ..errors import ConfigError
from .base import Settings

Fraction = Annotated[float, Field(ge=0, le=1)]


class BaliKindSettings(Settings):
    """Subclasses set `KIND` (the kind's name, for messages), narrow `method` / `dataset` and add their keys."""

    KIND: ClassVar[str] = ""
    # grid axes
    method: str
    dataset: str
    seed: int = Field(description="initialisation and minibatches (and the split of the UCI sets)")
    # the MLP and the predictive's Monte Carlo samples
    hidden: list[int] = Field(min_length=1, description="hidden layer widths")
    activation: Literal["leaky_tanh", "tanh", "relu"]
    eval_samples: int = Field(ge=1, description="predictive samples per curve evaluation")
    final_samples: int = Field(ge=1, description="predictive samples for the final metrics")

    def need(self, name: str):
        """Setting `name`, which this cell's method (or task) needs; a clear error where it is not set."""
        value = getattr(self, name)
        if value is None:
            raise ConfigError(f"{self.KIND}: method '{self.method}' on '{self.dataset}' needs the setting '{name}'")
        return value


Dtype = Literal["float64", "float32"]


class BaliOptions(Settings):
    """BALI's settings that the papers fix implicitly or leave unstated, each defaulting to what every cell so far
    ran with. They are in the plan, not only in the library's `BaliConfig`, so that a cell records them and each
    builder passes every field of `BaliConfig` (`library_options`): no library default reaches a cell
    (tests/test_builder_arguments.py)."""

    scale_input_layer: bool = Field(
        False,
        description="also divide the first layer's features (x, 1) by sqrt(D_0 + 1): Eq. 12 scales the hidden "
        "features, Sec. 2.3 writes x_{n,1} = (x_n, 1) unscaled",
    )
    u0: float | None = Field(
        None,
        gt=0,
        description="inverse-Wishart prior degrees of freedom u_0, which the paper "
        "never states; None: D_y of the layer, the smallest for which the prior is proper",
    )
    sigma_u2_factor_hidden: float | None = Field(
        None,
        gt=0,
        description="U_0 = sigma_u2_factor_hidden * N_eff I in the hidden layers only; None: the last "
        "layer's U_0 (the paper's single value)",
    )
    bias_correction: bool = Field(True, description="divide the EMAs by 1 - prod_s (1 - beta_s) (Sec. 3.2)")
    stats_dtype: Dtype = Field("float64", description="dtype of the EMA statistics and the posterior factors")
    gram_dtype: Dtype = Field(
        "float64",
        description="dtype of each batch's Gram products X^T X, X^T Y, Y^T Y before they enter the "
        "EMAs (float32: a CPU step of the MNIST network ~1.4x faster; benchmarks/bench_bali_step.py)",
    )

    def library_options(self) -> dict:
        """These settings as `BaliConfig` keywords."""
        return {name: getattr(self, name) for name in BaliOptions.model_fields}


class BbbNoise(Settings):
    """Bayes by Backprop's likelihood noise in regression (methods/bbb.py), each default what every cell ran with."""

    noise_std: float | None = Field(None, gt=0, description="a fixed likelihood noise std (null = learned)")
    init_noise_std: float = Field(0.1, gt=0, description="initial std of the learned noise")


class BaliPriors(BaliOptions):
    """BALI's hyperparameters (Tables 4 / 5)."""

    alpha: float = Field(gt=0, description="step size of the pseudo-targets y = z + alpha dL/dz (Eq. 18)")
    beta: float = Field(gt=0, le=1, description="update rate of the EMAs of the layer statistics Psi (Eq. 17)")
    beta_milestones: list[Fraction] = Field(description="beta / beta_decay after each fraction of the iterations")
    beta_decay: float = Field(gt=0)
    sigma_r2: float = Field(gt=0)
    sigma_u2_factor: float = Field(gt=0, description="sigma_u^2 = sigma_u2_factor * N_eff")
    sigma_init: float = Field(gt=0)
    n_eff_divisor: float = Field(gt=0, description="N_eff = N_train / n_eff_divisor")
    # The N in the inverse-Wishart degrees of freedom u = u_0 + N (Eq. 16d), which sets the noise mode
    # Sigma = U / (u + D_y + 1) (Eq. 21): "n" = the actual N_train (how Alg. 1 writes it), "n_eff" = N_eff (the
    # count the EMAs of Eq. 17 carry). A CHOICE with no default: every BALI block of config/experiments states it,
    # so the config says which reading each experiment takes. The config's choice, n_eff, and the evidence for it are in
    # config/experiments/bali_regression.yaml. Matters only where N_eff < N (kin8nm, powerplant, protein, the
    # classification sets): Sigma under "n" is N_eff / N times the "n_eff" one there.
    wishart_n: Literal["n", "n_eff"] = Field(
        description="the N in the inverse-Wishart degrees of freedom u = u_0 + N (Eq. 16d): n = N_train (Alg. 1), "
        "n_eff = N_eff (the count of the EMA statistics of Eq. 17)"
    )

    def config_kwargs(self, n_train: int, n_steps: int, batch_size: int) -> dict:
        """Every `BaliConfig` keyword of a cell with `n_train` training points (N_eff = n_train / n_eff_divisor).
        The kind's block defines `reparam`."""
        return dict(
            alpha=float(self.alpha),
            beta=float(self.beta),
            beta_milestones=tuple(self.beta_milestones),
            beta_decay=float(self.beta_decay),
            n_iterations=n_steps,
            n_eff=n_train / float(self.n_eff_divisor),
            sigma_init=float(self.sigma_init),
            sigma_r2=float(self.sigma_r2),
            sigma_u2_factor=float(self.sigma_u2_factor),
            n_data=float(n_train),
            wishart_n=self.wishart_n,
            batch_size=batch_size,
            reparam=self.reparam,
            **self.library_options(),
        )
