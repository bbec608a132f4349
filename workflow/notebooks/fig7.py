# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 7 — MNIST: retrained standard networks (partitioned networks paper, App. F.2)
# Standard networks retrained (from scratch, same CNN and settings, augmentation ranges fixed) with the ranges found by the partitioned networks of Fig. 5: test accuracy (mean over seeds) for 2, 3 and 4 chunks; rows are the parameter
# proportions of the partitions, columns the data proportions of the chunks (unnormalised).
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
from reprokit.report.render import notebook, style
from reprokit.report.render.invariance import sensitivity_page

log = notebook.start_log(snakemake)

style.setup()
fig, scale, note = sensitivity_page(snakemake.input, "retrain_mnist", "MNIST", retrained=True)
fig

# %%
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
