"""Settings shared by the BALI paper's kinds (uci_regression, synthetic_predictive, bali_classification).

* :class:`BaliKindSettings`, the base of the three kinds' settings: the keys all three have (grid axes
  method / dataset / seed, the MLP, the Monte Carlo sample counts), a grid value checked against the
  valid ones, and a setting that only some methods (or tasks) need, named when a cell lacks it;
* :class:`BaliPriors`, the BALI hyperparameters of Tables 4 / 5, which uci_regression's `bali` /
  `bali_ystd` blocks and bali_classification's `bali` block extend with the keys only their kind has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..config import ConfigError
from . import Settings


@dataclass(frozen=True)
class BaliKindSettings(Settings):
    """Subclasses set `KIND` (the kind's name, for messages) and `VALID` ({field: valid values}, checked
    when a cell's settings are built), and add their own keys."""

    KIND: ClassVar[str] = ""
    VALID: ClassVar[dict] = {}
    # grid axes
    method: str
    dataset: str
    seed: int  # initialisation and minibatches (and the split of the UCI sets)
    # the MLP and the predictive's Monte Carlo samples
    hidden: list
    activation: str
    eval_samples: int  # per curve evaluation
    final_samples: int  # for the final metrics

    def __post_init__(self):
        for name, valid in self.VALID.items():
            value = getattr(self, name)
            if value not in valid:
                raise ConfigError(f"{self.KIND}: {name} '{value}' unknown (valid: {', '.join(valid)})")

    def need(self, name: str):
        """Setting `name`, which this cell's method (or task) needs; a clear error where it is not set."""
        value = getattr(self, name)
        if value is None:
            raise ConfigError(f"{self.KIND}: method '{self.method}' on '{self.dataset}' needs the setting '{name}'")
        return value


@dataclass(frozen=True)
class BaliPriors(Settings):
    alpha: float
    beta: float
    beta_milestones: list  # beta / beta_decay after each fraction of the iterations
    beta_decay: float
    sigma_r2: float
    sigma_u2_factor: float  # sigma_u^2 = sigma_u2_factor * N_eff
    sigma_init: float
    n_eff_divisor: float  # N_eff = N_train / n_eff_divisor
    # The N in the inverse-Wishart degrees of freedom u = u_0 + N (Eq. 16d), which sets the noise mode
    # Sigma = U / (u + D_y + 1) (Eq. 21): "n" = the actual N_train, "n_eff" = N_eff. A CHOICE, the one
    # default of the pipeline (reprokit.bali.BaliConfig.wishart_n must equal it; a test checks). The text
    # supports "n": Tables 4/5 replace N by N_eff only "for the EMA updates in Eq. (17)", and Alg. 1 writes
    # "Sigma_l <- U_l / (u_{0,l} + N + D_y + 1)" with "Require: N: number of training examples". Matters only
    # where N_eff < N (kin8nm, powerplant, protein, the classification sets): Sigma is N_eff / N times the
    # "n_eff" one there. See config/experiments/bali_regression.yaml for the measured effect.
    # keyword-only, so that subclasses may add required fields after it
    wishart_n: str = field(default="n", kw_only=True)
    # dtype of each batch's Gram products before they enter the float64 EMAs (reprokit.bali.BaliConfig.gram_dtype)
    gram_dtype: str = field(default="float64", kw_only=True)
