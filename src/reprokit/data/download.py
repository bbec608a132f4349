"""Fetching a missing dataset from its official URL into the cache folder (only with ``download=True``).

Every file goes to a temporary name, is verified, then renamed into place, so that a failed or
concurrent download never leaves a partial file where :func:`.mirrors.locate` looks. CIFAR-10's
archive is extracted (into a temporary folder, verified, renamed); Tiny ImageNet's zip is read in
place; UCI classification tables are taken out of the official zip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
import zipfile
from pathlib import Path
from typing import Callable, Sequence

from .checksums import VerifiedCache, file_hash, verify_layout
from .errors import ChecksumMismatch, DatasetUnavailable
from .specs import CIFAR_BASE, CIFAR_TGZ, TINY_ZIP, UCI_CLASSIFICATION

__all__ = ["DOWNLOADERS"]


def _tmp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.{uuid.uuid4().hex[:12]}.part")


def _fetch(urls: Sequence[str], final: Path, algo: str | None, digest: str | None, name: str, tried) -> None:
    """Download the first URL that answers to a temporary name, verify, os.replace into ``final``."""
    from torchvision.datasets.utils import download_url

    final.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in urls:
        tmp = _tmp_name(final)
        try:
            download_url(url, root=str(tmp.parent), filename=tmp.name)  # md5 checked below, for sha256 too
        except Exception as e:  # network errors, HTTP errors, missing file:// paths
            errors.append(f"{url}: {type(e).__name__}: {e}")
            tmp.unlink(missing_ok=True)
            continue
        try:
            if algo is not None:
                actual = file_hash(tmp, algo)
                if actual != digest:
                    raise ChecksumMismatch(f"{final} (downloaded from {url})", algo, digest, actual)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return
    raise DatasetUnavailable(name, tried, urls[0] if urls else None, "download failed: " + " | ".join(errors))


def _fetch_member(url: str, member: str, final: Path, algo: str, digest: str, name: str, tried) -> None:
    """Download a zip archive, take one member out of it, verify it, os.replace into ``final``."""
    archive = _tmp_name(final.with_name(final.name + ".zip"))
    try:
        _fetch([url], archive, None, None, name, tried)
        with zipfile.ZipFile(archive) as zf:
            matches = [n for n in zf.namelist() if n == member or n.endswith("/" + member)]
            if not matches:
                raise DatasetUnavailable(name, tried, url, f"downloaded archive has no member '{member}'")
            data = zf.read(matches[0])
        actual = hashlib.new(algo, data).hexdigest()
        if actual != digest:
            raise ChecksumMismatch(f"{final} (member {member} of {url})", algo, digest, actual)
        tmp = _tmp_name(final)
        try:
            tmp.write_bytes(data)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    finally:
        archive.unlink(missing_ok=True)


def _download_idx(spec, cache_dir: Path, layouts, tried) -> None:
    for fc in layouts[0].files:
        fname = fc.relpath.rsplit("/", 1)[-1]
        _fetch([m + fname for m in spec.urls], cache_dir / fc.relpath, fc.algo, fc.digest, spec.name, tried)


def _download_cifar(spec, cache_dir: Path, layouts, tried) -> None:
    from torchvision.datasets.utils import extract_archive

    tgz = next(fc for lay in layouts for fc in lay.files if fc.relpath == CIFAR_TGZ)
    if not (cache_dir / CIFAR_TGZ).is_file():
        _fetch(list(spec.urls), cache_dir / CIFAR_TGZ, tgz.algo, tgz.digest, spec.name, tried)
    if (cache_dir / CIFAR_BASE).exists():
        return
    # extract next to the target, verify the members, then rename the whole folder into place
    tmpdir = Path(tempfile.mkdtemp(prefix=".cifar-extract-", dir=cache_dir))
    try:
        extract_archive(str(cache_dir / CIFAR_TGZ), str(tmpdir))
        verify_layout(tmpdir, layouts[0], VerifiedCache(None))
        try:
            os.replace(tmpdir / CIFAR_BASE, cache_dir / CIFAR_BASE)
        except OSError:
            if not (cache_dir / CIFAR_BASE).is_dir():  # another job won the race: fine
                raise
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _download_tiny(spec, cache_dir: Path, layouts, tried) -> None:
    # The zip is read in place by the loader (120k small files are not worth extracting).
    fc = next(fc for lay in layouts for fc in lay.files if fc.relpath == TINY_ZIP)
    _fetch(list(spec.urls), cache_dir / TINY_ZIP, fc.algo, fc.digest, spec.name, tried)


def _download_uci_regression(spec, cache_dir: Path, layouts, tried) -> None:
    for fc in layouts[0].files:
        fname = fc.relpath.rsplit("/", 1)[-1]
        final = cache_dir / fc.relpath
        if final.is_file():
            continue
        url = spec.urls[0].rsplit("/", 1)[0] + "/" + fname
        _fetch([url], final, fc.algo, fc.digest, spec.name, tried)


def _download_uci_classification(spec, cache_dir: Path, layouts, tried) -> None:
    fc = layouts[0].files[0]
    member = UCI_CLASSIFICATION[spec.name][2]
    _fetch_member(spec.urls[0], member, cache_dir / fc.relpath, fc.algo, fc.digest, spec.name, tried)


DOWNLOADERS: dict[str, Callable] = {
    "idx": _download_idx,
    "cifar": _download_cifar,
    "tiny": _download_tiny,
    "uci_regression": _download_uci_regression,
    "uci_classification": _download_uci_classification,
}
