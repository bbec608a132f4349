# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 2 — input selection (partitioned networks paper)
# (a) For fixed masks keeping the first K of 30 inputs: the partitioned LML objective (left) and the
# post-hoc diagonal Laplace log marginal likelihood (right), with train/test accuracy and average
# log-likelihood. (b) Keep probabilities of the learned concrete-Bernoulli input mask over training.
# The data follow the text (x_i = y + e_i, the label y in {0, 1}); where the artefact also has the cells of the
# label coded 2y - 1 (a variant of ours, `fig2a_pm1` / `fig2b_pm1`), they are drawn in grey beside them.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from reprokit.plan.input_selection import METHOD_TABLE
from reprokit.report.render import input_selection, notebook, style
from reprokit.report.store import cells

log = notebook.start_log(snakemake)

style.setup()
a = pd.read_csv(snakemake.input["fig2a"])
b_curves = pd.read_csv(snakemake.input["fig2b_curves"])
b = pd.read_csv(snakemake.input["fig2b"])
# the variant with the label coded 2y - 1 (+-1), when the artefact has it: drawn in grey
inputs = dict(snakemake.input.items()) if hasattr(snakemake.input, "items") else {}
a_pm1 = cells.read_csv(inputs["fig2a_pm1"]) if "fig2a_pm1" in inputs else pd.DataFrame()
b_pm1 = cells.read_csv(inputs["fig2b_pm1"]) if "fig2b_pm1" in inputs else pd.DataFrame()
scale = style.scale_of(a)

# %% [markdown]
# (a) The objective against the number of inputs kept, with a zoom near K = 15, and the fit below it.

# %%
fig, axes = plt.subplots(2, 3, figsize=(13, 9))  # room for the legends below the panels
LABEL = {m: e.label for m, e in METHOD_TABLE.items()}  # plan/input_selection.py
part = input_selection.of(a, "partitioned")
lap = input_selection.of(a, "laplace")
peak_part = input_selection.panel(
    axes[0, 0],
    axes[1, 0],
    part,
    "lml",
    f"(a) {LABEL['partitioned']}",
    "LML estimate",
    input_selection.of(a_pm1, "partitioned"),
)
peak_lap = input_selection.panel(
    axes[0, 1],
    axes[1, 1],
    lap,
    "laplace_lml",
    f"(a) {LABEL['laplace']}",
    "log marginal likelihood",
    input_selection.of(a_pm1, "laplace"),
    otherwise="no Laplace cell early-stopped on its LML (App. I.4) has run yet; the cells before 2026-12-07 "
    "reported the end of training and were dropped (docs/choices.md, Fig. 2a Laplace)",
)

# %% [markdown]
# (b) Mask probability per input over training (mean over seeds); informative inputs 1–15 in blue.

# %%
input_selection.mask_panels(axes[0, 2], axes[1, 2], b, b_curves, b_pm1)
note = input_selection.note(
    a,
    b,
    getattr(snakemake, "config", None) or {},
    {"LML": peak_part, "Laplace": peak_lap},
    variant=not a_pm1.empty or not b_pm1.empty,
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
