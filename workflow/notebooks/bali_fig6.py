# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Fig. 6 — Bayes by Backprop on the two-moons data (App. I.2)
# The same network as Fig. 1 (3 x 256 tanh) trained by Bayes by Backprop with three KL down-weighting
# factors (loss = NLL + factor * KL / N); the paper shows three factors without naming them, we use 1, 0.1
# and 0.01. Large factors underfit, small ones are overconfident.

# %%
from reprokit.report.render import bali_regression as br
from reprokit.report.render import notebook, style

log = notebook.start_log(snakemake)

style.setup()
fig, scale, note = br.bbb_synthetic_page(snakemake.input, "two_moons", "two-moons")
fig

# %%
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
