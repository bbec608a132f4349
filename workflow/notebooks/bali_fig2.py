# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Fig. 2 — NLL over iterations
# Negative log predictive likelihood on the test set (solid) and on random training points (dashed) of
# BALI, MC dropout (p = 0.1) and MAP, evaluated during training with Monte Carlo posterior / dropout
# samples (Sec. 5.4); mean over seeds/splits. Read from the per-step curve (curve.csv) of each cell.

# %%
import textwrap

import matplotlib.pyplot as plt

from reprokit.report import bali_classification as bc
from reprokit.report import style

log = style.start_log(snakemake)  # noqa: F821 (injected by Snakemake)

style.setup()
df = bc.load([snakemake.input["bali_cls_uci"], snakemake.input["bali_cls_image"]])  # noqa: F821
curves = bc.load([snakemake.input["bali_cls_uci_curves"], snakemake.input["bali_cls_image_curves"]])  # noqa: F821
scale = bc.scale_of(df)

# %%
order = ["mnist", "fashion_mnist", "spambase", "cdc_diabetes", "magic"]
fig, axes = plt.subplots(1, len(order), figsize=(15, 3.2))
for ax, d in zip(axes, order):
    rows = df[df["dataset"] == d]
    ax.set_title(bc.DATASETS[d])
    ax.set_xlabel("iteration")
    if rows.empty or (rows["status"] == "unavailable").all():  # the cells' notes and how to get the data
        style.na_panel(ax, rows, otherwise="no cell of this dataset ran at this scale", width=40, fontsize=6)
        continue
    for m in bc.METHODS:
        c = bc.nll_curves(curves, d, m) if not curves.empty else None
        if c is None or c.empty:
            continue
        ax.plot(c["step"], c["test_nll"], color=bc.COLORS[m], ls="-", lw=1.2, label=f"{bc.METHODS[m]} test")
        ax.plot(c["step"], c["train_nll"], color=bc.COLORS[m], ls="--", lw=1.0, label=f"{bc.METHODS[m]} train")
    ax.set_yscale("log")
    ran = rows[rows["status"] != "unavailable"]
    doubling = int(ran["eval_doubling_until"].fillna(0).max()) if "eval_doubling_until" in ran else 0
    every = f"eval every {int(ran['eval_every'].iloc[0])} it."
    if doubling > 1:  # rows at 1, 2, 4, ..: a log-like x axis (linear through 0) shows the curves' start
        ax.set_xscale("symlog", linthresh=1)
        every += f" and at 1, 2, 4, .. < {doubling}"
    ax.text(0.98, 0.98, f"{every}, {int(ran['eval_samples'].iloc[0])} samples", ha="right", va="top", fontsize=6,
            transform=ax.transAxes)
if not style.na_texts(axes[0]):
    axes[0].set_ylabel("NLL (log scale)")
style.figure_legend(fig, axes, ncol=6, frameon=True, bbox_to_anchor=(0.5, 1.06))  # every plotted method
fig.tight_layout(rect=(0, 0.07, 1, 1))
note = bc.provenance(df) + "; curve NLL: test set (or a fixed random subset of it) and random training points"
note = textwrap.fill(note, 230)
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
