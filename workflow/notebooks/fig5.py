# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 5 — MNIST: sensitivity to the partitioning (partitioned networks paper, App. F.1)
# Partitioned networks learning affine augmentations (CNN fit on all 60k examples): test accuracy (mean over seeds) for 2, 3 and 4 chunks; rows are the parameter
# proportions of the partitions, columns the data proportions of the chunks (unnormalised).
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
from reprokit.report.render import notebook, style
from reprokit.report.render.invariance import sensitivity_page

log = notebook.start_log(snakemake)

style.setup()
fig, scale, note = sensitivity_page(snakemake.input, "sens_mnist", "MNIST", retrained=False)
fig

# %%
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
