"""VADAM (Khan et al. 2018, "Fast and Scalable Bayesian Deep Learning by Weight-Perturbation in Adam") for UCI
regression, with that paper's in-cell selection of the noise and prior precisions.

    m = VadamProtocol(data, hidden=[50], epochs=40, batch_size=32, lr=0.01, betas=(0.9, 0.99), mc_samples=10,
                      log_noise_prec=[0.0, 2.5, 5.0], log_prior_prec=[-4.0, 0.0, 4.0], folds=5, seed=split,
                      val_samples=100, n_eval_samples=100)

Written by hand: Vadam is a few lines on top of Adam and no maintained library ships it (the IVON optimiser of
`ivon-opt` is a later, different method).

Vadam (the paper's Fig. 1): a factorised Gaussian q(w) = N(mu, 1/(N s + lambda)) over the weights, with s
Adam's second-moment estimate. Every step draws `mc_samples` weights w = mu + eps / sqrt(N s + lambda), takes
the minibatch gradient g_k of the mean negative log-likelihood (1/M) sum -log N(y | f(x; w_k), 1/tau) at each,
and updates (lambda~ = lambda / N, t the step)

    m <- b1 m + (1 - b1) (mean_k g_k + lambda~ mu)        s <- b2 s + (1 - b2) mean_k g_k^2
    mu <- mu - lr (m / (1 - b1^t)) / (sqrt(s / (1 - b2^t)) + lambda~).

s starts at 0 (the initial precision of q equals the prior's: the authors' erratum to their App. J), m at 0,
mu at torch.nn.Linear's default initialisation (CHOICE: the paper does not say; its models are torch Linear
layers). The perturbation uses s without bias correction, as Fig. 1 writes it. The noise precision tau and
the prior precision lambda are fixed during a training run.

Selection (the paper's Sec. 6.2 / App. J: tau and lambda chosen per split by Bayesian optimisation of the
K-fold cross-validated test log-likelihood, 30 evaluations in the box log tau in [0, 5], log lambda in
[-4, 4]): CHOICE, a grid over that box (`log_noise_prec` x `log_prior_prec`, natural logs) scored by the
mean validation log-likelihood over `folds` folds of the training split (a seeded permutation cut into
contiguous folds), in place of the Bayesian optimiser (a 5 x 6 grid is as many evaluations); the best point
(the first on ties) is then trained on all training rows and evaluated on the test rows. With one grid point
there is no selection. Inputs and targets are standardised once with the training split's statistics (the
builder; CHOICE: the folds are not standardised separately).

Predictive: `final_samples` weight draws from q, each with Gaussian noise 1/tau (`PredictiveEvaluation`),
metrics in the targets' original units. The protocol is one sequence of optimiser steps, so the shared loop
checkpoints and resumes it at any step: the state holds the phase, the scores so far and the current run.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import seeds
from ..data.task import TaskData
from ..metrics import predictive_metrics
from .common import EpochSampler, PredictiveEvaluation
from .cv_protocol import epoch_steps, fold_sizes

FINAL = (0,)  # sub-stream key of the final training; grid point g, fold k use (1, g, k)


def init_mlp(sizes: list[int], seed: int, keys: tuple, device) -> list[torch.Tensor]:
    """torch.nn.Linear's default initialisation of an MLP with layer widths `sizes`, as [W1, b1, W2, b2, ...]
    (float32, on `device`), drawn from the `init` stream's sub-stream `keys`."""
    gen = seeds.generator(seed, "init", keys=keys)
    params = []
    for d_in, d_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(d_in)  # kaiming_uniform_(a=sqrt(5)) on the weight, and the bias, give this bound
        params.append((torch.rand(d_out, d_in, generator=gen, device="cpu") * 2 - 1) * bound)
        params.append((torch.rand(d_out, generator=gen, device="cpu") * 2 - 1) * bound)
    return [p.to(device) for p in params]


