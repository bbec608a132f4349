"""Where a dataset's files are: the mirror folders and the cache folder, searched in order.

``cache_dir`` (if given) is searched after the mirrors, receives downloads (same layout as a mirror),
and holds ``verified-checksums.json`` (see :class:`.checksums.VerifiedCache`). :func:`is_available`
is the cheap test the pipeline runs on every DAG build (presence and sizes, no hashing, no torch);
:func:`locate` verifies the checksums (and downloads when asked).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .checksums import VerifiedCache, apply_overrides, check_override_keys, missing_files, verify_layout
from .download import DOWNLOADERS
from .errors import DatasetUnavailable
from .specs import dataset_info

__all__ = ["is_available", "locate"]


def _as_dirs(mirrors) -> list[Path]:
    if mirrors is None:
        return []
    if isinstance(mirrors, (str, os.PathLike)):
        mirrors = [mirrors]
    return [Path(m).expanduser() for m in mirrors]


def _search_roots(mirrors, cache_dir) -> list[Path]:
    roots = _as_dirs(mirrors)
    if cache_dir is not None and Path(cache_dir) not in roots:
        roots.append(Path(cache_dir))
    return roots


def is_available(name: str, mirrors, cache_dir=None) -> bool:
    """Cheap availability test (no hashing): some mirror (or cache_dir) has every file, with the
    right size where it is known. Synthetic datasets are always available."""
    spec = dataset_info(name)
    if spec.synthetic:
        return True
    for root in _search_roots(mirrors, cache_dir):
        for layout in spec.layouts:
            if not missing_files(root, layout, check_size=True):
                return True
    return False


def locate(name: str, mirrors, cache_dir=None, download: bool = False,
           checksums: Mapping[str, str] | None = None) -> Path:
    """Path of the dataset's files (a folder or an archive, see :mod:`.specs`), verified.

    Searches each mirror and then ``cache_dir``, in order; the first location holding every file of
    a layout is verified (raises :class:`ChecksumMismatch` on a bad file) and returned. If none is
    found and ``download`` is true, the files are downloaded into ``cache_dir`` from the official
    URL, verified and (CIFAR-10) extracted; otherwise :class:`DatasetUnavailable` is raised.
    ``checksums`` replaces the expected digest of the named files (mirror-relative paths).
    """
    spec = dataset_info(name)
    if spec.synthetic:
        raise ValueError(f"dataset '{name}' is synthetic (generated from a seed): it has no files to locate")
    check_override_keys(spec, checksums)
    layouts = [apply_overrides(lay, checksums) for lay in spec.layouts]
    cache = VerifiedCache(cache_dir)
    tried: list[str] = []
    try:
        for root in _search_roots(mirrors, cache_dir):
            for layout in layouts:
                miss = missing_files(root, layout, check_size=False)
                if miss:
                    shown = "; ".join(miss[:3]) + (f"; ... ({len(miss)} files)" if len(miss) > 3 else "")
                    tried.append(f"{root / layout.root} ({shown})")
                    continue
                verify_layout(root, layout, cache)
                return root / layout.root
        if not download:
            raise DatasetUnavailable(name, tried, spec.urls[0] if spec.urls else None,
                                     "not found (pass download=True with a cache_dir to fetch it)")
        if cache_dir is None:
            raise DatasetUnavailable(name, tried, spec.urls[0] if spec.urls else None,
                                     "download=True needs a cache_dir to download into")
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        DOWNLOADERS[spec.loader](spec, Path(cache_dir), layouts, tried)
        root = Path(cache_dir)
        for layout in layouts:
            if not missing_files(root, layout, check_size=False):
                verify_layout(root, layout, cache)
                return root / layout.root
        raise DatasetUnavailable(name, tried, spec.urls[0], "download finished but the files are not complete")
    finally:
        cache.save()
