"""Federated partitioned training (partitioned paper, Sec. 5 and App. J): Table 4 and Fig. 10.

Grid axes:
  dataset   mnist | cifar10
  rotated   false | true: the `rotated` variant (one fixed rotation per image, data_seed) and the client
            split by rotation bin (Dirichlet over 10 bins) instead of by label
  method    fedavg | augerino | partitioned (methods/federated.py)
  n_train   examples spread over the clients (the `federated` variant: validation hold-out of n_val,
            then a subset of n_train, both fixed across methods and seeds: data_seed)
  seed      initialisation, partition masks, client-to-chunk assignment, client sampling, minibatches,
            augmentation draws

The model gets dropout "between layers" at rate `dropout`: learned concrete dropout (psi) for
partitioned, fixed-rate nn.Dropout otherwise (App. J.2). Augerino and partitioned average the
predictions over `aug_samples` augmentations in training and `eval_aug_samples` in evaluation;
FedAvg uses no augmentation. The curve has one row every `eval_every` rounds: validation accuracy /
log-likelihood (on the first `n_val_eval` validation examples), the cumulative bytes uploaded /
downloaded (measured), psi. metrics.json: the last evaluation plus `val_acc_last` (mean over the last
`last_k` evaluations, Table 4's entry) and `upload_pct` (uploaded bytes / the bytes the same clients
would have uploaded with every weight).
"""

from __future__ import annotations

import torch

from .. import seeds
from ..augment.affine import build_augmentation
from ..data import variants
from ..methods.federated import FedConfig, FedData, FederatedTraining, FedNet
from ..models.registry import build_model
from ..plan.federated import METHOD_TABLE, PLAN, FederatedSettings
from ..plan.methods import load_builder
from . import CellContext, Run


def load_data(st: FederatedSettings, ctx: CellContext):
    """(FedData without device placement, n_classes)."""

    bundle = ctx.load(str(st.dataset))
    rotated = variants.load_variant(ctx.variant("rotated")) if st.rotated else None
    split = variants.load_variant(ctx.variant("federated"))
    b = variants.apply_variants(bundle, subset=split, rotated=rotated)
    x_val, y_val = b.x_val, b.y_val
    if st.n_val_eval is not None and int(st.n_val_eval) < x_val.shape[0]:
        x_val, y_val = x_val[: int(st.n_val_eval)], y_val[: int(st.n_val_eval)]
    data = FedData(b.x_train, b.y_train, torch.as_tensor(b.meta["client"]).long(), x_val, y_val, int(st.n_clients))
    return data, int(b.n_classes)


def build(cell, ctx: CellContext) -> Run:
    """The cell's Run from its method's builder in the kind's table (plan/federated.py, METHOD_TABLE)."""
    st = PLAN.typed_settings(cell)
    return load_builder(METHOD_TABLE[st.method])(st, ctx)


def build_fedavg(st, ctx: CellContext) -> Run:
    """FedAvg with a server Adam (FedOpt): one network, no augmentation."""
    return _run(st, ctx, augment=False, partitioned=False)


def build_augerino(st, ctx: CellContext) -> Run:
    """FedAvg + Augerino: the learnable augmentation trained with the weights, its width regularised."""
    return _run(st, ctx, augment=True, partitioned=False)


def build_partitioned(st, ctx: CellContext) -> Run:
    """FedAvg + Partitioned: clients hold chunks, the augmentation and dropout rates are learned on held-out chunks."""
    return _run(st, ctx, augment=True, partitioned=True)


def _run(st, ctx: CellContext, augment: bool, partitioned: bool) -> Run:
    rt = ctx.runtime
    seed = int(st.seed)
    data, _n_classes = load_data(st, ctx)
    data = type(data)(
        *(
            rt.to(t) if isinstance(t, torch.Tensor) else t
            for t in (data.x_train, data.y_train, data.client, data.x_val, data.y_val, data.n_clients)
        )
    )
    torch.manual_seed(seeds.stream_seed(seed, "init"))
    model = build_model(
        st.model, dropout=float(st.dropout), learnable_dropout=partitioned, **dict(st.model_kwargs or {})
    )
    aug = build_augmentation(st.augmentation, init=float(st.aug_init)) if augment else None
    net = rt.model(FedNet(model, aug, int(st.aug_samples)))
    cfg = FedConfig.from_settings(st)
    m = FederatedTraining(net, data, cfg, seed)
    sizes = torch.bincount(data.client, minlength=data.n_clients)
    info = {
        "n_train": int(data.x_train.shape[0]),
        "n_val": int(data.x_val.shape[0]),
        "n_clients": int(data.n_clients),
        "clients_per_round": int(st.clients_per_round),
        "rounds": int(st.rounds),
        "client_size_min": int(sizes.min()),
        "client_size_max": int(sizes.max()),
        "aug_samples": int(st.aug_samples) if aug is not None else 0,
        "weight_bytes": m.weight_bytes(),
        "client_batching": m.batching,
    }
    if partitioned:
        info["clients_per_chunk"] = [m.client_chunk.count(k) for k in range(1, m.n_chunks + 1)]
    return Run(m, int(st.rounds), int(st.eval_every), info)
