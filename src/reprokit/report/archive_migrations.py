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
  * `resolved_settings` (2026-11-27): a cell records its resolved settings (`KindPlan.cell_settings`: every key
    of the kind's model with its default, grid coordinates applied, axes and other methods' keys left out)
    instead of the config as written. Each line gets HEAD's resolution of what it recorded (`resolve_line`). A
    filled default is checked against the run's `info` where that names the key with a value of the same sort
    (`_info_records_something_else` lists where info names it but records another thing); a line that
    disagrees, or whose rewrite changes a value other than by a dotted coordinate, is left as it was (stale).
    `--provenance --before C` re-fingerprints the records that matched the config at C, the commit before the
    change, where C's settings for the build, resolved this way, equal HEAD's.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys

from ..errors import ConfigError
from . import archive

AXIS = "bali.wishart_n"
# (main experiment, the experiment of the other reading `n`)
WISHART_PAIRS = (
    ("bali_uci", "bali_uci_wishart"),
    ("bali_uci_protein", "bali_uci_protein_wishart"),
    ("bali_cls_image", "bali_cls_image_wishart"),
    ("bali_cls_uci", "bali_cls_uci_wishart"),
)


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


def wishart_n_eff(
    lines: dict[str, dict[str, dict]], heads: dict[str, dict[str, dict]], date: str, pairs=WISHART_PAIRS
) -> tuple[dict[str, dict[str, dict]], list[str]]:
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
                    log.append(
                        f"{line['cell']}: left stale ({archive.differing_keys(settings, head)} differ besides "
                        "wishart_n)"
                    )
                    continue
                new = _moved(line, line["cell"], main, line["coords"], settings)
                _note(
                    new,
                    date,
                    f"settings.{key}.wishart_n {want} written: "
                    + (
                        "what it ran with (the default then)"
                        if want == "n"
                        else "it ran with n, and N_eff = N here, so both readings are one computation"
                    ),
                )
                keep(main, new)
                log.append(
                    f"{line['cell']}: wishart_n {want} written ({'ran with it' if want == 'n' else 'N_eff = N'})"
                )
                continue
            cell = line["cell"].replace(f"/{main}/", f"/{alt}/", 1) + f"/{AXIS}~n"
            target = heads[alt].get(cell)
            settings = _with_value(line, key, target[key]["wishart_n"]) if target else None
            if target is None or archive.differing_keys(settings, target):
                keep(main, line)
                log.append(f"{line['cell']}: left stale (no cell {cell} with these settings in HEAD's grid)")
                continue
            new = _moved(line, cell, alt, {**line["coords"], AXIS: "n"}, settings)
            _note(
                new,
                date,
                f"moved from {line['cell']}: it ran with wishart_n n (the default then), now {alt}'s axis value",
            )
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
            _note(
                new,
                date,
                f"moved from {line['cell']}: it ran with wishart_n n_eff (its axis then), now {main}'s setting",
            )
            if cell in out[main]:
                raise ValueError(f"{cell}: two archived lines would land here (from {main} and {alt})")
            keep(main, new)
            log.append(f"{line['cell']} -> {cell}")
    return out, log


