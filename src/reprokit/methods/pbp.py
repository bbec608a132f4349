"""Probabilistic backpropagation (PBP; Hernandez-Lobato & Adams 2015) behind the Method protocol.

    m = PBPMethod(data, hidden=[50], seed=split, prior_a=6.0, prior_b=6.0, y_std=y_std)   # a step = an epoch

Written by hand: no maintained library implements PBP (the authors' Theano code is a research script), so
the algorithm is written here from the paper's description.

Model (the paper's Sec. 2): an MLP whose layer l maps z_{l-1} to W_l (z_{l-1}, 1) / sqrt(V_{l-1} + 1) (the
input width V_{l-1} plus the bias), ReLU on the hidden layers, a linear output and Gaussian noise
y ~ N(f(x; W), 1/gamma). Priors w ~ N(0, 1/lambda) for every weight, lambda ~ Gamma(a0, b0), gamma ~
Gamma(a0, b0) (a0 = b0 = 6 in the paper). The posterior approximation is fully factorised: q(w) = N(m_w, v_w)
per weight, Gamma q(lambda) and q(gamma).

Moment propagation: the pre-activations of a layer are taken Gaussian with the mean and variance of
W_l (z, 1) / sqrt(V + 1) under q and the (independent Gaussian) z of the layer below; a ReLU maps a Gaussian
N(mu, s^2) to the exact moments of its output, E[b] = mu Phi(mu/s) + s phi(mu/s) and E[b^2] = (mu^2 + s^2)
Phi + mu s phi, which is again taken Gaussian. The output's (m_L, v_L) give the evidence of one point,

    Z = N(y | m_L, v_L + b/(a - 1))          (q(gamma) = Gamma(a, b); its noise variance E[1/gamma])

and the ADF update of every weight is the Gaussian moment match of q(w) Z (Minka 2001):
m <- m + v dlogZ/dm, v <- v - v^2 [(dlogZ/dm)^2 - 2 dlogZ/dv]; the Gamma q(gamma) is moment matched with
Z1 = Z(a + 1, b), Z2 = Z(a + 2, b): a <- 1 / (Z Z2 / Z1^2 (a + 1)/a - 1), b <- 1 / (Z2/Z1 (a + 1)/b - Z1/Z a/b).
The derivatives of log Z with respect to every (m_w, v_w) are taken by hand through the moment propagation
(`_backward`; tests/test_bali_pbp.py checks them against autograd).

One training step is one epoch: an ADF pass over the training rows in a fresh random order (one update per
point, as the paper), then an EP refinement of the prior factors: for every weight in turn the cavity of its
prior site (a Gaussian in w and a Gamma site in lambda) is formed, the tilted N(w | 0, 1/lambda) q_cav(w)
q_cav(lambda) is moment matched with the same formulas (Z = N(m_cav | 0, v_cav + b/(a - 1))), and the site is
the ratio of the new q and the cavity. Initially the prior sites carry all of q (no data seen).

CHOICEs where the paper's text is silent (each named in the config too):
* weight means start at N(0, 1/(V_{l-1} + 1)) draws (symmetry breaking), variances at the prior's b0/(a0 - 1);
* an ADF update that would make a variance non-positive (or non-finite) leaves that weight as it was; a point
  whose log Z is not finite is skipped; a Gamma update that is not a proper Gamma (a <= 1 or b <= 0) is skipped
  (the counts are recorded);
* an EP prior update whose cavity is improper (v_cav <= 0, a_cav <= 1, b_cav <= 0) is skipped.

The predictive is the moment-propagated Gaussian N(y | m_L, v_L + b/(a - 1)) (no Monte Carlo); metrics in the
targets' original units when `y_std` is given (RMSE x y_std, log-likelihood - log y_std). All numerics are
float64 numpy on the host (the updates are sequential per point: torch's per-op overhead would dominate).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from .. import seeds
from ..data.task import TaskData

LOG_2PI = math.log(2.0 * math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def relu_moments(mu: np.ndarray, var: np.ndarray):
    """(mean, variance, Phi, phi / s, s) of max(0, a) for a ~ N(mu, var), elementwise (var > 0)."""
    s = np.sqrt(var)
    alpha = mu / s
    cdf = ndtr(alpha)
    pdf = INV_SQRT_2PI * np.exp(-0.5 * alpha * alpha)
    mean = mu * cdf + s * pdf
    second = (mu * mu + var) * cdf + mu * s * pdf
    return mean, np.maximum(second - mean * mean, 1e-300), cdf, pdf / s


class PBPNetwork:
    """PBP's factorised Gaussian q over an MLP's weights with Gamma q's over the noise and prior precisions.

    `M[l]`, `V[l]`: [n_out, n_in (+ 1 with `bias`)] means and variances of layer l. `noise_var` fixes the noise
    variance (no Gamma update; the exactness tests use it) instead of learning q(gamma)."""

    def __init__(
        self,
        n_in: int,
        hidden: list[int],
        rng: np.random.Generator,
        a0: float,
        b0: float,
        bias: bool = True,
        noise_var: float | None = None,
    ):
        self.bias = bool(bias)
        sizes = [int(n_in), *map(int, hidden), 1]
        v0 = b0 / (a0 - 1.0)
        self.M, self.V = [], []
        for d_in, d_out in zip(sizes[:-1], sizes[1:]):
            width = d_in + self.bias
            self.M.append(rng.standard_normal((d_out, width)) / math.sqrt(width))
            self.V.append(np.full((d_out, width), v0))
        self.noise_a, self.noise_b = float(a0), float(b0)
        self.prior_a, self.prior_b = float(a0), float(b0)
        self.noise_var = None if noise_var is None else float(noise_var)
        # EP prior sites: Gaussian (precision, precision x mean) per weight, Gamma (shape, rate) per weight
        self.site_prec = [1.0 / v for v in self.V]
        self.site_nu = [m / v for m, v in zip(self.M, self.V)]
        self.site_a = [np.zeros_like(v) for v in self.V]
        self.site_b = [np.zeros_like(v) for v in self.V]
        self.skipped = {"points": 0, "weights": 0, "noise": 0, "prior": 0}

    # -------------------------------------------------------------- moments
    def noise_variance(self, shift: int = 0) -> float:
        """E[1/gamma] under Gamma(a + shift, b) (`shift` 1, 2: the Z1, Z2 of the Gamma update)."""
        if self.noise_var is not None:
            return self.noise_var
        return self.noise_b / (self.noise_a + shift - 1.0)

    def _augment(self, m: np.ndarray, v: np.ndarray):
        if not self.bias:
            return m, v
        one = np.ones(m.shape[:-1] + (1,))
        return np.concatenate([m, one], -1), np.concatenate([v, np.zeros_like(one)], -1)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Moment-propagated output mean and variance (without the noise) for rows `x` [B, D]: ([B], [B])."""
        m, v = np.asarray(x, dtype=np.float64), np.zeros_like(x, dtype=np.float64)
        last = len(self.M) - 1
        for i, (mw, vw) in enumerate(zip(self.M, self.V)):
            mt, vt = self._augment(m, v)
            scale = 1.0 / mt.shape[-1]
            ma = (mt @ mw.T) / math.sqrt(mt.shape[-1])
            va = scale * (vt @ (mw * mw).T + (mt * mt) @ vw.T + vt @ vw.T)
            if i == last:
                return ma[:, 0], va[:, 0]
            m, v = relu_moments(ma, va)[:2]
        raise AssertionError("unreachable")

    def _forward_one(self, x: np.ndarray):
        """One point's moment propagation, keeping what `_backward` needs."""
        m, v = x, np.zeros_like(x)
        cache = []
        last = len(self.M) - 1
        for i, (mw, vw) in enumerate(zip(self.M, self.V)):
            mt, vt = self._augment(m, v)
            k = 1.0 / math.sqrt(mt.shape[0])
            ma = k * (mw @ mt)
            va = k * k * ((mw * mw) @ vt + vw @ (mt * mt + vt))
            if i == last:
                cache.append((mt, vt, k, None))
                return ma[0], va[0], cache
            mb, vb, cdf, pdf_s = relu_moments(ma, va)
            cache.append((mt, vt, k, (mb, cdf, pdf_s)))
            m, v = mb, vb
        raise AssertionError("unreachable")

    def _backward(self, gm: float, gv: float, cache) -> tuple[list, list]:
        """dlogZ/dM and dlogZ/dV of every layer from dlogZ/dm_L = gm, dlogZ/dv_L = gv."""
        gm_a, gv_a = np.array([gm]), np.array([gv])
        dM, dV = [None] * len(self.M), [None] * len(self.M)
        for i in range(len(self.M) - 1, -1, -1):
            mt, vt, k, relu = cache[i]
            mw, vw = self.M[i], self.V[i]
            if relu is not None:  # the ReLU after this layer's pre-activation: through its moments
                mb, cdf, pdf_s = relu
                gm_b, gv_b = gm_a, gv_a
                gm_a = gm_b * cdf + gv_b * 2.0 * mb * (1.0 - cdf)
                gv_a = gm_b * 0.5 * pdf_s + gv_b * (cdf - mb * pdf_s)
            k2 = k * k
            dM[i] = k * np.outer(gm_a, mt) + 2.0 * k2 * np.outer(gv_a, vt) * mw
            dV[i] = k2 * np.outer(gv_a, mt * mt + vt)
            if i > 0:  # to the layer below's outputs (the bias entry is dropped)
                gm_in = k * (gm_a @ mw) + 2.0 * k2 * (gv_a @ vw) * mt
                gv_in = k2 * (gv_a @ (mw * mw + vw))
                n = mt.shape[0] - self.bias
                gm_a, gv_a = gm_in[:n], gv_in[:n]
        return dM, dV

    def log_evidence(self, x: np.ndarray, y: float, shift: int = 0) -> float:
        """log Z (shift 0), log Z1 (1), log Z2 (2) of one point."""
        m, v, _ = self._forward_one(np.asarray(x, dtype=np.float64))
        var = v + self.noise_variance(shift)
        return -0.5 * (LOG_2PI + math.log(var) + (y - m) ** 2 / var)

    # -------------------------------------------------------------- ADF over the data
    def adf_update(self, x: np.ndarray, y: float) -> float:
        """One point's ADF update of every weight and of q(gamma); returns log Z (before the update)."""
        m, v, cache = self._forward_one(x)
        logz = []
        for shift in (0, 1, 2) if self.noise_var is None else (0,):
            var = v + self.noise_variance(shift)
            logz.append(-0.5 * (LOG_2PI + math.log(var) + (y - m) ** 2 / var))
        if not all(math.isfinite(z) for z in logz):
            self.skipped["points"] += 1
            return float("nan")
        var = v + self.noise_variance(0)
        r = y - m
        gm, gv = r / var, -0.5 / var + 0.5 * r * r / (var * var)
        dM, dV = self._backward(gm, gv, cache)
        for i in range(len(self.M)):
            mw, vw = self.M[i], self.V[i]
            m_new = mw + vw * dM[i]
            v_new = vw - vw * vw * (dM[i] * dM[i] - 2.0 * dV[i])
            ok = (v_new > 0) & np.isfinite(v_new) & np.isfinite(m_new)
            self.skipped["weights"] += int(ok.size - ok.sum())
            self.M[i] = np.where(ok, m_new, mw)
            self.V[i] = np.where(ok, v_new, vw)
        if self.noise_var is None:
            a, b = self.noise_a, self.noise_b
            new = gamma_match(a, b, *logz)
            if new is None:
                self.skipped["noise"] += 1
            else:
                self.noise_a, self.noise_b = new
        return logz[0]

    # -------------------------------------------------------------- EP on the prior factors
    def refine_prior(self) -> None:
        """One EP sweep over the prior factors N(w | 0, 1/lambda), weight by weight (layers in order, rows
        then columns), each with the shared q(lambda)."""
        for i in range(len(self.M)):
            mw, vw = self.M[i], self.V[i]
            sp, sn, sa, sb = self.site_prec[i], self.site_nu[i], self.site_a[i], self.site_b[i]
            for idx in np.ndindex(mw.shape):
                prec_cav = 1.0 / vw[idx] - sp[idx]
                a_cav, b_cav = self.prior_a - sa[idx], self.prior_b - sb[idx]
                if prec_cav <= 0 or a_cav <= 1 or b_cav <= 0:
                    self.skipped["prior"] += 1
                    continue
                v_cav = 1.0 / prec_cav
                m_cav = v_cav * (mw[idx] / vw[idx] - sn[idx])
                logz = [normal_log_pdf(m_cav, v_cav + b_cav / (a_cav + s - 1.0)) for s in (0, 1, 2)]
                var = v_cav + b_cav / (a_cav - 1.0)
                gm, gv = -m_cav / var, -0.5 / var + 0.5 * m_cav**2 / var**2
                m_new = m_cav + v_cav * gm
                v_new = v_cav - v_cav**2 * (gm * gm - 2.0 * gv)
                new = gamma_match(a_cav, b_cav, *logz)
                if not (v_new > 0 and math.isfinite(m_new)) or new is None:
                    self.skipped["prior"] += 1
                    continue
                sp[idx], sn[idx] = 1.0 / v_new - prec_cav, m_new / v_new - m_cav * prec_cav
                sa[idx], sb[idx] = new[0] - a_cav, new[1] - b_cav
                mw[idx], vw[idx] = m_new, v_new
                self.prior_a, self.prior_b = new

    # -------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {
            "M": [a.copy() for a in self.M],
            "V": [a.copy() for a in self.V],
            "noise": (self.noise_a, self.noise_b),
            "prior": (self.prior_a, self.prior_b),
            "sites": [[a.copy() for a in s] for s in (self.site_prec, self.site_nu, self.site_a, self.site_b)],
            "skipped": dict(self.skipped),
        }

    def load_state_dict(self, state: dict) -> None:
        self.M = [np.array(a, dtype=np.float64) for a in state["M"]]
        self.V = [np.array(a, dtype=np.float64) for a in state["V"]]
        self.noise_a, self.noise_b = map(float, state["noise"])
        self.prior_a, self.prior_b = map(float, state["prior"])
        sites = [[np.array(a, dtype=np.float64) for a in s] for s in state["sites"]]
        self.site_prec, self.site_nu, self.site_a, self.site_b = sites
        self.skipped = dict(state["skipped"])


