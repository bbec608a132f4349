"""The data one cell trains and evaluates on (train/test tensors on the cell's device)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TaskData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    task: str = "classification"  # or "regression"
    n_classes: int | None = None

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def device(self) -> torch.device:
        """Where the data live; methods build their models, generators and samplers there."""
        return self.x_train.device

    def to(self, device) -> TaskData:
        """A copy with every tensor on `device` (moved once, before training)."""
        return TaskData(
            self.x_train.to(device),
            self.y_train.to(device),
            self.x_test.to(device),
            self.y_test.to(device),
            self.task,
            self.n_classes,
        )
