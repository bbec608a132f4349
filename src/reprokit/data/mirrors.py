"""Where a dataset's files are: the mirror folders and the cache folder, searched in order, as
torchvision does it: found locally, else fetched into the cache.

``mirrors`` are local folders in the original layout, or http(s) URLs of web folders laid out the same
way (a site's internal mirror). ``cache_dir`` (if given) is searched after the local mirrors, receives
downloads (same layout as a mirror), and holds ``verified-checksums.json`` (see
:class:`.checksums.VerifiedCache`). :func:`is_available` is the cheap local test the pipeline runs on
every DAG build (presence and sizes, no hashing, no network, no torch); :func:`locate` verifies the
checksums and, when asked, downloads: from each URL mirror in turn, then from the official URLs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .checksums import VerifiedCache, apply_overrides, check_override_keys, missing_files, overrides_for, verify_layout
from .download import fetch, is_url
from .errors import DatasetUnavailable
from .specs import dataset_info

__all__ = ["fetch_status", "is_available", "locate", "url_mirrors"]


def _as_list(mirrors) -> list:
    if mirrors is None:
        return []
    if isinstance(mirrors, (str, os.PathLike)):
        return [mirrors]
    return list(mirrors)


def _as_dirs(mirrors) -> list[Path]:
    return [Path(m).expanduser() for m in _as_list(mirrors) if not is_url(m)]


def url_mirrors(mirrors) -> list[str]:
    """The http(s) entries of ``mirrors``, in order."""
    return [str(m) for m in _as_list(mirrors) if is_url(m)]


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


def locate(
    name: str, mirrors, cache_dir=None, download: bool = False, checksums: Mapping[str, str] | None = None
) -> Path:
    """Path of the dataset's files (a folder or an archive, see :mod:`.specs`), verified.

    Searches each local mirror and then ``cache_dir``, in order; the first location holding every file
    of a layout is verified (raises :class:`ChecksumMismatch` on a bad file) and returned. If none is
    found and ``download`` is true, the files are downloaded into ``cache_dir`` (from each URL mirror,
    then the official URLs), verified and (CIFAR-10) extracted; otherwise, or when no source answers,
    :class:`DatasetUnavailable` is raised.
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
            raise DatasetUnavailable(
                name,
                tried,
                spec.urls[0] if spec.urls else None,
                "not found, and downloading is off (data.download: false; download=True with a cache_dir fetches it)",
            )
        if cache_dir is None:
            raise DatasetUnavailable(
                name, tried, spec.urls[0] if spec.urls else None, "download=True needs a cache_dir to download into"
            )
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        fetch(spec, Path(cache_dir), layouts, tried, url_mirrors(mirrors))
        root = Path(cache_dir)
        for layout in layouts:
            if not missing_files(root, layout, check_size=False):
                verify_layout(root, layout, cache)
                return root / layout.root
        raise DatasetUnavailable(name, tried, spec.urls[0], "download finished but the files are not complete")
    finally:
        cache.save()


def fetch_status(
    name: str, mirrors, cache_dir=None, download: bool = False, checksums: Mapping[str, str] | None = None
) -> dict:
    """Make ``name`` available (verify it where it is, or fetch it when ``download``) and say how it went:
    ``{"dataset", "available": True, "path"}``, or ``{"dataset", "available": False, "reason"}`` when it is
    nowhere and could not be fetched (no network, HTTP error, downloading off); the pipeline turns the
    reason into the dataset's n/a rows. A file that is present or arrives with the wrong checksum is not
    a status: :class:`ChecksumMismatch` propagates, naming the file. ``checksums``: a config-wide
    override table; the entries naming this dataset's files apply."""
    spec = dataset_info(name)
    if spec.synthetic:
        return {"dataset": name, "available": True, "path": None}
    try:
        path = locate(name, mirrors, cache_dir, download=download, checksums=overrides_for(spec, checksums))
    except DatasetUnavailable as err:
        return {"dataset": name, "available": False, "reason": err.reason, "detail": str(err)}
    return {"dataset": name, "available": True, "path": str(path)}
