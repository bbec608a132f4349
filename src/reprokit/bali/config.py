"""Hyperparameters of BALI (paper Tables 4 and 5, App. H) and the beta schedule."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import torch

from ..typed import numbers_of

REPARAMS = ("weight", "local", "mean")
WISHART_N = ("n", "n_eff")  # the data count in the inverse-Wishart degrees of freedom u = u_0 + N (Eq. 16d)
_FLOATS = ("alpha", "beta", "beta_decay", "n_eff", "sigma_init", "sigma_r", "sigma_r2", "sigma_u2", "sigma_u2_factor")
_FLOATS += ("sigma_u2_factor_hidden", "u0", "n_data")
_DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass
class BaliConfig:
    """All BALI settings. Variances, not standard deviations, unless the name says `sigma_*` without `2`.

    alpha:            pseudo-target step size (Eq. 20).
    beta:             initial EMA rate (Eqs. 17, 19); decayed by `beta_decay` after each fraction in
                      `beta_milestones` of `n_iterations` (Tables 4/5: 5x at 60% and 80%).
    n_eff:            effective dataset size N_eff that replaces N in Eq. 17 (scale N_eff / B).
    sigma_init:       std of the initial weights, drawn before the first posterior exists (App. H).
    sigma_r / sigma_r2: prior row scale R_0 = sigma_r^2 I. Give either (Table 4/5 list sigma_r^2,
                      App. H.1 lists sigma_r); default sigma_r2 = 40 (Table 4).
    sigma_u2:         prior noise scale U_0 = sigma_u2 I; None means sigma_u2_factor * n_eff (0.01 N_eff).
    sigma_u2_factor_hidden: U_0 = sigma_u2_factor_hidden * n_eff I in the hidden layers only; None (default,
                      the paper's single value) means the same U_0 as the last layer. A sensitivity knob:
                      in regression the last layer's U_0 floors the likelihood noise, the hidden layers'
                      sets how much their weights are sampled (measured 2026-11-22,
                      commit a60c402, in config/experiments/bali_regression.yaml).
    u0:               inverse-Wishart prior degrees of freedom; the paper never states it. None means
                      D_y of the layer, the smallest integer for which the prior is proper (u0 > D_y - 1).
    n_data:           the actual training-set size N; None means n_eff (the two agree).
    wishart_n:        which count enters the posterior degrees of freedom u = u_0 + N (Eq. 16d), hence the
                      mode Sigma = U / (u + D_y + 1) (Eq. 21). A CHOICE the paper leaves to its reader when
                      N_eff < N: Tables 4/5 say "we use the effective dataset size N_eff (instead of the actual
                      dataset size N) for the EMA updates in Eq. (17)", and Alg. 1 keeps N ("Require: N: number
                      of training examples") in "Sigma_l <- U_l / (u_{0,l} + N + D_y + 1)".
                      "n" (the text as written): u = u_0 + n_data, so U (an EMA scaled by N_eff / B)
                      is divided by ~N and Sigma is ~N_eff / N times the "n_eff" one. "n_eff": u = u_0 + n_eff,
                      the count the EMA statistics actually carry (Sigma is then a consistent residual
                      variance). Required, with no default here: a caller states its reading; "n_eff" is the
                      one recommended (docs/library.md, evidence in docs/choices.md) and the pipeline's default.
    batch_size:       informational (the N_eff/B scale uses the actual batch size of each step).
    reparam:          "weight" (BALI-W, Eq. 22), "local" (BALI-L, App. F Eq. 68) or "mean" (App. F Eq. 69).
    scale_input_layer: also divide the first layer's features (x, 1) by sqrt(D_0 + 1). Eq. 12 scales the
                      hidden features (h(z_{l-1}), 1); Sec. 2.3 then states x_{n,1} = (x_n, 1) for the first
                      layer, unscaled, which is the default here. (With the Table 5 prior sigma_r^2 = 10 and
                      N_eff = N/50, scaling 784 MNIST pixels makes the first layer prior-dominated and training
                      markedly slower: ~89% vs ~93% test accuracy after 300 steps in our check.)
    bias_correction:  Adam-style division of the EMAs by b_t = 1 - prod_s (1 - beta_s) (Sec. 3.2).
    stats_dtype:      dtype of the EMA statistics and posterior factors ("float64" by default).
    gram_dtype:       dtype in which each batch's Gram products X^T X, X^T Y, Y^T Y are formed before they
                      enter the EMAs (None: stats_dtype). "float32" makes a CPU step of the MNIST network
                      ~1.4x faster and leaves the EMAs, factorisations and Schur complement in stats_dtype
                      (benchmarks/bench_bali_step.py; numbers in config/experiments/bali_classification.yaml).
    """

    alpha: float = 0.3
    beta: float = 0.2
    beta_milestones: Sequence[float] = (0.6, 0.8)
    beta_decay: float = 5.0
    n_iterations: int = 20000
    n_eff: float = 1000.0
    sigma_init: float = 1.0
    sigma_r: float | None = None
    sigma_r2: float | None = None
    sigma_u2: float | None = None
    sigma_u2_factor: float = 0.01
    sigma_u2_factor_hidden: float | None = None
    u0: float | None = None
    n_data: float | None = None
    wishart_n: str = field(kw_only=True)  # no default: a choice the caller makes (recommended: "n_eff")
    batch_size: int | None = None
    reparam: str = "weight"
    scale_input_layer: bool = False
    bias_correction: bool = True
    stats_dtype: str = "float64"
    gram_dtype: str | None = None

    def __post_init__(self):
        # a string from YAML (alpha="0.3") is converted, anything else that is not a number refused by name
        numbers_of(
            self,
            floats=_FLOATS,
            ints=("n_iterations", "batch_size"),
            optional=("sigma_r", "sigma_r2", "sigma_u2", "sigma_u2_factor_hidden", "u0", "n_data", "batch_size"),
        )
        if self.reparam not in REPARAMS:
            raise ValueError(f"reparam '{self.reparam}' unknown (valid: {', '.join(REPARAMS)})")
        if self.wishart_n not in WISHART_N:
            raise ValueError(f"wishart_n '{self.wishart_n}' unknown (valid: {', '.join(WISHART_N)})")
        if self.n_data is not None and self.n_data <= 0:
            raise ValueError("n_data must be positive")
        if self.stats_dtype not in _DTYPES:
            raise ValueError(f"stats_dtype '{self.stats_dtype}' unknown (valid: {', '.join(_DTYPES)})")
        if self.gram_dtype is not None and self.gram_dtype not in _DTYPES:
            raise ValueError(f"gram_dtype '{self.gram_dtype}' unknown (valid: {', '.join(_DTYPES)})")
        if self.sigma_r is not None and self.sigma_r2 is not None:
            if not math.isclose(self.sigma_r**2, self.sigma_r2, rel_tol=1e-9):
                raise ValueError(f"sigma_r={self.sigma_r} and sigma_r2={self.sigma_r2} disagree; give one")
        if self.sigma_r is None and self.sigma_r2 is None:
            self.sigma_r2 = 40.0
        if not 0.0 < self.beta <= 1.0:
            raise ValueError(f"beta must lie in (0, 1], got {self.beta}")
        if self.n_eff <= 0 or self.n_iterations <= 0:
            raise ValueError("n_eff and n_iterations must be positive")
        self.beta_milestones = tuple(float(m) for m in self.beta_milestones)

    @classmethod
    def from_dict(cls, d: dict) -> BaliConfig:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown BaliConfig keys: {sorted(unknown)}")
        return cls(**d)

    @property
    def prior_var_r(self) -> float:
        """sigma_r^2 in R_0 = sigma_r^2 I."""
        return float(self.sigma_r2) if self.sigma_r2 is not None else float(self.sigma_r) ** 2

    @property
    def prior_var_u(self) -> float:
        """sigma_u^2 in U_0 = sigma_u^2 I (default 0.01 * N_eff, Tables 4/5)."""
        return float(self.sigma_u2) if self.sigma_u2 is not None else self.sigma_u2_factor * float(self.n_eff)

    @property
    def prior_var_u_hidden(self) -> float:
        """sigma_u^2 of the hidden layers' U_0 (= prior_var_u unless sigma_u2_factor_hidden is set)."""
        if self.sigma_u2_factor_hidden is None:
            return self.prior_var_u
        return float(self.sigma_u2_factor_hidden) * float(self.n_eff)

    @property
    def wishart_count(self) -> float:
        """The N in u = u_0 + N (Eq. 16d): n_data (wishart_n "n", n_eff when n_data is None) or n_eff."""
        if self.wishart_n == "n" and self.n_data is not None:
            return float(self.n_data)
        return float(self.n_eff)

    @property
    def torch_stats_dtype(self) -> torch.dtype:
        return _DTYPES[self.stats_dtype]

    @property
    def torch_gram_dtype(self) -> torch.dtype:
        return _DTYPES[self.gram_dtype or self.stats_dtype]

    def beta_at(self, t: int) -> float:
        """EMA rate used at iteration t (1-based): beta / decay^k, k = #milestones m with t > round(m * T)."""
        k = sum(int(t > int(round(m * self.n_iterations))) for m in self.beta_milestones)
        return self.beta / self.beta_decay**k
