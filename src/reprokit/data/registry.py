"""Dataset registry: ``load(name, mirrors, ...)`` finds a dataset's files, verifies them and loads them.

The concerns live in their own modules; this one joins them and re-exports the public API:

    specs.py      names, tasks, file layouts, official URLs              (torch-free: every DAG build)
    checksums.py  expected digests (torchvision's MD5s, checksums.tsv), hashing, verified-file record
    mirrors.py    searching the mirror and cache folders: is_available (cheap), locate (verified)
    download.py   fetching from the official URLs into the cache folder (only with download=True)
    bundle.py     Bundle, the loaded dataset; standardize
    images.py     MNIST / Fashion-MNIST (IDX), CIFAR-10 (python pickles), Tiny ImageNet (JPEG tree or zip)
    uci.py        UCI regression (standard splits) and classification tables (seeded 80/20 splits)
    synthetic.py  generators seeded by ``seed``: input_selection, sines_trend, sinc, two_moons
    errors.py     DatasetUnavailable, ChecksumMismatch

Tests (or a user with a private re-packaging) may pass ``checksums={relpath: hexdigest}`` to
:func:`locate`/:func:`load` to replace the expected digest of named files (md5 if 32 hex digits,
sha256 if 64); there is no switch that turns verification off.

The package never imports snakemake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .bundle import Bundle, standardize
from .errors import ChecksumMismatch, DatasetUnavailable
from .images import load_cifar, load_idx, load_tiny
from .mirrors import is_available, locate
from .specs import UCI_CLASSIFICATION, UCI_REGRESSION, DatasetSpec, dataset_info, dataset_names
from .synthetic import load_synthetic
from .uci import load_uci_classification, load_uci_regression

__all__ = [
    "Bundle",
    "ChecksumMismatch",
    "DatasetSpec",
    "DatasetUnavailable",
    "UCI_CLASSIFICATION",
    "UCI_REGRESSION",
    "dataset_info",
    "dataset_names",
    "is_available",
    "load",
    "locate",
    "standardize",
]

_LOADERS: dict[str, Callable] = {
    "idx": load_idx,
    "cifar": load_cifar,
    "tiny": load_tiny,
    "uci_regression": load_uci_regression,
    "uci_classification": load_uci_classification,
}


def load(
    name: str, mirrors=(), cache_dir=None, download: bool = False, checksums: Mapping[str, str] | None = None, **kw
) -> Bundle:
    """Load a dataset as a :class:`Bundle` (files located and verified by :func:`locate`).

    Keywords by dataset:
      images (mnist, fashion_mnist, cifar10, tinyimagenet): ``dtype`` "float32" (default, [0, 1]) | "uint8".
      UCI regression (uci_*): ``split`` 0..19 (protein 0..4), the standard split; raw (unstandardised)
        values, see :func:`standardize`.
      spambase, magic, cdc_diabetes: ``split`` = seed of a random (not stratified) 80/20 split,
        ``test_fraction`` (0.2).
      synthetic: ``seed`` and the sizes/noise documented on each generator in :mod:`.synthetic`
        (``_input_selection``, ``_sines_trend``, ``_sinc``, ``_two_moons``).
    """
    spec = dataset_info(name)
    if spec.synthetic:
        if checksums:
            raise ValueError(f"dataset '{name}' is synthetic: it has no files to check")
        return load_synthetic(spec, kw)
    path = locate(name, mirrors, cache_dir=cache_dir, download=download, checksums=checksums)
    return _LOADERS[spec.loader](spec, path, cache_dir, kw)
