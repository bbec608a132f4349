"""Partitioned networks (Mlodozeniec et al., ICLR 2023): masks, model wrapping, optimisers, schedule.

Conventions: partitions / subnetworks are 1-based (k = 1..C, subnetwork C = full network, 0 = all
defaults); data chunk ids are 0-based array labels (chunk id j is D_{j+1}).

Typical loop (App. I.1)::

    pm = partition(model, [0.8, 0.1, 0.1])
    opt = PartitionedAdam(pm, lr=1e-3, weight_decay=wd, chunk_sizes=sched.chunk_sizes)
    k, idx = sched.param_step(B)
    with pm.subnetwork(k):
        loss = nll(pm(x[idx]), y[idx])
    opt.zero_grad(); loss.backward(); opt.step(k)
    k, idx = sched.hyper_step(B)
    with pm.subnetwork(k - 1):
        hyper_loss = nll(pm(augment(x[idx])), y[idx])   # gradient w.r.t. psi only
"""

from .masks import exact_counts, node_assignment, normalise_proportions, random_weight_assignment
from .objective import lml_estimate
from .optim import PartitionedAdam, PartitionedSGD, weight_decay_factors
from .schedule import PartitionSchedule, chunk_assignment
from .wrap import PartitionedModel, partition

__all__ = [
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
