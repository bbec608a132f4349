"""Fig. 2: input selection on the synthetic task of Lyle et al. (2020).

Grid axes: `method` (partitioned | laplace | partitioned_mask), `n_inputs` (fixed masks keeping the
first K inputs; absent for the learned mask), `seed`. The seed drives initialisation, the chunk
assignment and minibatch sampling; the data sample is fixed by `data_seed` (a dataset, like the real ones).
Settings (typed, defaults): `InputSelectionSettings` in plan/input_selection.py.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import seeds
from ..augment.concrete import ConcreteBernoulliMask, FixedInputMask
from ..data import registry, variants
from ..data.task import TaskData
from ..methods.laplace_posthoc import PosthocDiagLaplace
from ..methods.standard import OptimConfig
from ..models.mlp import MLP
from ..partition import PartitionedHPO, partition
from ..plan.input_selection import METHOD_TABLE, PLAN, InputSelectionSettings
from ..plan.methods import load_builder
from . import CellContext, Evaluation, Run


def _data(st: InputSelectionSettings, ctx: CellContext) -> TaskData:
    b = registry.load(
        st.dataset, ctx.mirrors, n_train=st.n_train, n_test=st.n_test, seed=st.data_seed, signal=st.signal
    )
    return TaskData(b.x_train, b.y_train, b.x_test, b.y_test, task="classification", n_classes=2)


def build(cell, ctx: CellContext) -> Run:
    """The cell's Run from its method's builder in the kind's table (plan/input_selection.py, METHOD_TABLE)."""
    st = PLAN.typed_settings(cell)  # checks the method and the settings it needs
    return load_builder(METHOD_TABLE[st.method])(st, ctx)


def build_laplace(st, ctx: CellContext) -> Run:
    """The post-hoc diagonal Laplace baseline on a fixed mask of the first `n_inputs` inputs (Fig. 2a)."""
    data, mask, mlp, optim = _shared(st, ctx, lambda n: FixedInputMask(n, int(st.n_inputs)))
    net = ctx.runtime.model(nn.Sequential(mask, mlp))
    m = PosthocDiagLaplace(
        net, data, optim, int(st.n_steps), int(st.seed), marglik_steps=st.laplace_prior_steps, select=st.laplace_select
    )
    return _run(st, data, m)


def build_partitioned(st, ctx: CellContext) -> Run:
    """Partitioned networks on a fixed mask of the first `n_inputs` inputs (Fig. 2a)."""
    return _partitioned(st, ctx, *_shared(st, ctx, lambda n: FixedInputMask(n, int(st.n_inputs))), learned=False)


def build_partitioned_mask(st, ctx: CellContext) -> Run:
    """Partitioned networks learning a concrete-Bernoulli input mask as the hyperparameter (Fig. 2b)."""
    shared = _shared(st, ctx, lambda n: ConcreteBernoulliMask(n, st.mask_init_keep, st.mask_temperature))
    return _partitioned(st, ctx, *shared, learned=True)


def _shared(st, ctx: CellContext, make_mask):
    """(data on the cell's device, input mask, MLP, optimiser settings): the mask and the MLP built after seeding
    the seed's `init` stream, in that order, for every method of the kind."""
    data = ctx.runtime.to(_data(st, ctx))  # once; methods follow data.device
    n_features = data.x_train.shape[1]
    torch.manual_seed(seeds.stream_seed(int(st.seed), "init"))
    mask = make_mask(n_features)
    mlp = MLP(n_features, st.hidden, 2, st.activation)
    optim = OptimConfig(optimizer="adam", lr=st.lr, weight_decay=st.weight_decay, batch_size=st.batch_size)
    return data, mask, mlp, optim


def _partitioned(st, ctx: CellContext, data, mask, mlp, optim, learned: bool) -> Run:
    """Partitioned training of the masked MLP on the cell's chunks; with `learned` the mask is the hyperparameter."""
    rt, seed = ctx.runtime, int(st.seed)
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
        hyper_modules=[mask] if learned else [],
        optim=optim,
        wd_scaling=st.wd_scaling,
        hyper_lr=st.hyper_lr,
        n_classes=data.n_classes,
        seed=seed,
        early_stopping=st.early_stopping,
    ).setup(data, int(st.n_steps), chunk_ids)
    evaluation = Evaluation.of(m, _keep_probabilities(mask), _kept_inputs(mask)) if learned else None
    return _run(st, data, m, evaluation)


def _run(st, data, m, evaluation=None) -> Run:
    info = {"n_train": data.n_train, "n_test": int(data.x_test.shape[0])}
    return Run(m, int(st.n_steps), int(st.eval_every), info=info, evaluation=evaluation)


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
