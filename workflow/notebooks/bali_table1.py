# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Table 1 — UCI regression, test RMSE (lower is better)
# Mean ± standard error over the standard splits (20; protein 5) of our BALI (standardised targets, the reading
# nearer the paper's numbers on more rows, and 'BALI raw-y' with targets in original units: the paper does not
# say, and its numbers need each on some datasets; the bali_readings table), MC dropout (DO), Bayes-by-Backprop (BBB), VADAM and PBP runs, next to the paper's numbers: the paper's
# own BALI and DO runs ("paper") and the literature values the paper quotes for BBB, NNG-MVG, VADAM and PBP ("quoted"), transcribed in
# config/papers/bali.yaml. Metrics in the targets' original units.

# %%
from reprokit.report.render import bali_regression as br
from reprokit.report.render import notebook

log = notebook.start_log(snakemake)

table, check = br.uci_artefact(snakemake.input, snakemake.output["tex"], "rmse")
table

# %%
check
