"""Dataset variants: subsets, rotations, chunk assignments, federated splits, variant files."""

import math
import os
import signal
import subprocess
import sys
import time

import fakes
import numpy as np
import pytest
import torch

from reprokit.data import registry
from reprokit.data import variants as V

# ---------------------------------------------------------------------------------------------- subsets, angles


def test_subset_indices():
    a = V.subset_indices(1000, 100, 0)
    assert a.dtype == np.int64 and len(a) == 100 and len(np.unique(a)) == 100
    assert np.all(np.diff(a) > 0) and a.min() >= 0 and a.max() < 1000
    assert np.array_equal(a, V.subset_indices(1000, 100, 0))
    assert not np.array_equal(a, V.subset_indices(1000, 100, 1))
    assert set(a) <= set(V.subset_indices(1000, 500, 0))  # nested for one seed
    assert np.array_equal(V.subset_indices(10, 10, 3), np.arange(10))
    with pytest.raises(ValueError, match="1001"):
        V.subset_indices(1000, 1001, 0)


def test_rotation_angles():
    a = V.rotation_angles(5000, 7)
    assert a.dtype == np.float32 and a.shape == (5000,)
    assert a.min() >= -math.pi and a.max() <= math.pi and a.min() < -3.1 and a.max() > 3.1
    assert abs(a.mean()) < 0.1
    assert np.array_equal(a, V.rotation_angles(5000, 7)) and not np.array_equal(a, V.rotation_angles(5000, 8))


def test_rotate_quarter_turn_matches_rot90():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 2, 9, 9, generator=g)  # odd size: the centre is a pixel
    for angle, k in [(math.pi / 2, 1), (-math.pi / 2, -1), (math.pi, 2)]:
        y = V.rotate_images(x, [angle] * 3)
        ref = torch.rot90(x, k, dims=(-2, -1))
        torch.testing.assert_close(y[..., 1:-1, 1:-1], ref[..., 1:-1, 1:-1], atol=1e-5, rtol=0)
    torch.testing.assert_close(V.rotate_images(x, [0.0] * 3), x, atol=1e-6, rtol=0)
    # a different angle per image
    y = V.rotate_images(x, [0.0, math.pi / 2, math.pi])
    torch.testing.assert_close(y[1, :, 1:-1, 1:-1], torch.rot90(x[1], 1, (-2, -1))[:, 1:-1, 1:-1], atol=1e-5, rtol=0)
    torch.testing.assert_close(y[0], x[0], atol=1e-6, rtol=0)


def test_rotate_non_square_half_turn_and_generic_angle():
    x = torch.rand(2, 1, 5, 7, generator=torch.Generator().manual_seed(1))
    y = V.rotate_images(x, [math.pi, math.pi])
    torch.testing.assert_close(y[..., 1:-1, 1:-1], torch.flip(x, (-2, -1))[..., 1:-1, 1:-1], atol=1e-5, rtol=0)
    # a generic angle keeps a centred bright disc where it is, and values stay in [0, 1]
    img = torch.zeros(1, 1, 21, 21)
    yy, xx = torch.meshgrid(torch.arange(21.0), torch.arange(21.0), indexing="ij")
    img[0, 0][(yy - 10) ** 2 + (xx - 10) ** 2 <= 16] = 1.0
    r = V.rotate_images(img, [0.7])
    assert float(r[0, 0, 10, 10]) == pytest.approx(1.0) and 0 <= float(r.min()) and float(r.max()) <= 1
    assert float(r[0, 0, 0, 0]) == 0.0


