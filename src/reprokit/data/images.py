"""Image datasets in their published formats: MNIST / Fashion-MNIST (IDX, gzip), CIFAR-10 (python
pickles, folder or tar.gz), Tiny ImageNet (JPEG tree or zip, read in place).

Images come out float32 in [0, 1] (``dtype="float32"``, the default) or uint8, shape (N, C, H, W);
labels int64. torchvision's readers and decoders are used where it has them (imported when a loader
runs, never when this module is imported).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_save_torch
from .bundle import Bundle, take_kwargs
from .specs import CIFAR_BASE, TINY_BASE

__all__ = ["load_cifar", "load_idx", "load_tiny"]


def _images_out(x_u8: torch.Tensor, dtype: str) -> torch.Tensor:
    if dtype == "uint8":
        return x_u8.contiguous()
    if dtype == "float32":
        return x_u8.to(torch.float32).div_(255.0)
    raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")


def _decoded(cache_dir, stem: str, sources: list[Path], read) -> dict:
    """`read()`'s tensors, kept in `cache_dir` as <stem>-decoded-<key>.pt, the key from the sources' paths, sizes
    and modification times: decoding runs once per source, not in every cell (MNIST's IDX files: ~4 s a
    cell, gunzip and parse; Tiny ImageNet's ~110k JPEGs: minutes). Without a cache_dir it always reads."""
    if cache_dir is None:
        return read()
    stats = [(p.resolve(), p.stat()) for p in sources]
    ident = "|".join(f"{path}|{st.st_size}|{st.st_mtime_ns}" for path, st in stats)
    cache_file = Path(cache_dir) / f"{stem}-decoded-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.pt"
    if cache_file.is_file():
        return torch.load(cache_file, weights_only=True)
    data = read()
    atomic_save_torch(data, cache_file)
    return data


_IDX_FILES = [
    f"{part}-{kind}-idx{n}-ubyte.gz" for part in ("train", "t10k") for kind, n in (("images", 3), ("labels", 1))
]


def _read_idx(path: Path) -> dict:
    from torchvision.datasets.mnist import read_image_file, read_label_file
    from torchvision.datasets.utils import extract_archive

    out = {}
    # torchvision's readers take an uncompressed file: decompress each .gz into a scratch folder
    with tempfile.TemporaryDirectory(prefix="reprokit-idx-") as td:
        for part in ("train", "t10k"):
            out[f"x_{part}"] = read_image_file(extract_archive(str(path / f"{part}-images-idx3-ubyte.gz"), td))
            out[f"y_{part}"] = read_label_file(extract_archive(str(path / f"{part}-labels-idx1-ubyte.gz"), td))
    return out


def load_idx(spec, path: Path, cache_dir, kw) -> Bundle:
    kw = take_kwargs(spec.name, kw, {"dtype": "float32"})
    d = _decoded(cache_dir, f"{spec.name}-idx", [path / f for f in _IDX_FILES], lambda: _read_idx(path))
    return Bundle(
        _images_out(d["x_train"].unsqueeze(1), kw["dtype"]),
        d["y_train"].long(),
        _images_out(d["x_t10k"].unsqueeze(1), kw["dtype"]),
        d["y_t10k"].long(),
        spec.task,
        spec.n_classes,
        spec.name,
        {"source": str(path), "verified": "md5 (torchvision official)", "synthetic": False},
    )


def _cifar_batches(path: Path) -> tuple[dict[str, dict], list[str]]:
    from torchvision.datasets import CIFAR10

    names = [f for f, _ in CIFAR10.train_list] + [f for f, _ in CIFAR10.test_list]
    meta_name = CIFAR10.meta["filename"]
    out = {}
    if path.is_dir():
        for n in names + [meta_name]:
            with open(path / n, "rb") as f:
                out[n] = pickle.load(f, encoding="latin1")
    else:
        with tarfile.open(path, "r:gz") as tf:
            for n in names + [meta_name]:
                f = tf.extractfile(f"{CIFAR_BASE}/{n}")
                if f is None:
                    raise RuntimeError(f"{path}: member {CIFAR_BASE}/{n} is not a file")
                out[n] = pickle.load(f, encoding="latin1")
    classes = list(out.pop(meta_name)[CIFAR10.meta["key"]])
    return out, classes


def load_cifar(spec, path: Path, cache_dir, kw) -> Bundle:
    from torchvision.datasets import CIFAR10

    kw = take_kwargs(spec.name, kw, {"dtype": "float32"})
    batches, classes = _cifar_batches(path)

    def stack(names):
        xs = [np.asarray(batches[n]["data"], dtype=np.uint8).reshape(-1, 3, 32, 32) for n in names]
        ys = [np.asarray(batches[n]["labels"], dtype=np.int64) for n in names]
        return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

    xtr, ytr = stack([f for f, _ in CIFAR10.train_list])
    xte, yte = stack([f for f, _ in CIFAR10.test_list])
    return Bundle(
        _images_out(xtr, kw["dtype"]),
        ytr,
        _images_out(xte, kw["dtype"]),
        yte,
        spec.task,
        spec.n_classes,
        spec.name,
        {"source": str(path), "classes": classes, "verified": "md5 (torchvision official)", "synthetic": False},
    )


class _TreeReader:
    def __init__(self, root: Path):
        self.root = root

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def listdir(self, rel: str) -> list[str]:
        return sorted(os.listdir(self.root / rel))

    def close(self):
        pass


class _ZipReader:
    def __init__(self, path: Path):
        self.zf = zipfile.ZipFile(path)
        self.prefix = f"{TINY_BASE}/"
        self.children: dict[str, set[str]] = {}
        for n in self.zf.namelist():
            if n.startswith(self.prefix) and not n.endswith("/"):
                d, base = (
                    n[len(self.prefix) :].rsplit("/", 1)
                    if "/" in n[len(self.prefix) :]
                    else ("", n[len(self.prefix) :])
                )
                self.children.setdefault(d, set()).add(base)

    def read(self, rel: str) -> bytes:
        return self.zf.read(self.prefix + rel)

    def listdir(self, rel: str) -> list[str]:
        return sorted(self.children.get(rel, ()))

    def close(self):
        self.zf.close()


def _decode_images(reader, rels: list[str]) -> torch.Tensor:
    from torchvision.io import ImageReadMode, decode_image

    out = None
    for i, rel in enumerate(rels):
        img = decode_image(torch.frombuffer(bytearray(reader.read(rel)), dtype=torch.uint8), mode=ImageReadMode.RGB)
        if out is None:
            out = torch.empty((len(rels), *img.shape), dtype=torch.uint8)
        if img.shape != out.shape[1:]:
            raise ValueError(f"{rel}: image shape {tuple(img.shape)} differs from {tuple(out.shape[1:])}")
        out[i] = img
    return out if out is not None else torch.empty((0, 3, 64, 64), dtype=torch.uint8)


def _read_tiny(path: Path) -> dict:
    """Tiny ImageNet from the extracted tree or the zip. Labels: index of the wnid in sorted(wnids)
    (ImageFolder's convention). Test set = the labelled validation set (val_annotations.txt order)."""
    reader = _TreeReader(path) if path.is_dir() else _ZipReader(path)
    try:
        wnids = reader.read("wnids.txt").decode().split()
        classes = sorted(wnids)
        if len(set(classes)) != len(classes):
            raise ValueError(f"{path}: wnids.txt lists a class twice")
        index = {w: i for i, w in enumerate(classes)}
        train_rel, train_y = [], []
        for w in classes:
            files = [f for f in reader.listdir(f"train/{w}/images") if f.upper().endswith(".JPEG")]
            if not files:
                raise ValueError(f"{path}: no training images for class {w} in train/{w}/images")
            train_rel += [f"train/{w}/images/{f}" for f in files]
            train_y += [index[w]] * len(files)
        val_rel, val_y = [], []
        for line in reader.read("val/val_annotations.txt").decode().splitlines():
            if not line.strip():
                continue
            fname, w = line.split("\t")[:2]
            if w not in index:
                raise ValueError(f"{path}: val_annotations.txt names class {w} which is not in wnids.txt")
            val_rel.append(f"val/images/{fname}")
            val_y.append(index[w])
        return {
            "x_train": _decode_images(reader, train_rel),
            "y_train": torch.tensor(train_y, dtype=torch.int64),
            "x_test": _decode_images(reader, val_rel),
            "y_test": torch.tensor(val_y, dtype=torch.int64),
            "classes": classes,
        }
    finally:
        reader.close()


def load_tiny(spec, path: Path, cache_dir, kw) -> Bundle:
    kw = take_kwargs(spec.name, kw, {"dtype": "float32"})
    data = _decoded(cache_dir, "tinyimagenet", [path], lambda: _read_tiny(path))
    verified = "structure only (extracted tree)" if path.is_dir() else "md5 of the zip"
    return Bundle(
        _images_out(data["x_train"], kw["dtype"]),
        data["y_train"],
        _images_out(data["x_test"], kw["dtype"]),
        data["y_test"],
        spec.task,
        spec.n_classes,
        spec.name,
        {
            "source": str(path),
            "classes": list(data["classes"]),
            "verified": verified,
            "synthetic": False,
            "test_set": "official validation set (the test set has no labels)",
        },
    )
