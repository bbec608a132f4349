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
# the main text's) and with local reparametrisation (BALI-L, App. F), mean over seeds (a ± s.e. band only where more
# than one seed ran; the footer says which). The paper does
# not name the data of Fig. 7; we show the UCI classification sets of Fig. 2. BALI-W curves are the BALI cells
# of the classification benchmark (bali_cls_uci), BALI-L the same settings with local reparametrisation.

# %%
import pandas as pd

from reprokit.report.render import bali_classification as bc
from reprokit.report.render import na, notebook, style
from reprokit.report.store import cells

log = notebook.start_log(snakemake)

style.setup()
w = cells.read_csv(snakemake.input["bali_cls_uci_curves"])
w = (w[w["method"] == "bali"] if "method" in w else w).assign(variant="BALI-W")
l = cells.read_csv(snakemake.input["bali_fig7_local_curves"]).assign(variant="BALI-L")
tables = pd.concat([pd.read_csv(snakemake.input["bali_cls_uci"]), pd.read_csv(snakemake.input["bali_fig7_local"])])
scale = style.scale_of(tables)
curves = pd.concat([w, l], ignore_index=True)
names = {"spambase": "Spambase", "magic": "Telescope (MAGIC)", "cdc_diabetes": "Diabetes"}
fig, axes, datasets = bc.variant_figure(curves, names)
if not datasets:  # no curve: the unavailable cells' notes and how to get the data
    na.panel(axes[0, 0], tables[tables.method == "bali"], "BALI-W vs BALI-L", width=60)
bali = tables[(tables.method == "bali") & tables["status"].isin(cells.RAN_STATUSES)]
steps = (
    ", ".join(f"{names.get(d, d)} {int(v)}" for d, v in bali.groupby("dataset")["n_steps"].max().items())
    if "n_steps" in bali
    else "n/a"
)
note = (
    style.source_note(
        tables[tables.method == "bali"],
        "UCI classification (Spambase, MAGIC telescope, CDC "
        "diabetes), random 80/20 splits; settings of the classification benchmark (Table 5)",
    )
    + f"; seeds (splits) per dataset: BALI-W {bc.seeds_per_dataset(w)}; BALI-L {bc.seeds_per_dataset(l)}"
    + f"; iterations: {steps}; curves: {bc.spread_text(curves, names)}; BALI-W drawn wide and pale under BALI-L; "
    "x axis: "
    "iterations on a log scale from the first evaluation (iteration 0, before training, is not drawn)"
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
