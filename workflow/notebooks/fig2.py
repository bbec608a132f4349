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
# The data follow the text (x_i = y + e_i, the label y in {0, 1}); where the artefact also has the cells of the
# label coded 2y - 1 (a variant of ours, `fig2a_pm1` / `fig2b_pm1`), they are drawn in grey beside them.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from reprokit.report.render import na, notebook, style
from reprokit.report.store import cells
from reprokit.report.store.stats import grouped_mean_se

log = notebook.start_log(snakemake)

style.setup()
a = pd.read_csv(snakemake.input["fig2a"])
b_curves = pd.read_csv(snakemake.input["fig2b_curves"])
b = pd.read_csv(snakemake.input["fig2b"])
# the variant with the label coded 2y - 1 (+-1), when the artefact has it: drawn in grey
inputs = dict(snakemake.input.items()) if hasattr(snakemake.input, "items") else {}
a_pm1 = cells.read_csv(inputs["fig2a_pm1"]) if "fig2a_pm1" in inputs else pd.DataFrame()
b_pm1 = cells.read_csv(inputs["fig2b_pm1"]) if "fig2b_pm1" in inputs else pd.DataFrame()
scale = style.scale_of(a)
PM1 = "label coded 2y-1 (variant)"


# %%
INFORMATIVE = 15  # the data's informative inputs: x_1..x_15 carry the label, x_16..x_30 are noise (Sec. 5)
K_MAX = 30


def by_inputs(df, column):
    """(K, mean, s.e.) over seeds per number of inputs K."""
    ms = grouped_mean_se(df, "n_inputs", column)
    return ms["n_inputs"].to_numpy(), ms["mean"].to_numpy(), ms["se"].to_numpy()


def seeds_text(df):
    """How many seeds each K's mean is over: "1 seed (no s.e.)", "3 seeds", "2-3 seeds"."""
    n = df.groupby("n_inputs")["seed"].nunique()
    lo, hi = int(n.min()), int(n.max())
    if hi == 1:
        return "1 seed (no s.e.)"
    return f"mean ± s.e. over {lo if lo == hi else f'{lo}-{hi}'} seeds"


# Where an inset may go, in axes coordinates (x0, y0, width, height), in order of preference: the first that no
# drawn point or line segment of the axes crosses is used.
INSET_SPOTS = [
    (0.56, 0.07, 0.41, 0.45),  # lower right
    (0.06, 0.07, 0.41, 0.45),  # lower left
    (0.56, 0.48, 0.41, 0.45),  # upper right
    (0.06, 0.48, 0.41, 0.45),  # upper left
    (0.30, 0.07, 0.41, 0.45),  # lower centre
]


def _crosses(ax, box, pad: float = 0.03, title: float = 0.09) -> bool:
    """Whether any line of `ax` (sampled along its segments) passes through `box` (axes coordinates, widened by
    `pad` on every side and by `title` above, where the inset's title goes)."""
    x0, y0, w, h = box
    h += title
    to_axes = ax.transData + ax.transAxes.inverted()
    for line in ax.get_lines():
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) == 0:
            continue
        if len(xy) > 1:  # points along each segment, so a line through the box counts though no vertex is in it
            t = np.linspace(0, 1, 20)[:, None, None]
            xy = (xy[:-1] * (1 - t) + xy[1:] * t).reshape(-1, 2)
        pts = to_axes.transform(xy)
        inside = (
            (pts[:, 0] > x0 - pad) & (pts[:, 0] < x0 + w + pad) & (pts[:, 1] > y0 - pad) & (pts[:, 1] < y0 + h + pad)
        )
        if inside.any():
            return True
    return False


def free_spot(ax, spots=INSET_SPOTS):
    """The first of `spots` that no line of `ax` crosses (axis limits as they are now), None if every one is."""
    return next((box for box in spots if not _crosses(ax, box)), None)


