# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Table 6 — MC dropout and MAP hyperparameters of the classification benchmark
# Rendered from what the dropout and MAP cells recorded in their metrics.json (Adam; MAP is the same
# network and settings with dropout probability 0, App. H.3).

# %%
from reprokit.report.render import bali_classification as bc
from reprokit.report.render import na, notebook
from reprokit.report.render.tables import write_table

log = notebook.start_log(snakemake)

df = bc.load([snakemake.input["bali_cls_uci"], snakemake.input["bali_cls_image"]])
scale = bc.scale_of(df)
table = bc.table6(df)
table

# %%
write_table(
    table,
    snakemake.output["tex"],
    caption="BALI Table 6: hyperparameters of Monte Carlo dropout (DO) and MAP for the classification "
    "benchmark as run (Adam optimiser, weight decay as Adam's L2 term)",
    scale=scale,
    note=bc.provenance(df),
    footnotes=na.footnotes(df),
    label="tab:bali_table6",
)
