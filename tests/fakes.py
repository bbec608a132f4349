"""Small stand-ins for CIFAR-10 and Tiny ImageNet, written in exactly the published formats.

The real archives are not in the offline mirror; the tests use these (``import fakes``: pytest puts
``tests/`` on ``sys.path``). Each writer returns ``{mirror-relative path: md5}`` of the files it
wrote, to be passed as ``checksums=`` to ``registry.locate``/``load`` (the official checksums cannot
match a fake).
Never point these at the repository: write them into a temporary folder.

Format notes (written by hand, no library writes these formats):
  CIFAR-10 python: ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``, each a pickled
    dict (protocol 2) with ``data`` (N x 3072 uint8, channel-major rows of 32x32) and ``labels``
    (list of int); ``batches.meta`` has ``label_names``. The archive is a gzip'd tar of that folder.
  Tiny ImageNet: ``tiny-imagenet-200/wnids.txt`` (one wnid per line), ``words.txt``,
    ``train/<wnid>/images/<wnid>_<i>.JPEG`` + ``train/<wnid>/<wnid>_boxes.txt``,
    ``val/images/val_<i>.JPEG`` + ``val/val_annotations.txt`` (file, wnid, x0, y0, x1, y1; tab
    separated), ``test/images/test_<i>.JPEG``; the zip holds that folder.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()


def _cifar_batches(n_per_batch: int, n_test: int, seed: int) -> dict[str, dict]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, n in [*((f"data_batch_{i}", n_per_batch) for i in range(1, 6)), ("test_batch", n_test)]:
        out[name] = {
            "batch_label": f"fake {name}",
            "labels": [int(v) for v in rng.integers(0, 10, n)],
            "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            "filenames": [f"fake_{name}_{i}.png" for i in range(n)],
        }
    out["batches.meta"] = {"label_names": list(CIFAR_CLASSES), "num_cases_per_batch": n_per_batch, "num_vis": 3072}
    return out


def make_fake_cifar10(root, n_per_batch: int = 4, n_test: int = 6, seed: int = 0, archive: bool = False) -> dict:
    """Write a fake ``cifar-10-batches-py`` folder (or, with ``archive``, only ``cifar-10-python.tar.gz``)
    under ``root``. Pixels and labels are random (``seed``). Returns ``{mirror-relative path: md5}``
    for every batch file and, with ``archive``, for the tar.gz too."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    batches = _cifar_batches(n_per_batch, n_test, seed)
    blobs = {f"cifar-10-batches-py/{name}": pickle.dumps(d, protocol=2) for name, d in batches.items()}
    sums = {rel: hashlib.md5(b, usedforsecurity=False).hexdigest() for rel, b in blobs.items()}
    if archive:
        tgz = root / "cifar-10-python.tar.gz"
        with tarfile.open(tgz, "w:gz") as tf:
            for rel, b in blobs.items():
                info = tarfile.TarInfo(rel)
                info.size = len(b)
                tf.addfile(info, io.BytesIO(b))
        sums["cifar-10-python.tar.gz"] = _md5(tgz)
    else:
        for rel, b in blobs.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(b)
    return sums


def _jpeg(value: int, gray: bool = False, size: int = 64) -> bytes:
    from PIL import Image

    mode = "L" if gray else "RGB"
    color = value if gray else (value, value, value)
    buf = io.BytesIO()
    Image.new(mode, (size, size), color).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def class_value(k: int) -> int:
    """Pixel value of every fake Tiny ImageNet image of class k (in sorted-wnid order)."""
    return 20 + 40 * k