def normal_log_pdf(r: float, var: float) -> float:
    """log N(r | 0, var)."""
    return -0.5 * (LOG_2PI + math.log(var) + r * r / var)


def gamma_match(a: float, b: float, logz: float, logz1: float, logz2: float) -> tuple[float, float] | None:
    """(a, b) of the Gamma matching the first two moments of Gamma(a, b) x (the factor with the evidences
    Z, Z1 = Z(a + 1, b), Z2 = Z(a + 2, b)); None where that is not a proper Gamma (a <= 1 or b <= 0)."""
    try:
        a_new = 1.0 / (math.exp(logz2 + logz - 2.0 * logz1) * (a + 1.0) / a - 1.0)
        b_new = 1.0 / (math.exp(logz2 - logz1) * (a + 1.0) / b - math.exp(logz1 - logz) * a / b)
    except (OverflowError, ZeroDivisionError):
        return None
    if not (math.isfinite(a_new) and math.isfinite(b_new)) or a_new <= 1.0 or b_new <= 0.0:
        return None
    return a_new, b_new


def gaussian_metrics(mean: np.ndarray, var: np.ndarray, y: np.ndarray, y_std=None) -> dict[str, float]:
    """RMSE and mean log-likelihood of the Gaussian predictive N(y | mean, var) (original units with `y_std`)."""
    scale = 1.0 if y_std is None else float(np.asarray(y_std).reshape(-1)[0])
    r = np.asarray(y, dtype=np.float64).reshape(-1) - mean
    ll = float(np.mean(-0.5 * (LOG_2PI + np.log(var) + r * r / var))) - math.log(scale)
    return {"nll": -ll, "ll": ll, "rmse": float(np.sqrt(np.mean(r * r))) * scale}


