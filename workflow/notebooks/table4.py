# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 4 — federated partitioned training (partitioned networks paper, Sec. 5 and App. J)
# Validation accuracy (%) of FedAvg (server Adam), FedAvg + Augerino and FedAvg + Partitioned on MNIST,
# RotMNIST, CIFAR10 and RotCIFAR10 split over 100 non-i.i.d. clients, at three training-set sizes: each
# cell's entry is its validation accuracy averaged over its last `last_k` evaluations (paper: 10, every 10
# rounds), then mean ± s.e. over seeds. Each of our rows is followed by the paper's (cited from
# config/papers/partitioned.yaml, never mixed with ours). "Upload %": the bytes the clients uploaded,
# measured by counting the tensors they sent, relative to the bytes the same clients would have uploaded with
# every weight (FedAvg's upload), per cell (its `upload_pct`), averaged over sizes and seeds: the value the
# reproduction report shows. n/a = no cell ran (dataset unavailable).
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import pandas as pd

from reprokit.plan.federated import METHOD_TABLE
from reprokit.report.render import invariance as inv
from reprokit.report.render import na, notebook, style
from reprokit.report.render.tables import write_table
from reprokit.report.verdicts import papers

log = notebook.start_log(snakemake)

METHODS = {m: e.label for m, e in METHOD_TABLE.items()}  # plan/federated.py, METHOD_TABLE
BLOCKS = [  # experiment, dataset, label, paper row key, rotated
    ("table4_mnist", "mnist", "MNIST", "mnist", False),
    ("table4_mnist", "mnist", "RotMNIST", "rotmnist", True),
    ("table4_cifar", "cifar10", "CIFAR10", "cifar10", False),
    ("table4_cifar", "cifar10", "RotCIFAR10", "rotcifar10", True),
]
tables = {e: pd.read_csv(snakemake.input[e]) for e in ("table4_mnist", "table4_cifar")}
paper_all = papers.load(snakemake.input["paper_numbers"])
paper = papers.artefact(paper_all, "table4")
whole = pd.concat(tables.values(), ignore_index=True)
scale = style.scale_of(whole)
for t in tables.values():
    t["rotated"] = inv.as_bool(t["rotated"])


# %%
def size_label(n: int) -> str:
    return f"{n / 1000:g}k"


def upload_pct(t: pd.DataFrame, method: str) -> str:
    """Mean over `method`'s cells of their measured `upload_pct` (bytes uploaded / the bytes the same clients
    would have uploaded with every weight, i.e. FedAvg's upload): the value the reproduction report shows."""
    ok = inv.completed(t)
    values = (
        pd.to_numeric(ok.loc[ok["method"] == method, "upload_pct"], errors="coerce").dropna()
        if "upload_pct" in ok
        else pd.Series(dtype=float)
    )
    return f"{values.mean():.1f}" if len(values) else "n/a"


COLUMNS = ["1.25k", "5k", "full"]  # the paper's sizes; ours go by position (their sizes: the `Sizes` column)
rows, notes, facts = [], [], []
for exp, dataset, blabel, key, rotated in BLOCKS:
    t = tables[exp]
    sizes = sorted(int(n) for n in t["n_train"].dropna().unique())
    for method, label in METHODS.items():
        ours = {"Data": blabel, "Method": label, "Source": "ours", "Sizes": "/".join(map(size_label, sizes))}
        cited = {
            "Data": "",
            "Method": "",
            "Source": "paper (cited)",
            "Sizes": "/".join(map(size_label, paper["sizes"][dataset])),
        }
        for i, col in enumerate(COLUMNS):
            if i < len(sizes):
                sub = t[(t["rotated"] == rotated) & (t["method"] == method) & (t["n_train"] == sizes[i])]
                ours[col] = inv.accuracy_entry(sub, metric="val_acc_last")
                notes += inv.outcome_notes(sub, f"{blabel} {size_label(sizes[i])} {label}")
            else:
                ours[col] = "n/a"
            cited[col] = inv.paper_entry(
                papers.entry(paper_all, "table4", f"{key}_{paper['sizes'][dataset][i]}", label)
            )
        ours["Upload %"] = upload_pct(t[t["rotated"] == rotated], method)
        cited["Upload %"] = inv.paper_entry(papers.entry(paper_all, "table4", f"upload_pct_{dataset}", label))
        if (t["rotated"] == rotated).any():
            rows += [ours, cited]
        else:  # not in this scale's grid (quick: RotCIFAR10): the paper's row only, named (a footnote says so)
            rows.append({**cited, "Data": blabel, "Method": label})
