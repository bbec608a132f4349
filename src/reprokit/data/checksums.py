"""What a dataset's files must be, and checking that they are: expected digests, hashing, the record of
files already verified.

MNIST / FashionMNIST / CIFAR-10 use the official MD5s that torchvision ships (read from
``torchvision_resources.json``, see :mod:`.specs`); TinyImageNet's zip uses its published MD5; UCI
files use the SHA-256 values in ``checksums.tsv`` (shipped in this package, made by
``make_checksums.py``). Tests (or a user with a private re-packaging) may replace the expected digest
of named files (``checksums={relpath: hexdigest}``, md5 if 32 hex digits, sha256 if 64); there is no
switch that turns verification off.

Torch-free: only hashing an md5 imports torchvision (its helper), and only when a file is hashed.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..atomic import atomic_write_text
from .errors import ChecksumMismatch

__all__ = [
    "FileCheck",
    "Layout",
    "VerifiedCache",
    "apply_overrides",
    "check_override_keys",
    "checksum_table",
    "file_hash",
    "missing_files",
    "table_check",
    "verify_layout",
]


@dataclass(frozen=True)
class FileCheck:
    relpath: str  # relative to the mirror root
    size: int | None = None  # bytes, where known (is_available compares it)
    algo: str | None = None  # "md5" | "sha256" | None (presence only)
    digest: str | None = None


@dataclass(frozen=True)
class Layout:
    root: str  # relative to the mirror root; what locate() returns (a folder or an archive)
    files: tuple[FileCheck, ...]
    note: str = ""


@lru_cache(maxsize=1)
def checksum_table() -> dict[str, tuple[int, str, str]]:
    """relpath -> (bytes, sha256, md5), from the checksums.tsv shipped with the package."""
    table = {}
    with open(Path(__file__).with_name("checksums.tsv"), newline="") as f:
        for rec in csv.DictReader(f, delimiter="\t"):
            table[rec["path"]] = (int(rec["bytes"]), rec["sha256"], rec["md5"])
    return table


def table_check(relpath: str, algo: str = "sha256") -> FileCheck:
    size, sha, md5 = checksum_table()[relpath]
    return FileCheck(relpath, size, algo, sha if algo == "sha256" else md5)


def file_hash(path: Path, algo: str) -> str:
    if algo == "md5":
        from torchvision.datasets.utils import calculate_md5

        return calculate_md5(path)
    # sha256: torchvision has no helper for it
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _algo_for(digest: str) -> str:
    d = digest.lower()
    if len(d) == 32 and all(c in "0123456789abcdef" for c in d):
        return "md5"
    if len(d) == 64 and all(c in "0123456789abcdef" for c in d):
        return "sha256"
    raise ValueError(f"checksum {digest!r} is neither an md5 (32 hex digits) nor a sha256 (64 hex digits)")


def apply_overrides(layout: Layout, overrides: Mapping[str, str] | None) -> Layout:
    if not overrides:
        return layout
    files = []
    for fc in layout.files:
        if fc.relpath in overrides:
            d = overrides[fc.relpath].lower()
            # a replaced checksum means a different file: its known size no longer applies
            fc = FileCheck(fc.relpath, None, _algo_for(d), d)
        files.append(fc)
    return Layout(layout.root, tuple(files), layout.note)


def check_override_keys(spec, overrides: Mapping[str, str] | None) -> None:
    """``spec``: a :class:`.specs.DatasetSpec` (its name and layouts)."""
    if not overrides:
        return
    known = {fc.relpath for lay in spec.layouts for fc in lay.files}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"checksums given for files that dataset '{spec.name}' does not use: {unknown}; "
            f"its files are: {sorted(known)}"
        )


def overrides_for(spec, overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The entries of a config-wide override table (``data.checksums``) that name ``spec``'s files."""
    known = {fc.relpath for lay in spec.layouts for fc in lay.files}
    return {k: v for k, v in (overrides or {}).items() if k in known}


class VerifiedCache:
    """(path, size, mtime_ns, algo, digest) of files already hashed, in <cache_dir>/verified-checksums.json,
    so that a file is hashed once rather than on every job."""

    FILENAME = "verified-checksums.json"

    def __init__(self, cache_dir):
        self.path = Path(cache_dir) / self.FILENAME if cache_dir is not None else None
        self.entries: dict[str, list] = {}
        self.dirty = False
        if self.path is not None and self.path.is_file():
            try:
                self.entries = json.loads(self.path.read_text())
            except (OSError, ValueError):
                self.entries = {}  # unreadable cache: just hash again

    @staticmethod
    def _key(path: Path) -> str:
        return str(path.resolve())

    def known(self, path: Path, algo: str, digest: str) -> bool:
        st = path.stat()
        return self.entries.get(self._key(path)) == [st.st_size, st.st_mtime_ns, algo, digest]

    def add(self, path: Path, algo: str, digest: str) -> None:
        st = path.stat()
        self.entries[self._key(path)] = [st.st_size, st.st_mtime_ns, algo, digest]
        self.dirty = True

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        # merge with what other jobs wrote meanwhile; losing an entry only costs a re-hash
        try:
            merged = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except (OSError, ValueError):
            merged = {}
        merged.update(self.entries)
        atomic_write_text(self.path, json.dumps(merged, indent=1, sort_keys=True) + "\n")
        self.dirty = False


def verify_layout(root: Path, layout: Layout, cache: VerifiedCache) -> None:
    """Hash every checked file of ``layout`` under ``root`` (unless ``cache`` knows it); raise
    :class:`ChecksumMismatch` on the first that differs."""
    for fc in layout.files:
        if fc.algo is None:
            continue
        p = root / fc.relpath
        if cache.known(p, fc.algo, fc.digest):
            continue
        actual = file_hash(p, fc.algo)
        if actual != fc.digest:
            raise ChecksumMismatch(p, fc.algo, fc.digest, actual)
        cache.add(p, fc.algo, fc.digest)


def missing_files(root: Path, layout: Layout, check_size: bool) -> list[str]:
    """What keeps ``root`` from holding ``layout`` (absent files; with ``check_size``, wrong sizes)."""
    out = []
    for fc in layout.files:
        p = root / fc.relpath
        if not p.is_file():
            out.append(f"{fc.relpath} missing")
        elif check_size and fc.size is not None and p.stat().st_size != fc.size:
            out.append(f"{fc.relpath} has {p.stat().st_size} bytes, expected {fc.size}")
    return out
