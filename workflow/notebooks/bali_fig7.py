# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Fig. 7 — BALI-W vs BALI-L (App. I.3)
# Test (solid) and training (dashed) NLL over iterations for BALI with weight reparametrisation (BALI-W,
# the main text's) and with local reparametrisation (BALI-L, App. F), mean ± s.e. over seeds. The paper does
# not name the data of Fig. 7; we show the UCI classification sets of Fig. 2. BALI-W curves are the BALI cells
# of the classification benchmark (bali_cls_uci), BALI-L the same settings with local reparametrisation.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprokit.report import style

log = style.start_log(snakemake)  # noqa: F821 (injected by Snakemake)

style.setup()
w = style.read_results(snakemake.input["bali_cls_uci_curves"])  # noqa: F821
w = (w[w["method"] == "bali"] if "method" in w else w).assign(variant="BALI-W")
l = style.read_results(snakemake.input["bali_fig7_local_curves"]).assign(variant="BALI-L")  # noqa: F821
tables = pd.concat([pd.read_csv(snakemake.input["bali_cls_uci"]), pd.read_csv(snakemake.input["bali_fig7_local"])])  # noqa: F821
scale = style.scale_of(tables)
curves = pd.concat([w, l], ignore_index=True)
names = {"spambase": "Spambase", "magic": "Telescope (MAGIC)", "cdc_diabetes": "Diabetes"}
datasets = [d for d in ["spambase", "magic", "cdc_diabetes"] if d in set(curves.get("dataset", []))]
fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4.2 * max(len(datasets), 1), 3.2), squeeze=False)
colors = {"BALI-W": "tab:blue", "BALI-L": "tab:orange"}
for ax, d in zip(axes[0], datasets):
    for variant, color in colors.items():
        c = curves[(curves.dataset == d) & (curves.variant == variant)]
        for split, ls in (("test", "-"), ("train", "--")):
            col = f"{split}_nll"
            if col not in c or c[col].dropna().empty:
                continue
            g = c.dropna(subset=[col]).groupby("step")[col]
            m, n = g.mean(), g.count()
            se = (g.std(ddof=1) / np.sqrt(n)).fillna(0)
            ax.plot(m.index, m.values, ls=ls, color=color, label=f"{variant} {split}")
            ax.fill_between(m.index, m - se, m + se, color=color, alpha=0.15, lw=0)
    ax.set_title(names.get(d, d))
    ax.set_xlabel("iteration")
    ax.set_ylabel("NLL")
    ax.set_yscale("log")
if datasets:
    axes[0, 0].legend(fontsize=6)
else:  # no curve: the unavailable cells' notes and how to get the data
    style.na_panel(axes[0, 0], tables[tables.method == "bali"], "BALI-W vs BALI-L", width=60)
note = style.provenance(tables[tables.method == "bali"], "UCI classification (Spambase, MAGIC telescope, CDC diabetes), "
                        "random 80/20 splits; settings of the classification benchmark (Table 5)")
fig.tight_layout(rect=(0, 0.05, 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
