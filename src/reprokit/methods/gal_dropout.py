"""MC dropout with Gal's UCI protocol (DropoutUncertaintyExps, "grid search (new)", the BALI paper's DO column).

    m = GalDropoutProtocol(data, hidden=[50], rates=(0.005, 0.01, 0.05, 0.1), taus=(0.25, 0.5, 0.75),
                           epochs=4000, batch_size=128, seed=split, predictive_samples=10000)

`data` holds the split's raw (unstandardised) training and test rows. One cell runs the whole protocol:

1. inner split: the first ``int((1 - val_fraction) N)`` training rows (in the split file's order) train,
   the rest validate;
2. for every (p, tau) of the grid (rates outer, taus inner, as in Gal's loop) a fresh network is trained on
   the inner rows and scored by its validation log-likelihood;
3. the (p, tau) with the highest validation LL (the first one on ties) is retrained on all training rows
   and evaluated on the test rows.

Each phase standardises inputs and targets with its own training rows' statistics (population std, a
constant column keeps std 1). The network is ReLU with inverted dropout of rate p on the inputs and before
every later layer (DropoutMLP with dropout_input), Glorot-uniform weights and zero biases (Keras'
defaults), trained for ``epochs`` epochs of shuffled minibatches (the last one smaller, as Keras' fit) with
Adam (lr 1e-3, eps 1e-7: Keras 2.2) on the mean squared error in standardised units plus
``reg * sum ||W||^2`` over the weight matrices (not the biases), reg = l^2 (1 - p) / (2 N tau).

The predictive is T = `predictive_samples` dropout passes mapped back to original units; its log-likelihood
per point is Gal's  logsumexp_t(-tau/2 (y - yhat_t)^2) - log T - log(2 pi)/2 + log(tau)/2, with tau a
precision in original units; the RMSE is that of the T-sample mean.

The protocol is one sequence of optimiser steps (`n_steps = grid points x inner-phase steps + full-phase
steps`), so the shared training loop checkpoints and resumes it at any step: the state holds the phase,
the grid results so far and the current network, optimiser, sampler and mask generator. Phase k draws
its initialisation, minibatches and masks from the named streams with sub-stream keys (1, k) (grid point
k) or (0,) (the final retraining), so the grid points are independent of one another and of their order.

`parallel_grid=True` trains the grid's networks side by side instead (`_GridBatch`: stacked weights, one
batched matmul per layer, `n_steps = inner-phase steps + full-phase steps`). Every grid point keeps its own
initialisation, minibatch and mask streams (the same draws as one after another) and Adam is elementwise,
so the networks are those of the sequential grid up to floating-point rounding; the tiny network's steps
are overhead-bound, so a step of all G points costs far less than G steps (kin8nm's 12 points: 4.8x faster
on one CPU thread; benchmarks/gal_grid_parallel.py).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import torch
from torch import nn

from .. import seeds
from ..data.task import TaskData
from .common import EpochSampler
from .gal_protocol import gal_inner_size as inner_size
from .gal_protocol import gal_protocol_steps as protocol_steps
from .gal_protocol import gal_steps_per_epoch as steps_per_epoch  # noqa: F401 (re-exported)
from .mc_dropout import DropoutMLP

log = logging.getLogger("reprokit.gal_dropout")

FINAL = (0,)  # sub-stream key of the final retraining; grid point k uses (1, k)


def weight_reg(p: float, tau: float, n: int, lengthscale: float = 1e-2) -> float:
    """Gal's L2 coefficient on ||W||^2 (added to the mean squared error): l^2 (1 - p) / (2 N tau)."""
    return float(lengthscale) ** 2 * (1.0 - float(p)) / (2.0 * int(n) * float(tau))


@torch.no_grad()
def tau_log_likelihood(samples: torch.Tensor, y: torch.Tensor, tau: float) -> torch.Tensor:
    """Per-point log-likelihood of Gal's predictive: samples [T, B] and y [B] in original units, tau a
    precision in those units. Computed in float64."""
    s = samples.to(torch.float64).reshape(samples.shape[0], -1)
    yy = y.to(torch.float64).reshape(1, -1)
    t = s.shape[0]
    return (
        torch.logsumexp(-0.5 * float(tau) * (yy - s).square(), dim=0)
        - math.log(t)
        - 0.5 * math.log(2 * math.pi)
        + 0.5 * math.log(float(tau))
    )


