# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Fig. 3 — OOD detection ROC curves
# Score: negative entropy of the predictive distribution. Trained on the in-distribution (ID) set, its
# test split are the positives; the test split of the other dataset is the OOD set (negatives). TPR = ID
# test points scored as ID, FPR = OOD points scored as ID (the standard convention; the paper's caption
# words the false positives differently). Each cell records its ROC curve at fixed FPRs and its AUROC in
# metrics.json; curves are averaged over seeds at those FPRs (vertical averaging).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from reprokit.report.render import bali_classification as bc
from reprokit.report.render import na, notebook, style
from reprokit.report.store.stats import format_mean_se

log = notebook.start_log(snakemake)

style.setup()
df = bc.load([snakemake.input["bali_cls_image"]])
# BALI whose noise covariance Sigma has the training-set size N in its Wishart degrees of freedom (Alg. 1's N; the
# config's wishart_n: n) instead of N_eff (ours: the other reading), where its cells ran
variant = bc.as_wishart_variant(bc.load([snakemake.input["bali_cls_image_wishart"]]))
df = pd.concat([df, variant], ignore_index=True) if len(variant) else df
scale = bc.scale_of(df)

# %%
pairs = [("mnist", "fashion_mnist"), ("fashion_mnist", "mnist")]
LABELS = {"bali_n": "BALI, Wishart dof with N"}  # the legend's words for bc.METHODS' short names
fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
summary = []
for ax, (id_set, ood_set) in zip(axes, pairs):
    ax.set_title(f"ID: {bc.DATASETS[id_set]}, OOD: {bc.DATASETS[ood_set]}")
    ax.set_xlabel("false positive rate (OOD classified as ID)")
    ax.set_ylabel("true positive rate (ID classified as ID)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    drawn = False
    for m in bc.METHODS:
        name = LABELS.get(m, bc.METHODS[m])
        fpr, tpr, aucs = bc.roc_mean(df, id_set, m)
        if not aucs:
            continue
        auc = format_mean_se(aucs)
        ax.plot(fpr, tpr, color=bc.COLORS[m], lw=1.3, label=f"{name} (AUROC {auc})")
        summary.append(f"{bc.DATASETS[id_set]} {name} {auc}")
        drawn = True
    if drawn:
        ax.plot([0, 1], [0, 1], color="0.6", ls=":", lw=0.8, zorder=1)  # chance, behind the curves
        ax.legend(loc="lower right")
    else:  # the notes of the unavailable ID / OOD cells and how to get the data
        na.panel(
            ax, df[df["dataset"].isin([id_set, ood_set])] if len(df) else df, otherwise="no cell completed", width=50
        )
ran = df[df["status"] != "unavailable"]
n_ood = sorted({int(v) for v in ran["n_ood"].dropna()}) if "n_ood" in ran else []
samples = sorted({int(v) for v in ran["final_samples"].dropna()}) if "final_samples" in ran else []
note = (
    bc.provenance(df) + f"; OOD set: the other dataset's test split ({'/'.join(map(str, n_ood)) or 'n/a'} images); "
    f"{'/'.join(map(str, samples)) or 'n/a'} predictive samples"
    + (
        "; BALI: the degrees of freedom of the noise covariance's Wishart posterior count N_eff (the count Eq. 17's "
        "moving averages carry); 'BALI, Wishart dof with N' (ours, not in the paper): they count the training-set "
        "size N, as Alg. 1 writes it"
        if "bali_n" in set(df["method"])
        else ""
    )
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
log.info("AUROC: %s", "; ".join(summary))
