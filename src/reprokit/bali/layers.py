"""One BALI layer: a multivariate Bayesian linear regression with a matrix-normal-inverse-Wishart posterior.

Notation follows the paper (Sec. 3, App. C): the layer maps features x in R^{D_x} (bias folded in,
D_x = in_features + 1) to outputs z = W^T x in R^{D_y}. Prior (Eq. 14) with M_0 = 0,
R_0 = sigma_r^2 I, U_0 = sigma_u^2 I, u_0. Posterior (Eq. 16) from EMA statistics (Eq. 17) with bias
correction b_t (N_w is `n_wishart`: the actual N by default, or N_eff; see BaliConfig.wishart_n):

    R^{-1} = R_0^{-1} + Psi_xx / b                          (16a)
    M      = R (R_0^{-1} M_0 + Psi_xy / b)                   (16b)
    U      = U_0 + M_0^T R_0^{-1} M_0 - M^T R^{-1} M + Psi_yy / b   (16c)
    u      = u_0 + N_w                                        (16d)
    Sigma  = U / (u + D_y + 1)     (inverse-Wishart mode, Eq. 21)

Implementation notes
--------------------
* Only the Cholesky factor L of the precision R^{-1} = L L^T is stored; R itself is never formed.
  M = L^{-T} L^{-1} B with two triangular solves (B = Psi_xy / b), and with S = L^{-1} B the quadratic term
  is M^T R^{-1} M = B^T R B = S^T S, so U = U_0 + Psi_yy / b - S^T S is the Schur complement of a PSD
  Gram matrix plus U_0 and stays positive definite without an explicit inverse.
* Weight samples (Eq. 22): W = M + F A G^T with A ~ N(0, I), G = chol(Sigma) and F = L^{-T}, which satisfies
  F F^T = L^{-T} L^{-1} = R; F A is one triangular solve. vec(W) then has covariance Sigma (x) R.
* The EMA statistics and all posterior factors are kept in float64 by default (`stats_dtype`): Psi_xx
  is scaled by N_eff / B and can be ill-conditioned, and U is a difference of large Gram terms
  (Psi_yy - S^T S) whose cancellation loses about half the float32 digits when the fit is good.
  Layer outputs are returned in the input's dtype.
* The batch's Gram products X^T X, X^T Y, Y^T Y may be formed in a cheaper `gram_dtype` (float32) and then
  added to the float64 EMAs: each product is then rounded once to ~1e-7 relative, while the running sums,
  the factorisations and the Schur complement stay in float64. On CPU this is the largest cost of a step
  (the 785 x 2048 x 785 product of an MNIST first layer); benchmarks/bench_bali_step.py times both.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.linalg import solve_triangular

from .linalg import safe_cholesky, symmetrize

_REPARAMS = ("weight", "local", "mean")


class BaliLinear(nn.Module):
    """Linear layer z = W^T x with x = (h, 1) / sqrt(in_features + 1) and a MNIW posterior over (W, Sigma).

    All state lives in buffers (no nn.Parameters), so `state_dict` captures the posterior, the EMAs and
    the initial weights.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        sigma_init: float = 1.0,
        prior_var_r: float = 40.0,
        prior_var_u: float = 1.0,
        u0: float | None = None,
        n_eff: float = 1.0,
        n_wishart: float,
        scale_input: bool = True,
        stats_dtype: torch.dtype = torch.float64,
        gram_dtype: torch.dtype | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.dx = self.in_features + 1  # bias folded into W (Eq. 12)
        self.dy = self.out_features
        self.input_scale = 1.0 / math.sqrt(self.dx) if scale_input else 1.0
        self.prior_var_r = float(prior_var_r)
        self.prior_var_u = float(prior_var_u)
        self.u0 = float(self.dy if u0 is None else u0)
        self.n_eff = float(n_eff)
        self.n_wishart = float(n_wishart)  # N in u = u_0 + N (16d): n_data or n_eff, BaliConfig.wishart_count
        self.stats_dtype = stats_dtype
        self.gram_dtype = stats_dtype if gram_dtype is None else gram_dtype
        if self.prior_var_r <= 0 or self.prior_var_u <= 0:
            raise ValueError("prior variances sigma_r^2 and sigma_u^2 must be positive")

        dx, dy, sd = self.dx, self.dy, stats_dtype
        w0 = torch.randn(dx, dy, generator=generator) * float(sigma_init)
        self.register_buffer("weight_init", w0)
        # EMA statistics (Eqs. 17, 19), zero-initialised as in Alg. 1.
        self.register_buffer("psi_xx", torch.zeros(dx, dx, dtype=sd))
        self.register_buffer("psi_xy", torch.zeros(dx, dy, dtype=sd))
        self.register_buffer("psi_yy", torch.zeros(dy, dy, dtype=sd))
        self.register_buffer("psi_gg", torch.zeros(dy, dtype=sd))
        # Posterior factors (valid once has_posterior is True).
        self.register_buffer("chol_prec", torch.eye(dx, dtype=sd) / math.sqrt(self.prior_var_r))
        self.register_buffer("mean", torch.zeros(dx, dy, dtype=sd))
        self.register_buffer("scale_u", torch.eye(dy, dtype=sd) * self.prior_var_u)
        sigma0 = torch.eye(dy, dtype=sd) * self.prior_var_u / (self.u0 + dy + 1)  # prior mode
        self.register_buffer("sigma", sigma0)
        self.register_buffer("chol_sigma", torch.linalg.cholesky(sigma0))
        self.register_buffer("has_posterior", torch.zeros((), dtype=torch.bool))

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, sigma_r2={self.prior_var_r:g}, "
            f"sigma_u2={self.prior_var_u:g}, u0={self.u0:g}, n_eff={self.n_eff:g}, n_wishart={self.n_wishart:g}"
            + ("" if self.gram_dtype == self.stats_dtype else f", gram_dtype={self.gram_dtype}")
        )

    # ------------------------------------------------------------------ features and outputs
    def features(self, h: torch.Tensor) -> torch.Tensor:
        """Regression inputs x = (h, 1) / sqrt(D_in + 1) of this layer (Eq. 12), shape [B, D_x]."""
        ones = torch.ones(h.shape[0], 1, dtype=h.dtype, device=h.device)
        x = torch.cat([h, ones], dim=1)
        return x * self.input_scale if self.input_scale != 1.0 else x

    def forward(self, h: torch.Tensor, reparam: str = "weight", generator: torch.Generator | None = None):
        return self.linear(self.features(h), reparam, generator)

    def linear(self, x: torch.Tensor, reparam: str = "weight", generator: torch.Generator | None = None):
        """Outputs z for features x: a weight sample (BALI-W), local reparametrisation (BALI-L) or the mean.

        Before the first posterior update every mode uses the fixed initial weights (Alg. 1).
        """
        if reparam not in _REPARAMS:
            raise ValueError(f"reparam '{reparam}' unknown (valid: {', '.join(_REPARAMS)})")
        if not bool(self.has_posterior):
            return x @ self.weight_init.to(x.dtype)
        if reparam == "weight":
            return x @ self.sample_weight(generator).to(x.dtype)
        if reparam == "mean":
            return x @ self.mean.to(x.dtype)
        # Local reparametrisation (App. F, Eqs. 67-68): z_n ~ N(M^T x_n, (x_n^T R x_n) Sigma), independent
        # over examples, with x_n^T R x_n = ||L^{-1} x_n||^2. L^{-1} is formed once per call in stats dtype
        # (D_x^3, not the D_x^2 B of a triangular solve against the batch); the batch-sized products run in
        # the outputs' dtype, as BALI-W's x @ W does. The noise is drawn in stats dtype (the same random
        # stream whatever the input dtype). benchmarks/bench_bali_step.py --reparam local times it.
        dt = x.dtype
        eye = torch.eye(self.dx, dtype=self.stats_dtype, device=x.device)
        linv = solve_triangular(self.chol_prec, eye, upper=False).to(dt)  # L^{-1}
        q = (x @ linv.mT).square().sum(1)  # [B]
        eps = torch.randn(x.shape[0], self.dy, dtype=self.stats_dtype, device=x.device, generator=generator)
        return x @ self.mean.to(dt) + q.sqrt().unsqueeze(1) * (eps.to(dt) @ self.chol_sigma.mT.to(dt))

    def sample_weight(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """W ~ MN(M, R, Sigma) via W = M + L^{-T} A chol(Sigma)^T (Eq. 22), in stats dtype, shape [D_x, D_y]."""
        if not bool(self.has_posterior):
            return self.weight_init.to(self.stats_dtype)
        a = torch.randn(self.dx, self.dy, dtype=self.stats_dtype, device=self.mean.device, generator=generator)
        fa = solve_triangular(self.chol_prec.mT, a, upper=True)  # L^{-T} A
        return self.mean + fa @ self.chol_sigma.mT

    # ------------------------------------------------------------------ EMA updates and posterior
    def normalised_grad(self, g: torch.Tensor, beta: float, b: float) -> torch.Tensor:
        """Update Psi_gg (Eq. 19) and return g / sqrt(Psi_gg / b) (the gradient part of Eq. 20), stats dtype."""
        gd = g.detach().to(self.stats_dtype)
        self.psi_gg.mul_(1.0 - beta).add_(gd.square().mean(0), alpha=beta)
        denom = (self.psi_gg / b).sqrt().clamp_min(torch.finfo(self.stats_dtype).tiny)
        return gd / denom

    def update(self, x: torch.Tensor, y: torch.Tensor, beta: float, b: float) -> None:
        """EMA of the natural-parameter terms (Eq. 17) with scale N_eff / B, then recompute the posterior."""
        if x.shape[1] != self.dx or y.shape[1] != self.dy or x.shape[0] != y.shape[0]:
            raise ValueError(
                f"update expects x [B, {self.dx}] and y [B, {self.dy}], got {tuple(x.shape)}, {tuple(y.shape)}"
            )
        xg = x.detach().to(self.gram_dtype)
        yg = y.detach().to(self.gram_dtype)
        s = beta * self.n_eff / x.shape[0]
        for psi, a, c in ((self.psi_xx, xg, xg), (self.psi_xy, xg, yg), (self.psi_yy, yg, yg)):
            if self.gram_dtype == self.stats_dtype:  # Psi <- (1 - beta) Psi + beta (N_eff / B) A^T C, fused
                psi.addmm_(a.mT, c, beta=1.0 - beta, alpha=s)
            else:  # the product in gram_dtype, the EMA in stats_dtype
                psi.mul_(1.0 - beta).add_((a.mT @ c).to(self.stats_dtype), alpha=s)
        self.recompute_posterior(b)

    @torch.no_grad()
    def recompute_posterior(self, b: float = 1.0) -> None:
        """Eq. 16 with X^T X ~ Psi_xx / b, X^T Y ~ Psi_xy / b, Y^T Y ~ Psi_yy / b; Sigma by Eq. 21 (M_0 = 0)."""
        prec = self.psi_xx / b
        prec.diagonal().add_(1.0 / self.prior_var_r)  # R^{-1} = R_0^{-1} + X^T X     (16a)
        chol = safe_cholesky(prec, what="posterior precision R^-1")
        rhs = self.psi_xy / b  # R_0^{-1} M_0 + X^T Y with M_0 = 0
        s = solve_triangular(chol, rhs, upper=False)  # L^{-1} B
        mean = solve_triangular(chol.mT, s, upper=True)  # R B                   (16b)
        u_mat = torch.addmm(self.psi_yy, s.mT, s, beta=1.0 / b, alpha=-1.0)  # Y^T Y - M^T R^{-1} M
        u_mat.diagonal().add_(self.prior_var_u)  # + U_0                          (16c)
        u_mat = symmetrize(u_mat)
        u_dof = self.u  # (16d)
        sigma = u_mat / (u_dof + self.dy + 1)  # inverse-Wishart mode  (21)
        self.chol_prec.copy_(chol)
        self.mean.copy_(mean)
        self.scale_u.copy_(u_mat)
        self.sigma.copy_(sigma)
        self.chol_sigma.copy_(safe_cholesky(sigma, what="noise covariance Sigma"))
        self.has_posterior.fill_(True)

    # ------------------------------------------------------------------ inspection
    @property
    def u(self) -> float:
        """Posterior inverse-Wishart degrees of freedom u = u_0 + N (Eq. 16d; N = `n_wishart`)."""
        return self.u0 + self.n_wishart

    def row_cov(self) -> torch.Tensor:
        """R = (R^{-1})^{-1} from the stored Cholesky factor (for inspection and tests; not used in training)."""
        return torch.cholesky_inverse(self.chol_prec).contiguous()

    def noise_cov(self) -> torch.Tensor:
        """Sigma (inverse-Wishart mode, Eq. 21); the prior mode before the first update."""
        return self.sigma
