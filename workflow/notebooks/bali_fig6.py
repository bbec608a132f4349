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
import matplotlib.pyplot as plt

from reprokit.report import bali_regression as br
from reprokit.report import style

style.setup()
df = br.load([snakemake.input["bali_bbb_synthetic"]])  # noqa: F821
scale = style.scale_of(df)
rows = df[df.dataset == "two_moons"].sort_values("kl_factor", ascending=False)
fig, axes = plt.subplots(1, max(len(rows), 1), figsize=(4 * max(len(rows), 1), 3.4), squeeze=False)
for ax, (_, row) in zip(axes[0], rows.iterrows()):
    br.plot_predictive(ax, row, f"BBB, two-moons, KL factor {row['kl_factor']:g}")
if len(rows) and rows.iloc[0].get("task") == "regression":
    axes[0, 0].legend(loc="upper left", fontsize=6)
r = rows.iloc[0] if len(rows) else df.iloc[0]
note = style.provenance(df, "synthetic two-moons (App. H.1)") + (
    f"; {int(r['n_steps'])} Adam iterations (lr {r['lr']:g}), full batch, N(0, {r['prior_sigma']:g}^2) prior, "
    f"learned noise (regression), {int(r['final_samples'])} weight samples")
fig.tight_layout(rect=(0, 0.05, 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
