"""UCI tables: the regression sets with the Hernandez-Lobato & Adams (2015) standard splits, and the
spambase / magic / CDC-diabetes classification tables with seeded random 80/20 splits.

Values come out raw (unstandardised, float32; regression targets (N, 1), class labels int64); see
:func:`.bundle.standardize`. ``meta`` records the split's train/test indices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .bundle import Bundle, take_kwargs
from .specs import UCI_CLASSIFICATION

__all__ = ["load_uci_classification", "load_uci_regression"]


def load_uci_regression(spec, path: Path, cache_dir, kw) -> Bundle:
    kw = take_kwargs(spec.name, kw, {"split": 0})
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
    return Bundle(
        x[itr],
        y[itr],
        x[ite],
        y[ite],
        "regression",
        None,
        spec.name,
        {
            "source": str(path),
            "split": split,
            "n_splits": spec.n_splits,
            "folder": spec.folder,
            "train_index": itr,
            "test_index": ite,
            "standardized": False,
            "verified": "sha256",
            "synthetic": False,
        },
    )


def load_uci_classification(spec, path: Path, cache_dir, kw) -> Bundle:
    import pandas as pd

    kw = take_kwargs(spec.name, kw, {"split": 0, "test_fraction": 0.2})
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
        x, y, label_note = (
            df.iloc[:, :-1].to_numpy(np.float64),
            (cls == "h").to_numpy().astype(np.int64),
            "0 = g (gamma, signal), 1 = h (hadron, background)",
        )
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
    return Bundle(
        xt[itr],
        yt[itr],
        xt[ite],
        yt[ite],
        "classification",
        2,
        spec.name,
        {
            "source": str(file),
            "split": int(split),
            "split_recipe": f"np.random.default_rng(split).permutation(N); first round({kw['test_fraction']}*N) are test (not stratified)",
            "train_index": itr,
            "test_index": ite,
            "labels": label_note,
            "standardized": False,
            "verified": "sha256",
            "synthetic": False,
        },
    )
