# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 7 — memory complexities (partitioned networks paper, App. D.1)
# Transcribed from the paper into `config/papers/partitioned.yaml` (the paper's data file, not computed) and
# rendered here; the caption says so. No experiment cells: identical at every scale.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output` / `snakemake.config`.

# %%
from reprokit.report.render import notebook
from reprokit.report.render.tables import write_complexity_table

log = notebook.start_log(snakemake)

data = snakemake.input["paper_numbers"]
scale = snakemake.config["scale"]
table = write_complexity_table(data, "table7", snakemake.output["tex"], scale)
table
