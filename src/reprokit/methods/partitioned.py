"""Partitioned networks (Mlodozeniec et al. 2023, Sec. 3 and App. I.1) as the pipeline's method.

The method itself is `reprokit.partition.PartitionedHPO` (partition/training.py), the library's front end:
the builders construct it and call ``setup(data, n_steps, chunk_ids)``, so the pipeline and a researcher's
code run one path. `PartitionedTraining` keeps the older eight-argument signature for existing callers.
A kind that measures something else (augmentation-averaged predictions on a test subset) gives its cell
an `Evaluation` (builders/).
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.task import TaskData
from ..partition.training import PartitionedConfig, PartitionedHPO, hyper_update, optimised_params, param_update

__all__ = [
    "PartitionedConfig",
    "PartitionedHPO",
    "PartitionedTraining",
    "hyper_update",
    "optimised_params",
    "param_update",
]


class PartitionedTraining(PartitionedHPO):
    """`PartitionedHPO` built from the pipeline's pieces: ``net`` maps inputs to outputs and contains the
    hyperparameter modules whose parameters are ``hyper_params``; ``pmodel`` is the partitioned model."""

    def __init__(
        self,
        net: nn.Module,
        pmodel,
        hyper_params: list[nn.Parameter],
        data: TaskData,
        chunk_ids: torch.Tensor,
        cfg: PartitionedConfig,
        n_steps: int,
        seed: int,
    ):
        super().__init__(
            net,
            cfg.chunk_proportions,
            hyper_params=hyper_params,
            optim=cfg.optim,
            hyper_lr=cfg.hyper_lr,
            wd_scaling=cfg.wd_scaling,
            task=data.task,
            pmodel=pmodel,
            seed=seed,
            early_stopping=cfg.early_stopping,
            eval_batch_size=cfg.eval_batch_size,
        )
        self.setup(data, n_steps, chunk_ids)
