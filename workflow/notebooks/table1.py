# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 1 — test accuracy with learned affine augmentations (partitioned networks paper, Sec. 5)
# Baseline (no augmentation), Augerino, Diff. Laplace (LILA) and Partitioned at the full data size:
# (Rot)CIFAR-10 with a fixup ResNet-8 and (Rot)TinyImageNet with a ResNet-50 (GroupNorm) are the
# Fig. 3b / 3c cells of the largest training subset (all 50k / 100k examples at paper scale), CIFAR-10 with
# a fixup ResNet-14 is the `table1_resnet14` experiment. Each of our rows is followed by the paper's,
# cited from config/papers/partitioned.yaml (never mixed with ours). Entries: test
# accuracy (%), mean ± s.e. over seeds; n/a = no cell ran (dataset unavailable); OOM = a cell ran out
# of device memory (recorded, not assumed); NaN = a cell diverged.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import pandas as pd

from reprokit.report.render import invariance as inv
from reprokit.report.render import na, notebook, style
from reprokit.report.render.tables import write_table
from reprokit.report.verdicts import papers

log = notebook.start_log(snakemake)

METHODS = {
    "baseline": "Baseline",
    "augerino": "Augerino",
    "diff_laplace": "Diff. Laplace",
    "partitioned": "Partitioned",
}
ROWS = [  # paper key, dataset, architecture, experiment, rotated
    ("rotcifar10_resnet8", "RotCIFAR10", "fixup ResNet-8", "fig3b", True),
    ("cifar10_resnet8", "CIFAR10", "fixup ResNet-8", "fig3b", False),
    ("cifar10_resnet14", "CIFAR10", "fixup ResNet-14", "table1_resnet14", False),
    ("rottinyimagenet_resnet50", "RotTinyImagenet", "ResNet-50 GN", "fig3c", True),
    ("tinyimagenet_resnet50", "TinyImagenet", "ResNet-50 GN", "fig3c", False),
]
tables = {e: pd.read_csv(snakemake.input[e]) for e in ("fig3b", "fig3c", "table1_resnet14")}
paper = papers.load(snakemake.input["paper_numbers"])
whole = pd.concat(tables.values(), ignore_index=True)
scale = style.scale_of(whole)
for t in tables.values():
    t["rotated"] = inv.as_bool(t["rotated"])


# %%
def full_size_cells(experiment: str, rotated: bool) -> pd.DataFrame:
    """The cells of the experiment's largest training subset (the whole training set at paper scale)."""
    t = tables[experiment]
    t = t[t["rotated"] == rotated]
    return t[t["n_train"] == t["n_train"].max()] if len(t) else t


rows, notes, sizes = [], [], []
for key, dataset, arch, experiment, rotated in ROWS:
    cells = full_size_cells(experiment, rotated)
    n_train = int(cells["n_train"].max()) if len(cells) else None
    ours = {"Dataset": dataset, "Architecture": arch, "Source": "ours"}
    cited = {"Dataset": "", "Architecture": "", "Source": "paper (cited)"}
    for method, label in METHODS.items():
        sub = cells[cells["method"] == method]
        ours[label] = inv.accuracy_entry(sub) if len(sub) else "n/a"
        cited[label] = inv.paper_entry(papers.entry(paper, "table1", key, label, None))
        notes += inv.outcome_notes(sub, f"{dataset} {arch} {label}")
    rows += [ours, cited]
    sizes.append(
        f"{dataset} {arch}: n_train {n_train if n_train is not None else 'n/a'}, iterations "
        f"{inv.steps_text(cells)} ({experiment})"
    )
table = pd.DataFrame(rows)
log.info("table:\n%s", table.to_string())

# %%
caption = (
    "Test accuracy (%) with learned affine augmentations on (rot)CIFAR10 and (rot)Tiny Imagenet, mean ± s.e. "
    "over seeds; each 'ours' row is followed by the paper's numbers ('paper (cited)', "
    f"{paper['source']}, Table 1; quoted, not ours)"
)
note = style.source_note(
    whole,
    "CIFAR-10 and TinyImageNet (its validation set as the test set), training subsets as in "
    f"the footnote, test examples: {inv.n_test_text(whole)}; Rot* = each image rotated once by "
    "U[-pi, pi]",
)
footnotes = [
    "Our rows: " + "; ".join(sizes) + ". The (Rot)CIFAR10 ResNet-8 and (Rot)TinyImagenet rows are the Fig. 3b / 3c "
    "cells of the largest subset; Partitioned: chunks [0.8, 0.1, 0.1] (CIFAR) / [0.8, 0.2] (TinyImagenet); at paper "
    "scale rotated CIFAR runs twice the iterations (App. I.4; each row's iterations above). CHOICE (the paper is "
    "silent): ResNet-14 iterations as ResNet-8 at 50k; Diff. Laplace's hyper-step schedule in iterations "
    "(config/experiments/mnist_invariance.yaml).",
    "n/a: no cell ran ("
    + (inv.unavailable_text(whole) or "not in this scale's grid")
    + ")"
    + ("; (Rot)TinyImagenet: paper scale only, no Fig. 3c cell in this scale's grid" if tables["fig3c"].empty else "")
    + "; OOM: a cell ran out of "
    "device memory (its recorded outcome; the paper's OOM was on a 32 GB V100); NaN: a cell diverged.",
]
if notes:
    footnotes.append("Outcomes: " + "; ".join(dict.fromkeys(notes)) + ".")
footnotes += na.footnotes(whole, notes=False)  # how to get a missing dataset (the n/a footnote quotes why)
# keys=3: a part of a table split to fit the page repeats Dataset, Architecture and Source
write_table(table, snakemake.output["tex"], caption, scale, note, footnotes=footnotes, label="tab:table1", keys=3)
