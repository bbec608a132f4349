"""BALI (Kurle et al., Alg. 1) behind the Method protocol: a `BaliMLP` trained by `bali_step` on minibatches.

    m = BaliMethod(data, hidden=[50], activation="relu", config=BaliConfig(...), batch_size=B, seed=0,
                   n_eval_samples=100, y_std=None)

`config.reparam` picks BALI-W ("weight", the paper's default), BALI-L ("local", App. F) or the deterministic
"mean" variant; the same reparametrisation is used for training and for the predictive (override the
latter with `eval_reparam`). Regression: the last layer is fit to the true targets and its inferred
noise covariance is the likelihood's (Sec. 5.2); classification: categorical likelihood on the logits.
Metrics (see `PredictiveEvaluation`): `{train,test}_{nll,ll,rmse|acc}`, `test_ece`, `test_auc` (binary),
regression ones in original target units when `y_std` is given; `final_metrics` adds `noise_sd`.

Precision: BALI runs outside autocast whatever `run.precision` says (its Kronecker statistics and
pseudo-targets are float64, and a bf16 forward would feed them rounded features); tf32 still applies
to its float32 matmuls.

State: the model's buffers (posteriors, EMAs, step count, initial weights), the minibatch sampler and the
training generator (weight / local-noise draws), so a resumed run is bit-identical.
"""

from __future__ import annotations

import torch

from .. import seeds
from ..bali import BaliConfig, BaliMLP, bali_step
from ..data.task import TaskData
from .common import EpochSampler, PredictiveEvaluation


def output_dim(data: TaskData) -> int:
    if data.task == "classification":
        if data.n_classes is None:
            raise ValueError("classification data needs n_classes")
        return int(data.n_classes)
    return int(data.y_train.reshape(data.n_train, -1).shape[1])


class BaliMethod(PredictiveEvaluation):
    def __init__(
        self,
        data: TaskData,
        hidden: list[int],
        activation: str,
        config: BaliConfig,
        batch_size: int,
        seed: int,
        n_eval_samples: int = 100,
        y_std=None,
        train_eval_size: int | None = None,
        eval_reparam: str | None = None,
        eval_batch_size: int = 8192,
    ):
        self.data = data
        self.config = config
        self.model = BaliMLP(
            int(data.x_train[0].numel()),
            list(hidden),
            output_dim(data),
            activation,
            data.task,
            config,
            generator=seeds.generator(seed, "init"),
        ).to(data.device)  # initialised on the CPU
        self.sampler = EpochSampler(data.n_train, int(batch_size), seeds.generator(seed, "minibatches", data.device))
        self.gen = seeds.generator(seed, "weight_noise", data.device)
        self.eval_reparam = eval_reparam
        self._setup_eval(data, seed, n_eval_samples, y_std, train_eval_size, eval_batch_size)

    # ------------------------------------------------------------------ Method protocol
    def _no_autocast(self):
        return torch.autocast(device_type=self.data.device.type, enabled=False)

    def train_step(self, step: int) -> dict[str, float]:
        idx = self.sampler.next()
        with self._no_autocast():
            out = bali_step(self.model, self.data.x_train[idx], self.data.y_train[idx], generator=self.gen)
        return {"loss": out["loss"], "beta": out["beta"]}

    def state_dict(self) -> dict:
        return {
            "model": {k: v.clone() for k, v in self.model.state_dict().items()},
            "sampler": self.sampler.state_dict(),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.sampler.load_state_dict(state["sampler"])
        self.gen.set_state(state["gen"])

    # ------------------------------------------------------------------ predictions
    @torch.no_grad()
    def sample_outputs(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Network outputs under `n_samples` posterior draws, [S, B, D] (regression: standardised units if the
        data were standardised; classification: logits)."""
        with self._no_autocast():
            return self.model.predict(x, n_samples, reparam=self.eval_reparam, generator=generator)

    def noise_cov(self) -> torch.Tensor:
        return self.model.noise_cov()
