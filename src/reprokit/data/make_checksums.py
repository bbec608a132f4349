"""Regenerate ``checksums.tsv`` (shipped inside the package) from a data mirror's ``MANIFEST.tsv``.

The package must not depend on any particular mirror at run time, so the checksums of the files the
loaders read are copied into the package once:

    python -m reprokit.data.make_checksums /path/to/MANIFEST.tsv [out.tsv]

Only the files a loader reads are kept (IDX archives, UCI ``data.txt``/index files, the three UCI
classification tables). Columns: ``path  bytes  sha256  md5`` (path relative to the mirror root).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

_KEEP = re.compile(
    r"^(MNIST/raw/[^/]+\.gz"
    r"|FashionMNIST/raw/[^/]+\.gz"
    r"|UCI/[^/]+/(data|index_features|index_target|index_train_\d+|index_test_\d+)\.txt"
    r"|UCI-classification/spambase/spambase\.data"
    r"|UCI-classification/magic/magic04\.data"
    r"|UCI-classification/cdc-diabetes-health-indicators/diabetes_binary_health_indicators_BRFSS2015\.csv)$"
)

HEADER = ("path", "bytes", "sha256", "md5")


def make_table(manifest: str | Path) -> list[tuple[str, str, str, str]]:
    rows = []
    with open(manifest, newline="") as f:
        for rec in csv.DictReader(f, delimiter="\t"):
            if _KEEP.match(rec["path"]):
                rows.append((rec["path"], rec["bytes"], rec["sha256"].lower(), rec["md5"].lower()))
    rows.sort()
    return rows


def write_table(rows, out: str | Path) -> None:
    lines = ["\t".join(HEADER)] + ["\t".join(r) for r in rows]
    Path(out).write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    out = argv[1] if len(argv) > 1 else Path(__file__).with_name("checksums.tsv")
    rows = make_table(argv[0])
    write_table(rows, out)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
