# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 3 — a feature extractor as hyperparameters (partitioned networks paper, Sec. 5)
# A Wide-ResNet-20 on CIFAR-10 whose stem and first two of three stages (13 convolutions) are psi
# (`table3_features`, methods/feature_extractor.py): validation-set optimisation with chunks [0.9, 0.1]
# (psi on the validation loss, no finetuning) vs a partitioned network with chunks [0.1, 0.8, 0.1] (only
# the last stage and the head are partitioned; psi on the LML). Next to each of our entries the paper's
# (cited from config/papers/partitioned.yaml). Entries: test accuracy (%), mean ± s.e.
# over seeds; n/a = no cell ran; NaN = a cell diverged; OOM = out of device memory.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import ast

import pandas as pd

from reprokit.report.render import invariance as inv
from reprokit.report.render import na, notebook, style
from reprokit.report.render.tables import write_table
from reprokit.report.verdicts import papers

log = notebook.start_log(snakemake)

METHODS = {"Validation set optim.": ("validation_opt", "split_sizes"), "Partitioned": ("partitioned", "chunk_sizes")}
cells = pd.read_csv(snakemake.input["table3_features"])
cited_from = papers.load(snakemake.input["paper_numbers"])
paper = papers.artefact(cited_from, "table3")
scale = style.scale_of(cells)


# %%
def proportions_used(rows: pd.DataFrame, column: str) -> str:
    """The chunk proportions the completed cells ran with, from their recorded chunk sizes."""
    ok = inv.completed(rows)
    if ok.empty or column not in ok:
        return "n/a"
    labels = set()
    for sizes in ok[column].dropna():
        n = [int(v) for v in ast.literal_eval(sizes)] if isinstance(sizes, str) else list(sizes)
        labels.add(inv.props_label([round(v / sum(n), 3) for v in n]))
    return " / ".join(sorted(labels))


rows, notes = [], []
for label, (method, sizes) in METHODS.items():
    sub = cells[cells["method"] == method]
    cited = paper["rows"][label]
    rows.append(
        {
            "Method": label,
            "Chunk proportions": inv.props_label(cited["proportions"]),
            "Test accuracy (ours)": inv.accuracy_entry(sub) if len(sub) else "n/a",
            "Test accuracy (paper, cited)": inv.paper_entry(papers.entry(cited_from, "table3", label, "Test accuracy")),
            "Our chunk proportions": proportions_used(sub, sizes),
        }
    )
    notes += inv.outcome_notes(sub, label)
table = pd.DataFrame(rows)
log.info("table:\n%s", table.to_string())

# %%
n_train = sorted({int(v) for v in cells["n_train"]})
caption = (
    "Learning a feature extractor (first 2 out of 3 stages of a Wide ResNet-20) as a hyperparameter on CIFAR10: "
    "test accuracy (%), mean ± s.e. over seeds; 'paper, cited' = the paper's numbers "
    f"({cited_from['source']}, Table 3; quoted, not ours)"
)
note = style.source_note(
    cells, f"CIFAR-10 ({'/'.join(map(str, n_train))} training examples; test examples: {inv.n_test_text(cells)})"
)
footnotes = [
    (
        f"Iterations: {inv.steps_text(cells)}; no augmentation; the same CIFAR optimiser settings as Table 1 (App. I.4). "
        "'Our chunk proportions' are those of the cells that completed (from their chunk sizes). CHOICE (the paper "
        "is silent): WRN-20 of width 1 with GroupNorm(2), iterations, seeds; validation-set optimisation without "
        "finetuning (the paper's row has none)."
    ),
    "n/a: no cell ran (" + (inv.unavailable_text(cells) or "not in this scale's grid") + "); NaN: a cell diverged; "
    "OOM: out of device memory.",
]
if notes:
    footnotes.append("Outcomes: " + "; ".join(notes) + ".")
footnotes += na.footnotes(cells, notes=False)  # how to get a missing dataset (the n/a footnote quotes why)
write_table(table, snakemake.output["tex"], caption, scale, note, footnotes=footnotes, label="tab:table3")
