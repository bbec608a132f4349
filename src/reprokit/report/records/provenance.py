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

from ...atomic import atomic_write_json, atomic_write_text
from ...config import grid_of
from ...data.mirrors import is_available
from ...plan import kind
from . import compute

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
            cells[cell.rel_dir] = kind(cell.kind).cell_settings(cell)
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


def publish(src: str | Path, dst: str | Path, scale: str) -> list[Path]:
    """Copy the artefacts built at `scale` (those whose record in `src` names that scale: the record and every
    `<artefact>.*` beside it) and the reproduction report (with its z-score figure) into `dst`
    (`figures/<scale>/`), the folder that is committed, and rewrite `dst/compute.md` from the archive in
    `dst/cells` (what the archived cells cost). The pipeline never writes there, so a committed build does not
    make Snakemake skip a fresh clone's build (an existing output with missing inputs counts as up to date).
    Returns the written paths."""
    src, dst = Path(src), Path(dst)
    records = sorted(src.glob(f"*{SUFFIX}"))
    if not records:
        raise FileNotFoundError(f"no {SUFFIX} records in {src}: build the artefacts first (snakemake --cores 2)")
    report = src / "reproduction.md"
    if not report.exists() or f"# Reproduction report: {scale} scale" not in report.read_text():
        raise FileNotFoundError(f"{report}: missing or not built at scale {scale} (snakemake {report})")
    dst.mkdir(parents=True, exist_ok=True)
    copied = []
    for rec_path in records:
        rec = json.loads(rec_path.read_text())
        if rec.get("scale") != scale:
            continue
        name = rec["artefact"]
        for path in sorted(src.glob(f"{name}.*")):
            if path.name == f"{name}{SUFFIX}" or path.suffix in (".pdf", ".png", ".tex", ".html", ".csv"):
                target = dst / path.name
                target.write_bytes(path.read_bytes())
                copied.append(target)
    (dst / report.name).write_bytes(report.read_bytes())
    copied.append(dst / report.name)
    z = src / "reproduction_z.png"  # the report's z-score figure, written beside it by the same command
    if z.exists():
        (dst / z.name).write_bytes(z.read_bytes())
        copied.append(dst / z.name)
    if any((dst / "cells").glob("*.jsonl")):  # the archive's cost table, kept in step with the report it feeds
        table = dst / "compute.md"
        atomic_write_text(table, compute.markdown(compute.spent(dst / "cells"), scale))
        copied.append(table)
    return copied


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        description="Copy the artefacts of one scale's build and its reproduction report "
        "from figures/ into the committed figures/<scale>/."
    )
    p.add_argument("--scale", default="quick")
    p.add_argument("--src", default="figures")
    p.add_argument("--dst", default=None, help="default: <src>/<scale>")
    args = p.parse_args(argv)
    copied = publish(args.src, args.dst or Path(args.src) / args.scale, args.scale)
    print(f"copied {len(copied)} files to {args.dst or Path(args.src) / args.scale}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
