"""Monte Carlo dropout (Gal & Ghahramani 2016) and MAP, both trained with Adam + weight decay (BALI Table 6).

    m = MCDropout(data, hidden=[256, 256], activation="leaky_tanh", p=0.1, optim=OptimConfig(lr=1e-3,
                  weight_decay=1e-4, batch_size=2048), n_steps=20000, seed=0, n_eval_samples=128)
    m = MAP(data, hidden, activation, optim, n_steps, seed)          # the same network with p = 0

Both are `StandardTraining` (methods/standard.py): the loop, optimiser and minibatch sampling are shared;
this module adds the dropout network, the regression likelihood with a learned homoscedastic noise scale
(`data_nll` hook) and the Monte Carlo predictive (`PredictiveEvaluation`): the predictive is the average
of `n_eval_samples` forward passes with dropout active (MAP: one deterministic pass).

Dropout masks are drawn from the method's own generator (checkpointed), so runs resume bit-identically
and evaluation never consumes training randomness.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import seeds
from ..bali.activations import get_activation
from ..data.task import TaskData
from .common import PredictiveEvaluation
from .standard import OptimConfig, StandardTraining


class DropoutMLP(nn.Module):
    """MLP with (inverted) dropout before every hidden-to-hidden / hidden-to-output layer, and optionally on
    the inputs (Gal's UCI regression setup). `noise_std=None` in regression learns a homoscedastic noise
    scale (a parameter `log_noise_std`); classification has none."""

    def __init__(
        self,
        in_features: int,
        hidden: list[int],
        out_features: int,
        activation: str = "relu",
        p: float = 0.1,
        dropout_input: bool = False,
        task: str = "classification",
        noise_std: float | None = None,
        init_noise_std: float = 0.1,
    ):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        if task not in ("regression", "classification"):
            raise ValueError(f"task '{task}' unknown (valid: regression, classification)")
        self.p, self.dropout_input, self.task = float(p), bool(dropout_input), task
        dims = [int(in_features), *[int(h) for h in hidden], int(out_features)]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.activation = get_activation(activation)
        self.generator: torch.Generator | None = None  # set by the method: the training mask generator
        if task == "regression":
            log_std = torch.full((dims[-1],), math.log(noise_std if noise_std is not None else init_noise_std))
            if noise_std is None:
                self.log_noise_std = nn.Parameter(log_std)
            else:
                self.register_buffer("log_noise_std", log_std)

    def _drop(self, h: torch.Tensor, active: bool, generator: torch.Generator | None) -> torch.Tensor:
        if not active or self.p == 0.0:
            return h
        keep = torch.rand(h.shape, generator=generator, dtype=h.dtype, device=h.device) >= self.p
        return h * keep / (1.0 - self.p)

    def forward(
        self, x: torch.Tensor, mc: bool | None = None, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Dropout is active when `mc` is True, or (mc None) in training mode."""
        active = self.training if mc is None else bool(mc)
        gen = generator if generator is not None else self.generator
        h = x.reshape(x.shape[0], -1)
        for i, lin in enumerate(self.linears):
            if i > 0:
                h = self.activation(h)
            if i > 0 or self.dropout_input:
                h = self._drop(h, active, gen)
            h = lin(h)
        return h

    def noise_cov(self) -> torch.Tensor:
        if self.task != "regression":
            raise ValueError("noise_cov is defined for regression only")
        return torch.diag(torch.exp(2.0 * self.log_noise_std.detach())).to(torch.float64)

    def nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-example negative log-likelihood, [B]."""
        if self.task == "classification":
            return F.cross_entropy(out, y.long(), reduction="none")
        y = y.reshape(out.shape).to(out.dtype)
        z = (y - out) * torch.exp(-self.log_noise_std)
        return (0.5 * z.square() + self.log_noise_std + 0.5 * math.log(2 * math.pi)).sum(-1)


class MCDropout(PredictiveEvaluation, StandardTraining):
    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        activation: str,
        p: float,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        n_eval_samples: int = 100,
        y_std=None,
        dropout_input: bool = False,
        noise_std: float | None = None,
        train_eval_size: int | None = None,
        eval_batch_size: int = 8192,
    ):
        out_dim = (
            int(data.n_classes)
            if data.task == "classification"
            else int(data.y_train.reshape(data.n_train, -1).shape[1])
        )
        with torch.random.fork_rng(devices=[]):  # initialisation from `seed`, global RNG untouched
            torch.manual_seed(seeds.stream_seed(seed, "init"))
            net = DropoutMLP(
                int(data.x_train[0].numel()), hidden, out_dim, activation, p, dropout_input, data.task, noise_std
            ).to(data.device)  # initialised on the CPU, then placed with the data
        self.mask_gen = seeds.generator(seed, "dropout_masks", data.device)
        net.generator = self.mask_gen
        super().__init__(net, data, optim, n_steps, int(seed))  # StandardTraining (MRO: after the mixin)
        n_eval = 1 if p == 0.0 else n_eval_samples
        self._setup_eval(data, seed, n_eval, y_std, train_eval_size, eval_batch_size)

    def data_nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.net.nll(out, y).mean()

    @torch.no_grad()
    def sample_outputs(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """[S, B, D] outputs of `n_samples` dropout passes (one deterministic pass when p = 0)."""
        was = self.net.training
        self.net.eval()
        try:
            mc = self.net.p > 0.0
            return torch.stack([self.net(x, mc=mc, generator=generator) for _ in range(int(n_samples) if mc else 1)])
        finally:
            self.net.train(was)

    def noise_cov(self) -> torch.Tensor:
        return self.net.noise_cov()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "mask_gen": self.mask_gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.mask_gen.set_state(state["mask_gen"])


class MAP(MCDropout):
    """Deterministic network, maximum a posteriori via Adam + weight decay (Table 6 with p = 0)."""

    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        activation: str,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        y_std=None,
        noise_std: float | None = None,
        train_eval_size: int | None = None,
        eval_batch_size: int = 8192,
    ):
        super().__init__(
            data,
            hidden,
            activation,
            0.0,
            optim,
            n_steps,
            seed,
            1,
            y_std,
            False,
            noise_std,
            train_eval_size,
            eval_batch_size,
        )
