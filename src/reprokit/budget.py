"""Cost model: how many cells, iterations and device-hours a scale of the pipeline needs.

    python -m reprokit.budget --config scale=paper               # every experiment, H100 step costs
    python -m reprokit.budget --config scale=paper --profile cpu --experiment fig3a
    python -m reprokit.budget --config scale=paper --write-doc docs/slurm.md   # also its counts in docs/slurm.md

A cell's cost is the sum of its *parts*: (model, step kind, images per step, how many such steps),
priced with the measured per-step times of `data/step_costs.tsv` (columns: profile, device, model,
step, precision, images, ms_per_step, source, date), plus one start-up per cell. Each experiment kind
says, torch-free, which parts its cells run (`KindPlan.cost_parts` in `plan/<kind>.py`, parts from
`plan/costs.py`); the numbers are read from the cell's settings as the kind's `build` reads them. A row
measured at another number of images per step (batch x augmentation samples) is scaled linearly to the cell's.

Rows of the chosen profile are used first; every other price is labelled in the output, never silent:
  * `standard` priced by the `plain` (hand-written torch) row of the same model (the goal in
    benchmarks/bench_throughput.py is a pipeline step within 1.1x of it);
  * `partitioned` (param + hyper update) priced as 2 x standard/plain when not measured;
  * a precision without rows priced at fp32;
  * Diff. Laplace's hyper step (`lila_hyper`) and the Last-layer ML step (`llml`), where the profile has no
    row of its own (lila_hyper: measured on the CPU profile, `bench_throughput.py --steps lila_hyper`),
    priced as a labelled ESTIMATE: a fixed multiple of the standard step's per-image time
    (LILA_HYPER_FACTOR, LLML_FACTOR);
  * a (model, step) measured only on another profile's device priced with that device's row, scaled by
    the median ratio of the two devices' per-image times over the models both measured (conv nets and
    MLPs apart; MLPs have no GPU rows yet, so their CPU rows are used as they are: an upper bound);
  * nothing measured at all: FALLBACK_MS per step, marked FALLBACK.
Not modelled: evaluations of the MLP kinds (BALI, UCI, synthetic: a few predictive passes), data loading
(once per cell), queueing. `runtime_minutes` adds the SLURM margin.

Where each cell runs under `--profile slurm` (:func:`cell_costs`): on a GPU only where its steps, priced on
the GPU profile, run at least GPU_MIN_SPEEDUP times faster than on one CPU core of the `cpu` profile, a GPU
step never counted faster than the fastest step measured on that GPU (small MLPs at small batches are bound
by kernel launches there); else on the CPU partition. `reprokit.packing.pack_jobs` packs the cells into SLURM
jobs; the CLI prints, per experiment, the jobs, GPU-hours *allocated* (held by jobs, start-up included) and
CPU-hours, with one cell per GPU job (the profile before packing) and packed.

This module imports no torch (it runs while Snakemake builds the DAG); `benchmarks/bench_throughput.py
--write-costs` and `benchmarks/measure_step_costs.py` fill the table.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .config import grid_of, load_pipeline_config
from .packing import JOB_OVERHEAD_S, CellCost, PackingSettings, pack_jobs
from .plan import KINDS
from .plan.costs import CellWork, Part
from .runtime_settings import RuntimeSettings

COSTS_FILE = Path(__file__).resolve().parent / "data" / "step_costs.tsv"
COLUMNS = ("profile", "device", "model", "step", "precision", "images", "ms_per_step", "source", "date")
FALLBACK_MS = 1000.0  # per step, for a (model, step) measured nowhere: loudly marked FALLBACK
DEFAULT_PROFILE = {"paper": "h100", "quick": "cpu", "test": "cpu"}  # paper scale runs on GPUs (README)
PROFILE_ENV = "REPROKIT_COST_PROFILE"  # overrides the profile `runtime_minutes` prices SLURM cells with
MARGIN, EXTRA_MINUTES, MAX_MINUTES = 1.5, 10, 24 * 60  # cells checkpoint: one cut off at the cap resumes
# Labelled estimates (ESTIMATE in the notes) for steps without a measured row, per image of a standard step:
LILA_HYPER_FACTOR = 25.0  # Diff. Laplace hyper step: 10 class backward passes with create_graph + their backward
LLML_FACTOR = 2.7  # Last-layer ML step (~11 s at batch 200, orbit 20, 1200 inducing points on the CPU profile)
GPU_PROFILE, CPU_PROFILE = "h100", "cpu"  # the two kinds of SLURM node a cell can ask for
GPU_MIN_SPEEDUP = 4.0  # a cell asks for a GPU only where its steps run at least this much faster there than on a core
# steps that run on the host whatever the cell's device (PBP: sequential float64 numpy updates): a cell with one
# asks for a CPU, and another profile prices them with the cpu row as is
HOST_STEPS = frozenset({"pbp"})


@dataclass
class Estimate:
    seconds: float
    n_steps: int
    notes: list[str] = field(default_factory=list)  # how each non-exact price was made
    fallback: bool = False


# ------------------------------------------------------------------------------------------------
# cells -> parts: each kind's plan owns them (KindPlan.cost_parts, torch-free)


def cell_work(cell) -> CellWork | None:
    """The cell's parts, or None for a kind the cost model does not know (priced as FALLBACK)."""

    plan = KINDS.get(cell.kind)
    return plan.cost_parts(cell) if plan is not None else None


