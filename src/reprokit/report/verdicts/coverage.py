"""What a claim reads and whether its cells cover its words: the experiments and metric it reads (`scope`), the
cells of each (`selectors`), the part of the scale's grid that has not run (`coverage`) and the settings its cells
run short of (`short_of`, the claim's `requires`).
"""

from __future__ import annotations

from ..store.cells import norm
from . import noise
from .sides import coord_key, fits, metric_of_row


def _sides(args: dict) -> tuple:
    """A check's `a` and each of its `b` (one or a list): rows or columns of a table, or {experiment, where}."""
    b = args.get("b")
    return (args.get("a"), *(b if isinstance(b, list) else [b]))


def scope(ctx, claim) -> tuple[list[str], str | None]:
    """(the experiments a claim reads, the metric it compares): its args' `experiment(s)` or its artefact's
    experiments; its args' `metric` or its artefact's `ours.metric`."""
    args = claim.args
    named = args.get("experiments") or args.get("experiment") or []
    experiments = [named] if isinstance(named, str) else list(named)
    for side in (*_sides(args), args.get("reference")):
        if isinstance(side, dict) and side.get("experiment") and side["experiment"] not in experiments:
            experiments.append(side["experiment"])  # compare's sides, vs_best_of's reference: their own experiment
    for pair in args.get("pairs") or []:  # paired_gap's [a, b] experiments
        experiments += [e for e in pair if e not in experiments]
    table = (getattr(ctx, "arts", {}) or {}).get(args.get("artefact", "")) if args.get("artefact") else None
    if table and not experiments:  # a table check: the experiments its entries read (ours, rows, columns)
        specs = [table.get("ours") or {}, *(table.get("rows") or {}).values(), *(table.get("columns") or {}).values()]
        experiments = list(dict.fromkeys(x["experiment"] for x in specs if isinstance(x, dict) and x.get("experiment")))
    if not experiments:
        experiments = list((getattr(ctx, "artefacts", {}).get(claim.artefact) or {}).get("experiments") or [])
    if not experiments:
        experiments = sorted(
            {
                r["experiment"]
                for r in ctx.arts.get(args.get("artefact", claim.artefact), {}).get("rows", {}).values()
                if isinstance(r, dict) and r.get("experiment")
            }
        )
    metric = args.get("metric") or (ctx.arts.get(args.get("artefact", claim.artefact)) or {}).get("ours", {}).get(
        "metric"
    )
    return experiments, metric


def entry_metrics(ctx, claim) -> list[str]:
    """The metrics of the table rows a table-entry claim compares (its args' `rows`, or `a` / `b` with
    `axis: rows`), each row's `metric` in its artefact's spec (Table 8: a timing ratio per row)."""
    args = claim.args
    named = list(args.get("rows") or []) + (list(_sides(args)) if args.get("axis") == "rows" else [])
    found = [metric_of_row(ctx, args.get("artefact", claim.artefact), r) for r in named if isinstance(r, str)]
    return list(dict.fromkeys(m for m in found if m))


def _grid(ctx, experiment: str) -> list[dict] | None:
    """The coordinates of every cell of `experiment` in the scale's grid (the pipeline config at hand), None where
    no config is at hand."""
    grid = getattr(ctx, "grid", None)
    return grid(experiment) if grid is not None else None


def selectors(ctx, claim, experiment: str) -> list[dict]:
    """The coordinate selectors of the cells of `experiment` the claim reads: its `where` with each side (`a`, `b`,
    `fast`, `slow`, `reference`) and group, or each table entry's where for a table check; [{}] for all."""
    args = claim.args
    base = dict(args.get("where") or {})
    if args.get("artefact") and hasattr(ctx, "_entry"):
        entries = []
        rows, cols = list(args.get("rows") or []), list(args.get("columns") or [])
        if args.get("over") is not None:
            sides = [args.get("a"), *(args["b"] if isinstance(args.get("b"), list) else [args.get("b")])]
            pairs = [(o, x) for o in args["over"] for x in sides if x is not None]
            entries = pairs if args.get("axis", "columns") == "columns" else [(x, o) for o, x in pairs]
        elif rows and cols:
            entries = [(r, c) for r in rows for c in cols]
        out = []
        for row, col in entries:
            found = ctx._entry(args.get("artefact", claim.artefact), row, col)
            if isinstance(found, tuple) and found[0] == experiment:
                out.append(found[3])
        return out or [{}]
    sides = []
    for key in ("a", "fast", "reference"):
        side = args.get(key)
        if isinstance(side, dict):
            sides.append(side.get("where", side) if key == "reference" else side)
    for key in ("b", "slow"):
        side = args.get(key)
        sides += [x for x in ([side] if isinstance(side, dict) else side or []) if isinstance(x, dict)]
    sides = [x for x in sides if x.get("experiment", experiment) == experiment] or [{}]
    groups = args.get("groups") or [{}]
    return [{**base, **g, **x} for x in sides for g in groups]


