"""BALI: Bayesian layerwise inference (Kurle, Klushyn, Herbrich). One import for the method.

BALI trains its own fully connected network, `BaliMLP` (no nn.Parameters: every layer's posterior lives in
buffers), with `BaliTrainer`; `predictive` gives the posterior predictive. Regression on standardised targets
(docs/library.md has a worked example and the recommended settings)::

    >>> import torch
    >>> from reprokit.bali import BaliConfig, BaliMLP, BaliTrainer, predictive
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.rand(200, 1, generator=g) * 6 - 3
    >>> y = torch.sin(x) + 0.1 * torch.randn(200, 1, generator=g)
    >>> y = (y - y.mean()) / y.std()
    >>> cfg = BaliConfig(alpha=0.3, beta=0.2, n_eff=len(x), sigma_r2=40, n_iterations=50, wishart_n="n_eff")
    >>> model = BaliMLP(1, [50], 1, activation="relu", task="regression", config=cfg, generator=g)
    >>> history = BaliTrainer(model, generator=g).fit(x, y, batch_size=32)
    >>> mean, var = predictive(model, x, n_samples=10, generator=g)
    >>> mean.shape, bool((var > 0).all())
    (torch.Size([200, 1]), True)
"""

from .activations import LeakyTanh, get_activation
from .config import BaliConfig
from .layers import BaliLinear
from .model import BaliMLP
from .predictive import predictive, predictive_log_likelihood
from .trainer import BaliTrainer, bali_step

__all__ = [
    "BaliConfig",
    "BaliLinear",
    "BaliMLP",
    "BaliTrainer",
    "LeakyTanh",
    "bali_step",
    "get_activation",
    "predictive",
    "predictive_log_likelihood",
]
