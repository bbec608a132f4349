"""Which partition to update and which examples to use at each step (App. I.1).

Data chunks are indexed 0..C-1 in ``chunk_ids`` (array indices); partitions / subnetworks are
1-based, so chunk id j is D_{j+1}. The sampling follows App. I.1 exactly:

* parameter step: k ~ Cat(u_1..u_C); minibatch uniform **with replacement** from D_1:k; the caller
  evaluates subnetwork k and calls ``opt.step(k)``.
* hyperparameter step: k ~ Cat(u_2..u_C) renormalised; minibatch from D_k only; the caller evaluates
  subnetwork k-1 (an unbiased estimate of the gradient of Eq. 4).

All randomness comes from one torch.Generator, checkpointed by ``state_dict()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..data.variants import chunk_assignment  # re-exported: one implementation (exact counts, seeded permutation)
from .masks import normalise_proportions

__all__ = ["PartitionSchedule", "chunk_assignment"]


class PartitionSchedule:
    """Samples (k, example indices) for partitioned parameter and hyperparameter steps.

    Args:
        chunk_ids: uint8/int array (numpy or torch), one chunk id 0..C-1 per training example.
        proportions: sampling probabilities u of k (normalised internally). Defaults to the chunk
            sizes, which is what the paper uses ("the (normalized) ratio of chunk-sizes").
        generator: torch.Generator or int seed.
        num_chunks: C, if some trailing chunks may be empty in ``chunk_ids`` (they must then have u=0).
        device: where the example indices are drawn and returned (the training data's device). The
            chunk draws k stay on the CPU generator (k picks a subnetwork on the host, so drawing it
            on a GPU would synchronise every step); on a non-CPU device the indices come from a
            second generator on that device, seeded from the first, so CPU runs are unchanged.
    """

    def __init__(
        self,
        chunk_ids,
        proportions: Sequence[float] | None = None,
        generator: torch.Generator | int | None = None,
        num_chunks: int | None = None,
        device=None,
    ):
        if isinstance(chunk_ids, torch.Tensor):
            ids = chunk_ids.detach().cpu().to(torch.int64).reshape(-1)
        else:
            ids = torch.as_tensor(np.asarray(chunk_ids)).to(torch.int64).reshape(-1)
        if ids.numel() == 0 or int(ids.min()) < 0:
            raise ValueError("chunk_ids must be a non-empty array of ids 0..C-1")
        c = int(num_chunks) if num_chunks is not None else int(ids.max()) + 1
        if int(ids.max()) >= c:
            raise ValueError(f"chunk id {int(ids.max())} >= num_chunks={c}")
        sizes = torch.bincount(ids, minlength=c)
        u = normalise_proportions(sizes.tolist() if proportions is None else proportions)
        if u.numel() != c:
            raise ValueError(f"{u.numel()} proportions for {c} chunks")
        empty = (sizes == 0) & (u > 0)
        if empty.any():
            raise ValueError(f"chunks {empty.nonzero().reshape(-1).tolist()} are empty but have positive probability")
        self.num_chunks = c
        self.proportions = u
        self.chunk_sizes = sizes
        # examples sorted by chunk: D_1:k = order[:cum[k]], D_k = order[cum[k-1]:cum[k]]
        self.order = torch.sort(ids, stable=True).indices
        self.cum = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)]).tolist()
        if isinstance(generator, torch.Generator):
            self.generator = generator
        else:
            self.generator = torch.Generator().manual_seed(0 if generator is None else int(generator))
        if self.generator.device.type != "cpu":
            raise ValueError("PartitionSchedule's generator draws k on the host: pass a CPU generator and `device`")
        self._u = u.to(torch.float64)
        self._u_hyper = u[1:].clone() if c > 1 else None
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.order = self.order.to(self.device)
        if self.device.type == "cpu":
            self.index_generator = self.generator
        else:
            self.index_generator = torch.Generator(device=self.device).manual_seed(self.generator.initial_seed())

    def _draw(self, lo: int, hi: int, batch_size: int) -> torch.Tensor:
        pos = torch.randint(lo, hi, (batch_size,), generator=self.index_generator, device=self.device)
        return self.order[pos]

    def param_step(self, batch_size: int) -> tuple[int, torch.Tensor]:
        """k ~ Cat(u) (1-based) and ``batch_size`` example indices drawn with replacement from D_1:k."""
        k = int(torch.multinomial(self._u, 1, generator=self.generator)) + 1
        return k, self._draw(0, self.cum[k], batch_size)

    def hyper_step(self, batch_size: int) -> tuple[int, torch.Tensor]:
        """k ~ Cat(u_2..u_C) renormalised (k >= 2) and indices drawn from D_k only; evaluate subnetwork k-1."""
        if self._u_hyper is None or float(self._u_hyper.sum()) <= 0:
            raise ValueError(
                "a hyperparameter step needs at least two chunks with positive probability beyond the first"
            )
        k = int(torch.multinomial(self._u_hyper, 1, generator=self.generator)) + 2
        return k, self._draw(self.cum[k - 1], self.cum[k], batch_size)

    def chunk_indices(self, k: int) -> torch.Tensor:
        """Indices of D_k (k = 1..C)."""
        return self.order[self.cum[k - 1] : self.cum[k]]

    def state_dict(self) -> dict:
        out = {"generator": self.generator.get_state()}
        if self.index_generator is not self.generator:
            out["index_generator"] = self.index_generator.get_state()
        return out

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        if self.index_generator is not self.generator:
            if "index_generator" not in state:
                raise ValueError(f"checkpoint of a schedule on the CPU cannot resume on {self.device}")
            self.index_generator.set_state(state["index_generator"])
