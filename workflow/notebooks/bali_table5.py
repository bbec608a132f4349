# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Table 5 — BALI hyperparameters of the classification benchmark
# Rendered from the hyperparameters each BALI cell recorded in its metrics.json (the values that ran,
# with N_eff and sigma_u^2 resolved), not from the config file; a dataset whose cells disagree lists
# every value.

# %%
from reprokit.report.render import bali_classification as bc
from reprokit.report.render import na, notebook
from reprokit.report.render.tables import write_table

log = notebook.start_log(snakemake)

df = bc.load([snakemake.input["bali_cls_uci"], snakemake.input["bali_cls_image"]])
scale = bc.scale_of(df)
table = bc.table5(df)
table

# %%
write_table(
    table,
    snakemake.output["tex"],
    caption="BALI Table 5: BALI's hyperparameters for classification as run: step size α, "
    "initial update rate β, priors R_0 = σ_r² I and U_0 = σ_u² I, effective dataset size N_eff (N: training "
    "points), batch size B",
    scale=scale,
    note=bc.provenance(df),
    footnotes=bc.table5_footnotes(df) + na.footnotes(df),
    label="tab:bali_table5",
)
