"""The two errors the data layer raises: a dataset that is nowhere to be found, a file that fails its checksum."""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["ChecksumMismatch", "DatasetUnavailable"]


class DatasetUnavailable(RuntimeError):
    """The dataset's files are in none of the mirror folders (and were not or could not be downloaded)."""

    def __init__(self, name: str, tried: Sequence[str], url: str | None, reason: str = ""):
        self.name, self.tried, self.url, self.reason = name, list(tried), url, reason
        lines = [f"dataset '{name}' is not available" + (f": {reason}" if reason else "")]
        lines.append("looked in:" if self.tried else "looked in: (no mirror folders given)")
        lines += [f"  - {t}" for t in self.tried]
        lines.append(f"official source: {url or '(none)'}")
        super().__init__("\n".join(lines))


class ChecksumMismatch(RuntimeError):
    """A file's checksum differs from the expected one."""

    def __init__(self, path: str | os.PathLike, algo: str, expected: str, actual: str):
        self.path, self.algo, self.expected, self.actual = str(path), algo, expected, actual
        super().__init__(f"checksum mismatch for {path}: expected {algo} {expected}, actual {algo} {actual}")
