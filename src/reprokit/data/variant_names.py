"""Variant file names and where they live: torch-free (the plans and Snakemake use them to declare a
cell's inputs); `variants.py` builds and reads the files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def _fmt_int(v) -> str:
    if isinstance(v, bool) or int(v) != v or int(v) < 0:
        raise ValueError(f"expected a non-negative integer, got {v!r}")
    return str(int(v))


def _fmt_float(v) -> str:
    v = float(v)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"expected a positive finite number, got {v!r}")
    return np.format_float_positional(v, trim="-")  # never an exponent, so never a '-'


def _fmt_props(v) -> str:
    if isinstance(v, str) or not isinstance(v, Sequence) or len(v) == 0:
        raise ValueError(f"proportions must be a non-empty list of positive numbers, got {v!r}")
    return "-".join(_fmt_float(x) for x in v)


def _fmt_by(v) -> str:
    if v not in ("label", "rotation"):
        raise ValueError(f"by must be 'label' or 'rotation', got {v!r}")
    return v


_NUM = r"(?:0|[1-9][0-9]*)"
_POS = r"[0-9]+(?:\.[0-9]+)?"
# kind -> (extension, [(param, token prefix, formatter, value regex, parser)])
KINDS: dict[str, tuple[str, list]] = {
    "subset": (".npz", [("n", "n", _fmt_int, _NUM, int), ("seed", "seed", _fmt_int, _NUM, int)]),
    "rotated": (".pt", [("seed", "seed", _fmt_int, _NUM, int)]),
    "chunks": (
        ".npz",
        [
            ("n", "n", _fmt_int, _NUM, int),
            ("proportions", "p", _fmt_props, rf"{_POS}(?:-{_POS})*", lambda s: [float(x) for x in s.split("-")]),
            ("seed", "seed", _fmt_int, _NUM, int),
        ],
    ),
    "federated": (
        ".npz",
        [
            ("n", "n", _fmt_int, _NUM, int),
            ("n_clients", "clients", _fmt_int, _NUM, int),
            ("alpha", "alpha", _fmt_float, _POS, float),
            ("by", "by", _fmt_by, r"label|rotation", str),
            ("val", "val", _fmt_int, _NUM, int),
            ("seed", "seed", _fmt_int, _NUM, int),
        ],
    ),
}
_DEFAULTS = {"federated": {"val": 0}}


def variant_filename(kind: str, **params) -> str:
    """Canonical file name of a variant, e.g. ``variant_filename("chunks", n=1000,
    proportions=[0.8, 0.1, 0.1], seed=0) == "chunks~n1000~p0.8-0.1-0.1~seed0.npz"``.

    Params: subset(n, seed); rotated(seed); chunks(n, proportions, seed);
    federated(n, n_clients, alpha, by="label"|"rotation", seed, val=0 — size of a validation set held
    out of the training set before the subset is drawn). Only [A-Za-z0-9._~-] appear in the name.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown variant kind '{kind}'; valid: {', '.join(KINDS)}")
    ext, fields = KINDS[kind]
    params = {**_DEFAULTS.get(kind, {}), **params}
    names = [f[0] for f in fields]
    if set(params) != set(names):
        raise ValueError(f"variant '{kind}' takes parameters {names}; got {sorted(params)}")
    tokens = [kind]
    for name, prefix, fmt, _rx, _parse in fields:
        try:
            tokens.append(prefix + fmt(params[name]))
        except (TypeError, ValueError) as e:
            raise ValueError(f"variant '{kind}', parameter {name}: {e}") from None
    return "~".join(tokens) + ext


def parse_variant_filename(filename: str) -> tuple[str, dict]:
    """Inverse of :func:`variant_filename` (a path's folders are ignored). Only canonical names are
    accepted (so one variant has one name)."""
    base = Path(str(filename)).name
    kind = base.split("~", 1)[0]
    if kind not in KINDS:
        raise ValueError(f"'{base}' is not a variant file name: kind must be one of {', '.join(KINDS)}")
    ext, fields = KINDS[kind]
    rx = "~".join([re.escape(kind)] + [f"{re.escape(prefix)}(?P<{name}>{vrx})" for name, prefix, _f, vrx, _p in fields])
    m = re.fullmatch(rx + re.escape(ext), base)
    if not m:
        example = "~".join([kind] + [f"{prefix}<{name}>" for name, prefix, *_ in fields]) + ext
        raise ValueError(f"'{base}' is not a valid '{kind}' variant name (expected {example})")
    params = {name: parse(m.group(name)) for name, _prefix, _f, _vrx, parse in fields}
    canonical = variant_filename(kind, **params)
    if canonical != base:
        raise ValueError(f"'{base}' is not in canonical form; the same variant is named '{canonical}'")
    return kind, params


def variant_path(variants_dir: str | Path, dataset: str, filename: str) -> Path:
    """Where the pipeline keeps variant `filename` of `dataset` (`data.variants_dir` of the config)."""
    return Path(variants_dir) / dataset / filename