def mlp_forward(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """ReLU MLP with a leading sample axis on every parameter: x [B, D] -> [S, B, D_out]."""
    h = x.unsqueeze(0)
    n_layers = len(params) // 2
    for i in range(n_layers):
        w, b = params[2 * i], params[2 * i + 1]
        h = torch.matmul(h, w.transpose(-1, -2)) + b.unsqueeze(-2)
        if i < n_layers - 1:
            h = F.relu(h)
    return h


class VadamRun(PredictiveEvaluation):
    """One Vadam training run on (x, y) with fixed noise precision `tau` and prior precision `prior_prec`."""

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        hidden: list[int],
        tau: float,
        prior_prec: float,
        lr: float,
        betas: tuple[float, float],
        batch_size: int,
        mc_samples: int,
        seed: int,
        keys: tuple,
    ):
        self.x, self.y = x, y.reshape(x.shape[0], -1)
        self.n = int(x.shape[0])
        self.tau, self.prior_prec = float(tau), float(prior_prec)
        self.lr, self.betas, self.mc_samples = float(lr), tuple(float(b) for b in betas), int(mc_samples)
        sizes = [int(x.shape[1]), *map(int, hidden), int(self.y.shape[1])]
        params = init_mlp(sizes, seed, keys, x.device)
        self.shapes = [p.shape for p in params]
        # mu, m and s as flat vectors (one op per update instead of one per layer: the steps are overhead-bound)
        self.mu = torch.cat([p.reshape(-1) for p in params])
        self.m = torch.zeros_like(self.mu)
        self.s = torch.zeros_like(self.mu)
        self.t = 0
        self.sampler = EpochSampler(
            self.n, batch_size, seeds.generator(seed, "minibatches", x.device, keys), keep_last=True
        )
        self.gen = seeds.generator(seed, "weight_noise", x.device, keys)

    def params(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """[S, P] flat weight samples as the MLP's [S, *shape] parameters (views)."""
        sizes = [math.prod(sh) for sh in self.shapes]
        return [v.reshape(flat.shape[0], *sh) for v, sh in zip(flat.split(sizes, dim=1), self.shapes)]

    def sigma(self) -> torch.Tensor:
        """Posterior standard deviations 1 / sqrt(N s + lambda), flat."""
        return torch.rsqrt(self.n * self.s + self.prior_prec)

    def sample(self, n_samples: int, generator: torch.Generator | None) -> torch.Tensor:
        """[S, P] weight draws from q."""
        eps = torch.randn((n_samples, self.mu.numel()), generator=generator, dtype=self.mu.dtype, device=self.mu.device)
        return self.mu + self.sigma() * eps

    def nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample mean negative log-likelihood of the minibatch, [S]."""
        sq = (out - y.unsqueeze(0)).square().sum(-1)
        d = y.shape[-1]
        return (0.5 * self.tau * sq).mean(-1) + 0.5 * d * (math.log(2 * math.pi) - math.log(self.tau))

    def train_step(self, step: int) -> dict[str, float]:
        idx = self.sampler.next()
        x, y = self.x[idx], self.y[idx]
        w = self.sample(self.mc_samples, self.gen).requires_grad_()
        losses = self.nll(mlp_forward(self.params(w), x), y)
        (g,) = torch.autograd.grad(losses.sum(), w)  # sample k's loss depends on its own row only: g_k per row
        b1, b2 = self.betas
        self.t += 1
        lam = self.prior_prec / self.n
        with torch.no_grad():
            self.m.mul_(b1).add_(g.mean(0) + lam * self.mu, alpha=1 - b1)
            self.s.mul_(b2).add_(g.square().mean(0), alpha=1 - b2)
            m_hat = self.m / (1 - b1**self.t)
            s_hat = self.s / (1 - b2**self.t)
            self.mu.sub_(self.lr * m_hat / (s_hat.sqrt() + lam))
        return {"loss": float(losses.detach().mean())}

    @torch.no_grad()
    def sample_outputs(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None):
        return mlp_forward(self.params(self.sample(n_samples, generator)), x)

    def noise_cov(self) -> torch.Tensor:
        d = self.y.shape[1]
        return torch.eye(d, dtype=torch.float64, device=self.x.device) / self.tau

    def state_dict(self) -> dict:
        return {
            "mu": self.mu.clone(),
            "m": self.m.clone(),
            "s": self.s.clone(),
            "t": self.t,
            "sampler": self.sampler.state_dict(),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        for name in ("mu", "m", "s"):
            setattr(self, name, state[name].to(self.x.device, copy=True))
        self.t = int(state["t"])
        self.sampler.load_state_dict(state["sampler"])
        self.gen.set_state(state["gen"])


class VadamProtocol(PredictiveEvaluation):
    """The selection protocol and the final Vadam run behind the Method protocol (see the module docstring)."""

    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        epochs: int,
        batch_size: int,
        lr: float,
        betas: tuple[float, float],
        mc_samples: int,
        log_noise_prec: list[float],
        log_prior_prec: list[float],
        folds: int,
        seed: int,
        val_samples: int,
        n_eval_samples: int,
        y_std=None,
        train_eval_size: int | None = None,
        eval_batch_size: int = 8192,
    ):
        if data.task != "regression":
            raise ValueError("VADAM's protocol here is for regression")
        self.data, self.hidden, self.seed = data, list(hidden), int(seed)
        self.epochs, self.batch_size = int(epochs), int(batch_size)
        self.lr, self.betas, self.mc_samples = float(lr), tuple(betas), int(mc_samples)
        self.grid = [(float(a), float(b)) for a in log_noise_prec for b in log_prior_prec]
        self.folds, self.val_samples = int(folds), int(val_samples)
        n = data.n_train
        perm = torch.randperm(n, generator=seeds.generator(seed, "validation_split")).to(data.device)
        bounds = [0]
        for size in fold_sizes(n, self.folds):
            bounds.append(bounds[-1] + size)
        self.fold_rows = [perm[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        # phases: (grid point, fold) for the selection (none with one grid point), then the final run
        self.phases = [(g, k) for g in range(len(self.grid)) for k in range(self.folds)] if len(self.grid) > 1 else []
        self.phase_steps = []
        for _, k in self.phases:
            self.phase_steps.append(self.epochs * epoch_steps(n - len(self.fold_rows[k]), self.batch_size))
        self.phases.append(None)
        self.phase_steps.append(self.epochs * epoch_steps(n, self.batch_size))
        self.n_steps = sum(self.phase_steps)
        self.scores: list[float] = []  # validation log-likelihood of every finished selection phase
        self.phase = 0
        self.phase_step = 0
        self._setup_eval(data, seed, n_eval_samples, y_std, train_eval_size, eval_batch_size)
        self.run = self._start(0)

    # -------------------------------------------------------------- phases
    def _train_rows(self, k: int) -> torch.Tensor:
        return torch.cat([r for j, r in enumerate(self.fold_rows) if j != k])

    def grid_scores(self) -> list[float]:
        """Mean validation log-likelihood over the folds of every grid point (once its folds have run)."""
        k = self.folds
        return [sum(self.scores[g * k : (g + 1) * k]) / k for g in range(len(self.scores) // k)]

    def chosen(self) -> tuple[float, float]:
        """(log tau, log lambda) of the final run: the grid point with the highest mean validation LL (the first
        on ties; a non-finite mean never wins)."""
        means = self.grid_scores()
        best = 0
        for g, v in enumerate(means):
            if math.isfinite(v) and (not math.isfinite(means[best]) or v > means[best]):
                best = g
        return self.grid[best]

    def _start(self, phase: int) -> VadamRun:
        d = self.data
        spec = self.phases[phase]
        if spec is None:
            log_tau, log_lam = self.chosen()
            x, y, keys = d.x_train, d.y_train, FINAL
        else:
            g, k = spec
            log_tau, log_lam = self.grid[g]
            rows = self._train_rows(k)
            x, y, keys = d.x_train[rows], d.y_train[rows], (1, g, k)
        return VadamRun(
            x,
            y,
            self.hidden,
            math.exp(log_tau),
            math.exp(log_lam),
            self.lr,
            self.betas,
            self.batch_size,
            self.mc_samples,
            self.seed,
            keys,
        )

    def _score(self) -> float:
        """Validation log-likelihood of the finished selection phase (the fold's rows, its own draws)."""
        _, k = self.phases[self.phase]
        rows = self.fold_rows[k]
        gen = seeds.generator(self.seed, "eval", self.data.device, (1, *self.phases[self.phase]))
        samples = self.run.sample_outputs(self.data.x_train[rows], self.val_samples, generator=gen)
        return predictive_metrics(samples, self.data.y_train[rows], "regression", self.run.noise_cov())["ll"]

    def train_step(self, step: int) -> dict[str, float]:
        out = self.run.train_step(self.phase_step)
        self.phase_step += 1
        if self.phase_step == self.phase_steps[self.phase] and self.phases[self.phase] is not None:
            score = self._score()
            self.scores.append(score if math.isfinite(score) else -math.inf)
            self.phase += 1
            self.phase_step = 0
            self.run = self._start(self.phase)
        return out

    @property
    def final_phase(self) -> bool:
        return self.phases[self.phase] is None

    # -------------------------------------------------------------- evaluation (the current run's q)
    @torch.no_grad()
    def sample_outputs(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None):
        return self.run.sample_outputs(x, n_samples, generator)

    def noise_cov(self) -> torch.Tensor:
        return self.run.noise_cov()

    def evaluate(self, step: int, n_samples: int | None = None) -> dict[str, float]:
        out = super().evaluate(step, n_samples)
        out["phase"] = float(self.phase)
        return out

    def final_metrics(self, n_samples: int | None = None) -> dict[str, float]:
        out = super().final_metrics(n_samples)
        log_tau, log_lam = self.chosen()
        out.update({"log_noise_prec": log_tau, "log_prior_prec": log_lam})
        means = self.grid_scores()
        if means:
            out["val_ll_chosen"] = means[self.grid.index((log_tau, log_lam))]
        return out

    def state_dict(self) -> dict:
        return {
            "phase": self.phase,
            "phase_step": self.phase_step,
            "scores": list(self.scores),
            "run": self.run.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.phase, self.phase_step = int(state["phase"]), int(state["phase_step"])
        self.scores = [float(s) for s in state["scores"]]
        self.run = self._start(self.phase)
        self.run.load_state_dict(state["run"])
