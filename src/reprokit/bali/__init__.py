"""BALI: Bayesian layerwise inference (Kurle, Klushyn, Herbrich).

cfg = BaliConfig(alpha=0.3, beta=0.2, n_eff=len(train), sigma_r2=40, n_iterations=20000, wishart_n="n")
model = BaliMLP(d_in, [50], 1, activation="relu", task="regression", config=cfg)
trainer = BaliTrainer(model)
for x, y in batches: trainer.step(x, y)          # -> {'loss', 'beta', 'b'}
mean, var = predictive(model, x_test, n_samples=100)
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