# kind -> {flat prefix: (block, the key's prefix inside the block)}, and whether a cell keeps its own method's
# block only (a kind with a method axis) or every block (update_timing: one cell times every method's update)
BLOCK_PREFIXES = {
    "affine_invariance": (
        {
            "augerino_": ("augerino", ""),
            "dl_": ("diff_laplace", ""),
            "llml_": ("last_layer_ml", ""),
            "finetune_": ("validation_opt", "finetune_"),
        },
        True,
    ),
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
        blocks.setdefault(block, {})[inner + key[len(prefix) :]] = value
        origin.setdefault(block, []).append(key)
    dropped = []
    for block, values in blocks.items():
        if own_only and block != method:
            dropped += origin[block]
            continue
        out[block] = {**out.get(block, {}), **values}
    return out, sorted(dropped)


def method_blocks(
    lines: dict[str, dict[str, dict]], heads: dict[str, dict[str, dict]], date: str, kinds: dict[str, str]
) -> tuple[dict[str, dict[str, dict]], list[str]]:
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
            new.setdefault("migrations", []).append(
                {
                    "migration": "method_blocks",
                    "date": date,
                    "what": "method settings nested in their method's block, values unchanged"
                    + (f"; dropped {', '.join(dropped)} (another method's, not read by {method})" if dropped else ""),
                }
            )
            out[name][cell] = new
            log.append(f"{cell}: nested" + (f", {len(dropped)} keys of another method dropped" if dropped else ""))
    return out, log


def restamp_provenance(
    rec: dict,
    old_resolved: dict,
    head_resolved: dict,
    transform,
    new_fingerprint: str,
    date: str,
    migration: str = "method_blocks",
) -> tuple[dict | None, str]:
    """(`rec` with HEAD's fingerprint and a `migrations` entry, or None; why). `old_resolved`: the artefact's
    resolved config (`provenance.resolved_config`) as the code before `migration` gave it; `head_resolved`: at
    HEAD; `transform(cell dir, settings)`: the migration's rewrite of one cell's settings."""
    from .provenance import digest

    if digest(old_resolved) != rec["fingerprint"]:
        return None, f"left for a rebuild: the config before {migration} does not give its fingerprint"
    cells = {rel: transform(rel, settings) for rel, settings in old_resolved["cells"].items()}
    if digest({**old_resolved, "cells": cells}) != digest(head_resolved):
        differ = sorted(
            k for k in set(cells) | set(head_resolved["cells"]) if cells.get(k) != head_resolved["cells"].get(k)
        )
        return None, (
            f"left for a rebuild: {len(differ)} cells differ beyond the {migration} rewrite"
            + (f" (first: {differ[0]})" if differ else " (the artefact's entry)")
        )
    out = copy.deepcopy(rec)
    out.setdefault("migrations", []).append(
        {
            "migration": migration,
            "date": date,
            "fingerprint_before": rec["fingerprint"],
            "what": f"fingerprint of HEAD's config: the settings this build saw, rewritten as {migration} does, equal "
            "HEAD's for every cell; nothing was rebuilt",
        }
    )
    out["fingerprint"] = new_fingerprint
    return out, f"fingerprint {rec['fingerprint']} -> {new_fingerprint}"


def _flat(d: dict, prefix: str = "") -> dict:
    """{dotted path: value} of nested mappings (lists and scalars are leaves)."""
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _comparable(a, b) -> bool:
    """Both scalars of one sort (bool, number, str): an info value can confirm a setting's."""

    def sort(v):
        return (
            "bool"
            if isinstance(v, bool)
            else "num"
            if isinstance(v, (int, float))
            else "str"
            if isinstance(v, str)
            else None
        )

    return sort(a) is not None and sort(a) == sort(b)


def _info_records_something_else(kind: str, path: str, resolved: dict) -> bool:
    """Where the run's `info` names a filled setting but records what the run did, not that setting: a default
    "auto" (a policy; info records its outcome, e.g. federated `client_batching`: loop / vmap), and
    uci_regression's `dropout.dropout_input` under Gal's protocol, which always drops inputs (info True) and
    reads the setting only under `learned_noise` (builders/uci_regression.py)."""
    if resolved[path] == "auto":
        return True
    return (
        kind == "uci_regression"
        and path.endswith(".dropout_input")
        and resolved.get(path.rsplit(".", 1)[0] + ".protocol") == "gal"
    )


def resolve_line(line: dict, kind_name: str, scale: str) -> tuple[dict, dict]:
    """(the line's settings resolved by HEAD's model, as `KindPlan.cell_settings` records them now, with its
    `_` glue kept; {"filled": paths HEAD's defaults added, "changed": paths whose value changed, "dropped":
    paths left out}). A ConfigError where the line's settings do not validate at HEAD."""
    from ..config import Cell
    from ..plan import kind

    written = line["settings"]
    cell = Cell(
        scale=scale,
        experiment=line["cell"].split("/")[1],
        coords=tuple(line["coords"].items()),
        settings=written,
        kind=kind_name,
    )
    resolved = {**kind(kind_name).cell_settings(cell), **{k: v for k, v in written.items() if k.startswith("_")}}
    before, after = _flat(archive._plain(written)), _flat(archive._plain(resolved))
    diff = {
        "filled": sorted(set(after) - set(before)),
        "dropped": sorted(set(before) - set(after)),
        "changed": sorted(k for k in set(after) & set(before) if after[k] != before[k]),
    }
    return resolved, diff


def resolved_settings(
    lines: dict[str, dict[str, dict]], heads: dict[str, dict[str, dict]], date: str, kinds: dict[str, str], scale: str
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """(the new archive lines {experiment: {cell: line}}, one message per line touched or left as it was).
    Each line's settings become what `cell_settings` records now (`resolve_line`). A default HEAD fills in is
    checked against the run's `info` where that names the same key with a value of the same sort; a line
    where they disagree, or whose rewrite changes a value other than through a dotted grid coordinate, is left
    as it was (stale). `kinds`: {experiment: its kind}."""
    out, log = {}, []
    for name, by_cell in lines.items():
        out[name] = {}
        for rel, line in by_cell.items():
            out[name][rel] = line
            try:
                resolved, diff = resolve_line(line, kinds[name], scale)
            except ConfigError as err:
                log.append(f"{rel}: left as it was (its settings do not validate at HEAD: {err})")
                continue
            if not any(diff.values()):
                continue  # already resolved
            dotted = {a for a in line["coords"] if "." in a}
            odd = [k for k in diff["changed"] if k not in dotted]
            info = line.get("info") or {}
            after = _flat(archive._plain(resolved))
            checked = [
                k
                for k in diff["filled"]
                if _comparable(info.get(k.rsplit(".", 1)[-1]), after[k])
                and not _info_records_something_else(kinds[name], k, after)
            ]
            conflicts = [
                f"{k} (info {info[k.rsplit('.', 1)[-1]]!r}, default {after[k]!r})"
                for k in checked
                if info[k.rsplit(".", 1)[-1]] != after[k]
            ]
            if odd or conflicts:
                log.append(
                    f"{rel}: left stale ("
                    + "; ".join(
                        ([f"{', '.join(odd)} would change"] if odd else [])
                        + ([f"ran otherwise: {', '.join(conflicts)}"] if conflicts else [])
                    )
                    + ")"
                )
                continue
            new = copy.deepcopy(line)
            new["settings"] = resolved
            new.setdefault("migrations", []).append(
                {
                    "migration": "resolved_settings",
                    "date": date,
                    "what": "settings as recorded now: every key with HEAD's default where the config left it out, the "
                    "grid coordinates applied, the axes and other methods' keys left out. A filled default "
                    "was checked against the run's info where that names it (`checked`); the others are "
                    "HEAD's defaults, which the run recorded nowhere",
                    **diff,
                    "checked": checked,
                }
            )
            out[name][rel] = new
            stale = heads.get(name, {}).get(rel)
            log.append(
                f"{rel}: resolved ({len(diff['filled'])} filled, {len(checked)} checked against info, "
                f"{len(diff['dropped'])} dropped, {len(diff['changed'])} coordinates applied)"
                + (
                    ""
                    if stale is None or not archive.differing_keys(resolved, stale)
                    else f"; still stale: {', '.join(archive.differing_keys(resolved, stale))} differ"
                )
            )
    return out, log


def _resolved_at(root: str, commit: str, wanted: list[tuple[str, list]], scale: str) -> list[dict]:
    """The resolved config of each (artefact, unavailable datasets) of `wanted` at `commit`, computed by that
    commit's code (one temporary git worktree)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tree = f"{tmp}/tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", tree, commit], cwd=root, check=True, capture_output=True, timeout=120
        )
        try:
            code = (
                "import json, sys; from reprokit.config import load_pipeline_config; "
                "from reprokit.report.provenance import resolved_config; "
                f"c = load_pipeline_config('.', {{'scale': {scale!r}}}); "
                f"print(json.dumps([resolved_config(c, a, {scale!r}, u) for a, u in {wanted!r}], default=str))"
            )
            res = subprocess.run(
                [sys.executable, "-c", code],
                cwd=tree,
                env={"PYTHONPATH": f"{tree}/src", "PATH": "/usr/bin:/bin"},
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if res.returncode:
                raise RuntimeError(f"resolved config at {commit}: {res.stderr[-800:]}")
            return json.loads(res.stdout)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", tree], cwd=root, capture_output=True, timeout=120, check=False
            )


def main(argv: list[str] | None = None) -> int:
    from ..config import load_pipeline_config

    parser = argparse.ArgumentParser(
        prog="python -m reprokit.report.archive_migrations", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("migration", choices=["wishart_n_eff", "method_blocks", "resolved_settings"])
    parser.add_argument("--scale", required=True)
    parser.add_argument("--root", default=".")
    parser.add_argument("--date", default=None, help="written into each touched line (default: the migration's)")
    parser.add_argument("--apply", action="store_true", help="write the archive (default: only say what changes)")
    parser.add_argument(
        "--provenance",
        action="store_true",
        help="method_blocks, resolved_settings: also re-fingerprint the scale's artefact records "
        "that the rewrite alone changed",
    )
    parser.add_argument(
        "--before",
        default=None,
        help="resolved_settings --provenance: the last commit before cell_settings resolved defaults",
    )
    args = parser.parse_args(argv)
    config = load_pipeline_config(args.root)
    kinds = {
        n: spec["kind"]
        for n, spec in config["experiments"].items()
        if archive.path_of(args.root, args.scale, n).exists()
    }
    if args.migration == "wishart_n_eff":
        names, migrate, date = [n for pair in WISHART_PAIRS for n in pair], wishart_n_eff, "2026-11-26"
    elif args.migration == "method_blocks":
        kinds = {n: k for n, k in kinds.items() if k in BLOCK_PREFIXES}
        names, date = list(kinds), "2026-11-27"

        def migrate(lines, heads, date):
            return method_blocks(lines, heads, date, kinds)
    else:
        if args.provenance and not args.before:
            parser.error("resolved_settings --provenance needs --before COMMIT")
        names, date = list(kinds), "2026-11-27"

        def migrate(lines, heads, date):
            return resolved_settings(lines, heads, date, kinds, args.scale)

    lines = {n: archive.load(archive.path_of(args.root, args.scale, n)) for n in names}
    heads = {n: archive.current_settings(config, args.scale, n) for n in names}
    out, log = migrate(lines, heads, args.date or date)
    print("\n".join(log) or "nothing to migrate")
    for name in names:
        before, after = len(lines[name]), len(out[name])
        print(f"{name}: {before} -> {after} archived lines")
        if (
            args.apply
            and (out[name] or lines[name])
            and json.dumps(out[name], sort_keys=True) != json.dumps(lines[name], sort_keys=True)
        ):
            archive.write(archive.path_of(args.root, args.scale, name), out[name])
    if args.provenance:
        restamp_all(args.root, args.scale, args.date or date, args.apply, args.migration, args.before)
    return 0


def _transform(migration: str, config: dict, scale: str):
    """`restamp_provenance`'s rewrite of one cell's settings for `migration`, at HEAD."""
    from ..config import experiment
    from ..plan import kind

    kinds = {n: spec["kind"] for n, spec in config["experiments"].items()}
    if migration == "method_blocks":

        def nest(rel, settings):
            k = kinds.get(rel.split("/")[1])
            if k not in BLOCK_PREFIXES:
                return settings
            coords = dict(part.split("~", 1) for part in rel.split("/")[2:])
            return nested_settings(settings, k, coords.get("method", settings.get("method")))[0]

        return nest

    cells: dict = {}

    def resolve(rel, settings):
        name = rel.split("/")[1]
        if name not in cells:
            cells[name] = {c.rel_dir: c for c in experiment(config, name, scale).cells()}
        cell = cells[name].get(rel)
        if cell is None:
            return settings
        return archive._plain(
            kind(cell.kind).cell_settings(
                type(cell)(scale=cell.scale, experiment=name, coords=cell.coords, settings=settings, kind=cell.kind)
            )
        )

    return resolve


def restamp_all(
    root: str, scale: str, date: str, apply: bool, migration: str = "method_blocks", before: str | None = None
) -> None:
    """`restamp_provenance` for each record of `figures/<scale>/` that no longer matches HEAD. The settings its
    build saw come from the record's commit (method_blocks) or from `before` (resolved_settings: the records
    matched the config there)."""
    from pathlib import Path

    from ..config import load_pipeline_config
    from . import provenance

    config = load_pipeline_config(root, {"scale": scale})
    transform = _transform(migration, config, scale)
    todo = []
    for path in sorted((Path(root) / "figures" / scale).glob(f"*{provenance.SUFFIX}")):
        rec = json.loads(path.read_text())
        if rec.get("scale") == scale and provenance.mismatch(rec, config) is not None:
            todo.append((path, rec))
    by_commit: dict[str, list] = {}
    for path, rec in todo:
        by_commit.setdefault(before or rec["commit"], []).append((path, rec))
    for commit, group in by_commit.items():
        wanted = [(rec["artefact"], list(rec.get("unavailable_datasets", ()))) for _, rec in group]
        for (path, rec), old in zip(group, _resolved_at(root, commit, wanted, scale)):
            head = provenance.resolved_config(config, rec["artefact"], scale, rec.get("unavailable_datasets", ()))
            new, why = restamp_provenance(
                rec,
                old,
                head,
                transform,
                provenance.fingerprint(config, rec["artefact"], scale, rec.get("unavailable_datasets", ())),
                date,
                migration,
            )
            print(f"{path}: {why}")
            if apply and new is not None:
                provenance.write(path, new)


if __name__ == "__main__":
    sys.exit(main())
