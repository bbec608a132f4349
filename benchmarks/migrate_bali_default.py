"""One-off archive migration (2026-11-28): BALI's UCI default moves to standardised targets.

The `bali_readings` table's stated rule (the text first; where it is silent, the reading nearer the paper on more
rows) picked standardised targets over raw ones at paper scale, 9 rows of 12 against 3 (figures/paper/
bali_readings.tex at commit 68d70f9). So the config's `bali` block of the uci_regression experiments now
standardises the targets and the raw-target reading is the named variant `bali_yraw`. The cells computed the
same things under the old names, so their archived lines are renamed instead of re-run:

* `bali_uci`, `bali_uci_protein`: method `bali` (raw targets) -> `bali_yraw`; method `bali_ystd` -> `bali`.
  Where N_eff = N (`n_eff_divisor` 1), `bali_ystd` recorded `wishart_n: n`, the same number as `n_eff`: the
  line gets `n_eff`, the value the `bali` block states.
* `bali_uci_wishart`, `bali_uci_protein_wishart` (raw targets, as every `bali` cell then): method `bali` ->
  `bali_yraw`, and the axis `bali.wishart_n` -> `bali_yraw.wishart_n`.

In each line the cell dir, `coords`, the settings block's key and, where named, the axis are renamed; the run's
own record (`info.standardize_y`) is checked against the new name, and the line is written only when its new
settings equal HEAD's for its new cell (`archive.differing_keys`) or it is listed as stale (it ran with other
settings before the rename: protein's std-y cells counted N, not N_eff, until they re-ran). A `migrations` entry says what was done.

    python benchmarks/migrate_bali_default.py --scale quick paper           # dry run
    python benchmarks/migrate_bali_default.py --scale quick paper --apply
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from reprokit.config import load_pipeline_config
from reprokit.report.store import archive

DATE = "2026-11-28"
RENAMES = {  # experiment: {old method: new method}
    "bali_uci": {"bali": "bali_yraw", "bali_ystd": "bali"},
    "bali_uci_protein": {"bali": "bali_yraw", "bali_ystd": "bali"},
    "bali_uci_wishart": {"bali": "bali_yraw"},
    "bali_uci_protein_wishart": {"bali": "bali_yraw"},
}
STANDARDISED = {"bali": True, "bali_yraw": False}  # what info.standardize_y must say under the new name


def rename_line(line: dict, old: str, new: str) -> tuple[dict, list[str]]:
    """(the line under method `new`, what changed besides the names)."""
    out = copy.deepcopy(line)
    extra = []
    parts = []
    for part in line["cell"].split("/"):
        if part == f"method~{old}":
            part = f"method~{new}"
        elif part.startswith(f"{old}."):
            part = new + part[len(old) :]
        parts.append(part)
    out["cell"] = "/".join(parts)
    out["coords"] = {
        (new + k[len(old) :] if k.startswith(f"{old}.") else k): (new if k == "method" else v)
        for k, v in line["coords"].items()
    }
    block = out["settings"].pop(old)
    if old == "bali_ystd" and block.get("wishart_n") == "n" and float(block.get("n_eff_divisor", 0)) == 1.0:
        block["wishart_n"] = "n_eff"  # N_eff = N: one number, the name the bali block states
        extra.append("wishart_n n -> n_eff (N_eff = N)")
    out["settings"][new] = block
    ran = (line.get("info") or {}).get("standardize_y")
    if ran is not None and bool(ran) != STANDARDISED[new]:
        raise ValueError(f"{line['cell']}: ran with standardize_y={ran}, cannot become method {new}")
    what = f"method {old} -> {new}: BALI's UCI default moved to standardised targets (bali_readings' rule)"
    if extra:
        what += "; " + "; ".join(extra)
    out["migrations"] = [
        *(line.get("migrations") or []),
        {"migration": "bali_default_std_y", "date": DATE, "from": old, "to": new, "what": what},
    ]
    return out, extra


def migrate(root: Path, scale: str, experiment: str, config: dict) -> tuple[dict, int, list[str]]:
    """(the archive's new lines, how many were renamed, the lines whose settings differ from HEAD's: cells that
    ran with other settings before the rename, left as they were and listed). Raises on a line that cannot be
    renamed (its run's standardize_y disagrees with the new name, or its new cell is not in HEAD's grid)."""
    path = archive.path_of(root, scale, experiment)
    lines = archive.load(path)
    now = archive.current_settings(config, scale, experiment)
    out, renamed, stale = {}, 0, []
    for cell, line in lines.items():
        method = line["coords"].get("method")
        if any(m.get("migration") == "bali_default_std_y" for m in line.get("migrations") or []):
            out[cell] = line  # migrated already
            continue
        if method in RENAMES[experiment]:
            line, _ = rename_line(line, method, RENAMES[experiment][method])
            renamed += 1
        if line["cell"] in out:
            raise ValueError(f"{path}: two lines for {line['cell']}")
        if line["cell"] not in now:
            raise ValueError(f"{path}: {line['cell']} is not a cell of HEAD's grid")
        keys = archive.differing_keys(line["settings"], now[line["cell"]])
        if keys:  # ran with other settings before the rename too (the report lists it as not used; it re-runs)
            stale.append(f"{line['cell']}: {keys}")
        out[line["cell"]] = line
    return out, renamed, stale


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", nargs="+", default=["quick", "paper"])
    p.add_argument("--root", default=".")
    p.add_argument("--apply", action="store_true")
    args = p.parse_args(argv)
    root = Path(args.root)
    config = load_pipeline_config(root)
    for scale in args.scale:
        for experiment in RENAMES:
            path = archive.path_of(root, scale, experiment)
            if not path.exists():
                continue
            try:
                lines, renamed, stale = migrate(root, scale, experiment, config)
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            print(f"{path}: {renamed} of {len(lines)} lines renamed; {len(stale)} stale (settings differ, re-run)")
            for line in stale:
                print(f"  stale: {line}")
            if args.apply and renamed:
                archive.write(path, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
