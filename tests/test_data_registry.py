"""Dataset registry: real MNIST / Fashion-MNIST / UCI from the offline mirror, checksums, errors, downloads."""

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import fakes
import numpy as np
import pytest
import torch

from reprokit.data import checksums, registry, specs
from reprokit.data.registry import ChecksumMismatch, DatasetUnavailable

MNIST_FILES = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]


def _md5(path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------- names


def test_dataset_names_complete():
    names = registry.dataset_names()
    expected = [
        "mnist",
        "fashion_mnist",
        "cifar10",
        "tinyimagenet",
        "uci_yacht",
        "uci_concrete",
        "uci_energy",
        "uci_redwine",
        "uci_kin8nm",
        "uci_powerplant",
        "uci_protein",
        "spambase",
        "magic",
        "cdc_diabetes",
        "input_selection",
        "sines_trend",
        "sinc",
        "two_moons",
    ]
    assert sorted(names) == sorted(expected)
    assert registry.dataset_info("uci_redwine").folder == "wine-quality-red"
    assert registry.dataset_info("uci_protein").n_splits == 5


@pytest.mark.parametrize("call", [registry.load, registry.locate, registry.is_available])
def test_unknown_dataset_lists_valid_names(call):
    with pytest.raises(ValueError) as e:
        call("mnsit", [])
    msg = str(e.value)
    assert "mnsit" in msg and "mnist" in msg and "uci_redwine" in msg and "two_moons" in msg


def test_package_never_imports_snakemake():
    import ast

    for py in Path(registry.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert not any(m.split(".")[0] == "snakemake" for m in mods), f"{py.name} imports snakemake"


def test_checksum_table_agrees_with_torchvision_md5s():
    from torchvision.datasets import MNIST, FashionMNIST

    table = checksums.checksum_table()
    for folder, cls in [("MNIST", MNIST), ("FashionMNIST", FashionMNIST)]:
        for fname, md5 in cls.resources:
            assert table[f"{folder}/raw/{fname}"][2] == md5
    # every UCI file a loader reads has a sha256 in the shipped table
    for _key, (folder, n_splits) in registry.UCI_REGRESSION.items():
        for i in range(n_splits):
            assert f"UCI/{folder}/index_train_{i}.txt" in table
        assert f"UCI/{folder}/index_train_{n_splits}.txt" not in table


def test_shipped_torchvision_resources_match_installed_torchvision():
    """The copy the registry reads (no torchvision import on availability checks) is what torchvision
    publishes; regenerate with `python -m reprokit.data.make_checksums --torchvision` when this fails."""
    from reprokit.data.make_checksums import torchvision_resources

    assert specs._torchvision_resources() == torchvision_resources()


def test_availability_check_does_not_import_torchvision(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from reprokit.data import registry; "
        "[registry.is_available(n, []) for n in ('mnist', 'cifar10', 'tinyimagenet', 'uci_yacht')]; "
        "print('torchvision' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------- real images


def test_mnist_loads_and_verifies(shared_data, tmp_path):
    b = registry.load("mnist", [shared_data], cache_dir=tmp_path)
    assert b.x_train.shape == (60000, 1, 28, 28) and b.x_test.shape == (10000, 1, 28, 28)
    assert b.x_train.dtype == torch.float32 and float(b.x_train.min()) == 0.0 and float(b.x_train.max()) == 1.0
    assert b.y_train.dtype == torch.int64 and b.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert b.y_test[:5].tolist() == [7, 2, 1, 0, 4]
    assert b.y_train.bincount().tolist()[:2] == [5923, 6742]
    assert b.task == "classification" and b.n_classes == 10 and b.name == "mnist"
    # the four files were hashed once and recorded
    verified = (tmp_path / "verified-checksums.json").read_text()
    assert all(f in verified for f in MNIST_FILES)


def test_mnist_is_decoded_once_per_cache(shared_data, tmp_path, monkeypatch):
    from reprokit.data import images

    first = registry.load("mnist", [shared_data], cache_dir=tmp_path, dtype="uint8")
    assert len(list(tmp_path.glob("mnist-idx-decoded-*.pt"))) == 1

    def boom(path):
        raise AssertionError("IDX files decoded again although a decoded copy is cached")

    monkeypatch.setattr(images, "_read_idx", boom)
    again = registry.load("mnist", [shared_data], cache_dir=tmp_path, dtype="uint8")
    assert torch.equal(again.x_train, first.x_train) and torch.equal(again.y_test, first.y_test)
    with pytest.raises(AssertionError, match="decoded again"):  # a new cache folder decodes
        registry.load("mnist", [shared_data], cache_dir=tmp_path / "other")


def test_uint8_images(shared_data):
    b = registry.load("mnist", [shared_data], dtype="uint8")
    f = registry.load("mnist", [shared_data])
    assert b.x_train.dtype == torch.uint8
    assert torch.equal(b.x_test.float() / 255, f.x_test)


def test_fashion_mnist_balanced(shared_data):
    b = registry.load("fashion_mnist", [shared_data])
    assert b.x_train.shape == (60000, 1, 28, 28)
    assert b.y_train.bincount().tolist() == [6000] * 10
    assert b.y_test.bincount().tolist() == [1000] * 10


def test_verified_cache_skips_hashing(shared_data, tmp_path, monkeypatch):
    registry.locate("mnist", [shared_data], cache_dir=tmp_path)

    def boom(*a, **k):
        raise AssertionError("hashed again although the file is recorded as verified")

    monkeypatch.setattr(checksums, "file_hash", boom)
    assert registry.locate("mnist", [shared_data], cache_dir=tmp_path) == Path(shared_data) / "MNIST" / "raw"
    with pytest.raises(AssertionError, match="hashed again"):  # without a cache every call hashes
        registry.locate("mnist", [shared_data])


def test_verified_cache_notices_a_changed_file(shared_data, tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(Path(shared_data) / "UCI" / "yacht", mirror / "UCI" / "yacht")
    registry.locate("uci_yacht", [mirror], cache_dir=tmp_path / "cache")
    data = mirror / "UCI" / "yacht" / "data.txt"
    data.write_bytes(data.read_bytes().replace(b"0.568", b"0.569", 1))  # same size, new content
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 1_000_000))
    with pytest.raises(ChecksumMismatch):
        registry.locate("uci_yacht", [mirror], cache_dir=tmp_path / "cache")


def _mirror_with_corrupt_mnist(shared_data, tmp_path, truncate=False):
    raw = tmp_path / "mirror" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in MNIST_FILES[:3]:
        (raw / f).symlink_to(Path(shared_data) / "MNIST" / "raw" / f)
    data = bytearray((Path(shared_data) / "MNIST" / "raw" / MNIST_FILES[3]).read_bytes())
    if truncate:
        data = data[:-10]
    else:
        data[100] ^= 0xFF
    (raw / MNIST_FILES[3]).write_bytes(bytes(data))
    return tmp_path / "mirror", raw / MNIST_FILES[3]


def test_corrupted_copy_names_file_and_both_checksums(shared_data, tmp_path):
    mirror, bad = _mirror_with_corrupt_mnist(shared_data, tmp_path)
    assert registry.is_available("mnist", [mirror])  # same size: the cheap check cannot tell
    with pytest.raises(ChecksumMismatch) as e:
        registry.load("mnist", [mirror])
    msg = str(e.value)
    assert str(bad) in msg
    assert "ec29112dd5afa0611ce80d1b7f02629c" in msg  # official md5
    assert _md5(bad) in msg  # actual md5
    assert e.value.expected == "ec29112dd5afa0611ce80d1b7f02629c" and e.value.actual == _md5(bad)


def test_truncated_copy_is_not_available(shared_data, tmp_path):
    mirror, _ = _mirror_with_corrupt_mnist(shared_data, tmp_path, truncate=True)
    assert not registry.is_available("mnist", [mirror])
    assert registry.is_available("mnist", [mirror, shared_data])


def test_missing_dataset_names_every_folder_and_the_url(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    assert not registry.is_available("mnist", [a, b])
    with pytest.raises(DatasetUnavailable) as e:
        registry.locate("mnist", [a, b], cache_dir=tmp_path / "cache")
    msg = str(e.value)
    for folder in (a, b, tmp_path / "cache"):
        assert str(folder / "MNIST" / "raw") in msg
    assert "mnist" in msg and "https://ossci-datasets.s3.amazonaws.com/mnist/" in msg
    with pytest.raises(DatasetUnavailable) as e:
        registry.load("cifar10", [a])
    msg = str(e.value)
    assert str(a / "cifar-10-batches-py") in msg and str(a / "cifar-10-python.tar.gz") in msg
    assert "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" in msg
    with pytest.raises(DatasetUnavailable, match="cache_dir"):
        registry.locate("tinyimagenet", [a], download=True)
    with pytest.raises(DatasetUnavailable, match=r"tiny-imagenet-200\.zip"):
        registry.locate("tinyimagenet", [a])


def test_synthetic_sets_are_always_available():
    for name in ("input_selection", "sines_trend", "sinc", "two_moons"):
        assert registry.is_available(name, [])
    with pytest.raises(ValueError, match="synthetic"):
        registry.locate("sinc", [])


# ---------------------------------------------------------------------------------------------- UCI


def test_uci_yacht_split_matches_index_files(shared_data):
    b = registry.load("uci_yacht", [shared_data], split=0)
    folder = Path(shared_data) / "UCI" / "yacht"
    data = np.loadtxt(folder / "data.txt")
    itr = np.loadtxt(folder / "index_train_0.txt").astype(int)
    ite = np.loadtxt(folder / "index_test_0.txt").astype(int)
    assert b.x_train.shape == (277, 6) and b.y_train.shape == (277, 1)
    assert b.x_test.shape == (31, 6) and b.y_test.shape == (31, 1)
    assert b.task == "regression" and b.n_classes is None and b.y_train.dtype == torch.float32
    np.testing.assert_allclose(b.x_train.numpy(), data[itr, :6], rtol=1e-6)
    np.testing.assert_allclose(b.y_test.numpy()[:, 0], data[ite, 6], rtol=1e-6)
    assert b.meta["split"] == 0 and not b.meta["standardized"]
    b7 = registry.load("uci_yacht", [shared_data], split=7)
    assert not torch.equal(b7.y_test, b.y_test)


@pytest.mark.parametrize(
    "name,n_train,n_test,d",
    [
        ("uci_energy", 691, 77, 8),
        ("uci_redwine", 1439, 160, 11),
        ("uci_powerplant", 8611, 957, 4),
        ("uci_concrete", 927, 103, 8),
    ],
)
def test_uci_sizes(shared_data, name, n_train, n_test, d):
    b = registry.load(name, [shared_data], split=19)
    assert b.x_train.shape == (n_train, d) and b.x_test.shape == (n_test, d)


def test_uci_split_range_is_checked(shared_data):
    with pytest.raises(ValueError, match=r"0\.\.19"):
        registry.load("uci_yacht", [shared_data], split=20)
    with pytest.raises(ValueError, match=r"0\.\.4"):
        registry.load("uci_protein", [shared_data], split=5)
    with pytest.raises(TypeError, match="split"):
        registry.load("uci_yacht", [shared_data], splt=1)


def test_standardize_uses_train_statistics(shared_data):
    b = registry.load("uci_concrete", [shared_data], split=3)
    z, stats = registry.standardize(b)
    torch.testing.assert_close(z.x_train.mean(0), torch.zeros(8), atol=1e-4, rtol=0)
    torch.testing.assert_close(z.x_train.std(0, unbiased=False), torch.ones(8), atol=1e-4, rtol=0)
    torch.testing.assert_close(z.y_train.mean(), torch.tensor(0.0), atol=1e-4, rtol=0)
    assert abs(float(z.x_test.mean())) > 1e-4  # test set uses the *train* statistics
    torch.testing.assert_close(z.y_test * stats["y_std"] + stats["y_mean"], b.y_test, atol=1e-3, rtol=1e-5)
    assert float(stats["y_std"]) == pytest.approx(float(b.y_train.std(unbiased=False)), rel=1e-5)
    assert z.meta["standardized"] and not b.meta["standardized"]
    with pytest.raises(ValueError, match="already"):
        registry.standardize(z)


def test_standardize_classification_keeps_labels():
    b = registry.load("two_moons", seed=1)
    z, stats = registry.standardize(b)
    assert torch.equal(z.y_train, b.y_train) and stats["y_mean"] is None
    with pytest.raises(ValueError, match="tabular"):
        registry.standardize(dataclasses.replace(b, x_train=torch.zeros(4, 1, 2, 2)))


def test_spambase_random_split(shared_data):
    b = registry.load("spambase", [shared_data], split=0)
    assert b.x_train.shape == (3681, 57) and b.x_test.shape == (920, 57)
    assert int(b.y_train.sum() + b.y_test.sum()) == 1813
    itr, ite = b.meta["train_index"], b.meta["test_index"]
    assert len(np.intersect1d(itr, ite)) == 0 and len(np.union1d(itr, ite)) == 4601
    again = registry.load("spambase", [shared_data], split=0)
    other = registry.load("spambase", [shared_data], split=1)
    assert torch.equal(again.x_test, b.x_test) and not torch.equal(other.x_test, b.x_test)


def test_magic_and_cdc_labels(shared_data):
    m = registry.load("magic", [shared_data], split=2)
    assert m.x_train.shape[1] == 10 and m.n_train + m.n_test == 19020
    assert int(m.y_train.sum() + m.y_test.sum()) == 6688  # h = 1
    c = registry.load("cdc_diabetes", [shared_data], split=0)
    assert c.x_train.shape[1] == 21 and c.n_train + c.n_test == 253680
    assert int(c.y_train.sum() + c.y_test.sum()) == 35346


# ---------------------------------------------------------------------------------------------- downloads


def test_download_verifies_and_extracts(http_dir, tmp_path, monkeypatch):
    served, base = http_dir
    sums = fakes.make_fake_cifar10(served, archive=True)
    fakes.point_spec(monkeypatch, "cifar10", urls=(f"{base}/cifar-10-python.tar.gz",))
    cache = tmp_path / "cache"
    with pytest.raises(DatasetUnavailable):
        registry.locate("cifar10", [tmp_path / "empty"], cache_dir=cache, checksums=sums)
    path = registry.locate("cifar10", [tmp_path / "empty"], cache_dir=cache, download=True, checksums=sums)
    assert path == cache / "cifar-10-batches-py"
    assert sorted(os.listdir(cache)) == ["cifar-10-batches-py", "cifar-10-python.tar.gz", "verified-checksums.json"]
    b = registry.load("cifar10", [tmp_path / "empty"], cache_dir=cache, checksums=sums)
    assert b.x_train.shape == (20, 3, 32, 32)


def test_download_with_wrong_checksum_leaves_nothing(http_dir, tmp_path, monkeypatch):
    served, base = http_dir
    fakes.make_fake_cifar10(served, archive=True)
    fakes.point_spec(monkeypatch, "cifar10", urls=(f"{base}/cifar-10-python.tar.gz",))
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumMismatch) as e:  # the fake cannot match the official md5
        registry.locate("cifar10", [], cache_dir=cache, download=True)
    assert "c58f30108f718f92721af3b95e74349a" in str(e.value)
    assert "cifar-10-python.tar.gz" in str(e.value)
    assert e.value.actual == _md5(served / "cifar-10-python.tar.gz")
    assert [p for p in cache.iterdir() if p.name != "verified-checksums.json"] == []


def test_download_failure_names_url(http_dir, tmp_path, monkeypatch):
    _served, base = http_dir
    fakes.point_spec(monkeypatch, "cifar10", urls=(f"{base}/missing.tar.gz",))
    with pytest.raises(DatasetUnavailable) as e:
        registry.locate("cifar10", [], cache_dir=tmp_path / "cache", download=True)
    assert f"{base}/missing.tar.gz" in str(e.value) and "404" in str(e.value)
    assert list((tmp_path / "cache").iterdir()) == []


def test_download_uci_file_by_file(shared_data, http_dir, tmp_path, monkeypatch):
    served, base = http_dir
    shutil.copytree(Path(shared_data) / "UCI" / "yacht", served / "yacht")
    fakes.point_spec(monkeypatch, "uci_yacht", urls=(f"{base}/yacht/data.txt",))
    b = registry.load("uci_yacht", [], cache_dir=tmp_path / "cache", download=True, split=0)
    assert b.n_train == 277
    assert (tmp_path / "cache" / "UCI" / "yacht" / "index_test_19.txt").is_file()
