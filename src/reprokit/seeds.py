"""Named, non-overlapping random streams: one cell seed, one independent stream per purpose.

Every random draw of a cell comes from a stream named here, derived from the cell's seed with
numpy's `SeedSequence` (entropy = the seed, spawn key = a hash of the name). Streams of different
names or different seeds are statistically independent, so seed 0's minibatch stream is not seed 1's
initialisation stream (as it was with `seed + 1`-style offsets), and adding a stream changes no other.

    torch.manual_seed(stream_seed(seed, "init"))              # global RNG: weight initialisation
    gen = generator(seed, "minibatches", device=data.device)  # a torch.Generator on the data's device
    rng = numpy_rng(seed, "eval_subset")                      # a numpy Generator
    gen = generator(seed, "augment", keys=(step, client, 1))  # one stream of many: one per (round, client, task)

Torch-free at import (torch is imported only by `generator`).
"""

from __future__ import annotations

import zlib

import numpy as np

# name -> what it draws. A stream not listed here is an error, so two places cannot share one by accident.
STREAMS: dict[str, str] = {
    "init": "weight initialisation (the global torch RNG while a model is built)",
    "partition_masks": "which partition each weight belongs to (partitioned networks)",
    "minibatches": "minibatch indices (epoch shuffles, partition schedule: k and indices; federated: per round, client and task)",
    "minibatches_all": "Partitioned (Ens.) with update='all': the minibatches of networks 1..C",
    "augment": "augmentation draws in training (affine transformations; federated: per round, client and task)",
    "weight_noise": "BALI / Bayes-by-Backprop weight or local-noise samples in training",
    "dropout_masks": "MC dropout masks in training (federated: dropout noise per round, client and task)",
    "latent_samples": "draws of the GP latent marginals in the ELBO (last-layer GP, training)",
    "inducing_init": "the training images whose features initialise the inducing points (last-layer GP)",
    "eval": "Monte Carlo / augmentation draws of the per-step evaluations (re-seeded at every evaluation)",
    "eval_lml": "augmentation draws of the out-of-chunk LML evaluation (Fig. 3 / Eq. 2)",
    "final": "Monte Carlo draws of the final metrics",
    "grid": "Monte Carlo draws of the predictive on a plotting grid (BALI Figs. 1, 4-6)",
    "train_eval_subset": "the fixed training subset evaluated during training",
    "test_eval_subset": "the fixed test subset evaluated during training",
    "train_subset": "a training subset drawn inside a kind (BALI classification: train_subset)",
    "val_subset": "a validation subset drawn inside a kind",
    "test_subset": "a test subset drawn inside a kind",
    "ood_subset": "the subset of the OOD dataset's test images (BALI Fig. 3)",
    "chunk_ids": "partitioned networks' front end: the data chunk of each example when the caller gives none",
    "marglik_batches": "the minibatches of Diff. Laplace's marginal-likelihood (hyperparameter) steps",
    "marglik_augment": "augmentation draws of Diff. Laplace's marginal-likelihood steps",
    "validation_split": "which training examples form the validation part (validation-set optimisation)",
    "validation_minibatches": "validation-set optimisation: the validation minibatches of the psi steps",
    "finetune_minibatches": "validation-set optimisation: the minibatches of the finetune phase (all data)",
    "timing_data": "the random batches of the update-timing kind (Table 8)",
    "schedule_examples": "the virtual chunk assignment of the update-timing kind",
    "clients": "federated: which clients take part in each round",
    "client_chunks": "federated partitioned: which data chunk each client belongs to",
    "replicate": "diagnostics only (benchmarks/bali_uci_sweep.py --replicate R): the base seed of replicate R >= 1",
}


def _check(name: str) -> None:
    if name not in STREAMS:
        raise KeyError(
            f"random stream '{name}' is not declared in reprokit.seeds.STREAMS (declared: {', '.join(STREAMS)})"
        )


def stream_seed(seed: int, name: str, keys: tuple = ()) -> int:
    """A 63-bit seed for stream `name` of cell seed `seed` (non-negative int). `keys` (non-negative ints)
    split the stream into independent sub-streams, e.g. one per (round, client); () is the stream itself."""
    _check(name)
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if any(int(k) < 0 for k in keys):
        raise ValueError(f"stream keys must be >= 0, got {keys}")
    ss = np.random.SeedSequence(entropy=int(seed), spawn_key=(zlib.crc32(name.encode()), *(int(k) for k in keys)))
    hi, lo = (int(v) for v in ss.generate_state(2, dtype=np.uint32))
    return ((hi << 32) | lo) & (2**63 - 1)


def numpy_rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng(stream_seed(seed, name))


def generator(seed: int, name: str, device=None, keys: tuple = ()):
    """A torch.Generator for stream `name` (sub-stream `keys`) on `device` (default CPU)."""
    from .runtime import generator as seeded  # torch: the rest of this module is torch-free

    return seeded(stream_seed(seed, name, keys), device)