def zoom_on_peak(ax, k, m, s, centre, seeds, half_width: int = 5):
    """An inset of K within `half_width` of `centre`, with its own y scale: at the panel's scale the curve rises by
    hundreds of nats and is flat there. It goes where the panel has no data (`free_spot`); where every spot has,
    it is left out (the panel's curve is then all there is)."""
    lo, hi = max(centre - half_width, 1), min(centre + half_width, K_MAX)
    near = np.isfinite(m) & (k >= lo) & (k <= hi)
    if near.sum() < 3:
        return None
    spot = free_spot(ax)
    if spot is None:
        log.info("%s: no spot without data for the zoom inset; left out", ax.get_title())
        return None
    ins = ax.inset_axes(spot)
    ins.errorbar(
        k[near],
        m[near],
        yerr=s[near] if np.nanmax(s[near]) > 0 else None,
        color="k",
        marker="o",
        ms=2,
        lw=0.8,
        capsize=1.5,
    )
    ins.axvline(INFORMATIVE, color="tab:blue", ls=":", lw=1)
    ins.set_xlim(lo - 0.5, hi + 0.5)
    bottom, top = np.nanmin(m[near] - s[near]), np.nanmax(m[near] + s[near])
    pad = 0.1 * (top - bottom) if top > bottom else 1.0
    ins.set_ylim(bottom - pad, top + pad)
    ins.set_title(f"zoom: K = {lo:g}-{hi:g}, {seeds}", fontsize=7)
    ins.tick_params(labelsize=7)
    return ins


def panel(ax_obj, ax_fit, df, objective, title, obj_label, variant=None, otherwise="no cell of this method has run"):
    """Top: the objective against K (its largest mean marked); bottom: train/test accuracy and log-likelihood.
    `variant`: the same cells with the label coded 2y-1, drawn in grey (objective and test accuracy)."""
    if df.empty or objective not in df:  # e.g. a paper-scale build from part of the grid
        for ax in (ax_obj, ax_fit):
            na.panel(ax, df, title=title, otherwise=otherwise)
        return np.nan
    k, m, s = by_inputs(df, objective)
    seeds = seeds_text(df)
    ax_obj.plot(k, m, color="k", marker="o", ms=2.5, label=obj_label)
    ax_obj.fill_between(k, m - s, m + s, color="k", alpha=0.2)
    best = k[np.nanargmax(m)] if np.isfinite(m).any() else np.nan
    ax_obj.axvline(INFORMATIVE, color="tab:blue", ls=":", lw=1, label=f"K = {INFORMATIVE} (the informative inputs)")
    if np.isfinite(best):
        ax_obj.plot(
            [best],
            [m[k == best][0]],
            ls="none",
            marker="*",
            ms=9,
            color="tab:red",
            zorder=4,
            label=f"largest mean (K = {best:g})",
        )
    if variant is not None and not variant.empty and objective in variant:
        kv, mv, _ = by_inputs(variant, objective)
        ax_obj.plot(kv, mv, color="0.6", ls="--", lw=1, label=f"the same, {PM1}")
    ax_obj.set_xlim(0, K_MAX + 1)
    ax_obj.set_title(f"{title}: {obj_label} vs. inputs kept")  # what is drawn, not what it shows
    ax_obj.set_xlabel("Num. inputs K (the first K kept)")
    ax_obj.set_ylabel(obj_label)
    # the legend below the axes (it covered the curve's flat top, its largest mean and K = 15), the inset where
    # the panel has no data
    ax_obj.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=6.5, frameon=False)
    zoom_on_peak(ax_obj, k, m, s, INFORMATIVE, seeds)
    for split, ls in (("train", "--"), ("test", "-")):
        for metric, color in (("acc", "tab:blue"), ("ll", "tab:orange")):
            kk, mm, ss = by_inputs(df, f"{split}_{metric}")
            ax_fit.plot(
                kk, mm, ls=ls, color=color, label=f"{split} {'accuracy' if metric == 'acc' else 'avg. log-lik.'}"
            )
            ax_fit.fill_between(kk, mm - ss, mm + ss, color=color, alpha=0.15)
    if variant is not None and not variant.empty and "test_acc" in variant:
        kv, mv, _ = by_inputs(variant, "test_acc")
        ax_fit.plot(kv, mv, color="0.6", ls="--", lw=1, label=f"test accuracy, {PM1}")
    ax_fit.axvline(INFORMATIVE, color="tab:blue", ls=":", lw=1)
    ax_fit.set_xlim(0, K_MAX + 1)
    ax_fit.set_title(f"{title}: train / test fit ({seeds})")
    ax_fit.set_xlabel("Num. inputs K (the first K kept)")
    ax_fit.set_ylabel("accuracy / avg. log-likelihood")
    # below the axes: inside, it was wider than the axes and covered the curves and the y label
    ax_fit.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=6.5, frameon=False)
    return best


fig, axes = plt.subplots(2, 3, figsize=(13, 9))  # room for the legends below the panels
part = a[(a.method == "partitioned") & (a.status == "completed")]
lap = a[(a.method == "laplace") & (a.status == "completed")]


def of(df, method):
    return df[(df.method == method) & (df.status == "completed")] if not df.empty and "method" in df else df


