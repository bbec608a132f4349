"""Partitioned networks (Mlodozeniec et al., ICLR 2023): one import for the method and its pieces.

Conventions: partitions / subnetworks are 1-based (k = 1..C, subnetwork C = full network, 0 = all
defaults); data chunk ids are 0-based array labels (chunk id j is D_{j+1}).

`PartitionedHPO` partitions a model, trains its weights and its hyperparameters (App. I.1) and gives the
out-of-chunk LML (Eq. 2); docs/library.md has a worked example. A learned input mask on 4 inputs::

    >>> import torch
    >>> from torch import nn
    >>> from reprokit.partition import ConcreteBernoulliMask, OptimConfig, PartitionedHPO
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(90, 4, generator=g)
    >>> y = (x[:, 0] > 0).long()
    >>> mask = ConcreteBernoulliMask(4, init_keep=0.9, generator=g)
    >>> model = nn.Sequential(mask, nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    >>> hpo = PartitionedHPO(model, [0.5, 0.25, 0.25], hyper_modules=[mask], optim=OptimConfig(batch_size=32),
    ...                      hyper_lr=1e-2, n_classes=2, seed=g)
    >>> hpo.fit(x, y, steps=20).predict(x).shape
    torch.Size([90, 2])
    >>> hpo.lml() < 0
    True

The pieces it is built from, for a hand-written loop (App. I.1)::

    >>> from reprokit.partition import PartitionSchedule, PartitionedAdam, chunk_assignment, partition
    >>> net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    >>> pm = partition(net, [0.5, 0.25, 0.25], seed=0)
    >>> sched = PartitionSchedule(chunk_assignment(90, [0.5, 0.25, 0.25], seed=0), generator=0)
    >>> opt = PartitionedAdam(pm, lr=1e-3, weight_decay=1e-4, chunk_sizes=sched.chunk_sizes.tolist())
    >>> k, idx = sched.param_step(32)          # partition k, a batch from chunks 1..k
    >>> with pm.subnetwork(k):
    ...     loss = nn.functional.cross_entropy(pm(x[idx]), y[idx])
    >>> opt.zero_grad(); loss.backward(); opt.step(k)
    >>> k, idx = sched.hyper_step(32)          # chunk k >= 2: its loss under subnetwork k-1 trains psi
    >>> with pm.subnetwork(k - 1):
    ...     hyper_loss = nn.functional.cross_entropy(pm(x[idx]), y[idx])
"""

from ..augment.concrete import ConcreteBernoulliMask, FixedInputMask
from ..data.task import TaskData
from ..methods.standard import OptimConfig
from .masks import exact_counts, node_assignment, normalise_proportions, random_weight_assignment
from .objective import lml_estimate
from .optim import PartitionedAdam, PartitionedSGD, weight_decay_factors
from .schedule import PartitionSchedule, chunk_assignment
from .training import PartitionedConfig, PartitionedHPO
from .wrap import PartitionedModel, partition

__all__ = [
    "PartitionedHPO",
    "PartitionedConfig",
    "OptimConfig",
    "ConcreteBernoulliMask",
    "FixedInputMask",
    "TaskData",
    "exact_counts",
    "normalise_proportions",
    "random_weight_assignment",
    "node_assignment",
    "partition",
    "PartitionedModel",
    "PartitionedSGD",
    "PartitionedAdam",
    "weight_decay_factors",
    "PartitionSchedule",
    "chunk_assignment",
    "lml_estimate",
]
