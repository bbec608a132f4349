# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 2 — partitioned networks vs validation-set optimisation (partitioned networks paper, Sec. 5)
# Learned affine augmentations (Augerino's parametrisation, App. I.4) with a fixup ResNet-14 on 20k
# CIFAR-10 examples split into two chunks [train, validation] of the given proportions (`table2_valopt`).
# Partitioned: a partitioned network on the two chunks, psi on the LML. Validation set optim.: a standard
# network on the training part, psi on the validation loss; +Finetune: the same cell after 20 more
# epochs on all 20k examples with psi fixed (SGD lr 0.01): its `finetune_test_acc`. Each of our rows is
# followed by the paper's (cited from config/papers/partitioned.yaml). Entries: test
# accuracy (%), mean ± s.e. over seeds; NaN = a run crashed (diverged), as in the paper; n/a = no cell.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import pandas as pd

from reprokit.config import grid_of
from reprokit.report.render import invariance as inv
from reprokit.report.render import na, notebook, style
from reprokit.report.render.tables import write_table
from reprokit.report.verdicts import papers

log = notebook.start_log(snakemake)

ROWS = [  # label (the paper's), method, metric
    ("Partitioned", "partitioned", "test_acc"),
    ("Validation set optim.", "validation_opt", "test_acc"),
    ("+Finetune", "validation_opt", "finetune_test_acc"),
]
cells = pd.read_csv(snakemake.input["table2_valopt"])
cited_from = papers.load(snakemake.input["paper_numbers"])
paper = papers.artefact(cited_from, "table2")
scale = style.scale_of(cells)
cells["props"] = cells["chunk_proportions"].map(inv.props_label)
paper_props = [inv.props_label(inv.as_tuple(p)) for p in paper["columns"]]
columns = paper_props + [p for p in dict.fromkeys(cells["props"]) if p not in paper_props]

# %%
rows, notes = [], []
for label, method, metric in ROWS:
    ours = {"Method": label, "Source": "ours"}
    cited = {"Method": "", "Source": "paper (cited)"}
    for props in columns:
        sub = cells[(cells["method"] == method) & (cells["props"] == props)]
        ours[props] = inv.accuracy_entry(sub, metric) if len(sub) else "n/a"
        cited[props] = inv.paper_entry(papers.entry(cited_from, "table2", label, props, "-"))
        if metric == "test_acc":
            notes += inv.outcome_notes(sub, f"{label} {props}")
    rows += [ours, cited]
table = pd.DataFrame(rows)
table.columns = pd.MultiIndex.from_tuples(
    [("", c) if c in ("Method", "Source") else ("Chunk proportions", c) for c in table.columns]
)
log.info("table:\n%s", table.to_string())

# %%
part, val = cells[cells["method"] == "partitioned"], cells[cells["method"] == "validation_opt"]
n_train = sorted({int(v) for v in cells["n_train"]})
# the network of this scale's cells (quick: a fixup ResNet-8, cheaper than the paper's ResNet-14; the config says so)
cfg = snakemake.config
net = (
    str(grid_of(cfg, "table2_valopt", scale).settings["model"])
    if "table2_valopt" in cfg.get("experiments", {})
    else "fixup_resnet14"
)
smaller = net != "fixup_resnet14"
net = net.replace("fixup_resnet", "fixup ResNet-")
paper_n = 20000  # Sec. 5 / App. I.4: a 20k-example subset of CIFAR-10
ours_n = "/".join(map(str, n_train))
differs = ["fixup ResNet-14" if smaller else "", f"{paper_n // 1000}k" if ours_n != str(paper_n) else ""]
caption = (
    f"Learning affine augmentations with {net} on {ours_n} CIFAR-10 examples"
    + (f" (the paper: {', '.join(d for d in differs if d)})" if any(differs) else "")
    + ": test accuracy (%), mean ± s.e. over seeds, per [train, validation] chunk proportions; each row of ours "
    "is followed by the paper's (Table 2; quoted, not ours)"
)
note = style.source_note(
    cells, f"CIFAR-10 (a fixed random training subset per seed; test examples: {inv.n_test_text(cells)})"
)
footnotes = [
    (
        f"Iterations: Partitioned {inv.steps_text(part)}, validation-set optimisation {inv.steps_text(val)} (cosine "
        f"learning-rate decay over the first {inv.steps_text(val, 'lr_cosine_steps')}, then held), then +Finetune "
        f"{inv.steps_text(val, 'finetune_steps')} steps (20 epochs at paper scale, SGD lr 0.01, psi fixed). Both methods "
        "use Augerino's affine parametrisation (Benton et al. 2020) and, for the same proportions and seed, the same split "
        "of the same examples; Partitioned's parameter proportions equal its chunk proportions."
    ),
    (
        "CHOICE (the paper is silent): the finetune phase decays its learning rate by the same cosine (100x) over its "
        "own steps; seeds as stated; a cell whose finetune phase diverges is NaN in both of its rows."
    ),
    "n/a: no cell (" + (inv.unavailable_text(cells) or "proportions not in this scale's grid") + "); NaN: a run "
    "diverged.",
]
if notes:
    footnotes.append("Outcomes: " + "; ".join(notes) + ".")
footnotes += na.footnotes(cells, notes=False)  # how to get a missing dataset (the n/a footnote quotes why)
write_table(table, snakemake.output["tex"], caption, scale, note, footnotes=footnotes, label="tab:table2")
