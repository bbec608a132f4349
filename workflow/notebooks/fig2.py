# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 2 — input selection (partitioned networks paper)
# (a) For fixed masks keeping the first K of 30 inputs: the partitioned LML objective (left) and the
# post-hoc diagonal Laplace log marginal likelihood (right), with train/test accuracy and average
# log-likelihood. (b) Keep probabilities of the learned concrete-Bernoulli input mask over training.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprokit.report import style
from reprokit.report.stats import grouped_mean_se

log = style.start_log(snakemake)  # noqa: F821 (injected by Snakemake)

style.setup()
a = pd.read_csv(snakemake.input["fig2a"])  # noqa: F821 (injected by Snakemake)
b_curves = pd.read_csv(snakemake.input["fig2b_curves"])  # noqa: F821
b = pd.read_csv(snakemake.input["fig2b"])  # noqa: F821
scale = style.scale_of(a)


# %%
def by_inputs(df, column):
    """(K, mean, s.e.) over seeds per number of inputs K."""
    ms = grouped_mean_se(df, "n_inputs", column)
    return ms["n_inputs"].to_numpy(), ms["mean"].to_numpy(), ms["se"].to_numpy()


def zoom_on_peak(ax, k, m, s, best, half_width: int = 4):
    """An inset of K within `half_width` of the peak, its own y scale and s.e. bars: at the panel's scale the curve
    rises by hundreds of nats and is flat near the peak, so the peak cannot be seen there."""
    near = np.isfinite(m) & (np.abs(k - best) <= half_width)
    if not np.isfinite(best) or near.sum() < 3:
        return None
    ins = ax.inset_axes([0.42, 0.08, 0.55, 0.52])  # lower right: the curve is near the top once it has risen
    ins.errorbar(k[near], m[near], yerr=s[near], color="k", marker="o", ms=2, lw=0.8, capsize=1.5)
    ins.axvline(best, color="tab:red", ls=":", lw=1)
    lo, hi = np.nanmin(m[near] - s[near]), np.nanmax(m[near] + s[near])
    pad = 0.1 * (hi - lo) if hi > lo else 1.0
    ins.set_ylim(lo - pad, hi + pad)
    ins.set_title(f"zoom: K = {k[near].min():g}-{k[near].max():g} (mean ± s.e.)", fontsize=6)
    ins.tick_params(labelsize=6)
    return ins


def panel(ax_obj, ax_fit, df, objective, title, obj_label):
    if df.empty or objective not in df:  # e.g. a paper-scale build from part of the grid
        for ax in (ax_obj, ax_fit):
            style.na_panel(ax, df, title=title, otherwise="no cell of this method has run")
        return np.nan
    k, m, s = by_inputs(df, objective)
    ax_obj.plot(k, m, color="k", marker="o", ms=2.5, label=obj_label)
    ax_obj.fill_between(k, m - s, m + s, color="k", alpha=0.2)
    best = k[np.nanargmax(m)] if np.isfinite(m).any() else np.nan
    ax_obj.axvline(best, color="tab:red", ls=":", lw=1)
    ax_obj.set_title(f"{title} (objective peaks at K = {best:g})")
    ax_obj.set_ylabel(obj_label)
    zoom_on_peak(ax_obj, k, m, s, best)
    for split, ls in (("train", "--"), ("test", "-")):
        for metric, color in (("acc", "tab:blue"), ("ll", "tab:orange")):
            kk, mm, ss = by_inputs(df, f"{split}_{metric}")
            ax_fit.plot(kk, mm, ls=ls, color=color, label=f"{split} {'accuracy' if metric == 'acc' else 'avg. log-lik.'}")
            ax_fit.fill_between(kk, mm - ss, mm + ss, color=color, alpha=0.15)
    ax_fit.set_xlabel("Num. inputs K")
    ax_fit.set_ylabel("accuracy / avg. log-likelihood")
    ax_fit.legend(loc="lower right", ncol=2)
    return best


fig, axes = plt.subplots(2, 3, figsize=(12, 6))
part = a[(a.method == "partitioned") & (a.status == "completed")]
lap = a[(a.method == "laplace") & (a.status == "completed")]
peak_part = panel(axes[0, 0], axes[1, 0], part, "lml", "Partitioned", "LML estimate")
peak_lap = panel(axes[0, 1], axes[1, 1], lap, "laplace_lml", "Post-hoc diagonal Laplace", "log marginal likelihood")

# %% [markdown]
# (b) Mask probability per input over training (mean over seeds); informative inputs 1–15 in blue.

# %%
prob_cols = sorted(c for c in b_curves.columns if c.startswith("p_keep_"))
curve = b_curves.groupby("step")[prob_cols].mean()
for i, col in enumerate(prob_cols):
    axes[0, 2].plot(curve.index, curve[col], color="tab:blue" if i < 15 else "tab:gray", lw=0.8)
axes[0, 2].set_title("Learned input mask over training")
axes[0, 2].set_xlabel("iteration")
axes[0, 2].set_ylabel("keep probability")
final = b[prob_cols].mean()
axes[1, 2].bar(np.arange(1, len(prob_cols) + 1), final.to_numpy(), color=["tab:blue"] * 15 + ["tab:gray"] * (len(prob_cols) - 15))
axes[1, 2].set_xlabel("input mask element")
axes[1, 2].set_ylabel("final keep probability")
axes[1, 2].set_title("Final mask (mean over seeds)")

kept = sorted({int(i) for row in b["kept_inputs"].dropna().astype(str) for i in row.split()})
note = (style.provenance(a, f"synthetic input selection (Lyle et al. 2020): {int(a['n_train'].iloc[0])} train / "
                         f"{int(a['n_test'].iloc[0])} test, 30 inputs, label y in {{0,1}} enters the features as 2y-1")
        + f"; LML peak K={peak_part:g}, Laplace peak K={peak_lap:g}; (b) inputs kept (p>0.5) in any seed: "
        + (f"{kept[0]}..{kept[-1]} ({len(kept)})" if kept else "none"))
fig.tight_layout(rect=(0, 0.03, 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
