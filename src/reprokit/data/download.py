"""Fetching a missing dataset into the cache folder (only with ``download=True``).

Sources are tried in order: each http(s) mirror (a web folder laid out like a mirror folder, e.g. a
site's internal copy: ``<url>/MNIST/raw/train-images-idx3-ubyte.gz``), then the dataset's official
URLs. HTTP is pooch's downloader (requests, with a progress bar in the job's log); what is ours is the
layout of each source and the checks. Every file goes to a temporary name, is verified, then renamed
into place, so that a failed or concurrent download never leaves a partial file where
:func:`.mirrors.locate` looks. CIFAR-10's archive is extracted (into a temporary folder, verified,
renamed); Tiny ImageNet's zip is read in place; UCI classification tables are taken out of the
official zip (a mirror serves the table itself).

A source that cannot be reached (no network, HTTP error) moves on to the next; when none answers,
:class:`DatasetUnavailable` says "download failed: ..." with each source's error. A file that arrives
with the wrong checksum stops at once with :class:`ChecksumMismatch` naming the file and the URL.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .checksums import VerifiedCache, file_hash, verify_layout
from .errors import ChecksumMismatch, DatasetUnavailable
from .specs import CIFAR_BASE, CIFAR_TGZ, TINY_ZIP, UCI_CLASSIFICATION

__all__ = ["DOWNLOADERS", "fetch", "is_url"]


def _tmp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.{uuid.uuid4().hex[:12]}.part")


HTTP_TIMEOUT_S = 60  # seconds without an answer before a source counts as unreachable


_CAUSES = (  # what a requests/urllib3 error message means, in a few words
    ("NameResolutionError", "host not found (no network?)"),
    ("Failed to resolve", "host not found (no network?)"),
    ("Name or service not known", "host not found (no network?)"),
    ("Connection refused", "connection refused"),
    ("Network is unreachable", "network unreachable"),
    ("timed out", "timed out"),
)


def _short(err: Exception, limit: int = 240) -> str:
    """One line for an HTTP failure: 'HTTP 404 Not Found', 'ConnectionError: connection refused', ..."""
    response = getattr(err, "response", None)
    if response is not None and getattr(response, "status_code", None):
        return f"HTTP {response.status_code} {response.reason or ''}".strip()
    text = " ".join(f"{type(err).__name__}: {err}".split())
    for pattern, meaning in _CAUSES:
        if pattern in text:
            return f"{type(err).__name__}: {meaning}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _http_get(url: str, out: Path) -> None:
    import pooch

    downloader = pooch.HTTPDownloader(progressbar=True, timeout=HTTP_TIMEOUT_S)
    downloader(url, str(out), None)


def _fetch(urls: Sequence[str], final: Path, algo: str | None, digest: str | None, name: str, tried) -> None:
    """Download the first URL that answers to a temporary name, verify, os.replace into ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in urls:
        tmp = _tmp_name(final)
        try:
            _http_get(url, tmp)
        except Exception as e:  # network errors, HTTP errors
            errors.append(f"{url}: {_short(e)}")
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
    raise DatasetUnavailable(name, tried, urls[0] if urls else None, " | ".join(errors))


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


def _at(base: str, relpath: str) -> str:
    return base.rstrip("/") + "/" + relpath


def _download_idx(spec, cache_dir: Path, layouts, tried, base: str | None = None) -> None:
    for fc in layouts[0].files:
        if (cache_dir / fc.relpath).is_file():
            continue
        fname = fc.relpath.rsplit("/", 1)[-1]
        urls = [_at(base, fc.relpath)] if base else [m + fname for m in spec.urls]
        _fetch(urls, cache_dir / fc.relpath, fc.algo, fc.digest, spec.name, tried)


def _download_cifar(spec, cache_dir: Path, layouts, tried, base: str | None = None) -> None:
    from torchvision.datasets.utils import extract_archive

    tgz = next(fc for lay in layouts for fc in lay.files if fc.relpath == CIFAR_TGZ)
    if not (cache_dir / CIFAR_TGZ).is_file():
        urls = [_at(base, CIFAR_TGZ)] if base else list(spec.urls)
        _fetch(urls, cache_dir / CIFAR_TGZ, tgz.algo, tgz.digest, spec.name, tried)
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


def _download_tiny(spec, cache_dir: Path, layouts, tried, base: str | None = None) -> None:
    # The zip is read in place by the loader (120k small files are not worth extracting).
    fc = next(fc for lay in layouts for fc in lay.files if fc.relpath == TINY_ZIP)
    urls = [_at(base, TINY_ZIP)] if base else list(spec.urls)
    _fetch(urls, cache_dir / TINY_ZIP, fc.algo, fc.digest, spec.name, tried)


def _download_uci_regression(spec, cache_dir: Path, layouts, tried, base: str | None = None) -> None:
    for fc in layouts[0].files:
        fname = fc.relpath.rsplit("/", 1)[-1]
        final = cache_dir / fc.relpath
        if final.is_file():
            continue
        url = _at(base, fc.relpath) if base else spec.urls[0].rsplit("/", 1)[0] + "/" + fname
        _fetch([url], final, fc.algo, fc.digest, spec.name, tried)


def _download_uci_classification(spec, cache_dir: Path, layouts, tried, base: str | None = None) -> None:
    fc = layouts[0].files[0]
    if base:  # a mirror serves the table itself
        _fetch([_at(base, fc.relpath)], cache_dir / fc.relpath, fc.algo, fc.digest, spec.name, tried)
        return
    member = UCI_CLASSIFICATION[spec.name][2]
    _fetch_member(spec.urls[0], member, cache_dir / fc.relpath, fc.algo, fc.digest, spec.name, tried)


DOWNLOADERS: dict[str, Callable] = {
    "idx": _download_idx,
    "cifar": _download_cifar,
    "tiny": _download_tiny,
    "uci_regression": _download_uci_regression,
    "uci_classification": _download_uci_classification,
}


def is_url(mirror) -> bool:
    """A `data.mirrors` entry that is a web folder (http or https) rather than a local folder."""
    return isinstance(mirror, str) and mirror.split("://", 1)[0].lower() in ("http", "https") and "://" in mirror


def fetch(spec, cache_dir: Path, layouts, tried: list, url_mirrors: Sequence[str] = ()) -> None:
    """Fetch ``spec``'s files into ``cache_dir``: from each http(s) mirror in turn, then from the official
    URLs. Raises :class:`DatasetUnavailable` ("download failed: <each source's error>") when no source
    answers, :class:`ChecksumMismatch` at once when a file arrives corrupted."""
    errors = []
    for base in url_mirrors:
        try:
            DOWNLOADERS[spec.loader](spec, cache_dir, layouts, tried, base=base)
            return
        except DatasetUnavailable as err:
            errors.append(f"mirror {base}: {err.reason}")
    if spec.urls:
        try:
            DOWNLOADERS[spec.loader](spec, cache_dir, layouts, tried)
            return
        except DatasetUnavailable as err:
            errors.append(f"official source: {err.reason}")
    raise DatasetUnavailable(
        spec.name,
        tried,
        spec.urls[0] if spec.urls else None,
        "download failed: " + "; ".join(errors or ["no source to download from"]),
    )
