"""Provenance of a built artefact: `figures/<artefact>.provenance.json`, written when its notebook finishes.

A record names the commit, scale, devices the cells ran on, the date, and a fingerprint of the artefact's
resolved config: the settings (`plan.resolved_settings`) of every cell of its experiments at its scale, plus
the artefact's own entry (notebook, experiments, data files). tests/test_provenance.py recomputes the
fingerprint of every committed record at HEAD and fails when the config changed since the artefact was
built. Publishing a scale's build into figures/<scale>/ is reprokit.report.commands.provenance. Torch-free.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import subprocess
from pathlib import Path

import pandas as pd

from ...atomic import atomic_write_json
from ...config import grid_of
from ...data.mirrors import is_available
from ...plan import kind

SUFFIX = ".provenance.json"


def resolved_config(config: dict, artefact: str, scale: str, unavailable=()) -> dict:
    """What the artefact's numbers depend on in the config: its entry and the settings of every cell that
    could run (cells of the `unavailable` datasets were n/a in the build: their settings shaped nothing)."""
    spec = config["artefacts"][artefact]
    skip = set(unavailable)
    cells = {}
    for name in spec["experiments"]:
        for cell in grid_of(config, name, scale).cells():
            if skip.intersection(cell.datasets):
                continue
            cells[cell.rel_dir] = kind(cell.kind).resolved_settings(cell)
    entry = {k: spec.get(k) for k in ("paper", "notebook", "experiments", "data", "outputs")}
    return {"artefact": entry, "cells": cells}


def fingerprint(config: dict, artefact: str, scale: str, unavailable=()) -> str:
    return digest(resolved_config(config, artefact, scale, unavailable))


def digest(resolved: dict) -> str:
    """The fingerprint of a resolved config (:func:`resolved_config`)."""
    blob = json.dumps(resolved, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def git_state(root: str | Path = ".") -> tuple[str, bool]:
    """(HEAD's commit or "unknown", whether config/ differs from it)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "status", "--porcelain", "--", "config"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
                timeout=20,
            ).stdout.strip()
            != ""
        )
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


def unavailable_datasets(config: dict, artefact: str, scale: str) -> list[str]:
    """The artefact's datasets that are in no local mirror nor the cache now (their cells were n/a rows)."""
    data = config.get("data") or {}
    names = {
        d
        for e in config["artefacts"][artefact]["experiments"]
        for c in grid_of(config, e, scale).cells()
        for d in c.datasets
    }
    return sorted(d for d in names if not is_available(d, data.get("mirrors"), data.get("cache_dir")))


def record(config: dict, artefact: str, scale: str, devices: list[str], root: str | Path = ".", unavailable=()) -> dict:
    """`unavailable`: datasets whose cells were n/a in this build (named in the record; the fingerprint
    covers the cells that could run)."""
    commit, dirty = git_state(root)
    rec = {
        "artefact": artefact,
        "commit": commit,
        "config_dirty": dirty,
        "scale": scale,
        "devices": devices or ["not recorded"],
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "fingerprint": fingerprint(config, artefact, scale, unavailable),
    }
    if unavailable:
        rec["unavailable_datasets"] = sorted(unavailable)
    return rec


def write(path: str | Path, rec: dict) -> None:
    atomic_write_json(path, rec)


def mismatch(rec: dict, config_at_head: dict) -> str | None:
    """Why a record no longer describes HEAD's config (None when its fingerprint still matches)."""
    name = rec["artefact"]
    if name not in config_at_head.get("artefacts", {}):
        return f"artefact {name} (built at commit {rec['commit']}) is no longer in the config"
    now = fingerprint(config_at_head, name, rec["scale"], rec.get("unavailable_datasets", ()))
    if now != rec["fingerprint"]:
        return (
            f"artefact {name}: its provenance names commit {rec['commit']} (scale {rec['scale']}), whose config "
            f"for it differs from HEAD's (fingerprint {rec['fingerprint']} != {now}): rebuild it"
        )
    return None
