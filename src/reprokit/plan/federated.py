"""Plan of the federated kind (partitioned paper, Sec. 5 and App. J: Table 4, Fig. 10).

Build: experiments/federated.py; method: methods/federated.py. Methods: fedavg (FedAvg with a server
Adam, FedOpt), augerino (FedAvg + Augerino), partitioned (FedAvg + Partitioned). One step = one round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..config import ConfigError
from ..data import variant_names as variants
from . import KindPlan, Settings, register
from .costs import EVAL_FORWARD_SHARE, CellWork, Part

METHODS = ("fedavg", "augerino", "partitioned")
BATCHING = ("loop", "vmap", "auto")


@dataclass(frozen=True)
class FederatedSettings(Settings):
    # grid axes
    dataset: str
    method: str
    n_train: int  # clients' examples in all (the federated split's subset size)
    seed: int
    rounds: int
    eval_every: int  # rounds between evaluations
    rotated: bool = False
    # data: the split is fixed across methods and seeds (data_seed); App. J.2
    n_clients: int = 100
    alpha: float = 0.1  # Dirichlet concentration (label skew; for rotated data over 10 rotation bins)
    rotated_alpha: float = 0.1
    n_val: int = 10000  # validation hold-out of the training set (MNIST 10k, CIFAR 5k)
    n_val_eval: int | None = None  # evaluate on the first n_val_eval validation examples (None: all)
    data_seed: int = 0  # federated split and rotation angles
    eval_seed: int = 0
    # model
    model: str = "mnist_cnn"
    model_kwargs: dict = field(default_factory=dict)
    dropout: float = 0.1  # initial (partitioned: learned) / fixed (fedavg, augerino) dropout rate
    augmentation: str = "schwobel"
    aug_init: float = 0.0
    aug_samples: int = 10
    eval_aug_samples: int = 10
    # federated optimisation
    clients_per_round: int = 10
    local_epochs: int = 1
    batch_size: int = 64
    local_lr: float = 0.05
    server_lr: float = 1e-3
    server_eps: float = 1e-8
    hyper_lr: float = 3e-3
    hyper_eps: float = 1e-8
    hyper_batch_size: int | None = None  # None: the client's whole local data (MNIST, App. J.1)
    # partitioned
    chunk_proportions: list = field(default_factory=lambda: [0.7, 0.2, 0.1])
    param_proportions: list | None = None  # default: chunk_proportions
    partition_scheme: str = "random"
    # augerino
    augerino_reg: float = 0.01
    augerino_reg_kind: str = "safe"
    last_k: int = 10  # val_acc_last: mean over the last last_k evaluations
    eval_batch_size: int = 1000
    # how a round's clients run (methods/federated.py): loop (one after the other), vmap (batched by
    # torch.func.vmap), auto (vmap on CUDA, loop on the CPU); the same results to rounding either way
    client_batching: str = "auto"

    def __post_init__(self):
        if self.method not in METHODS:
            raise ConfigError(f"federated: method '{self.method}' unknown (valid: {', '.join(METHODS)})")
        if self.client_batching not in BATCHING:
            raise ConfigError(f"federated: client_batching '{self.client_batching}' unknown "
                              f"(valid: {', '.join(BATCHING)})")

    @property
    def split_alpha(self) -> float:
        return float(self.rotated_alpha if self.rotated else self.alpha)


class FederatedPlan(KindPlan):
    name = "federated"
    Settings = FederatedSettings
    build_target = "reprokit.experiments.federated:build"

    def n_steps(self, cell) -> int:
        return int(self.settings(cell).rounds)

    def required_variants(self, cell) -> dict:
        st = self.settings(cell)
        ds, out = str(st.dataset), {}
        if st.rotated:
            out["rotated"] = (ds, variants.variant_filename("rotated", seed=int(st.data_seed)))
        out["federated"] = (ds, variants.variant_filename(
            "federated", n=int(st.n_train), n_clients=int(st.n_clients), alpha=st.split_alpha,
            by="rotation" if st.rotated else "label", val=int(st.n_val), seed=int(st.data_seed)))
        return out


    def cost_parts(self, cell) -> CellWork:
        """A round: clients_per_round clients, each one epoch of its ~n_train/n_clients examples in batches
        (FedAvg / Augerino: one network; Partitioned: sum_k u_k (C - k + 1) partitions trained per client in
        expectation, plus a psi gradient on the local data of clients of chunks k >= 2), then evaluations."""
        st = self.settings(cell)
        model, n = str(st.model), int(st.rounds)
        S = 1 if st.method == "fedavg" else int(st.aug_samples)
        n_local = max(1, int(st.n_train) // int(st.n_clients))
        B = min(int(st.batch_size), n_local)
        steps = math.ceil(n_local / int(st.batch_size)) * int(st.local_epochs) * int(st.clients_per_round)
        parts = [Part(model, "standard", B * S, n * steps)]
        if st.method == "partitioned":
            u = [float(v) / sum(st.chunk_proportions) for v in st.chunk_proportions]
            c = len(u)
            parts = [Part(model, "param", B * S, n * steps * sum(u[k] * (c - k) for k in range(c)))]
            hyper_n = int(st.hyper_batch_size or n_local)
            parts.append(Part(model, "hyper", min(hyper_n, n_local) * S, n * int(st.clients_per_round) * (1 - u[0])))
        n_val = int(st.n_val_eval or st.n_val)
        n_evals = n // int(st.eval_every) + 1
        parts.append(Part(model, "standard", B * S,
                          n_evals * EVAL_FORWARD_SHARE * n_val * int(st.eval_aug_samples) / (B * S)))
        return CellWork(n, parts)


PLAN = register(FederatedPlan())