peak_part = panel(axes[0, 0], axes[1, 0], part, "lml", "(a) Partitioned", "LML estimate", of(a_pm1, "partitioned"))
peak_lap = panel(
    axes[0, 1],
    axes[1, 1],
    lap,
    "laplace_lml",
    "(a) Diag. Laplace",
    "log marginal likelihood",
    of(a_pm1, "laplace"),
    otherwise="no Laplace cell early-stopped on its LML (App. I.4) has run yet; the cells before 2026-12-07 "
    "reported the end of training and were dropped (docs/choices.md, Fig. 2a Laplace)",
)

# %% [markdown]
# (b) Mask probability per input over training (mean over seeds); informative inputs 1–15 in blue.

# %%
prob_cols = sorted(c for c in b_curves.columns if c.startswith("p_keep_"))
colour = {True: "tab:blue", False: "tab:gray"}
curve = b_curves.groupby("step")[prob_cols].mean()
b_seeds = int(b["seed"].nunique()) if "seed" in b else 0
for i, col in enumerate(prob_cols):
    axes[0, 2].plot(curve.index, curve[col], color=colour[i < INFORMATIVE], lw=0.8)
axes[0, 2].set_title(f"(b) Learned input mask over training (mean over {b_seeds} seed(s))")
axes[0, 2].set_xlabel("iteration")
axes[0, 2].set_ylabel("keep probability")
final = b[prob_cols].mean()
axes[1, 2].bar(
    np.arange(1, len(prob_cols) + 1), final.to_numpy(), color=[colour[i < INFORMATIVE] for i in range(len(prob_cols))]
)
if not b_pm1.empty and set(prob_cols) <= set(b_pm1):
    axes[1, 2].plot(
        np.arange(1, len(prob_cols) + 1),
        b_pm1[prob_cols].mean().to_numpy(),
        ls="none",
        marker="_",
        ms=9,
        mew=1.5,
        color="k",
        label=f"{PM1}, {int(b_pm1['seed'].nunique())} seed(s)",
    )
axes[1, 2].set_xlabel("input mask element")
axes[1, 2].set_ylabel("final keep probability")
axes[1, 2].set_title(f"(b) Final mask (mean over {b_seeds} seed(s))")
mask_key = [
    Patch(color="tab:blue", label=f"informative inputs 1-{INFORMATIVE}"),
    Patch(color="tab:gray", label=f"spurious inputs {INFORMATIVE + 1}-{len(prob_cols) or K_MAX}"),
]
bar_key = mask_key + list(axes[1, 2].get_legend_handles_labels()[0])
axes[0, 2].legend(handles=mask_key, loc="best", fontsize=7)  # where the curves are not
axes[1, 2].set_ylim(0, 1.35)  # room above the bars for the legend
axes[1, 2].legend(handles=bar_key, loc="upper center", ncol=2, fontsize=7)


def coding(experiment):
    """How the label enters the features in an experiment's cells (its `signal` setting; the kind's default is
    the +-1 coding): as the text's x_i = y + e_i, or as 2y - 1."""
    config = getattr(snakemake, "config", None) or {}
    settings = ((config.get("experiments") or {}).get(experiment) or {}).get("settings") or {}
    if settings.get("signal", "signed") == "label":
        return "the label y in {0,1} enters the features as y (x_i = y + e_i, as the text writes)"
    return "the label y in {0,1} enters the features as 2y-1 (not the text's x_i = y + e_i)"


kept = sorted({int(i) for row in b["kept_inputs"].dropna().astype(str) for i in row.split()})
note = (
    style.source_note(
        a,
        f"synthetic input selection (Lyle et al. 2020): {int(a['n_train'].iloc[0])} train / "
        f"{int(a['n_test'].iloc[0])} test, 30 inputs, " + coding("fig2a"),
    )
    + "; (a) post-hoc diagonal Laplace (Immer et al. 2021), each cell at its evaluation of largest Laplace LML "
    "(early stopping, App. I.4); K of the largest mean objective: "
    + ", ".join(
        f"{name} {'n/a' if np.isnan(k) else f'{k:g}'}" for name, k in (("LML", peak_part), ("Laplace", peak_lap))
    )
    + (f"; grey dashed / black ticks: the same cells with the {PM1}" if not a_pm1.empty or not b_pm1.empty else "")
    + "; (b) inputs kept (keep probability > 0.5) in any seed: "
    + (f"{kept[0]}..{kept[-1]} ({len(kept)} inputs)" if kept else "none")
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