# ------------------------------------------------------------------------------------------------
# the step-cost table


def read_costs(path: str | Path = COSTS_FILE) -> list[dict]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"))
    for r in rows:
        r["ms_per_step"] = float(r["ms_per_step"])
        r["images"] = int(r["images"]) if r.get("images") not in (None, "") else None
    return rows


def write_costs(new_rows: list[dict], path: str | Path = COSTS_FILE) -> None:
    """Add rows, replacing those of the same (profile, model, step, precision); keeps the header comments."""
    path = Path(path)
    head, rows = [], []
    if path.exists():
        head = [line for line in path.read_text().splitlines(keepends=True) if line.startswith("#")]
        rows = read_costs(path)
    key = lambda r: (r["profile"], r["model"], r["step"], r["precision"])  # noqa: E731
    replaced = {key(r) for r in new_rows}
    rows = [r for r in rows if key(r) not in replaced] + list(new_rows)
    rows.sort(key=lambda r: (r["profile"], r["model"], r["step"], r["precision"]))
    with open(path, "w", newline="") as f:
        f.writelines(head)
        w = csv.DictWriter(f, COLUMNS, delimiter="\t", extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    **r,
                    "images": "" if r.get("images") is None else r["images"],
                    "ms_per_step": f"{float(r['ms_per_step']):.4g}",
                }
            )