def make_fake_tinyimagenet(
    root, n_classes: int = 3, n_train_per_class: int = 2, n_val: int = 5, archive: bool = False, gray_first: bool = True
) -> dict:
    """Write a fake ``tiny-imagenet-200`` tree (or, with ``archive``, only ``tiny-imagenet-200.zip``)
    under ``root``. Every image of class k (index in sorted wnids) is the constant grey
    ``class_value(k)``; the first training image is a grayscale JPEG if ``gray_first``. wnids.txt
    lists the classes in reverse order (so that sorting matters). Returns ``{path: md5}`` for the
    zip (empty dict for a tree, which has no published checksums) plus ``"_val_labels"``, the
    expected validation labels."""
    root = Path(root)
    wnids = [f"n{9000000 + k:08d}" for k in range(n_classes)]  # sorted order = class index
    files: dict[str, bytes] = {
        "wnids.txt": ("\n".join(reversed(wnids)) + "\n").encode(),
        "words.txt": "".join(f"{w}\tfake class {k}\n" for k, w in enumerate(wnids)).encode(),
    }
    for k, w in enumerate(wnids):
        boxes = []
        for i in range(n_train_per_class):
            fname = f"{w}_{i}.JPEG"
            files[f"train/{w}/images/{fname}"] = _jpeg(class_value(k), gray=(gray_first and k == 0 and i == 0))
            boxes.append(f"{fname}\t0\t0\t63\t63\n")
        files[f"train/{w}/{w}_boxes.txt"] = "".join(boxes).encode()
    val_labels, ann = [], []
    for i in range(n_val):
        k = (i * 2 + 1) % n_classes
        files[f"val/images/val_{i}.JPEG"] = _jpeg(class_value(k))
        ann.append(f"val_{i}.JPEG\t{wnids[k]}\t1\t2\t60\t61\n")
        val_labels.append(k)
    files["val/val_annotations.txt"] = "".join(ann).encode()
    files["test/images/test_0.JPEG"] = _jpeg(128)
    out: dict = {"_val_labels": val_labels}
    if archive:
        root.mkdir(parents=True, exist_ok=True)
        z = root / "tiny-imagenet-200.zip"
        with zipfile.ZipFile(z, "w") as zf:
            for rel, b in files.items():
                zf.writestr(f"tiny-imagenet-200/{rel}", b)
        out["tiny-imagenet-200.zip"] = _md5(z)
    else:
        for rel, b in files.items():
            p = root / "tiny-imagenet-200" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(b)
    return out


def record_as_verified(cache_dir, root, dataset: str) -> list[str]:
    """Record the fake files of ``dataset`` under the mirror ``root`` as already verified, with their
    *official* digests, in ``cache_dir``'s verified-checksums record (data/checksums.py VerifiedCache), so
    that a whole pipeline run (which passes no ``checksums=`` override) accepts the fake mirror. Tests
    only: the record is keyed by path, size and mtime, so it stands for exactly these files. Returns the
    paths recorded."""
    from reprokit.data.checksums import VerifiedCache
    from reprokit.data.specs import dataset_info

    cache = VerifiedCache(cache_dir)
    done = []
    for layout in dataset_info(dataset).layouts:
        for fc in layout.files:
            path = Path(root) / fc.relpath
            if fc.algo is not None and path.is_file():
                cache.add(path, fc.algo, fc.digest)
                done.append(fc.relpath)
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    cache.save()
    return done


def serve_folder(root):
    """Serve the folder ``root`` over HTTP on 127.0.0.1 (a free port) from a daemon thread; returns the
    server (``shutdown()`` and ``server_close()`` it) and its base URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def point_spec(monkeypatch, name, **changes):
    """Replace fields of dataset ``name``'s spec (e.g. its official ``urls``) for one test."""
    import dataclasses

    from reprokit.data import specs

    specs.dataset_info(name)  # fills the table
    monkeypatch.setitem(specs._SPECS, name, dataclasses.replace(specs._SPECS[name], **changes))


def checksums_of(sums: dict) -> dict[str, str]:
    """The ``{path: md5}`` part of a writer's return value (drops the ``_``-prefixed extras)."""
    return {k: v for k, v in sums.items() if not k.startswith("_")}


__all__ = [
    "CIFAR_CLASSES",
    "checksums_of",
    "class_value",
    "make_fake_cifar10",
    "make_fake_tinyimagenet",
    "point_spec",
    "record_as_verified",
    "serve_folder",
]
