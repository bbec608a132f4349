"""Partition assignments: which partition k = 1..C owns each entry of a parameter tensor.

Convention (used throughout `reprokit.partition`): partition ids are **1-based**, k = 1..C, as in
the paper; subnetwork k uses every entry whose id is <= k. Chunk ids of *data* are 0-based
(0..C-1, see `schedule.py`) because they index arrays. Assignments are stored as ``torch.uint8``
(App. D memory note), so C <= 255.

Counts are exact per tensor: ``n * proportions`` rounded with the largest-remainder method, so a
layer never drifts away from the requested proportions by more than one entry per partition.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "normalise_proportions",
    "exact_counts",
    "random_weight_assignment",
    "node_assignment",
]


def normalise_proportions(proportions: Sequence[float]) -> torch.Tensor:
    """Return proportions as a float64 vector summing to 1.

    The paper writes proportions unnormalised (e.g. [1, 8], App. F), so we accept any non-negative
    vector with a positive sum.
    """
    p = torch.as_tensor([float(x) for x in proportions], dtype=torch.float64)
    if p.ndim != 1 or p.numel() == 0:
        raise ValueError(f"proportions must be a non-empty 1-D sequence, got {proportions!r}")
    if p.numel() > 255:
        raise ValueError(f"at most 255 partitions fit in uint8 assignments, got {p.numel()}")
    if not torch.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"proportions must be finite, non-negative and not all zero: {proportions!r}")
    return p / p.sum()


def exact_counts(n: int, proportions: Sequence[float]) -> torch.Tensor:
    """Split ``n`` items into integer counts matching ``proportions`` (largest remainder).

    Ties in the remainder go to the earlier partition, so the result is deterministic.
    """
    p = normalise_proportions(proportions)
    ideal = p * n
    counts = torch.floor(ideal).to(torch.int64)
    rest = int(n - counts.sum())
    if rest > 0:
        frac = ideal - counts.to(torch.float64)
        # stable sort on -frac: equal remainders keep index order (earlier partition first)
        order = torch.sort(-frac, stable=True).indices
        counts[order[:rest]] += 1
    return counts


def _shuffled_ids(n: int, proportions: Sequence[float], generator: torch.Generator | None) -> torch.Tensor:
    counts = exact_counts(n, proportions)
    ids = torch.repeat_interleave(torch.arange(1, counts.numel() + 1, dtype=torch.uint8), counts)
    perm = torch.randperm(n, generator=generator)
    return ids[perm]


def random_weight_assignment(
    shape: Sequence[int] | torch.Size, proportions: Sequence[float], generator: torch.Generator | None = None
) -> torch.Tensor:
    """Random weight partitioning (App. C, Fig. 4a): each entry gets an id in 1..C.

    Exactly ``exact_counts(numel, proportions)[k-1]`` entries get id k, placed uniformly at random.
    Returns a uint8 tensor of ``shape`` (CPU).
    """
    shape = torch.Size(shape)
    return _shuffled_ids(shape.numel(), proportions, generator).reshape(shape)


def node_assignment(
    shape: Sequence[int] | torch.Size, proportions: Sequence[float], generator: torch.Generator | None = None
) -> torch.Tensor:
    """Node partitioning (App. C, Fig. 4b): whole output rows (dim 0) share one partition id.

    For nn.Linear dim 0 is out-features, for nn.Conv* it is out-channels, so a partition owns
    complete units (and, by `partition(scheme="node")`, their biases). Row counts are exact
    (largest remainder over ``shape[0]`` rows). Returns a uint8 tensor of the full ``shape``.
    """
    shape = torch.Size(shape)
    if len(shape) == 0:
        raise ValueError("node assignment needs a tensor with at least one dimension")
    rows = _shuffled_ids(shape[0], proportions, generator)
    return rows.reshape((shape[0],) + (1,) * (len(shape) - 1)).expand(shape).contiguous()
