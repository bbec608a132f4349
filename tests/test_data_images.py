"""CIFAR-10 and Tiny ImageNet loaders, on small files written in the published formats (tmp_path)."""

import pickle

import fakes
import numpy as np
import pytest
import torch

from reprokit.data import images, registry
from reprokit.data.registry import ChecksumMismatch


def _expected_cifar(root):
    data, labels = {}, {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(root / "cifar-10-batches-py" / name, "rb") as f:
            d = pickle.load(f, encoding="latin1")
        data[name], labels[name] = d["data"], d["labels"]
    x_train = np.concatenate([data[f"data_batch_{i}"] for i in range(1, 6)]).reshape(-1, 3, 32, 32)
    y_train = sum((labels[f"data_batch_{i}"] for i in range(1, 6)), [])
    return x_train, y_train, data["test_batch"].reshape(-1, 3, 32, 32), labels["test_batch"]


def test_cifar_folder_layout(tmp_path):
    sums = fakes.make_fake_cifar10(tmp_path, n_per_batch=3, n_test=4)
    b = registry.load("cifar10", [tmp_path], checksums=sums)
    x_train, y_train, x_test, y_test = _expected_cifar(tmp_path)
    assert b.x_train.shape == (15, 3, 32, 32) and b.x_test.shape == (4, 3, 32, 32)
    assert b.x_train.dtype == torch.float32 and b.y_train.dtype == torch.int64
    assert torch.equal((b.x_train * 255).round().to(torch.uint8), torch.from_numpy(x_train))
    assert b.y_train.tolist() == y_train and b.y_test.tolist() == y_test
    assert torch.equal(
        registry.load("cifar10", [tmp_path], checksums=sums, dtype="uint8").x_test, torch.from_numpy(x_test)
    )
    assert b.meta["classes"][:2] == ["airplane", "automobile"] and b.n_classes == 10


def test_cifar_archive_matches_folder(tmp_path):
    s_dir = fakes.make_fake_cifar10(tmp_path / "dir", seed=3)
    s_tgz = fakes.make_fake_cifar10(tmp_path / "tgz", seed=3, archive=True)
    assert not (tmp_path / "tgz" / "cifar-10-batches-py").exists()
    assert (
        registry.locate("cifar10", [tmp_path / "tgz"], checksums=s_tgz) == tmp_path / "tgz" / "cifar-10-python.tar.gz"
    )
    a = registry.load("cifar10", [tmp_path / "dir"], checksums=s_dir)
    b = registry.load("cifar10", [tmp_path / "tgz"], checksums=s_tgz)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)


def test_cifar_official_checksums_are_enforced(tmp_path):
    fakes.make_fake_cifar10(tmp_path)
    with pytest.raises(ChecksumMismatch) as e:  # no override: torchvision's official md5s apply
        registry.load("cifar10", [tmp_path])
    assert "data_batch_1" in str(e.value) and "c99cafc152244af753f735de768cd75f" in str(e.value)
    with pytest.raises(ValueError, match="does not use"):
        registry.load("cifar10", [tmp_path], checksums={"cifar-10-batches-py/data_batch_9": "0" * 32})
    with pytest.raises(ValueError, match="md5|sha256"):
        registry.load("cifar10", [tmp_path], checksums={"cifar-10-batches-py/data_batch_1": "xyz"})


def test_tinyimagenet_tree(tmp_path):
    info = fakes.make_fake_tinyimagenet(tmp_path, n_classes=3, n_train_per_class=2, n_val=5)
    b = registry.load("tinyimagenet", [tmp_path])
    assert b.x_train.shape == (6, 3, 64, 64) and b.x_test.shape == (5, 3, 64, 64)
    # labels = index in sorted wnids, although wnids.txt lists them in reverse
    assert b.y_train.tolist() == [0, 0, 1, 1, 2, 2]
    assert b.y_test.tolist() == info["_val_labels"]
    assert b.meta["classes"] == sorted(b.meta["classes"]) and b.n_classes == 200
    # every image is the constant grey of its class (JPEG of a flat image is exact up to +-1)
    for x, y in [(b.x_train, b.y_train), (b.x_test, b.y_test)]:
        grey = torch.tensor([fakes.class_value(int(k)) for k in y], dtype=torch.float32)
        torch.testing.assert_close(x.mean((1, 2, 3)) * 255, grey, atol=1.5, rtol=0)
    # the first training image is a grayscale JPEG: decoded to 3 equal channels
    assert torch.equal(b.x_train[0, 0], b.x_train[0, 1]) and torch.equal(b.x_train[0, 1], b.x_train[0, 2])
    assert "structure" in b.meta["verified"]


def test_tinyimagenet_zip_and_decoded_cache(tmp_path, monkeypatch):
    info = fakes.make_fake_tinyimagenet(tmp_path / "m", n_classes=4, n_train_per_class=3, n_val=6, archive=True)
    fakes.make_fake_tinyimagenet(tmp_path / "t", n_classes=4, n_train_per_class=3, n_val=6)
    sums = fakes.checksums_of(info)
    with pytest.raises(ChecksumMismatch, match="90528d7ca1a48142e341f4ef8d21d0de"):
        registry.load("tinyimagenet", [tmp_path / "m"])
    cache = tmp_path / "cache"
    z = registry.load("tinyimagenet", [tmp_path / "m"], cache_dir=cache, checksums=sums, dtype="uint8")
    t = registry.load("tinyimagenet", [tmp_path / "t"], dtype="uint8")
    assert z.x_train.shape == (12, 3, 64, 64) and z.x_train.dtype == torch.uint8
    assert torch.equal(z.x_train, t.x_train) and torch.equal(z.y_test, t.y_test)
    assert z.y_test.tolist() == info["_val_labels"]
    assert len(list(cache.glob("tinyimagenet-decoded-*.pt"))) == 1

    def boom(path):
        raise AssertionError("decoded again although a decoded copy is cached")

    monkeypatch.setattr(images, "_read_tiny", boom)
    again = registry.load("tinyimagenet", [tmp_path / "m"], cache_dir=cache, checksums=sums)
    assert torch.equal((again.x_train * 255).round().to(torch.uint8), z.x_train)


def test_tinyimagenet_missing_training_class(tmp_path):
    fakes.make_fake_tinyimagenet(tmp_path, n_classes=2)
    root = tmp_path / "tiny-imagenet-200"
    wnid = sorted((root / "wnids.txt").read_text().split())[1]
    for f in (root / "train" / wnid / "images").iterdir():
        f.unlink()
    with pytest.raises(ValueError, match=wnid):
        registry.load("tinyimagenet", [tmp_path])
