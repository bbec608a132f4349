"""Dataset variants: subsets, fixed rotations, chunk assignments and federated client splits.

A variant is a small file built once by a pipeline rule and shared by every cell that uses it. Its
file name says everything needed to rebuild it (:func:`variant_filename`), and rebuilding from the
same name gives a byte-identical file:

    subset~n1000~seed0.npz                       indices of a random subset of the training set
    chunks~n1000~p0.8-0.1-0.1~seed0.npz          that subset (same n, seed) + a chunk id per example
    rotated~seed0.pt                             full train and test images, each rotated once, uint8
    federated~n5000~clients100~alpha0.1~bylabel~val10000~seed0.npz
                                                 validation hold-out + subset + a client id per example

Random streams (numpy ``default_rng``), so that one seed never drives two things in lockstep:
  subset indices: ``seed``;  chunk ids: ``[seed, 1]``;  federated validation hold-out: ``[seed, 2]``;
  federated client split: ``[seed, 3]``;  rotation angles: ``seed`` (one vector for train then test).
Consequences: ``chunks~n~p~seed s`` uses exactly the indices of ``subset~n~seed s``; a federated
split with ``val0`` uses the indices of ``subset~n~seed s``; ``federated~...~byrotation~...~seed s``
bins the angles of ``rotated~seed s`` (pair them).

Synthetic datasets are generated at the requested size, so for them a subset of size n is the whole
generated set (indices = 0..n-1).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_save_torch, atomic_write_bytes
from . import registry
from .bundle import Bundle
from .variant_names import KINDS, parse_variant_filename, variant_filename, variant_path  # noqa: F401 - re-exported

__all__ = [
    "KINDS",
    "apply_variants",
    "build_variant",
    "chunk_assignment",
    "chunk_counts",
    "dirichlet_client_split",
    "load_variant",
    "parse_variant_filename",
    "rotate_images",
    "rotation_angles",
    "rotation_bins",
    "subset_indices",
    "variant_filename",
]

ROTATION_BINS = 10  # federated "by rotation": angles binned into 10 equal bins (paper App. J.2)


# ----------------------------------------------------------------------------------------------
# the primitives


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, (bool, float)) or (isinstance(seed, (int, np.integer)) and seed < 0):
        raise ValueError(f"seed must be a non-negative integer (or a sequence of them), got {seed!r}")
    return np.random.default_rng(seed)


def subset_indices(n_total: int, n: int, seed) -> np.ndarray:
    """``n`` distinct indices out of ``range(n_total)``, sorted ascending (int64).

    They are the first ``n`` entries of ``default_rng(seed).permutation(n_total)``, so subsets with
    the same seed are nested (the 1k subset lies inside the 5k one).
    """
    n_total, n = int(n_total), int(n)
    if n < 0 or n > n_total:
        raise ValueError(f"subset of size {n} requested from {n_total} examples (need 0 <= n <= {n_total})")
    return np.sort(_rng(seed).permutation(n_total)[:n]).astype(np.int64)


def rotation_angles(n: int, seed) -> np.ndarray:
    """``n`` angles (radians, float32) uniform on [-pi, pi)."""
    return _rng(seed).uniform(-math.pi, math.pi, int(n)).astype(np.float32)


def rotate_images(x: torch.Tensor, angles, batch_size: int = 2048) -> torch.Tensor:
    """Rotate each image of ``x`` (N, C, H, W) by its angle about the image centre.

    Positive angles turn the image counter-clockwise as displayed (row 0 at the top), so pi/2 equals
    ``torch.rot90(x, 1, dims=(-2, -1))``. Bilinear interpolation (``affine_grid``/``grid_sample``,
    ``align_corners=False``), zeros outside. Float input gives float output; uint8 input is rotated
    in float and rounded back to uint8.
    """
    if x.ndim != 4:
        raise ValueError(f"rotate_images expects (N, C, H, W), got shape {tuple(x.shape)}")
    a = torch.as_tensor(np.asarray(angles, dtype=np.float64)).reshape(-1)
    if a.numel() != x.shape[0]:
        raise ValueError(f"{x.shape[0]} images but {a.numel()} angles")
    is_u8 = x.dtype == torch.uint8
    if not (is_u8 or x.is_floating_point()):
        raise TypeError(f"rotate_images: expected a float or uint8 tensor, got {x.dtype}")
    n, c, h, w = x.shape
    out = torch.empty_like(x)
    cos, sin = torch.cos(a), torch.sin(a)
    for s in range(0, n, batch_size):
        e = min(n, s + batch_size)
        xb = x[s:e].float() if is_u8 else x[s:e]
        # theta maps output to input coordinates in [-1, 1] units; with S = diag(W/2, H/2) the pixel
        # rotation R becomes S^-1 R S (an aspect correction that is the identity for square images)
        theta = torch.zeros(e - s, 2, 3, dtype=torch.float64)
        theta[:, 0, 0] = cos[s:e]
        theta[:, 0, 1] = -sin[s:e] * h / w
        theta[:, 1, 0] = sin[s:e] * w / h
        theta[:, 1, 1] = cos[s:e]
        grid = torch.nn.functional.affine_grid(theta.to(xb.dtype), [e - s, c, h, w], align_corners=False)
        yb = torch.nn.functional.grid_sample(xb, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        out[s:e] = yb.round().clamp_(0, 255).to(torch.uint8) if is_u8 else yb
    return out


def chunk_assignment(n: int, proportions: Sequence[float], seed) -> np.ndarray:
    """A chunk id in 0..C-1 (uint8) for each of ``n`` examples, with exact counts.

    ``proportions`` must be positive; they are normalised (so ``[1, 8]`` is fine). Counts are
    ``floor(n p_k)`` plus one for the chunks with the largest remainders (ties: lower k first), so
    they sum to n; the ids are then randomly permuted with ``default_rng(seed)``, or, when ``seed``
    is a ``torch.Generator``, with ``torch.randperm(n, generator=seed)`` (code that holds a torch
    generator, e.g. the Table 8 timing cells, imports this function from ``reprokit.partition``).
    """
    p = np.asarray(proportions, dtype=np.float64).reshape(-1)
    if p.size == 0 or not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError(f"chunk proportions must be finite and positive, got {list(proportions)!r}")
    if p.size > 256:
        raise ValueError(f"at most 256 chunks fit in uint8, got {p.size}")
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    raw = p / p.sum() * n
    counts = np.floor(raw).astype(np.int64)
    rest = n - int(counts.sum())
    order = np.argsort(-(raw - counts), kind="stable")  # largest remainder first
    counts[order[:rest]] += 1
    ids = np.repeat(np.arange(p.size, dtype=np.uint8), counts)
    if _is_torch_generator(seed):
        return ids[torch.randperm(n, generator=seed).numpy()]
    return _rng(seed).permutation(ids).astype(np.uint8)


def _is_torch_generator(obj) -> bool:
    # by type name, so that a numpy seed never makes this (torch-lazy) module execute torch
    t = type(obj)
    return t.__name__ == "Generator" and t.__module__.split(".")[0] == "torch"


def chunk_counts(n: int, proportions: Sequence[float]) -> np.ndarray:
    """The exact per-chunk counts :func:`chunk_assignment` gives."""
    return np.bincount(chunk_assignment(n, proportions, 0), minlength=len(proportions))


def dirichlet_client_split(keys, n_clients: int, alpha: float, seed) -> np.ndarray:
    """Client id (int32) for every example: key-skewed split after Hsu et al. (2019) / Reddi et al. (2021).

    Recipe (all draws from ``default_rng(seed)``, in this order):
      1. the K distinct key values (labels, or rotation bins) are sorted; each client c draws
         q_c ~ Dirichlet(alpha * p) over them, p = the keys' overall frequencies (Hsu et al. 2019's
         concentration alpha * prior; with alpha = 0.1 and 10 labels most clients hold one label, as
         App. J.2 says) (one (n_clients, K) draw);
      2. each key's examples are shuffled into a pool (keys in sorted order);
      3. clients get equal sizes: n // n_clients each, the first n % n_clients one more;
      4. examples are dealt round-robin (round r: clients 0..n_clients-1 that still need an example,
         in order), each draw picking a key with probability q_c restricted to keys whose pool is not
         empty (renormalised) and taking the next example from that pool; if every key with q_c > 0
         is used up, the key is drawn in proportion to the examples left.
    Every example is assigned exactly once. Small alpha gives clients dominated by one key.
    """
    keys = np.asarray(keys).reshape(-1)
    n = keys.size
    n_clients = int(n_clients)
    if not 1 <= n_clients <= n:
        raise ValueError(f"n_clients must be in 1..{n} (number of examples), got {n_clients}")
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ValueError(f"alpha must be positive and finite, got {alpha!r}")
    rng = _rng(seed)
    values, inv = np.unique(keys, return_inverse=True)
    k = values.size
    prior = np.bincount(inv, minlength=k) / n
    q = rng.dirichlet(float(alpha) * prior, size=n_clients)
    pools = [rng.permutation(np.flatnonzero(inv == j)) for j in range(k)]
    left = np.array([len(pl) for pl in pools], dtype=np.int64)
    taken = np.zeros(k, dtype=np.int64)
    sizes = np.full(n_clients, n // n_clients, dtype=np.int64)
    sizes[: n % n_clients] += 1
    u = rng.random(n)
    out = np.full(n, -1, dtype=np.int32)
    t = 0
    for r in range(int(sizes.max())):
        for c in np.flatnonzero(sizes > r):
            avail = left > 0
            p = q[c] * avail
            if p.sum() <= 0:
                p = left.astype(np.float64)
            cdf = np.cumsum(p)
            j = int(np.searchsorted(cdf, u[t] * cdf[-1], side="right"))
            if j >= k or not avail[j]:  # rounding at the top end: take the last available key
                j = int(np.flatnonzero(avail)[-1])
            out[pools[j][taken[j]]] = c
            taken[j] += 1
            left[j] -= 1
            t += 1
    assert t == n and (out >= 0).all()
    return out


def rotation_bins(angles, n_bins: int = ROTATION_BINS) -> np.ndarray:
    """Bin index (int64) of each angle in ``n_bins`` equal bins over [-pi, pi] (pi goes in the last)."""
    a = np.asarray(angles, dtype=np.float64)
    b = np.floor((a + math.pi) / (2 * math.pi) * n_bins).astype(np.int64)
    return np.clip(b, 0, n_bins - 1)


# ----------------------------------------------------------------------------------------------
# files


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    # np.savez stamps each member with the current time, so two builds differ; this writes the same
    # .npz layout (one .npy per key, stored uncompressed) with a fixed timestamp and sorted keys.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            arr = np.asarray(arrays[key])
            arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
            np.lib.format.write_array(member, arr, allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def _meta_array(dataset: str, kind: str, params: dict, **extra) -> np.ndarray:
    return np.array(json.dumps({"dataset": dataset, "kind": kind, "params": params, **extra}, sort_keys=True))


def load_variant(path) -> dict:
    """Read a variant file into a dict: always ``kind``, ``dataset``, ``params``; then by kind
    subset: ``indices`` (int64), ``n_total``;  chunks: ``indices``, ``chunks`` (uint8), ``n_total``;
    federated: ``indices``, ``client`` (int32), ``keys`` (label or rotation bin per example),
      ``val_indices``, ``n_total``;
    rotated: ``x_train``, ``x_test`` (uint8 tensors N,C,H,W), ``angles_train``, ``angles_test``
      (float32 tensors, radians).
    """
    path = Path(path)
    if path.suffix == ".pt":
        return dict(torch.load(path, weights_only=True))
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    meta = json.loads(str(out.pop("meta")))
    out.update(meta)
    if "n_total" in out:
        out["n_total"] = int(out["n_total"])
    return out


def _load_for_variant(dataset: str, mirrors, cache_dir, load_kw) -> Bundle:
    kw = dict(load_kw)
    if registry.dataset_info(dataset).loader in ("idx", "cifar", "tiny"):
        kw.setdefault("dtype", "uint8")  # a quarter of the memory; only labels and sizes are used
    return registry.load(dataset, mirrors, cache_dir=cache_dir, **kw)


def build_variant(dataset: str, filename: str, out_path, mirrors, cache_dir=None, **load_kw) -> Path:
    """Build the variant named ``filename`` for ``dataset`` and write it atomically to ``out_path``
    (temporary file in the same folder, then ``os.replace``). ``load_kw`` go to ``registry.load``
    (e.g. ``checksums=...``). Returns ``out_path``."""
    kind, params = parse_variant_filename(filename)
    out_path = Path(out_path)
    info = registry.dataset_info(dataset)
    expected_ext = KINDS[kind][0]
    if out_path.suffix != expected_ext:
        raise ValueError(f"{out_path}: a '{kind}' variant is written as {expected_ext}")
    seed = params["seed"]

    if kind == "rotated":
        if info.loader not in ("idx", "cifar", "tiny"):
            raise ValueError(f"rotated variants are for image datasets, not '{dataset}'")
        b = registry.load(dataset, mirrors, cache_dir=cache_dir, dtype="uint8", **load_kw)
        angles = rotation_angles(b.n_train + b.n_test, seed)
        a_tr, a_te = angles[: b.n_train], angles[b.n_train :]
        obj = {
            "kind": kind,
            "dataset": dataset,
            "params": params,
            "x_train": rotate_images(b.x_train, a_tr),
            "x_test": rotate_images(b.x_test, a_te),
            "angles_train": torch.from_numpy(a_tr),
            "angles_test": torch.from_numpy(a_te),
        }
        atomic_save_torch(obj, out_path)
        return out_path

    n = params["n"]
    if info.synthetic:
        if kind == "federated":
            raise ValueError(f"federated variants are for the image datasets, not synthetic '{dataset}'")
        n_total = n  # generated at the requested size: the subset is the whole set
    else:
        full = _load_for_variant(dataset, mirrors, cache_dir, load_kw)
        labels, n_total, n_test = full.y_train.numpy(), full.n_train, full.n_test
        del full
    meta = _meta_array(dataset, kind, params)
    if kind == "subset":
        arrays = {"indices": subset_indices(n_total, n, seed), "n_total": np.int64(n_total)}
    elif kind == "chunks":
        arrays = {
            "indices": subset_indices(n_total, n, seed),
            "n_total": np.int64(n_total),
            "chunks": chunk_assignment(n, params["proportions"], [seed, 1]),
        }
    else:  # federated
        val = params["val"]
        if val + n > n_total:
            raise ValueError(f"federated: val {val} + n {n} exceeds the {n_total} training examples of {dataset}")
        val_idx = subset_indices(n_total, val, [seed, 2])
        pool = np.setdiff1d(np.arange(n_total, dtype=np.int64), val_idx)
        idx = pool[subset_indices(pool.size, n, seed)]
        if params["by"] == "label":
            keys = labels[idx].astype(np.int64)
        else:  # rotation: the angles of rotated~seed<seed> (train part), binned
            angles = rotation_angles(n_total + n_test, seed)[:n_total]
            keys = rotation_bins(angles[idx], ROTATION_BINS)
        arrays = {
            "indices": idx,
            "val_indices": val_idx,
            "keys": keys,
            "n_total": np.int64(n_total),
            "client": dirichlet_client_split(keys, params["n_clients"], params["alpha"], [seed, 3]),
        }
    arrays["meta"] = meta
    atomic_write_bytes(out_path, _npz_bytes(arrays))
    return out_path


# ----------------------------------------------------------------------------------------------
# applying variants to a bundle


def _check_dataset(bundle: Bundle, variant: dict, what: str) -> None:
    ds = variant.get("dataset")
    if ds is not None and ds != bundle.name:
        raise ValueError(f"{what} variant was built for '{ds}', not '{bundle.name}'")


def apply_variants(bundle: Bundle, subset: Any = None, rotated: dict | None = None) -> Bundle:
    """A new bundle with the variants applied, rotation first, then the subset.

    ``rotated``: a loaded ``rotated`` variant; train and test images are replaced by the rotated
      ones (converted to the bundle's image dtype); angles go to ``meta['angles_train'/'angles_test']``.
    ``subset``: a loaded ``subset``/``chunks``/``federated`` variant, or an index array. The training
      set becomes ``x_train[indices]``; a federated validation hold-out becomes ``x_val``/``y_val``;
      ``chunks``/``client`` ids (aligned with the new training set) go to ``meta['chunks'/'client']``.
    """
    b = dataclasses.replace(bundle, meta=dict(bundle.meta))
    if rotated is not None:
        _check_dataset(b, rotated, "rotated")
        xtr, xte = rotated["x_train"], rotated["x_test"]
        if tuple(xtr.shape) != tuple(b.x_train.shape) or tuple(xte.shape) != tuple(b.x_test.shape):
            raise ValueError(
                f"rotated variant shapes {tuple(xtr.shape)}/{tuple(xte.shape)} do not match "
                f"{b.name} {tuple(b.x_train.shape)}/{tuple(b.x_test.shape)}"
            )
        conv = (lambda t: t.clone()) if b.x_train.dtype == torch.uint8 else (lambda t: t.to(torch.float32) / 255.0)
        b.x_train, b.x_test = conv(xtr), conv(xte)
        b.meta.update(
            rotated=dict(rotated.get("params", {})),
            angles_train=torch.as_tensor(rotated["angles_train"]),
            angles_test=torch.as_tensor(rotated["angles_test"]),
        )
    if subset is not None:
        var = subset if isinstance(subset, dict) else {"indices": np.asarray(subset)}
        _check_dataset(b, var, "subset")
        if "n_total" in var and int(var["n_total"]) != b.n_train:
            raise ValueError(
                f"subset variant was drawn from {int(var['n_total'])} examples but {b.name} has {b.n_train}"
            )
        idx = torch.as_tensor(np.asarray(var["indices"], dtype=np.int64))
        val = var.get("val_indices")
        if val is not None and len(val) > 0:
            vi = torch.as_tensor(np.asarray(val, dtype=np.int64))
            b.x_val, b.y_val = b.x_train[vi], b.y_train[vi]
            if "angles_train" in b.meta:
                b.meta["angles_val"] = b.meta["angles_train"][vi]
        b.x_train, b.y_train = b.x_train[idx], b.y_train[idx]
        for key in ("angles_train",):
            if key in b.meta:
                b.meta[key] = b.meta[key][idx]
        for key in ("chunks", "client"):
            if key in var:
                b.meta[key] = torch.as_tensor(np.asarray(var[key]))
        b.meta["subset"] = dict(var.get("params", {"n": int(idx.numel())}))
        b.meta["train_indices"] = idx
    return b
