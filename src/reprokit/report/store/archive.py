"""The committed record of the cells that ran at a scale: `figures/<scale>/cells/<experiment>.jsonl`.

`results/` is not committed (checkpoints, curves, logs, gigabytes at paper scale), so the cells a machine ran
are gone with the machine; a paper-scale table built over weeks from CPU runs, a lent GPU and a cluster
needs every one of them. The archive keeps what the reproduction report reads from a cell: one JSON line
per cell with its metrics.json record (status, coordinates, metrics, info, device and provenance) and the
settings it ran with (its config.json), and its learning curve (curve.csv, column by column), which the
figures need (`reprokit.report.commands.build_partial` builds an artefact from these lines).

    python -m reprokit.report.commands.archive --scale paper          # results/paper/* -> figures/paper/cells/
    python -m reprokit.report.commands.reproduction --scale paper --out figures/paper/reproduction.md   # reads both

Updating merges: a cell found under results/ replaces its archived line (a re-run wins), every other archived
line is kept. Reading checks each line against HEAD's config: a cell whose settings differ from what the
config now gives that cell (or that is no longer in the grid) is not used, and `stale` names it and the keys,
as `benchmarks/run_cells.py` does for a finished cell in results/. Torch-free.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...atomic import atomic_write_text
from ...config import grid_of
from ...plan import kind
from . import cells

FIELDS = (
    "status",
    "scale",
    "experiment",
    "coords",
    "datasets",
    "metrics",
    "steps",
    "info",
    "provenance",
    "seconds_this_run",
    "seconds_per_step",
    "resumed_from_step",
)  # the timings: CPU/GPU-hours per artefact


def path_of(root: str | Path, scale: str, experiment: str) -> Path:
    """figures/<scale>/cells/<experiment>.jsonl under `root` (the repository root)."""
    return Path(root) / "figures" / scale / "cells" / f"{experiment}.jsonl"


def _plain(obj):
    """JSON's view of `obj` (tuples -> lists), so stored and current settings compare equal."""
    return json.loads(json.dumps(obj, allow_nan=True))


def from_results(results: str | Path, scale: str, experiment: str) -> dict[str, dict]:
    """{cell dir (scale/experiment/axis~value/...): archive line} for every metrics.json under
    results/<scale>/<experiment>/. A metrics.json without its config.json is an error naming it (the line
    could not be checked against the config later)."""
    root = Path(results)
    out = {}
    for cell_dir, record in cells.records(root / scale / experiment):
        cell = cell_dir.relative_to(root).as_posix()
        out[cell] = {
            "cell": cell,
            "settings": cells.resolved_settings(cell_dir),
            **{k: record[k] for k in FIELDS if k in record},
        }
        curve = cells.curve(cell_dir)
        if curve is not None:  # the learning curve, column by column (figures need it)
            out[cell]["curve"] = _plain(curve.to_dict("list"))
    return out


def load(path: str | Path) -> dict[str, dict]:
    """{cell dir: line} of an archive file; {} when it does not exist. A line lacking a key the report needs
    (cell, settings, status, coords, metrics) is an error naming the file and line."""
    path = Path(path)
    if not path.exists():
        return {}
    out = {}
    for i, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip():
            continue
        line = json.loads(text)
        missing = {"cell", "settings", "status", "coords", "metrics"} - set(line)
        if missing:
            raise ValueError(f"{path}:{i}: lacks {sorted(missing)}: not an archived cell")
        out[line["cell"]] = line
    return out


def write(path: str | Path, lines: dict[str, dict]) -> None:
    """One line per cell, sorted by cell dir (a stable diff), written atomically."""
    text = "".join(json.dumps(lines[c], sort_keys=True, allow_nan=True) + "\n" for c in sorted(lines))
    atomic_write_text(path, text)