for exp, dataset in (("table4_mnist", "mnist"), ("table4_cifar", "cifar10")):
    t = tables[exp]
    ok = inv.completed(t)
    if len(ok):
        facts.append(
            f"{dataset}: rounds {inv.steps_text(t, 'rounds')}, "
            f"{int(ok['clients_per_round'].iloc[0])} of {int(ok['n_clients'].iloc[0])} clients per round, "
            f"{int(ok['n_val'].iloc[0])} validation examples, entry = mean of the last "
            f"{int(ok['n_evaluations_last'].max())} evaluations"
        )
    else:
        facts.append(f"{dataset}: no cell ran ({inv.unavailable_text(t) or 'not in this scale grid'})")
table = pd.DataFrame(rows).fillna("n/a")
# The Sizes column only where some block's sizes are not the first of the paper's (else the footnote lists them), so
# the table fits the page; "FedAvg + Augerino" printed "+ Augerino" under FedAvg's row, one line a row, so it fits
# the page in height too.
ours_sizes = {
    blabel: sorted(int(n) for n in tables[exp].loc[tables[exp]["rotated"] == rot, "n_train"].dropna().unique())
    for exp, _, blabel, _, rot in BLOCKS
}
paper_prefix = all(s == paper["sizes"][d][: len(s)] for (_, d, *_), s in zip(BLOCKS, ours_sizes.values()))
shown = table.drop(columns="Sizes") if paper_prefix else table.copy()
shown["Method"] = shown["Method"].str.replace("FedAvg + ", "+ ", regex=False)  # "+ Augerino": FedAvg + Augerino
log.info("table:\n%s", table.to_string())

# %%
part = inv.completed(whole[whole["method"] == "partitioned"])
ranges = []
for col in ("aug_rotation", "dropout_p1"):
    if col in part and part[col].notna().any():
        vals = part.groupby(["experiment", "rotated"])[col].mean()
        ranges.append(
            f"{col}: " + ", ".join(f"{'Rot' if r else ''}{e.split('_')[1]} {v:.3g}" for (e, r), v in vals.items())
        )
caption = (
    "Federated validation accuracy (%), each run's mean over its last evaluations, mean ± s.e. over seeds, and the "
    "upload as % of FedAvg's; each row of ours is followed by the paper's ('paper (cited)', Table 4; quoted)"
)
note = style.source_note(
    whole,
    "MNIST (10k validation hold-out) and CIFAR-10 (5k), 100 clients with Dirichlet label skew; Rot* = each image "
    "rotated once by U[-pi, pi]",
)
footnotes = [
    "Our runs: "
    + "; ".join(facts)
    + ". Columns 1.25k/5k/full: the paper's sizes; "
    + (
        "ours ran the first of them: "
        + ", ".join(f"{b} {'/'.join(map(size_label, s)) or 'none'}" for b, s in ours_sizes.items())
        + "."
        if paper_prefix
        else "our rows put our sizes (column Sizes) in that order."
    ),
]
absent = [blabel for exp, _, blabel, _, rot in BLOCKS if not (tables[exp]["rotated"] == rot).any()]
if absent:  # quick: RotCIFAR10 (config/experiments/federated.yaml)
    footnotes[-1] += " Paper scale only (not in this scale's grid; the paper's rows alone): " + ", ".join(absent) + "."
if ranges:
    log.info("learned by Partitioned (mean over cells): %s", "; ".join(ranges))
if notes:
    footnotes.append("Outcomes: " + "; ".join(dict.fromkeys(notes)) + ".")
footnotes += na.footnotes(whole, notes=False)  # how to get a missing dataset (the n/a footnote quotes why)
# keys=3: a part of a table split to fit the page repeats Data, Method and Source
write_table(shown, snakemake.output["tex"], caption, scale, note, footnotes=footnotes, label="tab:table4", keys=3)