def test_rotate_uint8_and_batches():
    x = torch.randint(0, 256, (5, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    assert torch.equal(V.rotate_images(x, np.zeros(5)), x)
    a = V.rotation_angles(5, 0)
    assert torch.equal(V.rotate_images(x, a, batch_size=2), V.rotate_images(x, a))
    with pytest.raises(ValueError, match="angles"):
        V.rotate_images(x, [0.0])


# ---------------------------------------------------------------------------------------------- chunks, clients


@pytest.mark.parametrize(
    "n,props,counts",
    [
        (1000, [0.8, 0.1, 0.1], [800, 100, 100]),
        (10, [1, 8], [1, 9]),
        (7, [1, 1, 1], [3, 2, 2]),
        (3001, [0.3, 0.7], [900, 2101]),
        (100, [0.1, 0.8, 0.1], [10, 80, 10]),
    ],
)
def test_chunk_counts_exact(n, props, counts):
    c = V.chunk_assignment(n, props, 0)
    assert c.dtype == np.uint8 and c.shape == (n,)
    assert np.bincount(c, minlength=len(props)).tolist() == counts


def test_chunk_assignment_is_permuted_and_reproducible():
    a = V.chunk_assignment(1000, [0.8, 0.1, 0.1], 0)
    assert not np.all(np.diff(a.astype(int)) >= 0)  # not sorted
    assert np.array_equal(a, V.chunk_assignment(1000, [8, 1, 1], 0))  # normalised
    assert not np.array_equal(a, V.chunk_assignment(1000, [0.8, 0.1, 0.1], 1))
    for bad in ([0.5, 0.0], [1, -1], [], [float("nan")]):
        with pytest.raises(ValueError, match="positive"):
            V.chunk_assignment(10, bad, 0)


def test_chunk_assignment_with_a_torch_generator_permutes_with_randperm():
    """One implementation serves data variants (numpy seed) and partition code (torch generator); with a
    generator the permutation is torch.randperm's, as reprokit.partition's own copy drew it before."""
    from reprokit import partition

    assert partition.chunk_assignment is V.chunk_assignment
    got = V.chunk_assignment(1001, [0.6, 0.3, 0.1], torch.Generator().manual_seed(3))
    sorted_ids = np.repeat(np.arange(3, dtype=np.uint8), [601, 300, 100])
    assert got.dtype == np.uint8
    assert np.array_equal(got, sorted_ids[torch.randperm(1001, generator=torch.Generator().manual_seed(3)).numpy()])


def test_dirichlet_assigns_every_example_once_with_skew():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 200)[rng.permutation(2000)]
    for alpha, lo, hi in [(0.01, 0.7, 1.0), (1000.0, 0.0, 0.3)]:
        c = V.dirichlet_client_split(labels, 100, alpha, 0)
        assert c.dtype == np.int32 and c.shape == (2000,)
        assert np.bincount(c, minlength=100).tolist() == [20] * 100  # equal client sizes, all assigned
        # mean share of a client's most frequent label: ~0.1 + sampling noise if iid, 1 if one label each
        dominant = np.mean([np.bincount(labels[c == k], minlength=10).max() / 20 for k in range(100)])
        assert lo <= dominant <= hi, (alpha, dominant)
    assert np.array_equal(V.dirichlet_client_split(labels, 20, 0.1, 5), V.dirichlet_client_split(labels, 20, 0.1, 5))
    uneven = V.dirichlet_client_split(labels[:1003], 10, 0.5, 1)
    assert sorted(np.bincount(uneven).tolist()) == [100] * 7 + [101] * 3
    with pytest.raises(ValueError, match="alpha"):
        V.dirichlet_client_split(labels, 20, 0.0, 0)


def test_rotation_bins():
    a = np.array([-math.pi, -math.pi + 1e-6, -1e-6, 0.0, math.pi - 1e-6, math.pi], dtype=np.float32)
    assert V.rotation_bins(a, 10).tolist() == [0, 0, 4, 5, 9, 9]
    b = V.rotation_bins(V.rotation_angles(10000, 0))
    assert b.min() == 0 and b.max() == 9 and np.all(np.abs(np.bincount(b) - 1000) < 150)


# ---------------------------------------------------------------------------------------------- file names


def test_variant_filenames_round_trip():
    cases = [
        ("subset~n1000~seed0.npz", "subset", dict(n=1000, seed=0)),
        ("chunks~n1000~p0.8-0.1-0.1~seed0.npz", "chunks", dict(n=1000, proportions=[0.8, 0.1, 0.1], seed=0)),
        ("chunks~n60000~p1-8~seed2.npz", "chunks", dict(n=60000, proportions=[1, 8], seed=2)),
        ("rotated~seed0.pt", "rotated", dict(seed=0)),
        (
            "federated~n1250~clients100~alpha0.1~bylabel~val10000~seed0.npz",
            "federated",
            dict(n=1250, n_clients=100, alpha=0.1, by="label", val=10000, seed=0),
        ),
        (
            "federated~n5000~clients100~alpha1~byrotation~val0~seed3.npz",
            "federated",
            dict(n=5000, n_clients=100, alpha=1.0, by="rotation", seed=3),
        ),
    ]
    for name, kind, params in cases:
        assert V.variant_filename(kind, **params) == name
        k, p = V.parse_variant_filename(name)
        assert k == kind and V.variant_filename(k, **p) == name
        assert "/" not in name and all(ch.isalnum() or ch in "._~-" for ch in name)
    assert V.parse_variant_filename("some/dir/subset~n10~seed1.npz") == ("subset", {"n": 10, "seed": 1})
    assert V.variant_filename("chunks", n=10, proportions=[1e-5, 1], seed=0) == "chunks~n10~p0.00001-1~seed0.npz"


@pytest.mark.parametrize(
    "bad",
    [
        "subset~n010~seed0.npz",
        "subset~n10~seed0.pt",
        "chunks~n10~p1.0-8~seed0.npz",
        "subset~seed0~n10.npz",
        "rotated~seed0~x1.pt",
        "chunks~n10~p0-1~seed0.npz",
        "flipped~seed0.pt",
        "federated~n1~clients1~alpha1~bycolour~val0~seed0.npz",
    ],
)
def test_non_canonical_names_rejected(bad):
    with pytest.raises(ValueError):
        V.parse_variant_filename(bad)


def test_variant_filename_checks_params():
    with pytest.raises(ValueError, match="seed"):
        V.variant_filename("subset", n=10)
    with pytest.raises(ValueError, match="proportions"):
        V.variant_filename("chunks", n=10, proportions=[0.5, -0.5], seed=0)
    with pytest.raises(ValueError, match="by"):
        V.variant_filename("federated", n=10, n_clients=2, alpha=1, by="colour", seed=0)


# ---------------------------------------------------------------------------------------------- building


@pytest.fixture
def cifar(tmp_path):
    root = tmp_path / "mirror"
    sums = fakes.make_fake_cifar10(root, n_per_batch=8, n_test=6)  # 40 train, 6 test
    return root, sums


def test_rotated_variant_reproducible_and_byte_identical(cifar, tmp_path):
    root, sums = cifar
    out1, out2 = tmp_path / "v1" / "rotated~seed3.pt", tmp_path / "v2" / "rotated~seed3.pt"
    V.build_variant("cifar10", out1.name, out1, [root], checksums=sums)
    V.build_variant("cifar10", out2.name, out2, [root], checksums=sums)
    assert out1.read_bytes() == out2.read_bytes()
    v = V.load_variant(out1)
    assert v["kind"] == "rotated" and v["dataset"] == "cifar10" and v["params"] == {"seed": 3}
    b = registry.load("cifar10", [root], checksums=sums, dtype="uint8")
    angles = V.rotation_angles(46, 3)
    assert np.array_equal(v["angles_train"].numpy(), angles[:40]) and np.array_equal(
        v["angles_test"].numpy(), angles[40:]
    )
    assert v["x_train"].dtype == torch.uint8 and v["x_train"].shape == (40, 3, 32, 32)
    assert torch.equal(v["x_test"], V.rotate_images(b.x_test, angles[40:]))
    other = tmp_path / "rotated~seed4.pt"
    V.build_variant("cifar10", other.name, other, [root], checksums=sums)
    assert not torch.equal(V.load_variant(other)["x_train"], v["x_train"])

    r = V.apply_variants(registry.load("cifar10", [root], checksums=sums), rotated=v)
    assert r.x_train.dtype == torch.float32 and torch.equal(r.x_train, v["x_train"].float() / 255)
    assert torch.equal(r.meta["angles_test"], v["angles_test"])


def test_subset_and_chunk_variants(cifar, tmp_path):
    root, sums = cifar
    sub = tmp_path / "subset~n10~seed1.npz"
    chk = tmp_path / "chunks~n10~p0.8-0.1-0.1~seed1.npz"
    V.build_variant("cifar10", sub.name, sub, [root], checksums=sums)
    V.build_variant("cifar10", chk.name, chk, [root], checksums=sums)
    s, c = V.load_variant(sub), V.load_variant(chk)
    assert np.array_equal(s["indices"], V.subset_indices(40, 10, 1)) and s["n_total"] == 40
    assert np.array_equal(c["indices"], s["indices"])  # same subset as subset~n10~seed1
    assert c["chunks"].dtype == np.uint8 and np.bincount(c["chunks"]).tolist() == [8, 1, 1]
    assert c["params"] == {"n": 10, "proportions": [0.8, 0.1, 0.1], "seed": 1}
    again = tmp_path / "again" / chk.name
    V.build_variant("cifar10", chk.name, again, [root], checksums=sums)
    assert again.read_bytes() == chk.read_bytes()

    b = registry.load("cifar10", [root], checksums=sums)
    a = V.apply_variants(b, subset=c)
    idx = torch.from_numpy(s["indices"])
    assert torch.equal(a.x_train, b.x_train[idx]) and torch.equal(a.y_train, b.y_train[idx])
    assert torch.equal(a.x_test, b.x_test) and a.meta["chunks"].tolist() == c["chunks"].tolist()
    assert b.n_train == 40  # the original is untouched
    with pytest.raises(ValueError, match="built for 'cifar10'"):
        V.apply_variants(registry.load("two_moons"), subset=s)
    with pytest.raises(ValueError, match="drawn from 40"):
        V.apply_variants(registry.load("two_moons"), subset={**s, "dataset": "two_moons"})


def test_chunk_variant_for_a_synthetic_set(tmp_path):
    name = V.variant_filename("chunks", n=3000, proportions=[1] * 8, seed=0)
    V.build_variant("input_selection", name, tmp_path / name, [])
    v = V.load_variant(tmp_path / name)
    assert np.array_equal(v["indices"], np.arange(3000)) and np.bincount(v["chunks"]).tolist() == [375] * 8
    assert v["dataset"] == "input_selection"


def test_federated_variants(cifar, tmp_path):
    root, sums = cifar
    name = V.variant_filename("federated", n=20, n_clients=4, alpha=0.1, by="label", val=10, seed=0)
    V.build_variant("cifar10", name, tmp_path / name, [root], checksums=sums)
    v = V.load_variant(tmp_path / name)
    idx, val = v["indices"], v["val_indices"]
    assert len(idx) == 20 and len(val) == 10 and len(np.intersect1d(idx, val)) == 0
    assert v["client"].dtype == np.int32 and np.bincount(v["client"]).tolist() == [5, 5, 5, 5]
    b = registry.load("cifar10", [root], checksums=sums)
    assert np.array_equal(v["keys"], b.y_train.numpy()[idx])
    a = V.apply_variants(b, subset=v)
    assert (
        a.n_train == 20 and a.x_val.shape == (10, 3, 32, 32) and torch.equal(a.y_val, b.y_train[torch.from_numpy(val)])
    )
    assert torch.equal(a.meta["client"], torch.from_numpy(v["client"]))

    rot = V.variant_filename("federated", n=30, n_clients=3, alpha=0.1, by="rotation", seed=2)
    V.build_variant("cifar10", rot, tmp_path / rot, [root], checksums=sums)
    r = V.load_variant(tmp_path / rot)
    assert np.array_equal(r["indices"], V.subset_indices(40, 30, 2)) and len(r["val_indices"]) == 0
    angles = V.rotation_angles(46, 2)[:40]  # = angles_train of rotated~seed2
    assert np.array_equal(r["keys"], V.rotation_bins(angles[r["indices"]]))
    with pytest.raises(ValueError, match="exceeds"):
        big = V.variant_filename("federated", n=35, n_clients=3, alpha=1, by="label", val=10, seed=0)
        V.build_variant("cifar10", big, tmp_path / big, [root], checksums=sums)


def test_build_rejects_wrong_extension_and_kind(tmp_path):
    with pytest.raises(ValueError, match="npz"):
        V.build_variant("input_selection", "subset~n10~seed0.npz", tmp_path / "x.pt", [])
    with pytest.raises(ValueError, match="image"):
        V.build_variant("sinc", "rotated~seed0.pt", tmp_path / "rotated~seed0.pt", [])


# ---------------------------------------------------------------------------------------------- interruptions


@pytest.mark.parametrize("name", ["subset~n10~seed0.npz", "rotated~seed0.pt"])
def test_failed_write_leaves_no_partial_file(cifar, tmp_path, monkeypatch, name):
    root, sums = cifar
    out_dir = tmp_path / "variants"
    out_dir.mkdir()
    (out_dir / name).write_bytes(b"old")  # a previous version survives a failed rebuild

    def fail(fd):
        raise OSError("disk full (simulated)")

    import reprokit.atomic

    monkeypatch.setattr(reprokit.atomic.os, "fsync", fail)
    with pytest.raises(OSError, match="simulated"):
        V.build_variant("cifar10", name, out_dir / name, [root], checksums=sums)
    assert sorted(os.listdir(out_dir)) == [name] and (out_dir / name).read_bytes() == b"old"


def test_killed_build_leaves_no_file(tmp_path):
    """SIGKILL in the middle of writing: the target name never appears."""
    out = tmp_path / "variants" / "chunks~n3000~p0.8-0.1-0.1~seed0.npz"
    flag = tmp_path / "writing"
    code = f"""
import os, time, reprokit.atomic
from reprokit.data import variants
def slow_fsync(fd):
    open({str(flag)!r}, "w").close()
    time.sleep(60)
reprokit.atomic.os.fsync = slow_fsync
variants.build_variant("input_selection", {out.name!r}, {str(out)!r}, [])
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while not flag.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.time() < deadline, "builder never reached the write"
            time.sleep(0.05)
        assert any(p.name.endswith(".tmp") for p in out.parent.iterdir())  # data is being written ...
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not out.exists()  # ... but never under the final name