def update(root: str | Path, results: str | Path, scale: str, experiments: list[str] | None = None) -> dict:
    """Merge the cells under results/<scale>/ into the archive; {experiment: (added, replaced, kept)}: cells new
    to the archive, archived cells whose line changed (re-run), archived cells not under results/ now."""
    base = Path(results) / scale
    if experiments is None:
        experiments = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    summary = {}
    for name in experiments:
        found = from_results(results, scale, name)
        if not found:
            raise FileNotFoundError(f"no finished cell (metrics.json) under {base / name}")
        target = path_of(root, scale, name)
        old = load(target)
        found = {c: old[c] if c in old and same_run(old[c], line) else line for c, line in found.items()}
        replaced = sum(c in old and old[c] != line for c, line in found.items())
        added = sum(c not in old for c in found)
        write(target, {**old, **found})
        summary[name] = (added, replaced, len(old) - (len(found) - added))
    return summary


def same_run(archived: dict, found: dict) -> bool:
    """Whether a results/ cell is the run an archived line already holds: everything equal but the settings and
    the `migrations` that rewrote them. The archived (migrated) line is then kept, not replaced by the run's
    own config.json."""

    def run(line):  # as JSON text: a curve's NaN equals itself
        return json.dumps(
            {k: v for k, v in line.items() if k not in ("settings", "migrations")}, sort_keys=True, default=str
        )

    return bool(archived.get("migrations")) and run(archived) == run(found)


def current_settings(config: dict, scale: str, experiment: str) -> dict[str, dict]:
    """{cell dir: settings} the config gives each cell of `experiment` at `scale` now."""
    return {c.rel_dir: kind(c.kind).resolved_settings(c) for c in grid_of(config, experiment, scale).cells()}


def differing_keys(then: dict, now: dict) -> list[str]:
    """Top-level settings keys whose values differ between a cell's recorded settings and the config's now
    (both in JSON's view: tuples as lists). Keys starting with "_" are pipeline glue, not settings (`_inputs`:
    where a retrain cell's source cell was found), and the config never gives them: they are not compared."""
    then, now = (_plain({k: v for k, v in d.items() if not k.startswith("_")}) for d in (then, now))
    return sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))


def split(lines: dict[str, dict], settings: dict[str, dict]) -> tuple[list[dict], list[str]]:
    """(lines that still describe their cell, why each other line is not used). `settings`: current_settings."""
    fresh, stale = [], []
    for cell, line in sorted(lines.items()):
        if cell not in settings:
            stale.append(f"{cell}: no longer a cell of the config's grid")
            continue
        keys = differing_keys(line["settings"], settings[cell])
        if keys:
            stale.append(f"{cell}: ran with other settings ({', '.join(keys)} differ from the config)")
        else:
            fresh.append(line)
    return fresh, stale


def rename(root: str | Path, scale: str, old: str, new: str, date: str, why: str) -> int:
    """Move experiment `old`'s archived cells to experiment `new` (its cell dirs and `experiment` renamed, a
    `migrations` entry saying when and why): for a config whose experiment names change while the cells keep
    their settings (e.g. a variant renamed when another reading becomes the default). `new`'s archive must not
    exist yet. Returns the number of lines moved."""
    source, target = path_of(root, scale, old), path_of(root, scale, new)
    if target.exists():
        raise FileExistsError(f"{target} exists: rename into a new experiment only")
    lines = load(source)
    if not lines:
        raise FileNotFoundError(f"{source}: no archived cell of {old}")
    moved = {}
    for cell, line in lines.items():
        prefix = f"{scale}/{old}/"
        if not cell.startswith(prefix):
            raise ValueError(f"{source}: cell {cell} is not under {prefix}")
        renamed = {
            **line,
            "cell": f"{scale}/{new}/{cell[len(prefix) :]}",
            "experiment": new,
            "migrations": [
                *(line.get("migrations") or []),
                {"migration": "renamed", "date": date, "from": old, "to": new, "what": why},
            ],
        }
        moved[renamed["cell"]] = renamed
    write(target, moved)
    source.unlink()
    return len(moved)
