"""Reproduction of *Hyperparameter Optimization through Neural Network Partitioning* and *BALI*.

Package map (one place for each thing):
  data/       dataset registry, mirrors and checksums, variants (subsets, rotations, chunks, federated splits)
  models/     plain torch models (MLP, MNIST CNN, FixUp ResNets, WRN, ResNet-50/9 with GroupNorm)
  partition/  partition masks, wrapped layers, partition-aware optimisers, the App. I.1 schedule
  augment/    learnable affine augmentations and concrete dropout
  methods/    one module per method, all behind the small protocol in methods/base.py
  bali/       Bayesian layerwise inference
  train.py    the single training loop (hooks, checkpoints, divergence handling)
  cell.py     config in, metrics out: the only entry point pipeline rules call
  report/     shared table and figure styling
The package never imports snakemake.
"""

__version__ = "0.1.0"
