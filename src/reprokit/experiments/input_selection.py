"""Fig. 2: input selection on the synthetic task of Lyle et al. (2020).

Grid axes: `method` (partitioned | laplace | partitioned_mask), `n_inputs` (fixed masks keeping the
first K inputs; absent for the learned mask), `seed`. The seed drives initialisation, the chunk
assignment and minibatch sampling; the data sample is fixed by `data_seed` (a dataset, like the real ones).
"""

from __future__ import annotations

import torch

from .. import seeds
from ..data import registry, variants
from ..methods.common import TaskData
from ..plan.input_selection import METHODS
from . import CellContext, Evaluation, Run


def _data(cell, ctx: CellContext) -> TaskData:
    s = cell.settings
    b = registry.load("input_selection", ctx.mirrors, n_train=s["n_train"], n_test=s["n_test"], seed=s["data_seed"])
    return TaskData(b.x_train, b.y_train, b.x_test, b.y_test, task="classification", n_classes=2)


def build(cell, ctx: CellContext) -> Run:
    from torch import nn

    from ..augment.concrete import ConcreteBernoulliMask, FixedInputMask
    from ..methods.laplace_posthoc import PosthocDiagLaplace
    from ..methods.partitioned import PartitionedConfig, PartitionedTraining
    from ..methods.standard import OptimConfig
    from ..models.mlp import MLP
    from ..partition import partition
    s, c = cell.settings, cell.coord_dict
    method, seed = c["method"], int(c["seed"])
    if method not in METHODS:
        raise ValueError(f"input_selection: method '{method}' unknown (valid: {', '.join(METHODS)})")
    rt = ctx.runtime
    data = rt.to(_data(cell, ctx))  # once; methods follow data.device
    n_features = data.x_train.shape[1]
    torch.manual_seed(seeds.stream_seed(seed, "init"))
    if method == "partitioned_mask":
        mask: nn.Module = ConcreteBernoulliMask(n_features, s["mask_init_keep"], s["mask_temperature"])
    else:
        mask = FixedInputMask(n_features, int(c["n_inputs"]))
    mlp = MLP(n_features, s["hidden"], 2, s["activation"])
    optim = OptimConfig(optimizer="adam", lr=s["lr"], weight_decay=s["weight_decay"], batch_size=s["batch_size"])
    n_steps = int(s["n_steps"])
    if method == "laplace":
        net = rt.model(nn.Sequential(mask, mlp))
        m = PosthocDiagLaplace(net, data, optim, n_steps, seed, marglik_steps=s["laplace_prior_steps"])
    else:
        chunk_ids = torch.as_tensor(variants.load_variant(ctx.variant("chunks"))["chunks"]).long().to(rt.device)
        pmodel = partition(mlp, s["chunk_proportions"], scheme=s["partition_scheme"], default=s["partition_default"],
                           seed=seeds.stream_seed(seed, "partition_masks"))
        net = rt.model(nn.Sequential(mask, pmodel))
        hyper = list(mask.parameters()) if method == "partitioned_mask" else []
        cfg = PartitionedConfig(chunk_proportions=s["chunk_proportions"], optim=optim, wd_scaling=s["wd_scaling"],
                                hyper_lr=s["hyper_lr"], early_stopping=s["early_stopping"])
        m = PartitionedTraining(net, pmodel, hyper, data, chunk_ids, cfg, n_steps, seed)
    info = {"n_train": data.n_train, "n_test": int(data.x_test.shape[0])}
    evaluation = Evaluation.of(m, _keep_probabilities(mask), _kept_inputs(mask)) if method == "partitioned_mask" else None
    return Run(m, n_steps, int(s["eval_every"]), info=info, evaluation=evaluation)


def _keep_probabilities(mask):
    """The learned keep probability of every input, for each curve row and the final metrics (Fig. 2b)."""
    def probs() -> dict[str, float]:
        return {f"p_keep_{i:02d}": float(p) for i, p in enumerate(mask.keep_probability.detach())}
    return probs


def _kept_inputs(mask):
    def kept() -> dict:
        idx = [i + 1 for i, p in enumerate(mask.keep_probability.detach()) if p > 0.5]
        return {**_keep_probabilities(mask)(), "n_kept": len(idx), "kept_inputs": " ".join(map(str, idx))}
    return kept

