"""Bayes by Backprop (Blundell et al. 2015) behind the Method protocol, with a KL down-weighting factor.

    m = BBBMethod(data, hidden=[256, 256, 256], activation="tanh", kl_factor=0.1,
                  optim=OptimConfig(lr=1e-3, batch_size=32), n_steps=20000, seed=0)

Loss per step (models/bbb.py `elbo_loss`): mean NLL of the minibatch under one weight sample +
kl_factor * KL(q || p) / N (kl_factor = 1: the ELBO; < 1 down-weights the KL, App. I.2). Adam on the
means, the softplus-parametrised standard deviations and (regression, unless `noise_std` is fixed) a
homoscedastic noise scale. Predictive and metrics as for BALI (`PredictiveEvaluation`).
"""

from __future__ import annotations

import torch

from .. import seeds
from ..data.task import TaskData
from ..models.bbb import BBBMLP
from .common import EpochSampler, PredictiveEvaluation
from .standard import OptimConfig, make_optimizer


class BBBMethod(PredictiveEvaluation):
    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        activation: str,
        kl_factor: float,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        prior_sigma: float = 1.0,
        init_sigma: float = 1e-3,
        noise_std: float | None = None,
        init_noise_std: float = 0.1,
        n_eval_samples: int = 100,
        y_std=None,
        train_eval_size: int | None = None,
        eval_batch_size: int = 8192,
    ):
        self.data, self.kl_factor = data, float(kl_factor)
        out_dim = (
            int(data.n_classes)
            if data.task == "classification"
            else int(data.y_train.reshape(data.n_train, -1).shape[1])
        )
        with torch.random.fork_rng(devices=[]):  # initialisation from `seed`, global RNG untouched
            torch.manual_seed(seeds.stream_seed(seed, "init"))
            self.model = BBBMLP(
                int(data.x_train[0].numel()),
                list(hidden),
                out_dim,
                activation,
                data.task,
                prior_sigma=prior_sigma,
                init_sigma=init_sigma,
                noise_std=noise_std,
                init_noise_std=init_noise_std,
            ).to(data.device)  # initialised on the CPU
        self.opt = make_optimizer([p for p in self.model.parameters() if p.requires_grad], optim)
        self.sampler = EpochSampler(data.n_train, optim.batch_size, seeds.generator(seed, "minibatches", data.device))
        self.gen = seeds.generator(seed, "weight_noise", data.device)
        self._setup_eval(data, seed, n_eval_samples, y_std, train_eval_size, eval_batch_size)

    def train_step(self, step: int) -> dict[str, float]:
        idx = self.sampler.next()
        loss, parts = self.model.elbo_loss(
            self.data.x_train[idx], self.data.y_train[idx], self.data.n_train, self.kl_factor, generator=self.gen
        )
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {"loss": float(loss.detach()), **parts}

    @torch.no_grad()
    def sample_outputs(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.model.predict(x, n_samples, generator=generator)

    def noise_cov(self) -> torch.Tensor:
        return self.model.noise_cov().detach().to(torch.float64)

    def state_dict(self) -> dict:
        return {
            "model": {k: v.clone() for k, v in self.model.state_dict().items()},
            "opt": self.opt.state_dict(),
            "sampler": self.sampler.state_dict(),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.sampler.load_state_dict(state["sampler"])
        self.gen.set_state(state["gen"])