def coverage(ctx, claim, experiments: list[str]) -> str:
    """What the claim's cells miss of the grid its words need at this scale: "" when every cell it reads ran (or is
    n/a for want of data), else how many of which experiment did not, with an example of what is missing."""
    missing = []
    for experiment in experiments:
        grid = _grid(ctx, experiment)
        if not grid:
            continue
        sel = selectors(ctx, claim, experiment)
        needed = [c for c in grid if any(fits(c, w) for w in sel)]
        # the seeds are the rule's business (its s.e. or its family's spread), not the words': a configuration
        # counts as covered when any of its seeds ran (or is n/a for want of data)
        axes = [a for a in grid[0] if a not in noise.SEED_AXES]

        def key(coords, axes=axes) -> tuple:
            return tuple(str(norm(coords.get(a))) for a in axes)

        df = ctx.table(experiment) if hasattr(ctx, "table") else None
        ran = df[df["status"].isin(("completed", "diverged", "oom", "unavailable"))] if df is not None else []
        done = {key(r) for _, r in ran.iterrows()} if len(ran) else set()
        configurations = {key(c): c for c in needed}
        lacking = [c for k, c in configurations.items() if k not in done]
        total = len(configurations)
        if lacking:
            example = ", ".join(f"{k}={v}" for k, v in lacking[0].items() if k not in noise.SEED_AXES)
            missing.append(
                f"{total - len(lacking)} of {total} configurations of {experiment} ran (missing e.g. {example or 'all'})"
            )
    return "; ".join(missing)


# What a `requires` key means in the verdict's words (a setting's own name otherwise)
REQUIRED_WORDS = {
    "partition_updates": "updates of their least-updated partition",
    "steps": "iterations",
}


def _read(ctx, claim, experiments: list[str], key: str) -> list[tuple[dict, float]]:
    """(coordinates, value of `key`) of every cell in ctx's grid the claim reads."""
    values = getattr(ctx, "cell_values", None)
    found = []
    for experiment in experiments:
        for coords, settings in (values(experiment) if values else []) or []:
            if any(fits(coords, w) for w in selectors(ctx, claim, experiment)) and key in settings:
                value = settings[key]
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found.append(({**coords, "experiment": experiment}, float(value)))
    return found


def short_of(ctx, claim, experiments: list[str]) -> str:
    """Where the claim's cells run with less than its words need (`requires`: {setting: minimum}): "" when every
    cell it reads meets each minimum, else which setting falls short and by how much. A minimum of "paper" asks
    each cell for at least what the same configuration runs at paper scale (its seed aside): e.g. every partition
    updated as often as the paper's schedule updates it."""
    if not claim.requires:
        return ""
    out = []
    for key, minimum in claim.requires.items():
        words = REQUIRED_WORDS.get(key, key)
        found = _read(ctx, claim, experiments, key)
        if not found:
            continue
        if minimum != "paper":
            least = min(v for _, v in found)
            if least < minimum:
                out.append(f"its cells run {key} = {least:g}, its words need at least {minimum:g}")
            continue
        if ctx.scale == "paper" or not hasattr(ctx, "at_scale"):
            continue
        paper = {_config(c): v for c, v in _read(ctx.at_scale("paper"), claim, experiments, key)}
        ratios = [(v / paper[_config(c)], v, paper[_config(c)]) for c, v in found if paper.get(_config(c))]
        if ratios and min(ratios)[0] < 1:
            ratio, value, at_paper = min(ratios)
            out.append(
                f"its cells run as few as {value:g} {words} where the paper's schedule gives the same configuration "
                f"{at_paper:g} ({ratio:.0%} of it)"
            )
    return "; ".join(out)


def _config(coords: dict) -> tuple:
    return tuple(sorted((k, coord_key(v)) for k, v in coords.items() if k != "seed"))
