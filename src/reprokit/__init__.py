"""Reproduction of *Hyperparameter Optimization through Neural Network Partitioning* and *BALI*.

Package map (one place for each thing). The library a researcher imports without the pipeline:
  partition/  partition masks, wrapped layers, partition-aware optimisers, the App. I.1 schedule
  bali/       Bayesian layerwise inference
  methods/    one module per method (partitioned, BALI, each baseline), behind the protocol in methods/base.py
  models/     plain torch models (MLP, MNIST CNN, FixUp ResNets, WRN, ResNet-50/9 with GroupNorm)
  augment/    learnable affine augmentations and concrete dropout
The pipeline, in the order data flows:
  config.py   the one config loader, experiment grids, cells          (errors.py: ConfigError)
  plan/       per kind: typed settings, what a cell needs, its cost    (torch-free)
  data/       dataset registry, mirrors and checksums, variants (subsets, rotations, chunks, federated splits)
  builders/   per kind: a cell's data + model + method
  loop.py     the single training loop (hooks, checkpoints, divergence handling); cell.py runs one cell
  metrics.py  predictive metrics
  report/     aggregate, archive, tables, figures, the reproduction report
The package never imports snakemake.
"""

__version__ = "0.1.0"
