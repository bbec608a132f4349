"""Plan of the federated kind (partitioned paper, Sec. 5 and App. J: Table 4, Fig. 10).

Build: builders/federated.py; method: methods/federated.py. Methods: fedavg (FedAvg with a server
Adam, FedOpt), augerino (FedAvg + Augerino), partitioned (FedAvg + Partitioned). One step = one round.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, get_args

from pydantic import Field

from ..data import variant_names as variants
from .base import KindPlan, Settings, register
from .costs import EVAL_FORWARD_SHARE, CellWork, Part
from .methods import MethodEntry, register_methods, table

_BUILD = "reprokit.builders.federated:"
# The kind's methods, in the order Table 4 and Fig. 10 list them (plan/methods.py). `cost_parts` still says how a
# partitioned round splits into partition and psi updates.
METHOD_TABLE = register_methods(
    "federated",
    table(
        MethodEntry("fedavg", label="FedAvg", colour="tab:gray", builder=_BUILD + "build_fedavg", cost_step="standard"),
        MethodEntry(
            "augerino",
            label="FedAvg + Augerino",
            colour="tab:blue",
            blocks=("augerino",),  # Augerino's cells only
            builder=_BUILD + "build_augerino",
            cost_step="standard",
        ),
        MethodEntry(
            "partitioned",
            label="FedAvg + Partitioned",
            colour="tab:red",
            builder=_BUILD + "build_partitioned",
            cost_step="param",
        ),
    ),
)
Method = Literal[tuple(METHOD_TABLE)]
METHODS = get_args(Method)


class FederatedAugerinoBlock(Settings):
    """FedAvg + Augerino (methods/federated.py): the width regulariser added to each client's loss."""

    reg: float = Field(0.01, ge=0, description="strength of the width regulariser")
    reg_kind: Literal["safe", "standard"] = Field("safe", description="safe (bounded below, App. E) or standard")


class FederatedSettings(Settings):
    # grid axes
    dataset: str
    method: Method
    n_train: int = Field(description="clients' examples in all (the federated split's subset size)")
    seed: int
    rounds: int = Field(ge=1, description="communication rounds (one training step each)")
    eval_every: int = Field(ge=1, description="rounds between evaluations of the validation set")
    rotated: bool = False
    # data: the split is fixed across methods and seeds (data_seed); App. J.2
    n_clients: int = Field(100, ge=1)
    alpha: float = Field(
        0.1, gt=0, description="Dirichlet concentration of the label skew (App. J.2; MNIST 0.1, CIFAR 1.0)"
    )
    rotated_alpha: float = Field(
        0.1, gt=0, description="Dirichlet concentration over the 10 rotation bins of rotated data"
    )
    n_val: int = Field(
        10000,
        ge=1,
        description="validation examples held out of the training set before the subset is drawn (MNIST 10k, CIFAR 5k)",
    )
    n_val_eval: int | None = Field(
        None, ge=1, description="evaluate on the first n_val_eval validation examples (None: all)"
    )
    data_seed: int = Field(0, ge=0, description="federated split and rotation angles")
    eval_seed: int = Field(0, ge=0)
    # model
    model: str = "mnist_cnn"
    model_kwargs: dict = Field(default_factory=dict)
    dropout: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="dropout rate (partitioned: initial value of the learned concrete dropout; others: fixed)",
    )
    # Benton et al.'s own parametrisation (`augerino`, with its `init_raw`) is built by the affine kind only
    augmentation: Literal["schwobel", "immer"] = "schwobel"
    aug_init: float = 0.0
    aug_samples: int = Field(10, ge=1)
    eval_aug_samples: int = Field(10, ge=1)
    # federated optimisation
    clients_per_round: int = Field(10, ge=1)
    local_epochs: int = Field(1, ge=1)
    batch_size: int = Field(64, ge=1)
    local_lr: float = Field(0.05, gt=0)
    server_lr: float = Field(1e-3, gt=0)
    server_eps: float = Field(1e-8, gt=0)
    hyper_lr: float = Field(3e-3, gt=0)
    hyper_eps: float = Field(1e-8, gt=0)
    hyper_batch_size: int | None = Field(
        None,
        ge=1,
        description="partitioned: examples of a client's psi gradient "
        "(None: the client's whole local data, MNIST, App. J.1)",
    )
    # partitioned
    chunk_proportions: list[Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: [0.7, 0.2, 0.1], min_length=1
    )
    param_proportions: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, description="default: chunk_proportions"
    )
    partition_scheme: Literal["random", "node"] = "random"
    augerino: FederatedAugerinoBlock = Field(
        default_factory=FederatedAugerinoBlock,
        description="method augerino's settings (the other methods' cells drop this block)",
    )
    last_k: int = Field(10, ge=1, description="val_acc_last: mean over the last last_k evaluations")
    eval_batch_size: int = Field(1000, ge=1)
    client_batching: Literal["loop", "vmap", "auto"] = Field(
        "auto",
        description="how a round's clients run (methods/federated.py): loop (one after the other), vmap "
        "(batched by torch.func.vmap), auto (vmap on CUDA, loop on the CPU); the same results to rounding either way",
    )

    @property
    def split_alpha(self) -> float:
        return float(self.rotated_alpha if self.rotated else self.alpha)


