"""Provenance of a built artefact: `figures/<artefact>.provenance.json`, written when its notebook finishes.

A record names the commit, scale, devices the cells ran on, the date, and a fingerprint of the artefact's
resolved config: the settings (`plan.cell_settings`) of every cell of its experiments at its scale, plus
the artefact's own entry (notebook, experiments, data files). tests/test_provenance.py recomputes the
fingerprint of every committed record at HEAD and fails when the config changed since the artefact was
built. Torch-free.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import subprocess
from pathlib import Path

import pandas as pd

from ..io import atomic_write_json

SUFFIX = ".provenance.json"


def resolved_config(config: dict, artefact: str, scale: str) -> dict:
    """What the artefact's numbers depend on in the config: its entry and every cell's settings."""
    from ..config import experiment
    from ..plan import kind

    spec = config["artefacts"][artefact]
    cells = {}
    for name in spec["experiments"]:
        for cell in experiment(config, name, scale).cells():
            cells[cell.rel_dir] = kind(cell.kind).cell_settings(cell)
    entry = {k: spec.get(k) for k in ("paper", "notebook", "experiments", "data", "outputs")}
    return {"artefact": entry, "cells": cells}


def fingerprint(config: dict, artefact: str, scale: str) -> str:
    blob = json.dumps(resolved_config(config, artefact, scale), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def git_state(root: str | Path = ".") -> tuple[str, bool]:
    """(HEAD's commit or "unknown", whether config/ differs from it)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True, timeout=20).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "config"], cwd=root, capture_output=True,
                               text=True, check=True, timeout=20).stdout.strip() != ""
        return commit, dirty
    except (OSError, subprocess.SubprocessError):
        return "unknown", False


def devices_of(csv_paths) -> list[str]:
    """The devices recorded by the cells of the tidy CSVs (column `device`, absent in older aggregates)."""
    found = set()
    for path in csv_paths:
        try:
            df = pd.read_csv(path, usecols=lambda c: c in ("device", "status"))
        except (OSError, ValueError, pd.errors.EmptyDataError):
            continue
        if "device" in df:
            found |= {str(v) for v in df["device"].dropna()}
    return sorted(found)


def record(config: dict, artefact: str, scale: str, devices: list[str], root: str | Path = ".") -> dict:
    commit, dirty = git_state(root)
    return {"artefact": artefact, "commit": commit, "config_dirty": dirty, "scale": scale,
            "devices": devices or ["not recorded"], "date": _dt.datetime.now().isoformat(timespec="seconds"),
            "fingerprint": fingerprint(config, artefact, scale)}


def write(path: str | Path, rec: dict) -> None:
    atomic_write_json(path, rec)


def mismatch(rec: dict, config_at_head: dict) -> str | None:
    """Why a record no longer describes HEAD's config (None when its fingerprint still matches)."""
    name = rec["artefact"]
    if name not in config_at_head.get("artefacts", {}):
        return f"artefact {name} (built at commit {rec['commit']}) is no longer in the config"
    now = fingerprint(config_at_head, name, rec["scale"])
    if now != rec["fingerprint"]:
        return (f"artefact {name}: its provenance names commit {rec['commit']} (scale {rec['scale']}), whose config "
                f"for it differs from HEAD's (fingerprint {rec['fingerprint']} != {now}): rebuild it")
    return None
