"""Regenerate ``checksums.tsv`` (shipped inside the package) from a data mirror's ``MANIFEST.tsv``.

The package must not depend on any particular mirror at run time, so the checksums of the files the
loaders read are copied into the package once:

    python -m reprokit.data.make_checksums /path/to/MANIFEST.tsv [out.tsv]
    python -m reprokit.data.make_checksums --torchvision      # torchvision_resources.json

Only the files a loader reads are kept (IDX archives, UCI ``data.txt``/index files, the three UCI
classification tables). Columns: ``path  bytes  sha256  md5`` (path relative to the mirror root).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from .specs import TORCHVISION_RESOURCES

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


def torchvision_resources() -> dict:
    """The file lists, official MD5s and URLs that torchvision publishes for MNIST, Fashion-MNIST and
    CIFAR-10, as plain data. The registry reads them from ``torchvision_resources.json`` (written by
    ``python -m reprokit.data.make_checksums --torchvision``) so that checking whether a dataset is
    available does not import torchvision (~2 s, paid by every DAG build); tests/test_data_registry.py
    checks the file against the installed torchvision."""
    from torchvision.datasets import CIFAR10, MNIST, FashionMNIST

    return {
        "mnist": {"resources": [list(r) for r in MNIST.resources], "mirrors": list(MNIST.mirrors)},
        "fashion_mnist": {
            "resources": [list(r) for r in FashionMNIST.resources],
            "mirrors": list(FashionMNIST.mirrors),
        },
        "cifar10": {
            "files": [list(r) for r in (*CIFAR10.train_list, *CIFAR10.test_list)]
            + [[CIFAR10.meta["filename"], CIFAR10.meta["md5"]]],
            "url": CIFAR10.url,
            "tgz_md5": CIFAR10.tgz_md5,
        },
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "--torchvision":
        import json

        TORCHVISION_RESOURCES.write_text(json.dumps(torchvision_resources(), indent=1) + "\n")
        print(f"wrote {TORCHVISION_RESOURCES}")
        return 0
    out = argv[1] if len(argv) > 1 else Path(__file__).with_name("checksums.tsv")
    rows = make_table(argv[0])
    write_table(rows, out)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
