"""Fig. 2: input selection on the synthetic task of Lyle et al. (2020).

Grid axes: `method` (partitioned | laplace | partitioned_mask), `n_inputs` (fixed masks keeping the
first K inputs; absent for the learned mask), `seed`. The seed drives initialisation, the chunk
assignment and minibatch sampling; the data sample is fixed by `data_seed` (a dataset, like the real ones).
Settings (typed, defaults): `InputSelectionSettings` in plan/input_selection.py.
"""

from __future__ import annotations

import torch

from .. import seeds
from ..augment.concrete import ConcreteBernoulliMask, FixedInputMask
from ..data import registry, variants
from ..data.task import TaskData
from ..methods.laplace_posthoc import PosthocDiagLaplace
from ..methods.standard import OptimConfig
from ..models.mlp import MLP
from ..partition import PartitionedHPO, partition
from ..plan.input_selection import PLAN, InputSelectionSettings
from . import CellContext, Evaluation, Run


def _data(st: InputSelectionSettings, ctx: CellContext) -> TaskData:
    b = registry.load(
        st.dataset, ctx.mirrors, n_train=st.n_train, n_test=st.n_test, seed=st.data_seed, signal=st.signal
    )
    return TaskData(b.x_train, b.y_train, b.x_test, b.y_test, task="classification", n_classes=2)


def build(cell, ctx: CellContext) -> Run:
    from torch import nn

    st = PLAN.settings(cell)  # checks the method and the settings it needs
    method, seed = st.method, int(st.seed)
    rt = ctx.runtime
    data = rt.to(_data(st, ctx))  # once; methods follow data.device
    n_features = data.x_train.shape[1]
    torch.manual_seed(seeds.stream_seed(seed, "init"))
    if method == "partitioned_mask":
        mask: nn.Module = ConcreteBernoulliMask(n_features, st.mask_init_keep, st.mask_temperature)
    else:
        mask = FixedInputMask(n_features, int(st.n_inputs))
    mlp = MLP(n_features, st.hidden, 2, st.activation)
    optim = OptimConfig(optimizer="adam", lr=st.lr, weight_decay=st.weight_decay, batch_size=st.batch_size)
    n_steps = int(st.n_steps)
    if method == "laplace":
        net = rt.model(nn.Sequential(mask, mlp))
        m = PosthocDiagLaplace(
            net, data, optim, n_steps, seed, marglik_steps=st.laplace_prior_steps, select=st.laplace_select
        )
    else:
        chunk_ids = torch.as_tensor(variants.load_variant(ctx.variant("chunks"))["chunks"]).long().to(rt.device)
        pmodel = partition(
            mlp,
            st.chunk_proportions,
            scheme=st.partition_scheme,
            default=st.partition_default,
            seed=seeds.stream_seed(seed, "partition_masks"),
        )
        net = rt.model(nn.Sequential(mask, pmodel))
        m = PartitionedHPO(
            net,
            st.chunk_proportions,
            hyper_modules=[mask] if method == "partitioned_mask" else [],
            optim=optim,
            wd_scaling=st.wd_scaling,
            hyper_lr=st.hyper_lr,
            n_classes=data.n_classes,
            seed=seed,
            early_stopping=st.early_stopping,
        ).setup(data, n_steps, chunk_ids)
    info = {"n_train": data.n_train, "n_test": int(data.x_test.shape[0])}
    evaluation = (
        Evaluation.of(m, _keep_probabilities(mask), _kept_inputs(mask)) if method == "partitioned_mask" else None
    )
    return Run(m, n_steps, int(st.eval_every), info=info, evaluation=evaluation)


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
