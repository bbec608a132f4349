"""Table 8 of the partitioned-networks paper (App. D.2): time per update relative to a standard update, from the
`update_timing` cells (builders/update_timing.py), next to the paper's quoted numbers.

`Timings` holds an experiment's tidy aggregate and curves (one row per timed repetition); `entries` gives every
measured ratio, `table` the table the notebook writes (method and update as the key column, per model the measured
entry and the paper's), `caption`, `source_note` and `footnotes` its words. Each measured entry is the median over
all timed repetitions (pooled over seeds, after warm-up) of the per-repetition ratio update / standard update, with
a 95% bootstrap confidence interval of that median.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store.stats import median_ci
from ..verdicts import papers
from . import style

LABELS = {"mnist_cnn": "MNIST CNN", "fixup_resnet8": "fixup ResNet-8", "fixup_resnet14": "fixup ResNet-14"}
# measured update -> (method, update) of the paper's rows, in the paper's order
UPDATE = {
    "augerino": ("Augerino", "Param. + hyperparam."),
    "dl_param": ("Diff. Laplace", "Param."),
    "dl_hyper": ("Diff. Laplace", "Hyperparam."),
    "param": ("Partitioned", "Param."),
    "hyper": ("Partitioned", "Hyperparam."),
}
MEASURED, PAPER = "measured (this run)", "paper, quoted"  # headers get the device and batch (table)
# The paper's batch per model as App. D.2, the section that reports these timings, states it: 250 (MNIST) and 200
# (CIFAR10). (Its main experiments use 200 and 250, App. I.4; our paper scale follows those,
# config/experiments/partitioned_tables.yaml; the last footnote says so.)
PAPER_BATCH = {"mnist_cnn": 250, "fixup_resnet8": 200, "fixup_resnet14": 200}
CLOCK = {"cpu": "process CPU time", "wall": "wall-clock time (after device synchronisation)"}


def label(model: str) -> str:
    return LABELS.get(model, model)


class Timings:
    """The completed cells of an `update_timing` experiment and their timed repetitions."""

    def __init__(self, cells: pd.DataFrame, curves: pd.DataFrame):
        self.cells = cells
        self.curves = curves
        self.done = cells[cells["status"] == "completed"]

    def models(self, paper_models) -> list[str]:
        """The models that have cells: the paper's in its order, then ours by name."""
        have = set(self.cells["model"])
        return [m for m in paper_models if m in have] + sorted(have - set(paper_models))

    def repetitions(self, model: str) -> pd.DataFrame:
        """Timed (non-warm-up) repetitions of every completed cell of `model`, pooled over seeds."""
        seeds = set(self.done.loc[self.done["model"] == model, "seed"])
        c = self.curves[(self.curves["model"] == model) & self.curves["seed"].isin(seeds)]
        if "warmup" not in c:
            return c.iloc[0:0]
        return c[c["warmup"].astype(str) == "False"]

    def timer(self, model: str) -> str:
        timers = set(self.done.loc[self.done["model"] == model, "timer"])
        if len(timers) != 1:
            raise ValueError(f"{model}: cells use different timers {timers}")
        return timers.pop()

    def ratio(self, model: str, kind: str) -> tuple[float, float, float, int]:
        """(median, 95% CI low, high, number of repetitions) of the per-repetition ratios, over the timed
        repetitions that ran the update (Diff. Laplace's hyper update runs in fewer)."""
        reps = self.repetitions(model)
        t = self.timer(model) if not reps.empty else None
        if t is None or f"{kind}_{t}_s" not in reps:
            return (np.nan, np.nan, np.nan, 0)
        reps = reps[reps[f"{kind}_{t}_s"].notna()]
        if reps.empty:
            return (np.nan, np.nan, np.nan, 0)
        r = (reps[f"{kind}_{t}_s"] / reps[f"standard_{t}_s"]).to_numpy(dtype=float)
        lo, hi = median_ci(r)
        return float(np.median(r)), lo, hi, len(r)

    def dl_outcomes(self, model: str) -> list[str]:
        """The Diff. Laplace hyper update's outcome in each completed cell of `model` (measured / oom / not measured)."""
        if "dl_hyper_outcome" not in self.done:
            return []
        return [str(v) for v in self.done.loc[self.done["model"] == model, "dl_hyper_outcome"].dropna()]

    def standard_ms(self, model: str) -> float:
        reps = self.repetitions(model)
        return float(1000 * reps[f"standard_{self.timer(model)}_s"].median()) if not reps.empty else np.nan

    def batch(self, model: str) -> str:
        batch = self.done.loc[self.done.model == model, "batch_size"]
        return str(int(batch.iloc[0])) if len(batch) else "?"

    def column(self, name: str) -> list:
        """The sorted distinct values of a column of the completed cells ([] where the aggregate lacks it)."""
        return sorted(set(self.done[name].dropna())) if name in self.done else []

    def entries(self, models) -> dict:
        """{(model, update): ratio stats} for every model and measured update."""
        return {(m, kind): self.ratio(m, kind) for m in models for kind in UPDATE}


def fmt_ratio(stats) -> str:
    med, lo, hi, n = stats
    # the interval under the median (one column per model and source fits the page in width and height)
    return "n/a" if n == 0 or not np.isfinite(med) else f"{med:.2f}\n[{lo:.2f}, {hi:.2f}]"