class PBPMethod:
    """PBP behind the Method protocol: a step is one epoch (the ADF pass in a fresh order, then the EP sweep
    over the prior factors). Regression with one output; `data` in the units PBP trains in (standardised by
    the builder), `y_std` maps the metrics back."""

    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        seed: int,
        prior_a: float,
        prior_b: float,
        y_std=None,
        train_eval_size: int | None = None,
    ):
        if data.task != "regression":
            raise ValueError("PBP is a regression method (one Gaussian output)")
        self.x = data.x_train.detach().cpu().numpy().astype(np.float64).reshape(data.n_train, -1)
        self.y = data.y_train.detach().cpu().numpy().astype(np.float64).reshape(data.n_train, -1)
        if self.y.shape[1] != 1:
            raise ValueError(f"PBP models one target, got {self.y.shape[1]}")
        self.y = self.y[:, 0]
        self.x_test = data.x_test.detach().cpu().numpy().astype(np.float64).reshape(data.x_test.shape[0], -1)
        self.y_test = data.y_test.detach().cpu().numpy().astype(np.float64).reshape(-1)
        self.net = PBPNetwork(self.x.shape[1], list(hidden), seeds.numpy_rng(seed, "init"), prior_a, prior_b)
        self.order = seeds.numpy_rng(seed, "minibatches")
        self.y_std = y_std
        self.train_idx = np.arange(len(self.y))
        if train_eval_size is not None and int(train_eval_size) < len(self.y):
            sub = seeds.numpy_rng(seed, "train_eval_subset").permutation(len(self.y))[: int(train_eval_size)]
            self.train_idx = np.sort(sub)

    def train_step(self, step: int) -> dict[str, float]:
        total, n = 0.0, 0
        for i in self.order.permutation(len(self.y)):
            z = self.net.adf_update(self.x[i], self.y[i])
            if math.isfinite(z):
                total, n = total + z, n + 1
        self.net.refine_prior()
        # the mean -log Z of the pass (each point's evidence under q before its update)
        loss = -total / n if n else float("nan")
        return {"loss": loss, "noise_var": self.net.noise_variance(), "prior_var": self.prior_variance()}

    def prior_variance(self) -> float:
        return self.net.prior_b / (self.net.prior_a - 1.0)

    def predictive(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of the Gaussian predictive (noise included), in training units."""
        m, v = self.net.predict(x)
        return m, v + self.net.noise_variance()

    def evaluate(self, step: int) -> dict[str, float]:
        out = {}
        for name, (x, y) in {
            "train": (self.x[self.train_idx], self.y[self.train_idx]),
            "test": (self.x_test, self.y_test),
        }.items():
            m, v = self.predictive(x)
            out.update({f"{name}_{k}": val for k, val in gaussian_metrics(m, v, y, self.y_std).items()})
        return out

    def final_metrics(self) -> dict[str, float]:
        out = self.evaluate(-1)
        scale = 1.0 if self.y_std is None else float(np.asarray(self.y_std).reshape(-1)[0])
        out["noise_sd"] = math.sqrt(self.net.noise_variance()) * scale
        out["prior_sd"] = math.sqrt(self.prior_variance())
        out.update({f"skipped_{k}": float(v) for k, v in self.net.skipped.items()})
        return out

    def state_dict(self) -> dict:
        return {"net": self.net.state_dict(), "order": self.order.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.order.bit_generator.state = state["order"]
