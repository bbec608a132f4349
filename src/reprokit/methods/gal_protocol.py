"""Step counts of Gal & Ghahramani's UCI protocol (Keras fit epochs over an inner split), torch-free so that
the plan can price a cell without importing the method."""

from __future__ import annotations


def gal_steps_per_epoch(n: int, batch_size: int) -> int:
    """Keras' fit: every row once per epoch, the last minibatch possibly smaller."""
    return -(-int(n) // int(batch_size))


def gal_inner_size(n_train: int, val_fraction: float) -> int:
    """Rows of the inner training part of Gal's protocol (int(0.8 N) for val_fraction 0.2)."""
    return int((1.0 - float(val_fraction)) * int(n_train))


def gal_protocol_steps(n_train: int, epochs: int, batch_size: int, val_fraction: float) -> tuple[int, int]:
    """(steps of one grid point on the inner split, steps of the final retraining on all rows); torch-free:
    the plan's step count (plan/uci_regression.py) and methods/gal_dropout.py both use it."""
    return (
        int(epochs) * gal_steps_per_epoch(gal_inner_size(n_train, val_fraction), batch_size),
        int(epochs) * gal_steps_per_epoch(n_train, batch_size),
    )