def fmt_measured(timings: Timings, measured: dict, model: str, key: str) -> str:
    if key == "dl_hyper":
        outcomes = timings.dl_outcomes(model)
        n_oom = outcomes.count("oom")
        if n_oom:
            return f"OOM [b] ({n_oom} of {len(outcomes)} cells)" if n_oom < len(outcomes) else "OOM [b]"
        if outcomes and set(outcomes) == {"not measured"}:
            return "not measured"
    return fmt_ratio(measured[(model, key)])


def fmt_paper(value, method: str, model: str) -> str:
    if value is None:
        return "-"
    text = str(value) if isinstance(value, str) else f"{value:g}"
    if method == "Diff. Laplace" and (model == "fixup_resnet8" or value == "OOM"):
        text += " [a]"
    return text


def table(timings: Timings, paper_all: dict, models: list[str], measured: dict) -> pd.DataFrame:
    """One key column, method over update (each row is two lines, the measured interval under its median); per
    model the measured entry and the paper's, each column naming its device and batch."""
    paper = papers.artefact(paper_all, "table8")
    paper_models = list(paper["columns"])
    paper_rows = {
        (r["method"], r["update"]): {m: papers.entry(paper_all, "table8", key, m, None) for m in paper_models}
        for key, r in paper["rows"].items()
    }
    rows = []
    std_row = {("", "Update"): "Standard param.\n(reference)"}
    for m in models:
        ms = timings.standard_ms(m)
        std_row[(label(m), MEASURED)] = f"1\n(= {ms:.0f} ms)" if np.isfinite(ms) else "n/a"
        std_row[(label(m), PAPER)] = "1"
    rows.append(std_row)
    for key, (method, update) in UPDATE.items():
        row = {("", "Update"): f"{method}\n{update}"}
        for m in models:
            row[(label(m), MEASURED)] = fmt_measured(timings, measured, m, key)
            row[(label(m), PAPER)] = fmt_paper(paper_rows.get((method, update), {}).get(m), method, m)
        rows.append(row)
    out = pd.DataFrame(rows)
    names = timings.column("device_name")
    our_device = "/".join(n.replace("NVIDIA ", "") if ("NVIDIA" in n or "GPU" in n) else "CPU" for n in names)

    def header(model: str, which: str) -> str:
        if which == PAPER:
            device = paper["device"].replace("NVIDIA ", "").split("-")[0]
            return f"paper\n({device},\nbatch {PAPER_BATCH.get(model, '?')})"
        return f"measured\n({our_device or 'n/a'},\nbatch {timings.batch(model)})"

    out.columns = pd.MultiIndex.from_tuples(
        [
            (top, header(next(m for m in models if label(m) == top), sub)) if top else (top, sub)
            for top, sub in out.columns
        ]
    )
    return out


def caption(paper_all: dict) -> str:
    return (
        "Time per update relative to a standard parameter update: measured (this run; median of the per-repetition "
        "ratio, 95% bootstrap confidence interval in brackets) and the paper's, quoted "
        f"({paper_all['source']}, App. D.2, Table 8; not re-measured)"
    )


def source_note(cells: pd.DataFrame) -> str:
    return style.source_note(
        cells, "synthetic N(0,1) images of MNIST (1x28x28) / CIFAR-10 (3x32x32) shape, random labels"
    )


def footnotes(timings: Timings, models: list[str], measured: dict) -> list[str]:
    """How it was measured (devices, threads, clock, repetitions, batch, backward mode), the paper's quoted Diff.
    Laplace values [a] and, where one ran out of device memory, the cells [b]."""
    done = timings.done
    threads = sorted({int(t) for t in done["num_threads"].dropna()}) if "num_threads" in done else []
    samples = sorted({int(s) for s in done["n_aug_samples"].dropna()}) if "n_aug_samples" in done else []
    batches = ", ".join(f"{label(m)} {timings.batch(m)}" for m in models if (done.model == m).any())
    paper_batches = ", ".join(f"{label(m)} {PAPER_BATCH[m]}" for m in models if m in PAPER_BATCH)
    n_reps = {label(m): measured[(m, "param")][3] for m in models}
    n_dl = {label(m): measured[(m, "dl_hyper")][3] for m in models}
    oom = done[done["dl_hyper_outcome"].astype(str) == "oom"] if "dl_hyper_outcome" in done else done.iloc[0:0]
    out = [
        f"Measured on {' / '.join(timings.column('device_name')) or 'n/a'} "
        f"(torch.set_num_threads({', '.join(map(str, threads))})), "
        f"{', '.join(CLOCK.get(t, t) for t in timings.column('timer'))}; repetitions: "
        + ", ".join(f"{k} {v}" for k, v in n_reps.items())
        + " (Diff. Laplace hyperparam.: "
        + ", ".join(f"{k} {v}" for k, v in n_dl.items())
        + f"); batch {batches} images x {', '.join(map(str, samples))} augmentation samples (the paper: "
        f"{paper_batches} x 20, as App. D.2 states it); backward mode {', '.join(timings.column('backward')) or 'n/a'}.",
        "[a] Quoted by the paper itself from Immer et al. (2022, App. D.4); its '-' on fixup ResNet-14: out of memory "
        "on the 10 GB RTX 3080.",
    ]
    if not oom.empty:
        out.append(
            "[b] Measured out of memory (torch.OutOfMemoryError in the Diff. Laplace hyperparameter update): "
            + "; ".join(f"{label(r.model)} seed {r.seed}" for r in oom.itertuples())
            + "."
        )
    return out