def select_best(results: list[dict]) -> dict:
    """The grid point with the highest validation log-likelihood; the first one on ties (Gal's strict `>`);
    non-finite scores never win."""
    best, best_ll = None, -math.inf
    for r in results:
        ll = float(r["val_ll"])
        if math.isfinite(ll) and ll > best_ll:
            best, best_ll = r, ll
    return best if best is not None else results[0]


@dataclass
class _Scaled:
    """A phase's training rows in standardised units and the statistics that map back."""

    x: torch.Tensor
    y: torch.Tensor
    x_mean: torch.Tensor
    x_std: torch.Tensor
    y_mean: float
    y_std: float

    @classmethod
    def of(cls, x: torch.Tensor, y: torch.Tensor) -> _Scaled:
        xm, xs = x.mean(0), x.std(0, unbiased=False)
        xs = torch.where(xs > 0, xs, torch.ones_like(xs))
        yv = y.reshape(-1).to(torch.float64)
        ym, ys = float(yv.mean()), float(yv.std(unbiased=False))
        return cls((x - xm) / xs, ((y.reshape(-1, 1) - ym) / ys).to(x.dtype), xm, xs, ym, ys)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.x_mean) / self.x_std


def glorot_init(net: nn.Module, generator: torch.Generator | None = None) -> None:
    """Keras' Dense defaults: Glorot-uniform weights, zero biases."""
    for lin in net.linears:
        fan_out, fan_in = lin.weight.shape
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound, generator=generator)
            lin.bias.zero_()


