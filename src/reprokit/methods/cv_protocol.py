"""Step counts of an in-cell K-fold selection protocol (VADAM's UCI protocol: methods/vadam.py), torch-free so
that the plan can price a cell without importing the method."""

from __future__ import annotations


def fold_sizes(n: int, folds: int) -> list[int]:
    """Rows of each of `folds` validation folds of n rows (the first n % folds folds one row larger)."""
    base, extra = divmod(int(n), int(folds))
    return [base + (i < extra) for i in range(int(folds))]


def epoch_steps(n: int, batch_size: int) -> int:
    """Minibatches of one epoch over n rows, the last one possibly smaller."""
    return -(-int(n) // min(int(batch_size), int(n)))


def protocol_steps(n_train: int, epochs: int, batch_size: int, folds: int, grid_points: int) -> tuple[int, int]:
    """(steps of the selection phases, steps of the final training on all rows). With one grid point there is
    nothing to select: no selection phases."""
    final = int(epochs) * epoch_steps(n_train, batch_size)
    if int(grid_points) <= 1:
        return 0, final
    per_point = sum(int(epochs) * epoch_steps(int(n_train) - v, batch_size) for v in fold_sizes(n_train, folds))
    return int(grid_points) * per_point, final
