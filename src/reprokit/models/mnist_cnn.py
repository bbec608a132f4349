"""MNIST CNN of Schwöbel et al. (2021), replicated in Table 9 of the partitioned-networks appendix.

    conv 20@5x5 pad 2, ReLU -> maxpool 2 -> conv 50@5x5 pad 2, ReLU -> maxpool 2
    -> FC 500, ReLU -> FC 50, ReLU -> FC 10 (logits; the "Softmax" of Table 9 lives in the loss).

Parameter count for 1x28x28 inputs (checked by hand in tests/test_models.py): 1,276,630.

Optional dropout "between layers" (App. J, federated MNIST): one slot after each of the four hidden
blocks (after pool1, after pool2, after the FC-500 ReLU, after the FC-50 ReLU); none before the input
or after the output. With ``dropout=None`` (default) no module is inserted at all, so the module list
is exactly Table 9. ``learnable_dropout=True`` uses :class:`ConcreteDropout` (rate is a
hyperparameter, init ``dropout``, 0.1 in the paper); otherwise a plain fixed-rate ``nn.Dropout``.
"""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from reprokit.augment.concrete_dropout import make_dropout

__all__ = ["MnistCNN"]


class MnistCNN(nn.Sequential):
    """Table 9 CNN as a flat ``nn.Sequential`` with named children (conv1, relu1, pool1, ...)."""

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        image_size: int = 28,
        dropout: float | None = None,
        learnable_dropout: bool = False,
        dropout_temperature: float = 0.1,
    ):
        if image_size % 4 != 0:
            raise ValueError(f"image_size must be divisible by 4 (two 2x2 max-pools), got {image_size}")
        feat = image_size // 4
        layers: list[tuple[str, nn.Module]] = []
        n_drop = 0

        def add_dropout():
            nonlocal n_drop
            d = make_dropout(dropout, learnable=learnable_dropout, temperature=dropout_temperature)
            if d is not None:
                n_drop += 1
                layers.append((f"drop{n_drop}", d))

        layers += [
            ("conv1", nn.Conv2d(in_channels, 20, kernel_size=5, padding=2)),
            ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(kernel_size=2, stride=2)),
        ]
        add_dropout()
        layers += [
            ("conv2", nn.Conv2d(20, 50, kernel_size=5, padding=2)),
            ("relu2", nn.ReLU()),
            ("pool2", nn.MaxPool2d(kernel_size=2, stride=2)),
        ]
        add_dropout()
        layers += [
            ("flatten", nn.Flatten()),
            ("fc1", nn.Linear(50 * feat * feat, 500)),
            ("relu3", nn.ReLU()),
        ]
        add_dropout()
        layers += [("fc2", nn.Linear(500, 50)), ("relu4", nn.ReLU())]
        add_dropout()
        layers += [("fc3", nn.Linear(50, num_classes))]
        super().__init__(OrderedDict(layers))
        self.num_classes = num_classes