class GalDropoutProtocol:
    """Gal's grid search + retraining as one method for the shared training loop (see the module doc)."""

    progress_seconds = 30.0  # a scoring log line at most this often (the training loop's cadence)

    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        rates,
        taus,
        epochs: int,
        seed: int,
        batch_size: int = 128,
        lengthscale: float = 1e-2,
        lr: float = 1e-3,
        val_fraction: float = 0.2,
        predictive_samples: int = 10000,
        eval_samples: int = 100,
        sample_chunk: int = 1000,
        activation: str = "relu",
        parallel_grid: bool = False,
    ):
        if data.task != "regression":
            raise ValueError("Gal's protocol is for regression")
        self.data, self.hidden, self.activation = data, [int(h) for h in hidden], activation
        self.grid = [(float(p), float(t)) for p in rates for t in taus]
        if not self.grid:
            raise ValueError("the (p, tau) grid is empty")
        self.epochs, self.batch_size, self.seed = int(epochs), int(batch_size), int(seed)
        self.lengthscale, self.lr, self.val_fraction = float(lengthscale), float(lr), float(val_fraction)
        self.predictive_samples, self.eval_samples = int(predictive_samples), int(eval_samples)
        self.sample_chunk = int(sample_chunk)
        n = data.n_train
        self.n_inner = inner_size(n, val_fraction)
        if not 0 < self.n_inner < n:
            raise ValueError(f"val_fraction {val_fraction} leaves no inner training or validation rows of {n}")
        self.inner_steps, self.full_steps = protocol_steps(n, epochs, batch_size, val_fraction)
        self.parallel_grid = bool(parallel_grid)
        grid_steps = self.inner_steps if self.parallel_grid else len(self.grid) * self.inner_steps
        self.n_steps = grid_steps + self.full_steps
        self.results: list[dict] = []  # one per finished grid point
        self.chosen: dict | None = None
        self.phase = -1  # index into the grid (parallel: 0 = the whole grid), len(grid) = the final retraining
        self.net = None
        self.grid_batch: _GridBatch | None = None  # parallel_grid: the grid's networks while they train

    # ---------------------------------------------------------------- phases
    def _phase_of(self, step: int) -> int:
        if self.parallel_grid:
            return 0 if step < self.inner_steps else len(self.grid)
        return min(step // self.inner_steps, len(self.grid))

    def _phase_end(self, k: int) -> int:
        return (k + 1) * self.inner_steps if k < len(self.grid) else self.n_steps

    def _phase_rows(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.data
        if k < len(self.grid):
            return d.x_train[: self.n_inner], d.y_train[: self.n_inner]
        return d.x_train, d.y_train

    def _phase_params(self, k: int) -> tuple[float, float]:
        if k < len(self.grid):
            return self.grid[k]
        if self.chosen is None:
            self.chosen = select_best(self.results)
            log.info(
                "grid done: chose p=%g tau=%g (validation LL %.4f)",
                self.chosen["p"],
                self.chosen["tau"],
                self.chosen["val_ll"],
            )
        return float(self.chosen["p"]), float(self.chosen["tau"])

    def _new_net(self, p: float, tau: float, keys: tuple) -> DropoutMLP:
        """A phase's network: Glorot-uniform from the `init` stream's sub-stream `keys`, on the data's device."""
        init_gen = seeds.generator(self.seed, "init", keys=keys)  # on the CPU; the net moves after init
        with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws: the global RNG stays untouched
            net = DropoutMLP(
                self.data.x_train.shape[1],
                self.hidden,
                1,
                self.activation,
                p,
                dropout_input=True,
                task="regression",
                noise_std=1.0 / math.sqrt(tau),
            )
        glorot_init(net, init_gen)
        return net.to(self.data.device)

    def _new_sampler(self, n: int, keys: tuple) -> EpochSampler:
        gen = seeds.generator(self.seed, "minibatches", self.data.device, keys=keys)
        return EpochSampler(n, self.batch_size, gen, keep_last=True)  # Keras' fit: the epoch's last batch smaller

    def _start_phase(self, k: int) -> None:
        x, y = self._phase_rows(k)
        self.scaled = _Scaled.of(x, y)
        self.phase = k
        if self.parallel_grid and k < len(self.grid):
            keys = [(1, j) for j in range(len(self.grid))]
            self.grid_batch = _GridBatch(
                [self._new_net(p, t, kk) for (p, t), kk in zip(self.grid, keys)],
                [weight_reg(p, t, x.shape[0], self.lengthscale) for p, t in self.grid],
                [seeds.generator(self.seed, "dropout_masks", self.data.device, keys=kk) for kk in keys],
                [self._new_sampler(x.shape[0], kk) for kk in keys],
                self.lr,
            )
            self.net = None
            log.info("grid: %d points side by side on %d rows, %d steps", len(self.grid), x.shape[0], self.inner_steps)
            return
        keys = (1, k) if k < len(self.grid) else FINAL
        p, tau = self._phase_params(k)
        self.p, self.tau = p, tau
        self.reg = weight_reg(p, tau, x.shape[0], self.lengthscale)
        self.net = self._new_net(p, tau, keys)
        self.mask_gen = seeds.generator(self.seed, "dropout_masks", self.data.device, keys=keys)
        self.net.generator = self.mask_gen
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr, eps=1e-7)
        self.sampler = self._new_sampler(x.shape[0], keys)
        what = f"grid point {k + 1}/{len(self.grid)}" if k < len(self.grid) else "final retraining"
        log.info(
            "%s: p=%g tau=%g on %d rows, %d steps",
            what,
            p,
            tau,
            x.shape[0],
            self.inner_steps if k < len(self.grid) else self.full_steps,
        )

    def _end_grid(self) -> None:
        """Parallel grid done: score every point with its own network, in grid order, as the sequential grid."""
        batch, self.grid_batch = self.grid_batch, None
        for k, (p, tau) in enumerate(self.grid):
            self.p, self.tau = p, tau
            self.net = batch.network(k, self._new_net(p, tau, (1, k)))
            self._end_grid_point(k)
        self.net = None  # nothing trains until the retraining starts (a checkpoint here holds the results only)

    def _end_grid_point(self, k: int) -> None:
        n = self.data.n_train
        xv, yv = self.data.x_train[self.n_inner : n], self.data.y_train[self.n_inner : n]
        m = self.predict_metrics(
            xv, yv, self.predictive_samples, seeds.generator(self.seed, "eval", self.data.device, keys=(1, k))
        )
        self.results.append({"p": self.p, "tau": self.tau, "val_ll": m["ll"], "val_rmse": m["rmse"]})
        log.info(
            "grid point %d/%d: p=%g tau=%g validation LL %.4f RMSE %.4f",
            k + 1,
            len(self.grid),
            self.p,
            self.tau,
            m["ll"],
            m["rmse"],
        )

    # ---------------------------------------------------------------- Method protocol
    def train_step(self, step: int) -> dict[str, float]:
        k = self._phase_of(step)
        if k != self.phase:
            self._start_phase(k)
        if self.grid_batch is not None:
            loss, mse = self.grid_batch.step(self.scaled.x, self.scaled.y)
            if step + 1 == self.inner_steps:
                self._end_grid()
            return {"loss": loss.mean().item(), "mse": mse.mean().item()}  # the grid points' mean
        idx = self.sampler.next()
        self.net.train()
        out = self.net(self.scaled.x[idx])
        mse = (out - self.scaled.y[idx]).square().mean()
        l2 = sum(lin.weight.square().sum() for lin in self.net.linears)
        loss = mse + self.reg * l2
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if k < len(self.grid) and step + 1 == self._phase_end(k):
            self._end_grid_point(k)
        return {"loss": loss.item(), "mse": mse.item()}

    @torch.no_grad()
    def sample_chunks(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None):
        """The T dropout passes of the current network in original units (raw inputs `x`), yielded as [t, B]
        chunks of at most `sample_chunk` passes (~80 MB of activations each), in the generator's order."""
        was = self.net.training
        self.net.eval()
        try:
            z = self.scaled.inputs(x)
            width = max([z.shape[1], *self.hidden])
            chunk = max(1, min(self.sample_chunk, int(2e7) // max(1, z.shape[0] * width)))
            for start in range(0, int(n_samples), chunk):
                t = min(chunk, int(n_samples) - start)
                rep = z.unsqueeze(0).expand(t, *z.shape).reshape(t * z.shape[0], z.shape[1])
                yield (
                    self.net(rep, mc=True, generator=generator).reshape(t, z.shape[0]) * self.scaled.y_std
                    + self.scaled.y_mean
                )
        finally:
            self.net.train(was)

    def sample_outputs(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """[T, B] dropout passes (all of `sample_chunks`)."""
        return torch.cat(list(self.sample_chunks(x, n_samples, generator)))

    @torch.no_grad()
    def predict_metrics(self, x: torch.Tensor, y: torch.Tensor, n_samples: int, generator) -> dict[str, float]:
        """Gal's LL and MC RMSE of T passes, accumulated chunk by chunk (log-sum-exp and sum in float64), so
        memory does not grow with T x B (protein's train split: 10000 x 41157 passes held at once peaked at
        ~15 GB); the same passes as `sample_outputs`, equal to scoring them at once up to float64 rounding."""
        yy = y.to(torch.float64).reshape(-1)
        lse, total, t = None, torch.zeros_like(yy), 0
        last_log = time.monotonic()
        for s in self.sample_chunks(x, n_samples, generator):
            s = s.to(torch.float64)
            part = tau_log_likelihood(s, yy, self.tau) + math.log(s.shape[0])  # the chunk's log-sum-exp term
            lse = part if lse is None else torch.logaddexp(lse, part)
            total += s.sum(0)
            t += s.shape[0]
            if time.monotonic() - last_log >= self.progress_seconds:  # protein's final scoring runs for minutes
                last_log = time.monotonic()
                log.info("scoring: %d/%d dropout passes over %d rows", t, int(n_samples), yy.shape[0])
        ll_i = lse - math.log(t)
        rmse = float((total / t - yy).square().mean().sqrt())
        ll = float(ll_i.mean())
        return {"ll": ll, "nll": -ll, "rmse": rmse}

    def evaluate(self, step: int) -> dict[str, float]:
        """Curve row: the last finished grid point's validation scores; in the final phase, test metrics of
        the retrained network with `eval_samples` passes."""
        if self.phase == len(self.grid):
            m = self.predict_metrics(
                self.data.x_test,
                self.data.y_test,
                self.eval_samples,
                seeds.generator(self.seed, "eval", self.data.device),
            )
            return {"phase": self.phase, "p": self.p, "tau": self.tau, **{f"test_{k}": v for k, v in m.items()}}
        if not self.results:
            return {"phase": max(self.phase, 0)}
        r = self.results[-1]
        return {
            "phase": len(self.results) - 1,
            "p": r["p"],
            "tau": r["tau"],
            "val_ll": r["val_ll"],
            "val_rmse": r["val_rmse"],
        }

    def final_metrics(self, n_samples: int | None = None) -> dict[str, float]:
        t = self.predictive_samples if n_samples is None else int(n_samples)
        gen = seeds.generator(self.seed, "final", self.data.device)
        out = {}
        for split, x, y in (
            ("train", self.data.x_train, self.data.y_train),
            ("test", self.data.x_test, self.data.y_test),
        ):
            out.update({f"{split}_{k}": v for k, v in self.predict_metrics(x, y, t, gen).items()})
        out.update(
            {"noise_sd": 1.0 / math.sqrt(self.tau), "chosen_p": self.p, "chosen_tau": self.tau, "predictive_samples": t}
        )
        if self.results:
            out["best_val_ll"] = float(select_best(self.results)["val_ll"])
        for r in self.results:  # the whole grid, one key per point
            out[f"val_ll_p{r['p']:g}_tau{r['tau']:g}"] = float(r["val_ll"]) if math.isfinite(r["val_ll"]) else -1e300
        return out

    def state_dict(self) -> dict:
        state = {"phase": self.phase, "results": [dict(r) for r in self.results], "chosen": self.chosen}
        if self.grid_batch is not None:
            state["grid_batch"] = self.grid_batch.state_dict()
        elif self.net is not None:
            state.update(
                {
                    "net": self.net.state_dict(),
                    "opt": self.opt.state_dict(),
                    "sampler": self.sampler.state_dict(),
                    "mask_gen": self.mask_gen.get_state(),
                }
            )
        return state

    def load_state_dict(self, state: dict) -> None:
        self.results = [dict(r) for r in state["results"]]
        self.chosen = state["chosen"]
        self.phase, self.net, self.grid_batch = -1, None, None
        if "grid_batch" in state:
            self._start_phase(int(state["phase"]))
            self.grid_batch.load_state_dict(state["grid_batch"])
        elif "net" in state:
            self._start_phase(int(state["phase"]))
            self.net.load_state_dict(state["net"])
            self.opt.load_state_dict(state["opt"])
            self.sampler.load_state_dict(state["sampler"])
            self.mask_gen.set_state(state["mask_gen"])


class _GridBatch:
    """The grid's G networks trained side by side (parallel_grid): weights stacked to [G, out, in] and biases to
    [G, 1, out], one batched matmul per layer, and one loss, the sum of the points' losses, so each point's
    gradient is its own and Adam (elementwise) updates it as alone. Point k draws its minibatch from its
    own sampler and its masks from its own generator, in the order one DropoutMLP would (inputs, then each
    hidden layer; none where p = 0). Written by hand: torch.func.vmap cannot batch the per-point generators."""

    def __init__(
        self,
        nets: list[DropoutMLP],
        regs: list[float],
        mask_gens: list[torch.Generator],
        samplers: list[EpochSampler],
        lr: float,
    ):
        first = nets[0]
        self.activation, self.mask_gens, self.samplers = first.activation, mask_gens, samplers
        self.ps = [float(n.p) for n in nets]
        dev = first.linears[0].weight.device
        self.weights = [
            nn.Parameter(torch.stack([n.linears[i].weight.detach() for n in nets])) for i in range(len(first.linears))
        ]
        self.biases = [
            nn.Parameter(torch.stack([n.linears[i].bias.detach() for n in nets]).unsqueeze(1))
            for i in range(len(first.linears))
        ]
        self.keep_scale = torch.tensor([1.0 - p for p in self.ps], device=dev).reshape(-1, 1, 1)
        self.reg = torch.tensor(regs, device=dev)
        self.opt = torch.optim.Adam([*self.weights, *self.biases], lr=lr, eps=1e-7)

    def _drop(self, h: torch.Tensor) -> torch.Tensor:
        keep = torch.stack(
            [
                torch.rand(h.shape[1:], generator=g, dtype=h.dtype, device=h.device) >= p
                if p > 0.0
                else torch.ones(h.shape[1:], dtype=torch.bool, device=h.device)
                for p, g in zip(self.ps, self.mask_gens)
            ]
        )
        return h * keep / self.keep_scale

    def step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One Adam step of every point on its own minibatch of (x, y); returns the points' losses and MSEs [G]."""
        idx = torch.stack([s.next() for s in self.samplers])  # [G, b]: equal sizes (same rows and batch size)
        h = x[idx]
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if i > 0:
                h = self.activation(h)
            h = torch.baddbmm(b, self._drop(h), w.transpose(1, 2))
        mse = (h - y[idx]).square().mean(dim=(1, 2))
        loss = mse + self.reg * sum(w.square().sum(dim=(1, 2)) for w in self.weights)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        self.opt.step()
        return loss.detach(), mse.detach()

    @torch.no_grad()
    def network(self, k: int, net: DropoutMLP) -> DropoutMLP:
        """`net` (point k's architecture) holding point k's current weights."""
        for lin, w, b in zip(net.linears, self.weights, self.biases):
            lin.weight.copy_(w[k])
            lin.bias.copy_(b[k, 0])
        return net

    def state_dict(self) -> dict:
        return {
            "weights": [w.detach().clone() for w in self.weights],
            "biases": [b.detach().clone() for b in self.biases],
            "opt": self.opt.state_dict(),
            "samplers": [s.state_dict() for s in self.samplers],
            "mask_gens": [g.get_state() for g in self.mask_gens],
        }

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            for p, v in zip([*self.weights, *self.biases], [*state["weights"], *state["biases"]]):
                p.copy_(v)
        self.opt.load_state_dict(state["opt"])
        for s, st in zip(self.samplers, state["samplers"]):
            s.load_state_dict(st)
        for g, st in zip(self.mask_gens, state["mask_gens"]):
            g.set_state(st)
