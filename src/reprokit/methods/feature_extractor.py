"""A feature extractor as hyperparameters (Table 3 of the partitioned paper): of a Wide-ResNet with three
stages, the stem and the first two stages ("the first two out of the three stages (13 convolution
layers)" of WRN-20) are psi; the last stage and the head (final norm, linear) are the weights.

* Validation-set optimisation: ``psi, weights = feature_extractor_split(wrn)``, then
  ``ValidationSetOptimisation(wrn, psi, ...)``: psi train on the validation loss, the weights on the
  training part (methods/validation_opt.py).
* Partitioned training: ``pm = partition_head(wrn, proportions, ...)`` partitions only the weights
  (psi are not partitioned: every subnetwork shares the current feature extractor), then
  ``PartitionedTraining(wrn, pm, psi, ...)``: the partitioned optimiser updates the head's partitions
  on D_1:k, the hyper step trains psi on the out-of-chunk loss of subnetwork k-1 (methods/partitioned.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..models.wide_resnet import WideResNet
from ..partition import PartitionedModel, partition

PSI_MODULES = ("conv1", "stage1", "stage2")  # the feature extractor
WEIGHT_MODULES = ("stage3", "norm", "fc")  # what the partitioned head holds


def _check(wrn: nn.Module) -> None:
    if not isinstance(wrn, WideResNet):
        raise TypeError(f"expected a WideResNet (models/wide_resnet.py), got {type(wrn).__name__}")


def feature_extractor_split(wrn: WideResNet) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(psi, weights): the parameters of the stem and stages 1-2, and every other parameter of ``wrn``;
    together they are each of ``wrn.parameters()`` exactly once."""
    _check(wrn)
    psi = [p for name in PSI_MODULES for p in getattr(wrn, name).parameters()]
    psi_ids = {id(p) for p in psi}
    weights = [p for p in wrn.parameters() if id(p) not in psi_ids]
    return psi, weights


class _Head(nn.Module):
    """The WRN's last stage and head as one module (the same submodules, not copies), so that
    ``partition`` wraps exactly them; its forward maps stage-2 features to logits."""

    def __init__(self, wrn: WideResNet):
        super().__init__()
        self.stage3, self.norm, self.relu = wrn.stage3, wrn.norm, wrn.relu
        self.avgpool, self.flatten, self.fc = wrn.avgpool, wrn.flatten, wrn.fc

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.avgpool(self.relu(self.norm(self.stage3(h))))))


def partition_head(wrn: WideResNet, proportions: Sequence[float], **partition_kwargs) -> PartitionedModel:
    """Partition the weights (last stage + head) of ``wrn`` in place into ``len(proportions)`` partitions
    and leave psi (stem, stages 1-2) alone; ``wrn`` itself stays the network to run (its forward reads
    the current subnetwork of the head). ``partition_kwargs`` go to ``reprokit.partition.partition``."""
    _check(wrn)
    return partition(_Head(wrn), proportions, **partition_kwargs)