class CostTable:
    def __init__(self, rows: list[dict], profile: str):
        self.rows = rows
        self.profile = profile
        profiles = sorted({r["profile"] for r in rows})
        if profile not in profiles:
            raise ValueError(f"cost profile '{profile}' unknown (have: {', '.join(profiles)}; see {COSTS_FILE})")
        self.device = next(r["device"] for r in rows if r["profile"] == profile)
        self._index = {(r["profile"], r["model"], r["step"], r["precision"]): r for r in rows}

    def _find(self, model: str, step: str, precision: str, notes: list[str], where: str = "own"):
        """(row, factor) for one step at `precision`, on this profile or (where='other') another one."""
        profiles = [self.profile] if where == "own" else sorted({r["profile"] for r in self.rows} - {self.profile})
        for prof in profiles:
            for prec in dict.fromkeys([precision, "fp32"]):
                row = self._index.get((prof, model, step, prec))
                if row is None:
                    continue
                if prec != precision:
                    notes.append(f"{model} {step}: no {precision} row, fp32 used")
                if prof != self.profile:
                    factor = 1.0 if step == "startup" or step in HOST_STEPS else self.device_factor(prof, model)
                    how = (
                        f"scaled x{factor:.3g} (median per-image time ratio of the models measured on both)"
                        if factor != 1.0
                        else "used as is"
                    )
                    notes.append(f"{model} {step}: measured on {row['device']} only, {how}")
                    row = {**row, "ms_per_step": row["ms_per_step"] * factor}
                return row
        return None

    def device_factor(self, other: str, model: str) -> float:
        """This profile's time over `other`'s for the same work: the median ratio of per-image times of the
        rows both profiles measured, among models of the same family (MLP or not); 1 when there are none."""
        mlp = model.startswith("mlp")
        ratios = []
        for (prof, m, step, prec), row in self._index.items():
            mine = self._index.get((self.profile, m, step, prec))
            if prof != other or mine is None or m.startswith("mlp") != mlp or m == "python":
                continue
            ratios.append((mine["ms_per_step"] / (mine["images"] or 1)) / (row["ms_per_step"] / (row["images"] or 1)))
        ratios.sort()
        return ratios[len(ratios) // 2] if ratios else 1.0

    def price(self, part: Part, precision: str, notes: list[str]) -> tuple[float, bool]:
        """(ms per step of `part`, fallback?)."""
        derived = {
            "standard": [("plain", 1.0, "plain-torch row as the pipeline step")],
            "param": [
                ("standard", 1.0, "standard step as the partitioned parameter update"),
                ("plain", 1.0, "plain-torch row as the partitioned parameter update"),
            ],
            "hyper": [
                ("standard", 1.0, "standard step as the hyper update"),
                ("plain", 1.0, "plain-torch row as the hyper update"),
            ],
            "partitioned": [
                ("standard", 2.0, "2 x standard step (param + hyper update)"),
                ("plain", 2.0, "2 x plain-torch row (param + hyper update)"),
            ],
            "lila_hyper": [
                (
                    "standard",
                    LILA_HYPER_FACTOR,
                    f"ESTIMATE {LILA_HYPER_FACTOR:g} x standard step "
                    "per image (KFAC-GGN: one backward per class with create_graph, then the "
                    "double backward; not measured)",
                ),
                (
                    "plain",
                    LILA_HYPER_FACTOR,
                    f"ESTIMATE {LILA_HYPER_FACTOR:g} x plain-torch row "
                    "per image (Diff. Laplace hyper step; not measured)",
                ),
            ],
            "llml": [
                (
                    "standard",
                    LLML_FACTOR,
                    f"ESTIMATE {LLML_FACTOR:g} x standard step per image "
                    "(CNN on the orbit + the sparse GP; not measured)",
                ),
                (
                    "plain",
                    LLML_FACTOR,
                    f"ESTIMATE {LLML_FACTOR:g} x plain-torch row per image (Last-layer ML step; not measured)",
                ),
            ],
        }
        for where in ("own", "other"):
            for step, factor, why in [(part.step, 1.0, "")] + derived.get(part.step, []):
                row = self._find(part.model, step, precision, notes, where)
                if row is None:
                    continue
                if why:
                    notes.append(f"{part.model} {part.step}: {why}")
                ms = row["ms_per_step"] * factor
                if part.images is not None and row["images"] and part.images != row["images"]:
                    ms *= part.images / row["images"]
                return ms, False
        notes.append(f"FALLBACK {part.model} {part.step}: no measured cost anywhere, {FALLBACK_MS:g} ms/step assumed")
        return FALLBACK_MS, True

    def startup_seconds(self, notes: list[str]) -> float:
        row = self._find("python", "startup", "fp32", notes) or self._find("python", "startup", "fp32", notes, "other")
        return row["ms_per_step"] / 1e3 if row is not None else 0.0

    def fastest_step_ms(self) -> float:
        """The fastest training step measured on this profile's device (0 when it measured none)."""
        return min(
            (
                r["ms_per_step"]
                for r in self.rows
                if r["profile"] == self.profile and r["model"] != "python" and "@" not in r["step"]
            ),
            default=0.0,
        )

    def shared_ms(self, part: Part, precision: str, k: int) -> float | None:
        """Measured ms per step of `part` while k cells share this device (step `<step>@<k>`), else None."""
        for prec in dict.fromkeys([precision, "fp32"]):
            row = self._index.get((self.profile, part.model, f"{part.step}@{k}", prec))
            if row is not None:
                ms = row["ms_per_step"]
                if part.images is not None and row["images"] and part.images != row["images"]:
                    ms *= part.images / row["images"]
                return ms
        return None


def run_settings(config: dict | None):
    """The config's `run:` block as reprokit.runtime_settings.RuntimeSettings (its defaults where a key is absent)."""

    return RuntimeSettings.from_dict((config or {}).get("run"))


_NO_WORK = object()


def estimate(cell, table: CostTable, precision: str = "fp32", work=_NO_WORK) -> Estimate:
    """`work`: the cell's cell_work(cell) where the caller has it already."""
    notes: list[str] = []
    work = cell_work(cell) if work is _NO_WORK else work
    if work is None:
        n = int(cell.settings.get("n_steps", 0) or 0)
        notes.append(f"FALLBACK kind {cell.kind}: no cost model, {FALLBACK_MS:g} ms x n_steps ({n}) assumed")
        return Estimate(FALLBACK_MS * n / 1e3 + table.startup_seconds(notes), n, notes, True)
    seconds, fallback = table.startup_seconds(notes), False
    for part in work.parts:
        ms, fb = table.price(part, precision, notes)
        seconds += ms * part.count / 1e3
        fallback |= fb
    return Estimate(seconds, work.n_steps, list(dict.fromkeys(notes)), fallback)


def runtime_minutes(cell, config: dict | None = None, table: CostTable | None = None) -> int:
    """SLURM wall time of a cell: MARGIN x the estimate + EXTRA_MINUTES, up to 5 min, at most MAX_MINUTES.

    Priced with the profile of $REPROKIT_COST_PROFILE, else the scale's default (paper: h100)."""
    if table is None:
        table = default_table(os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE.get(cell.scale, "cpu"))
    precision = run_settings(config).precision
    est = estimate(cell, table, precision)
    minutes = MARGIN * est.seconds / 60 + EXTRA_MINUTES
    return int(min(MAX_MINUTES, 5 * math.ceil(minutes / 5)))


_TABLES: dict[str, CostTable] = {}


def default_table(profile: str) -> CostTable:
    """The repository's table for `profile`, read once per process (the DAG asks per cell)."""
    if profile not in _TABLES:
        _TABLES[profile] = CostTable(read_costs(), profile)
    return _TABLES[profile]


# ------------------------------------------------------------------------------------------------
# SLURM: which node each cell asks for, and the packed jobs (reprokit.packing)


def step_seconds(work: CellWork | None, table: CostTable, precision: str, floor_ms: float = 0.0) -> float | None:
    """Seconds of a cell's training steps (its cell_work; no start-up), each step at least `floor_ms`;
    None: no cost model."""
    if work is None:
        return None
    notes: list[str] = []
    return sum(max(table.price(part, precision, notes)[0], floor_ms) * part.count for part in work.parts) / 1e3


def cell_costs(
    cells,
    config: dict | None = None,
    gpu: CostTable | None = None,
    cpu: CostTable | None = None,
    shared: tuple[int, ...] = (),
) -> list:
    """reprokit.packing.CellCost of each cell: the device it asks for under `--profile slurm` and its
    estimates. GPU prices from $REPROKIT_COST_PROFILE or h100, CPU prices from the `cpu` profile (one core)."""

    precision = run_settings(config).precision
    gpu = gpu or default_table(os.environ.get(PROFILE_ENV) or GPU_PROFILE)
    cpu = cpu or default_table(CPU_PROFILE)
    floor = gpu.fastest_step_ms()
    out = []
    for cell in cells:
        work = cell_work(cell)
        on_gpu, on_cpu = estimate(cell, gpu, precision, work), estimate(cell, cpu, precision, work)
        g, c = step_seconds(work, gpu, precision, floor), step_seconds(work, cpu, precision)
        speedup = c / g if g and c is not None else math.inf  # no cost model: a GPU, as before
        host = work is not None and any(part.step in HOST_STEPS for part in work.parts)
        device = "gpu" if speedup >= GPU_MIN_SPEEDUP and not host else "cpu"
        sharing = {}
        for k in shared if work is not None and device == "gpu" else ():
            ms = [gpu.shared_ms(part, precision, k) for part in work.parts]
            if all(m is not None for m in ms):
                startup = gpu.startup_seconds([])
                sharing[k] = startup + sum(m * part.count for m, part in zip(ms, work.parts)) / 1e3
        out.append(
            CellCost(
                rel_dir=cell.rel_dir,
                experiment=cell.experiment,
                device=device,
                seconds=(on_gpu if device == "gpu" else on_cpu).seconds,
                gpu_seconds=on_gpu.seconds,
                speedup=speedup,
                shared_seconds=sharing,
            )
        )
    return out


def slurm_plan(config: dict, settings=None, experiments: list[str] | None = None, rows: list[dict] | None = None):
    """(jobs, costs) of every cell of the config's scale, packed as `--profile slurm` packs them
    (`rows`: a step-cost table other than the repository's)."""

    settings = settings or PackingSettings()
    cells = [
        c
        for name in sorted(config["experiments"])
        if not experiments or name in experiments
        for c in grid_of(config, name, config["scale"]).cells()
    ]
    tables = {}
    if rows is not None:
        tables = {
            "gpu": CostTable(rows, os.environ.get(PROFILE_ENV) or GPU_PROFILE),
            "cpu": CostTable(rows, CPU_PROFILE),
        }
    costs = cell_costs(cells, config, shared=(settings.cells_per_gpu,), **tables)
    return pack_jobs(costs, settings, prefix=f"pack_{config['scale']}"), costs


def slurm_rows(jobs, costs, threads: int = 1) -> list[dict]:
    """Per experiment: cells, jobs with one cell per GPU job and packed, GPU-hours allocated both ways, CPU-hours.
    A packed job's hours are split among its cells by their share of it; it counts once under each experiment."""

    by_rel = {c.rel_dir: c for c in costs}
    rows: dict[str, dict] = {}
    for c in costs:
        r = rows.setdefault(
            c.experiment,
            {
                "experiment": c.experiment,
                "cells": 0,
                "gpu_cells": 0,
                "jobs_single": 0,
                "jobs": set(),
                "gpu_h_single": 0.0,
                "gpu_h": 0.0,
                "cpu_h": 0.0,
            },
        )
        r["cells"] += 1
        r["gpu_cells"] += c.device == "gpu"
        r["jobs_single"] += 1
        r["gpu_h_single"] += (c.gpu_seconds + JOB_OVERHEAD_S) / 3600
    for j, job in enumerate(jobs):
        held = job.wall_s + JOB_OVERHEAD_S
        for rel in job.cells:
            r = rows[by_rel[rel].experiment]
            r["jobs"].add(j)
            hours = held * job.share_s[rel] / max(job.wall_s, 1e-9) / 3600
            if job.device == "gpu":
                r["gpu_h"] += hours
            else:
                r["cpu_h"] += hours * job.at_once * threads
    for r in rows.values():
        r["jobs"] = len(r["jobs"])
    return [rows[k] for k in sorted(rows)]


def print_slurm(
    config: dict, settings=None, experiments: list[str] | None = None, rows: list[dict] | None = None
) -> None:

    settings = settings or PackingSettings()
    threads = run_settings(config).threads_per_cell
    jobs, costs = slurm_plan(config, settings, experiments, rows)
    per_exp = slurm_rows(jobs, costs, threads)
    gpu_profile = os.environ.get(PROFILE_ENV) or GPU_PROFILE
    print(
        f"\nSLURM (--profile slurm): a cell asks for a GPU where the cost model prices its steps >= "
        f"{GPU_MIN_SPEEDUP:g}x faster on {gpu_profile} than on one '{CPU_PROFILE}' core, else the CPU partition; "
        f"cells under {settings.long_minutes:g} min packed into jobs of ~{settings.target_minutes:g} "
        f"({settings.min_minutes:g}-{settings.max_minutes:g}) estimated min, {settings.cells_per_gpu} at once on a "
        f"GPU, {settings.cells_per_cpu_job} on a CPU job."
    )
    w = max([22, *(len(r["experiment"]) + 2 for r in per_exp)])
    print(
        f"{'experiment':<{w}}{'cells':>7}{'on GPU':>8}{'jobs 1/cell':>13}{'jobs packed':>13}"
        f"{'GPU-h 1/cell':>14}{'GPU-h packed':>14}{'CPU-h packed':>14}"
    )
    for r in per_exp:
        print(
            f"{r['experiment']:<{w}}{r['cells']:>7}{r['gpu_cells']:>8}{r['jobs_single']:>13}{r['jobs']:>13}"
            f"{r['gpu_h_single']:>14.1f}{r['gpu_h']:>14.1f}{r['cpu_h']:>14.1f}"
        )
    n_gpu = sum(j.device == "gpu" for j in jobs)
    print(
        f"{'total':<{w}}{len(costs):>7}{sum(c.device == 'gpu' for c in costs):>8}{len(costs):>13}{len(jobs):>13}"
        f"{sum(r['gpu_h_single'] for r in per_exp):>14.1f}{sum(r['gpu_h'] for r in per_exp):>14.1f}"
        f"{sum(r['cpu_h'] for r in per_exp):>14.1f}"
    )
    short = [j for j in jobs if not j.alone and j.wall_s < settings.min_minutes * 60]
    alone = sum(j.alone for j in jobs)
    short_alone = sum(j.alone and j.wall_s < settings.long_minutes * 60 for j in jobs)
    print(
        f"SLURM jobs: {len(costs)} with one cell per job; {len(jobs)} with packing ({n_gpu} GPU, {len(jobs) - n_gpu} "
        f"CPU): {len(jobs) - alone} packed jobs and {alone} single cells"
        + (
            f" ({short_alone} under {settings.long_minutes:g} estimated min: nothing to pack them with)"
            if short_alone
            else f" of {settings.long_minutes:g} estimated min or more"
        )
        + f"; packed jobs under {settings.min_minutes:g} estimated min: {len(short)}."
    )
    shared = any(c.shared_seconds for c in costs)
    print(
        "Allocated hours: each job's estimated wall time + "
        f"{JOB_OVERHEAD_S:g} s start-up; GPU cells sharing a GPU "
        + ("priced from the measured <step>@k rows where step_costs.tsv has them, else " if shared else "")
        + "counted as fast as one after another"
        + ("." if shared else " (no <step>@k rows measured yet: benchmarks/gpu_packing.sh).")
    )


DOC_MARKERS = ("<!-- slurm-plan:start -->", "<!-- slurm-plan:end -->")  # docs/slurm.md's generated block


def plan_in_words(config: dict, settings=None, rows: list[dict] | None = None) -> str:
    """The config's cells and SLURM jobs at its scale, in one sentence (docs/slurm.md's generated block, so the
    docs never carry a count typed in by hand): cells, where they run, how many are short, the jobs."""
    settings = settings or PackingSettings()
    jobs, costs = slurm_plan(config, settings, rows=read_costs() if rows is None else rows)
    gpu = sum(c.device == "gpu" for c in costs)
    short = sum(c.seconds < settings.long_minutes * 60 for c in costs)
    alone = sum(j.alone for j in jobs)
    return (
        f"At {config['scale']} scale the config has {len(costs)} cells: {len(costs) - gpu} on the CPU partition, "
        f"{gpu} with a GPU; {short} estimated under {settings.long_minutes:g} minutes; SLURM jobs: {len(costs)} with "
        f"one cell per job, {len(jobs)} packed ({len(jobs) - alone} packed jobs and {alone} cells alone)."
    )


def doc_block(text: str) -> str:
    """What stands between DOC_MARKERS in `text` (stripped)."""
    start, end = DOC_MARKERS
    if start not in text or end not in text:
        raise ValueError(f"no {start} ... {end} block")
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def write_doc(path: str | Path, words: str) -> None:
    """Put `words` between DOC_MARKERS in the file at `path`."""
    path = Path(path)
    text = path.read_text()
    start, end = DOC_MARKERS
    old = doc_block(text)
    path.write_text(text.replace(f"{start}\n{old}\n{end}", f"{start}\n{words}\n{end}", 1))
    if doc_block(path.read_text()) != words:
        raise ValueError(f"{path}: write the block as {start}, a line, {end}")


# ------------------------------------------------------------------------------------------------
# CLI


def parse_config_args(items: list[str]) -> dict:
    """snakemake-style `key=value` overrides (values parsed as YAML)."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--config: expected key=value, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out


def budget(config: dict, table: CostTable, experiments: list[str] | None = None) -> list[dict]:

    scale = config["scale"]
    precision = run_settings(config).precision
    rows = []
    for name in sorted(config["experiments"]):
        if experiments and name not in experiments:
            continue
        g = grid_of(config, name, scale)
        cells = list(g.cells())
        ests = [estimate(c, table, precision) for c in cells]
        notes: dict[str, int] = {}
        for e in ests:
            for n in e.notes:
                notes[n] = notes.get(n, 0) + 1
        rows.append(
            {
                "experiment": name,
                "kind": g.kind,
                "cells": len(cells),
                "iterations": sum(e.n_steps for e in ests),
                "device_hours": sum(e.seconds for e in ests) / 3600,
                "max_cell_hours": max((e.seconds for e in ests), default=0.0) / 3600,
                "fallback_cells": sum(e.fallback for e in ests),
                "notes": notes,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reprokit.budget", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="as snakemake's (scale=paper ...)")
    p.add_argument(
        "--profile",
        default=None,
        help="step-cost profile (column `profile` of the table; default: h100 for scale paper, cpu otherwise)",
    )
    p.add_argument("--experiment", action="append", default=None, help="only this experiment (repeatable)")
    p.add_argument("--root", default=".", help="repository root (config/, workflow/schemas/)")
    p.add_argument("--costs", default=str(COSTS_FILE), help="step-cost table (TSV)")
    p.add_argument("--notes", action="store_true", help="list how each non-exact price was made")
    p.add_argument(
        "--cells-per-gpu",
        type=int,
        default=None,
        metavar="K",
        help="as slurm/config.yaml's set-resources.cell.cells_per_gpu (default: reprokit.packing.PackingSettings)",
    )
    p.add_argument(
        "--cells-per-cpu-job",
        type=int,
        default=None,
        metavar="K",
        help="as slurm/config.yaml's set-resources.cell.cells_per_cpu_job",
    )
    p.add_argument("--no-slurm", action="store_true", help="leave out the SLURM jobs and allocated hours")
    p.add_argument(
        "--write-doc",
        metavar="PATH",
        default=None,
        help="also write the cells and SLURM jobs in words into PATH's generated block (docs/slurm.md, paper scale)",
    )
    args = p.parse_args(argv)

    config = load_pipeline_config(args.root, parse_config_args(args.config))
    scale = config["scale"]
    if args.write_doc:
        write_doc(args.write_doc, plan_in_words(config, rows=read_costs(args.costs)))
    profile = args.profile or DEFAULT_PROFILE[scale]
    table = CostTable(read_costs(args.costs), profile)
    known = set(config["experiments"])
    for name in args.experiment or []:
        if name not in known:
            raise SystemExit(f"--experiment: no experiment '{name}' (have: {', '.join(sorted(known))})")
    rows = budget(config, table, args.experiment)
    precision = run_settings(config).precision
    print(
        f"scale {scale}, precision {precision}, step costs of profile '{profile}' ({table.device}), "
        f"{Path(args.costs).name}"
    )
    w = max([22, *(len(r["experiment"]) + 2 for r in rows)])  # names never run into the kind column
    print(f"{'experiment':<{w}}{'kind':<22}{'cells':>7}{'iterations':>13}{'device-h':>11}{'max cell h':>12}  priced")
    for r in rows:
        derived = [n for n in r["notes"] if not n.startswith("python startup")]  # start-up: see --notes
        how = (
            f"FALLBACK for {r['fallback_cells']} cells"
            if r["fallback_cells"]
            else ("partly derived (see --notes)" if derived else "measured")
        )
        print(
            f"{r['experiment']:<{w}}{r['kind']:<22}{r['cells']:>7}{r['iterations']:>13,}{r['device_hours']:>11.1f}"
            f"{r['max_cell_hours']:>12.2f}  {how}"
        )
        if args.notes or r["fallback_cells"]:
            for note, count in r["notes"].items():
                if args.notes or note.startswith("FALLBACK"):
                    print(f"    {count:>5} cells: {note}")
    total_h = sum(r["device_hours"] for r in rows)
    print(
        f"{'total':<{w + 22}}{sum(r['cells'] for r in rows):>7}{sum(r['iterations'] for r in rows):>13,}{total_h:>11.1f}"
    )
    fb = sum(r["fallback_cells"] for r in rows)
    if fb:
        print(
            f"FALLBACK: {fb} cells priced at {FALLBACK_MS:g} ms/step (nothing measured for them); the total is a guess"
        )
    print(
        "Estimates: measured step time x steps + start-up per cell (not modelled: MLP-kind evaluations, "
        "queueing); SLURM asks 1.5x + 10 min per cell."
    )
    all_rows = read_costs(args.costs)
    if not args.no_slurm and {GPU_PROFILE, CPU_PROFILE} <= {r["profile"] for r in all_rows}:
        defaults = PackingSettings()
        print_slurm(
            config,
            PackingSettings(
                cells_per_gpu=args.cells_per_gpu or defaults.cells_per_gpu,
                cells_per_cpu_job=args.cells_per_cpu_job or defaults.cells_per_cpu_job,
            ),
            args.experiment,
            all_rows,
        )
    elif not args.no_slurm:
        print(f"(no SLURM plan: {Path(args.costs).name} lacks the '{GPU_PROFILE}' or '{CPU_PROFILE}' profile)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
