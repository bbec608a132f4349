# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 8 — time per update relative to a standard update (partitioned networks paper, App. D.2)
# Measured by the `update_timing` cells (src/reprokit/builders/update_timing.py): per model, a
# standard parameter update, the partitioned parameter and hyperparameter updates, the Augerino update
# and the Diff. Laplace (LILA) parameter and hyperparameter updates, on the same batch with S
# augmentation samples, timed in one process, interleaved, after warm-up. Each measured entry is the
# median over all timed repetitions (pooled over seeds) of the per-repetition ratio update / standard
# update, with a 95% bootstrap confidence interval of that median. A Diff. Laplace hyperparameter update
# that ran out of device memory is printed OOM: the cell measured it to (its `dl_hyper_outcome`). The
# paper's RTX 3080 numbers are cited literature, quoted in their own column
# (config/papers/partitioned.yaml), never mixed with ours.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import numpy as np
import pandas as pd

from reprokit.report.render import notebook, style
from reprokit.report.render.tables import write_table
from reprokit.report.store.stats import median_ci
from reprokit.report.verdicts import papers

log = notebook.start_log(snakemake)

LABELS = {"mnist_cnn": "MNIST CNN", "fixup_resnet8": "fixup ResNet-8", "fixup_resnet14": "fixup ResNet-14"}
# measured update -> (method, update) of the paper's rows, in the paper's order
UPDATE = {
    "augerino": ("Augerino", "Param. + hyperparam."),
    "dl_param": ("Diff. Laplace", "Param."),
    "dl_hyper": ("Diff. Laplace", "Hyperparam."),
    "param": ("Partitioned", "Param."),
    "hyper": ("Partitioned", "Hyperparam."),
}
MEASURED, PAPER = "measured (this run)", "paper, quoted"  # headers get the device and batch below

cells = pd.read_csv(snakemake.input["table8_timing"])
curves = pd.read_csv(snakemake.input["table8_timing_curves"])
paper_all = papers.load(snakemake.input["paper_numbers"])
paper = papers.artefact(paper_all, "table8")
PAPER_MODELS = list(paper["columns"])
scale = style.scale_of(cells)
done = cells[cells["status"] == "completed"]
models = [m for m in PAPER_MODELS if m in set(cells["model"])] + sorted(set(cells["model"]) - set(PAPER_MODELS))


# %%
def repetitions(model: str) -> pd.DataFrame:
    """Timed (non-warm-up) repetitions of every completed cell of `model`, pooled over seeds."""
    seeds = set(done.loc[done["model"] == model, "seed"])
    c = curves[(curves["model"] == model) & curves["seed"].isin(seeds)]
    if "warmup" not in c:
        return c.iloc[0:0]
    return c[c["warmup"].astype(str) == "False"]


def timer_of(model: str) -> str:
    timers = set(done.loc[done["model"] == model, "timer"])
    if len(timers) != 1:
        raise ValueError(f"{model}: cells use different timers {timers}")
    return timers.pop()


def ratio_stats(model: str, kind: str) -> tuple[float, float, float, int]:
    """(median, 95% CI low, high, number of repetitions) of the per-repetition ratios, over the timed
    repetitions that ran the update (Diff. Laplace's hyper update runs in fewer)."""
    reps = repetitions(model)
    t = timer_of(model) if not reps.empty else None
    if t is None or f"{kind}_{t}_s" not in reps:
        return (np.nan, np.nan, np.nan, 0)
    reps = reps[reps[f"{kind}_{t}_s"].notna()]
    if reps.empty:
        return (np.nan, np.nan, np.nan, 0)
    r = (reps[f"{kind}_{t}_s"] / reps[f"standard_{t}_s"]).to_numpy(dtype=float)
    lo, hi = median_ci(r)
    return float(np.median(r)), lo, hi, len(r)


def dl_outcomes(model: str) -> list[str]:
    """The Diff. Laplace hyper update's outcome in each completed cell of `model` (measured / oom / not measured)."""
    if "dl_hyper_outcome" not in done:
        return []
    return [str(v) for v in done.loc[done["model"] == model, "dl_hyper_outcome"].dropna()]


def standard_ms(model: str) -> float:
    reps = repetitions(model)
    return float(1000 * reps[f"standard_{timer_of(model)}_s"].median()) if not reps.empty else np.nan


measured = {(m, kind): ratio_stats(m, kind) for m in models for kind in UPDATE}
measured

# %%
paper_rows = {
    (r["method"], r["update"]): {m: papers.entry(paper_all, "table8", key, m, None) for m in PAPER_MODELS}
    for key, r in paper["rows"].items()
}


def fmt_ratio(stats) -> str:
    med, lo, hi, n = stats
    # the interval under the median (one column per model and source fits the page in width and height)
    return "n/a" if n == 0 or not np.isfinite(med) else f"{med:.2f}\n[{lo:.2f}, {hi:.2f}]"


def fmt_measured(model: str, key: str) -> str:
    if key == "dl_hyper":
        outcomes = dl_outcomes(model)
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


