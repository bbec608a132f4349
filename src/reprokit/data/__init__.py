"""Datasets: one module per concern.

Torch-free (imported while Snakemake plans the jobs): `specs` (names, layouts, URLs), `checksums`,
`mirrors` (where files are; availability), `download`, `variant_names` (variant file names and paths).
Loading (torch): `registry.load` picks the loader (`images`, `uci`, `synthetic`) and returns a
`bundle.Bundle`; `variants` builds and applies subsets, rotations, chunks and federated splits.
"""
