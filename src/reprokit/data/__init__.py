"""Datasets: `registry.load` (specs, checksums, mirrors, downloads, loaders: see registry.py) and variants
(subsets, rotations, chunks, federated clients)."""

from .registry import (
    Bundle,
    ChecksumMismatch,
    DatasetUnavailable,
    dataset_info,
    dataset_names,
    is_available,
    load,
    locate,
    standardize,
)
from .variants import (
    apply_variants,
    build_variant,
    chunk_assignment,
    dirichlet_client_split,
    load_variant,
    parse_variant_filename,
    rotate_images,
    rotation_angles,
    rotation_bins,
    subset_indices,
    variant_filename,
)

__all__ = [
    "Bundle", "ChecksumMismatch", "DatasetUnavailable", "dataset_info", "dataset_names", "is_available", "load",
    "locate", "standardize", "apply_variants", "build_variant", "chunk_assignment", "dirichlet_client_split",
    "load_variant", "parse_variant_filename", "rotate_images", "rotation_angles", "rotation_bins", "subset_indices",
    "variant_filename",
]
