"""Rewrites of the committed archive (`figures/<scale>/cells/`) for a config change that re-homes cells which ran.

A cell's archived line is used only while its settings equal what HEAD's config gives that cell
(`archive.split`). When a change of the config leaves what a cell computed the same but moves it (a renamed
key, a reading that became the default), the line is rewritten here instead of the cell being run again;
every line touched gets a `migrations` entry saying what was done, on which date and why the computation is
the one the new settings describe. A line is only rewritten after its new settings were checked to equal
HEAD's for its new cell, so a migration cannot make a line claim settings it did not run with. Idempotent:
a line already migrated is left as it is. Torch-free.

    python -m reprokit.report.archive_migrations wishart_n_eff --scale paper          # what it would do
    python -m reprokit.report.archive_migrations wishart_n_eff --scale paper --apply  # and write it

Migrations:
  * `wishart_n_eff` (2026-11-26): BALI's `wishart_n` (the N in Sigma's degrees of freedom, Eq. 16d) lost its
    default `n` and every BALI block states it; the main experiments say `n_eff`, the `*_wishart`
    experiments' axis says `n`. A line that ran with the old default (no `wishart_n` in its block, `info`
    saying `n`):
      - where N_eff = N (`n_eff_divisor` 1) both readings are one computation: the block gains the config's value;
      - where the config's value is `n` (bali_ystd): the block gains `n`, what it ran with;
      - otherwise it moves to the paired `*_wishart` experiment, as its `bali.wishart_n~n` cell;
    and a `*_wishart` line that ran with `n_eff` (its axis) moves to the main experiment's cell.
    Results under `results/` are not touched: Snakemake runs those cells again (their settings now differ).
  * `method_blocks` (2026-11-27): the flat, prefixed method settings of the affine_invariance, federated and
    update_timing kinds became nested blocks named after their method (as the BALI kinds' are):
    `augerino_<k>` -> `augerino.<k>`, `dl_<k>` -> `diff_laplace.<k>`, `llml_<k>` -> `last_layer_ml.<k>`,
    `finetune_<k>` -> `validation_opt.finetune_<k>`. Values are unchanged. Where the kind has a method axis
    (affine_invariance, federated) a cell keeps its own method's block only: the keys of another method's
    block (every cell recorded Augerino's, which only Augerino's cells read) are dropped, and named in the
    line's `migrations` entry. A line whose rewritten settings differ from HEAD's is left as it is (stale).
    With `--provenance`, each committed artefact record of the scale (`figures/<scale>/*.provenance.json`) whose
    fingerprint no longer matches HEAD gets HEAD's fingerprint only where the settings its build saw (the
    resolved config at the record's commit, computed by that commit's own code in a git worktree), rewritten
    this way, equal HEAD's resolved config for the artefact: the same cells with the same values, renamed. The
    record keeps its commit and date and gains a `migrations` entry; any other record is left for a rebuild.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys

from . import archive

AXIS = "bali.wishart_n"
# (main experiment, the experiment of the other reading `n`)
WISHART_PAIRS = (("bali_uci", "bali_uci_wishart"), ("bali_uci_protein", "bali_uci_protein_wishart"),
                 ("bali_cls_image", "bali_cls_image_wishart"), ("bali_cls_uci", "bali_cls_uci_wishart"))


def _block_key(line: dict) -> str | None:
    """The settings key of the line's BALI prior block (uci_regression: the method's block, bali / bali_ystd;
    bali_classification: `bali`), or None for a method without one (dropout, map, bbb)."""
    for key in (line["coords"].get("method"), "bali"):
        block = line["settings"].get(key)
        if isinstance(block, dict) and "n_eff_divisor" in block:
            return key
    return None


def _note(line: dict, date: str, what: str) -> None:
    line.setdefault("migrations", []).append({"migration": "wishart_n_eff", "date": date, "what": what})


def _with_value(line: dict, key: str, value: str) -> dict:
    settings = copy.deepcopy(line["settings"])
    settings[key]["wishart_n"] = value
    return settings


def _moved(line: dict, cell: str, experiment: str, coords: dict, settings: dict) -> dict:
    out = copy.deepcopy(line)
    out.update(cell=cell, experiment=experiment, coords=coords, settings=settings)
    return out


def wishart_n_eff(lines: dict[str, dict[str, dict]], heads: dict[str, dict[str, dict]], date: str,
                  pairs=WISHART_PAIRS) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """(the new archive lines {experiment: {cell: line}}, one message per line touched or left stale).
    `lines`: the archive of each experiment of `pairs`; `heads`: `archive.current_settings` of each."""
    out = {name: {} for pair in pairs for name in pair}
    log = []

    def keep(name, line):
        out[name][line["cell"]] = line

    for main, alt in pairs:
        for line in lines.get(main, {}).values():
            key = _block_key(line)
            if key is None or "wishart_n" in line["settings"][key]:
                keep(main, line)  # no BALI block, or already states its reading
                continue
            ran = line.get("info", {}).get("wishart_n", "n")
            head = heads[main].get(line["cell"])
            if ran != "n" or head is None:
                keep(main, line)
                log.append(f"{line['cell']}: left as it is (ran with {ran}; in HEAD's grid: {head is not None})")
                continue
            want = head[key]["wishart_n"]
            same = float(line["settings"][key]["n_eff_divisor"]) == 1.0
            if want == "n" or same:
                settings = _with_value(line, key, want)
                if archive.differing_keys(settings, head):
                    keep(main, line)
                    log.append(f"{line['cell']}: left stale ({archive.differing_keys(settings, head)} differ besides "
                               "wishart_n)")
                    continue
                new = _moved(line, line["cell"], main, line["coords"], settings)
                _note(new, date, f"settings.{key}.wishart_n {want} written: "
                      + ("what it ran with (the default then)" if want == "n"
                         else "it ran with n, and N_eff = N here, so both readings are one computation"))
                keep(main, new)
                log.append(f"{line['cell']}: wishart_n {want} written ({'ran with it' if want == 'n' else 'N_eff = N'})")
                continue
            cell = line["cell"].replace(f"/{main}/", f"/{alt}/", 1) + f"/{AXIS}~n"
            target = heads[alt].get(cell)
            settings = _with_value(line, key, target[key]["wishart_n"]) if target else None
            if target is None or archive.differing_keys(settings, target):
                keep(main, line)
                log.append(f"{line['cell']}: left stale (no cell {cell} with these settings in HEAD's grid)")
                continue
            new = _moved(line, cell, alt, {**line["coords"], AXIS: "n"}, settings)
            _note(new, date, f"moved from {line['cell']}: it ran with wishart_n n (the default then), now {alt}'s "
                  f"axis value")
            keep(alt, new)
            log.append(f"{line['cell']} -> {cell}")
        for line in lines.get(alt, {}).values():
            if str(line["coords"].get(AXIS)) != "n_eff":
                keep(alt, line)
                continue
            key = _block_key(line)
            cell = line["cell"].replace(f"/{alt}/", f"/{main}/", 1).replace(f"/{AXIS}~n_eff", "")
            target = heads[main].get(cell)
            settings = _with_value(line, key, "n_eff") if key else None
            if key is None or target is None or archive.differing_keys(settings, target):
                keep(alt, line)
                log.append(f"{line['cell']}: left stale (no cell {cell} with these settings in HEAD's grid)")
                continue
            coords = {k: v for k, v in line["coords"].items() if k != AXIS}
            new = _moved(line, cell, main, coords, settings)
            _note(new, date, f"moved from {line['cell']}: it ran with wishart_n n_eff (its axis then), now "
                  f"{main}'s setting")
            if cell in out[main]:
                raise ValueError(f"{cell}: two archived lines would land here (from {main} and {alt})")
            keep(main, new)
            log.append(f"{line['cell']} -> {cell}")
    return out, log


# kind -> {flat prefix: (block, the key's prefix inside the block)}, and whether a cell keeps its own method's
# block only (a kind with a method axis) or every block (update_timing: one cell times every method's update)
BLOCK_PREFIXES = {
    "affine_invariance": ({"augerino_": ("augerino", ""), "dl_": ("diff_laplace", ""), "llml_": ("last_layer_ml", ""),
                           "finetune_": ("validation_opt", "finetune_")}, True),
    "federated": ({"augerino_": ("augerino", "")}, True),
    "update_timing": ({"augerino_": ("augerino", ""), "dl_": ("diff_laplace", "")}, False),
}


def nested_settings(flat: dict, kind: str, method: str | None) -> tuple[dict, list[str]]:
    """(`flat`, a cell's recorded settings before `method_blocks`, with its method keys in blocks; the flat keys
    dropped as another method's). Where `kind` has a method axis only the block of `method` is kept."""
    prefixes, own_only = BLOCK_PREFIXES[kind]
    out, blocks, origin = {}, {}, {}
    for key, value in flat.items():
        prefix = next((p for p in prefixes if key.startswith(p)), None)
        if prefix is None:
            out[key] = value
            continue
        block, inner = prefixes[prefix]
        blocks.setdefault(block, {})[inner + key[len(prefix):]] = value
        origin.setdefault(block, []).append(key)
    dropped = []
    for block, values in blocks.items():
        if own_only and block != method:
            dropped += origin[block]
            continue
        out[block] = {**out.get(block, {}), **values}
    return out, sorted(dropped)


def method_blocks(lines: dict[str, dict[str, dict]], heads: dict[str, dict[str, dict]], date: str,
                  kinds: dict[str, str]) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """(the new archive lines {experiment: {cell: line}}, one message per line touched or left stale).
    `kinds`: {experiment: its kind}."""
    out, log = {}, []
    for name, by_cell in lines.items():
        out[name] = {}
        prefixes = tuple(BLOCK_PREFIXES[kinds[name]][0])
        for cell, line in by_cell.items():
            flat = line["settings"]
            if not any(k.startswith(prefixes) for k in flat):
                out[name][cell] = line  # nothing flat: already nested (or never had method keys)
                continue
            method = line["coords"].get("method", flat.get("method"))
            settings, dropped = nested_settings(flat, kinds[name], method)
            head = heads[name].get(cell)
            if head is None or archive.differing_keys(settings, head):
                why = "not in HEAD's grid" if head is None else f"{archive.differing_keys(settings, head)} differ"
                out[name][cell] = line
                log.append(f"{cell}: left stale ({why})")
                continue
            new = copy.deepcopy(line)
            new["settings"] = settings
            new.setdefault("migrations", []).append({
                "migration": "method_blocks", "date": date,
                "what": "method settings nested in their method's block, values unchanged"
                        + (f"; dropped {', '.join(dropped)} (another method's, not read by {method})" if dropped
                           else "")})
            out[name][cell] = new
            log.append(f"{cell}: nested" + (f", {len(dropped)} keys of another method dropped" if dropped else ""))
    return out, log


def restamp_provenance(rec: dict, old_resolved: dict, head_resolved: dict, kinds: dict[str, str],
                       new_fingerprint: str, date: str) -> tuple[dict | None, str]:
    """(`rec` with HEAD's fingerprint and a `migrations` entry, or None; why). `old_resolved`: the artefact's
    resolved config (`provenance.resolved_config`) at the record's commit; `head_resolved`: at HEAD; `kinds`:
    {experiment: kind} at HEAD."""
    from .provenance import digest

    if digest(old_resolved) != rec["fingerprint"]:
        return None, f"left for a rebuild: the config at {rec['commit'][:7]} does not give its fingerprint"
    cells = {}
    for rel, flat in old_resolved["cells"].items():
        experiment = rel.split("/")[1]
        kind = kinds.get(experiment)
        if kind in BLOCK_PREFIXES:
            coords = dict(part.split("~", 1) for part in rel.split("/")[2:])
            flat = nested_settings(flat, kind, coords.get("method", flat.get("method")))[0]
        cells[rel] = flat
    if digest({**old_resolved, "cells": cells}) != digest(head_resolved):
        differ = sorted(k for k in set(cells) | set(head_resolved["cells"])
                        if cells.get(k) != head_resolved["cells"].get(k))
        return None, (f"left for a rebuild: {len(differ)} cells differ beyond the renaming"
                      + (f" (first: {differ[0]})" if differ else " (the artefact's entry)"))
    out = copy.deepcopy(rec)
    out.setdefault("migrations", []).append({
        "migration": "method_blocks", "date": date, "fingerprint_before": rec["fingerprint"],
        "what": "fingerprint of HEAD's config: the settings this build saw (the config at its commit), with the "
                "method settings nested in their blocks, equal HEAD's for every cell; nothing was rebuilt"})
    out["fingerprint"] = new_fingerprint
    return out, f"fingerprint {rec['fingerprint']} -> {new_fingerprint}"


def _resolved_at(root: str, commit: str, artefact: str, scale: str, unavailable) -> dict:
    """The artefact's resolved config at `commit`, computed by that commit's code (a temporary git worktree)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tree = f"{tmp}/tree"
        subprocess.run(["git", "worktree", "add", "--detach", tree, commit], cwd=root, check=True,
                       capture_output=True, timeout=120)
        try:
            code = ("import json, sys; from reprokit.config import load_pipeline_config; "
                    "from reprokit.report.provenance import resolved_config; "
                    f"print(json.dumps(resolved_config(load_pipeline_config('.', {{'scale': {scale!r}}}), "
                    f"{artefact!r}, {scale!r}, {list(unavailable)!r}), default=str))")
            res = subprocess.run([sys.executable, "-c", code], cwd=tree, env={"PYTHONPATH": f"{tree}/src",
                                 "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=300, check=False)
            if res.returncode:
                raise RuntimeError(f"resolved config at {commit}: {res.stderr[-800:]}")
            return json.loads(res.stdout)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=root, capture_output=True, timeout=120,
                           check=False)


def main(argv: list[str] | None = None) -> int:
    from ..config import load_pipeline_config

    parser = argparse.ArgumentParser(prog="python -m reprokit.report.archive_migrations",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("migration", choices=["wishart_n_eff", "method_blocks"])
    parser.add_argument("--scale", required=True)
    parser.add_argument("--root", default=".")
    parser.add_argument("--date", default=None, help="written into each touched line (default: the migration's)")
    parser.add_argument("--apply", action="store_true", help="write the archive (default: only say what changes)")
    parser.add_argument("--provenance", action="store_true",
                        help="method_blocks: also re-fingerprint the scale's artefact records that it renamed only")
    args = parser.parse_args(argv)
    config = load_pipeline_config(args.root)
    if args.migration == "wishart_n_eff":
        names, migrate, date = [n for pair in WISHART_PAIRS for n in pair], wishart_n_eff, "2026-11-26"
    else:
        kinds = {n: spec["kind"] for n, spec in config["experiments"].items() if spec["kind"] in BLOCK_PREFIXES
                 and archive.path_of(args.root, args.scale, n).exists()}
        names, date = list(kinds), "2026-11-27"

        def migrate(lines, heads, date):
            return method_blocks(lines, heads, date, kinds)
    lines = {n: archive.load(archive.path_of(args.root, args.scale, n)) for n in names}
    heads = {n: archive.current_settings(config, args.scale, n) for n in names}
    out, log = migrate(lines, heads, args.date or date)
    print("\n".join(log) or "nothing to migrate")
    for name in names:
        before, after = len(lines[name]), len(out[name])
        print(f"{name}: {before} -> {after} archived lines")
        if args.apply and (out[name] or lines[name]) and json.dumps(out[name], sort_keys=True) != json.dumps(
                lines[name], sort_keys=True):
            archive.write(archive.path_of(args.root, args.scale, name), out[name])
    if args.provenance and args.migration == "method_blocks":
        restamp_all(args.root, args.scale, args.date or date, args.apply)
    return 0


def restamp_all(root: str, scale: str, date: str, apply: bool) -> None:
    """`restamp_provenance` for each record of `figures/<scale>/` that no longer matches HEAD."""
    from pathlib import Path

    from ..config import load_pipeline_config
    from . import provenance

    config = load_pipeline_config(root, {"scale": scale})
    kinds = {n: spec["kind"] for n, spec in config["experiments"].items()}
    for path in sorted((Path(root) / "figures" / scale).glob(f"*{provenance.SUFFIX}")):
        rec = json.loads(path.read_text())
        if rec.get("scale") != scale or provenance.mismatch(rec, config) is None:
            continue
        name, unavailable = rec["artefact"], rec.get("unavailable_datasets", ())
        old = _resolved_at(root, rec["commit"], name, scale, unavailable)
        head = provenance.resolved_config(config, name, scale, unavailable)
        new, why = restamp_provenance(rec, old, head, kinds, provenance.fingerprint(config, name, scale, unavailable),
                                      date)
        print(f"{path}: {why}")
        if apply and new is not None:
            provenance.write(path, new)


if __name__ == "__main__":
    sys.exit(main())