table_rows = []
# one key column, method over update (each row is two lines, the measured interval under its median)
std_row = {("", "Update"): "Standard param.\n(reference)"}
for m in models:
    std_row[(LABELS.get(m, m), MEASURED)] = f"1\n(= {standard_ms(m):.0f} ms)" if np.isfinite(standard_ms(m)) else "n/a"
    std_row[(LABELS.get(m, m), PAPER)] = "1"
table_rows.append(std_row)
for key, (method, update) in UPDATE.items():
    row = {("", "Update"): f"{method}\n{update}"}
    for m in models:
        row[(LABELS.get(m, m), MEASURED)] = fmt_measured(m, key)
        row[(LABELS.get(m, m), PAPER)] = fmt_paper(paper_rows.get((method, update), {}).get(m), method, m)
    table_rows.append(row)
table = pd.DataFrame(table_rows)
# Each column names its batch size: ours as measured; the paper's as App. D.2, the section that reports these timings,
# states it: 250 (MNIST) and 200 (CIFAR10). (Its main experiments use 200 and 250, App. I.4; our paper scale follows
# those, config/experiments/partitioned_tables.yaml; the last footnote says so.) The caption lists the same numbers
# from this one table, and both name the devices.
PAPER_BATCH = {"mnist_cnn": 250, "fixup_resnet8": 200, "fixup_resnet14": 200}  # App. D.2
names = sorted(set(done["device_name"].dropna())) if "device_name" in done else []
our_device = "/".join(n.replace("NVIDIA ", "") if ("NVIDIA" in n or "GPU" in n) else "CPU" for n in names)


def our_batch(model: str) -> str:
    batch = done.loc[done.model == model, "batch_size"]
    return str(int(batch.iloc[0])) if len(batch) else "?"


def _header(model: str, which: str) -> str:
    if which == PAPER:
        return f"paper\n({paper['device'].replace('NVIDIA ', '').split('-')[0]},\nbatch {PAPER_BATCH.get(model, '?')})"
    return f"measured\n({our_device or 'n/a'},\nbatch {our_batch(model)})"


table.columns = pd.MultiIndex.from_tuples(
    [
        (top, _header(next(m for m in models if LABELS.get(m, m) == top), sub)) if top else (top, sub)
        for top, sub in table.columns
    ]
)
table

# %%
first = done.iloc[0] if not done.empty else cells.iloc[0]
devices = sorted(set(done["device_name"].dropna())) if "device_name" in done else []
threads = sorted({int(t) for t in done["num_threads"].dropna()}) if "num_threads" in done else []
timers = sorted(set(done["timer"].dropna())) if "timer" in done else []
batches = ", ".join(f"{LABELS.get(m, m)} {our_batch(m)}" for m in models if (done.model == m).any())
paper_batches = ", ".join(f"{LABELS.get(m, m)} {PAPER_BATCH[m]}" for m in models if m in PAPER_BATCH)
samples = sorted({int(s) for s in done["n_aug_samples"].dropna()}) if "n_aug_samples" in done else []
n_reps = {LABELS.get(m, m): measured[(m, "param")][3] for m in models}
n_dl = {LABELS.get(m, m): measured[(m, "dl_hyper")][3] for m in models}
backward = sorted(set(done["backward"].dropna())) if "backward" in done else []
clock = {"cpu": "process CPU time", "wall": "wall-clock time (after device synchronisation)"}
caption = (
    "Time per update relative to a standard parameter update: measured (this run; median of the per-repetition "
    "ratio, 95% bootstrap confidence interval in brackets) and the paper's, quoted "
    f"({paper_all['source']}, App. D.2, Table 8; not re-measured)"
)
note = style.source_note(cells, "synthetic N(0,1) images of MNIST (1x28x28) / CIFAR-10 (3x32x32) shape, random labels")
oom_cells = done[done["dl_hyper_outcome"].astype(str) == "oom"] if "dl_hyper_outcome" in done else done.iloc[0:0]
footnotes = [
    f"Measured on {' / '.join(devices) or 'n/a'} (torch.set_num_threads({', '.join(map(str, threads))})), "
    f"{', '.join(clock.get(t, t) for t in timers)}; repetitions: "
    + ", ".join(f"{k} {v}" for k, v in n_reps.items())
    + " (Diff. Laplace hyperparam.: "
    + ", ".join(f"{k} {v}" for k, v in n_dl.items())
    + f"); batch {batches} images x {', '.join(map(str, samples))} augmentation samples (the paper: {paper_batches} "
    f"x 20, as App. D.2 states it); backward mode {', '.join(backward) or 'n/a'}.",
    "[a] Quoted by the paper itself from Immer et al. (2022, App. D.4); its '-' on fixup ResNet-14: out of memory "
    "on the 10 GB RTX 3080.",
]
if not oom_cells.empty:
    footnotes.append(
        "[b] Measured out of memory (torch.OutOfMemoryError in the Diff. Laplace hyperparameter update): "
        + "; ".join(f"{LABELS.get(r.model, r.model)} seed {r.seed}" for r in oom_cells.itertuples())
        + "."
    )
write_table(table, snakemake.output["tex"], caption, scale, note, footnotes=footnotes, label="tab:table8")