class FederatedPlan(KindPlan):
    name = "federated"
    title = "federated experiments (Table 4 and Fig. 10 of the partitioned-networks paper, App. J)"
    Settings = FederatedSettings
    axes = ("dataset", "rotated", "method", "n_train", "seed")
    build_target = "reprokit.builders.federated:build"

    def n_steps(self, cell) -> int:
        return int(self.typed_settings(cell).rounds)

    def required_variants(self, cell) -> dict:
        st = self.typed_settings(cell)
        ds, out = str(st.dataset), {}
        if st.rotated:
            out["rotated"] = (ds, variants.variant_filename("rotated", seed=int(st.data_seed)))
        out["federated"] = (
            ds,
            variants.variant_filename(
                "federated",
                n=int(st.n_train),
                n_clients=int(st.n_clients),
                alpha=st.split_alpha,
                by="rotation" if st.rotated else "label",
                val=int(st.n_val),
                seed=int(st.data_seed),
            ),
        )
        return out

    def cost_parts(self, cell) -> CellWork:
        """A round: clients_per_round clients, each one epoch of its ~n_train/n_clients examples in batches
        (FedAvg / Augerino: one network; Partitioned: sum_k u_k (C - k + 1) partitions trained per client in
        expectation, plus a psi gradient on the local data of clients of chunks k >= 2), then evaluations."""
        st = self.typed_settings(cell)
        model, n = str(st.model), int(st.rounds)
        S = 1 if st.method == "fedavg" else int(st.aug_samples)
        n_local = max(1, int(st.n_train) // int(st.n_clients))
        B = min(int(st.batch_size), n_local)
        steps = math.ceil(n_local / int(st.batch_size)) * int(st.local_epochs) * int(st.clients_per_round)
        step = METHOD_TABLE[st.method].step(st)
        parts = [Part(model, step, B * S, n * steps)]
        if st.method == "partitioned":
            u = [float(v) / sum(st.chunk_proportions) for v in st.chunk_proportions]
            c = len(u)
            parts = [Part(model, step, B * S, n * steps * sum(u[k] * (c - k) for k in range(c)))]
            hyper_n = int(st.hyper_batch_size or n_local)
            parts.append(Part(model, "hyper", min(hyper_n, n_local) * S, n * int(st.clients_per_round) * (1 - u[0])))
        n_val = int(st.n_val_eval or st.n_val)
        n_evals = n // int(st.eval_every) + 1
        parts.append(
            Part(model, "standard", B * S, n_evals * EVAL_FORWARD_SHARE * n_val * int(st.eval_aug_samples) / (B * S))
        )
        return CellWork(n, parts)


PLAN = register(FederatedPlan())
