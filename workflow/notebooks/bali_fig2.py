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
from reprokit.report.render import bali_classification as bc
from reprokit.report.render import notebook, style

log = notebook.start_log(snakemake)

style.setup()
df = bc.load([snakemake.input["bali_cls_uci"], snakemake.input["bali_cls_image"]])
curves = bc.load([snakemake.input["bali_cls_uci_curves"], snakemake.input["bali_cls_image_curves"]])
scale = bc.scale_of(df)

# %%
fig, axes = bc.nll_figure(df, curves)
ran = df[df["status"] != "unavailable"]
samples = "/".join(str(int(v)) for v in sorted(set(ran["eval_samples"].dropna()))) if "eval_samples" in ran else "n/a"
note = (
    bc.provenance(df) + "; curves: mean over the seeds (splits) that ran per dataset; NLL on the test set (or a "
    f"fixed random subset of it) and on random training points, {samples} posterior / dropout samples; NLL "
    "evaluated (iterations): "
    + bc.eval_text(df)
    + "; x axis: iterations on a log scale from the first evaluation (iteration 0, before training, is not "
    "drawn); " + bc.coinciding_text(curves)
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
