"""Fig. 2 of the partitioned-networks paper (input selection): the panels and the footer, from the tidy aggregates
of the `input_selection` cells (report/store/aggregate.py).

(a) For fixed masks keeping the first K of 30 inputs: an objective against K (`panel`: the partitioned LML
estimate, or the post-hoc diagonal Laplace log marginal likelihood) with a zoom on K near 15 where the panel has
no data, and the train / test fit below it. (b) The learned concrete-Bernoulli input mask: its keep probabilities
over training and at the end (`mask_panels`). The cells with the label coded 2y - 1 (a variant of ours) are drawn
in grey beside the text's.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ..store.stats import grouped_mean_se
from . import na, style

INFORMATIVE = 15  # the data's informative inputs: x_1..x_15 carry the label, x_16..x_30 are noise (Sec. 5)
K_MAX = 30
PM1 = "label coded 2y-1 (variant)"
# Where an inset may go, in axes coordinates (x0, y0, width, height), in order of preference: the first that no
# drawn point or line segment of the axes crosses is used.
INSET_SPOTS = [
    (0.56, 0.07, 0.41, 0.45),  # lower right
    (0.06, 0.07, 0.41, 0.45),  # lower left
    (0.56, 0.48, 0.41, 0.45),  # upper right
    (0.06, 0.48, 0.41, 0.45),  # upper left
    (0.30, 0.07, 0.41, 0.45),  # lower centre
]


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


def of(df, method):
    """The completed cells of `method` (the frame as it is when it has none: an empty variant)."""
    return df[(df.method == method) & (df.status == "completed")] if not df.empty and "method" in df else df


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
        logging.getLogger("reprokit.artefact").info(
            "%s: no spot without data for the zoom inset; left out", ax.get_title()
        )
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
    `variant`: the same cells with the label coded 2y-1, drawn in grey (objective and test accuracy). Returns the
    K of the largest mean objective (NaN where nothing ran: both axes then say n/a, `otherwise` why)."""
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


def mask_panels(ax_curve, ax_final, b: pd.DataFrame, b_curves: pd.DataFrame, b_pm1: pd.DataFrame) -> None:
    """(b) The mask's keep probability per input over training (mean over seeds) and at the end, informative inputs
    1-15 in blue; the variant's final means as black ticks."""
    prob_cols = sorted(c for c in b_curves.columns if c.startswith("p_keep_"))
    colour = {True: "tab:blue", False: "tab:gray"}
    curve = b_curves.groupby("step")[prob_cols].mean()
    b_seeds = int(b["seed"].nunique()) if "seed" in b else 0
    for i, col in enumerate(prob_cols):
        ax_curve.plot(curve.index, curve[col], color=colour[i < INFORMATIVE], lw=0.8)
    ax_curve.set_title(f"(b) Learned input mask over training (mean over {b_seeds} seed(s))")
    ax_curve.set_xlabel("iteration")
    ax_curve.set_ylabel("keep probability")
    final = b[prob_cols].mean()
    ax_final.bar(
        np.arange(1, len(prob_cols) + 1),
        final.to_numpy(),
        color=[colour[i < INFORMATIVE] for i in range(len(prob_cols))],
    )
    if not b_pm1.empty and set(prob_cols) <= set(b_pm1):
        ax_final.plot(
            np.arange(1, len(prob_cols) + 1),
            b_pm1[prob_cols].mean().to_numpy(),
            ls="none",
            marker="_",
            ms=9,
            mew=1.5,
            color="k",
            label=f"{PM1}, {int(b_pm1['seed'].nunique())} seed(s)",
        )
    ax_final.set_xlabel("input mask element")
    ax_final.set_ylabel("final keep probability")
    ax_final.set_title(f"(b) Final mask (mean over {b_seeds} seed(s))")
    mask_key = [
        Patch(color="tab:blue", label=f"informative inputs 1-{INFORMATIVE}"),
        Patch(color="tab:gray", label=f"spurious inputs {INFORMATIVE + 1}-{len(prob_cols) or K_MAX}"),
    ]
    bar_key = mask_key + list(ax_final.get_legend_handles_labels()[0])
    ax_curve.legend(handles=mask_key, loc="best", fontsize=7)  # where the curves are not
    ax_final.set_ylim(0, 1.35)  # room above the bars for the legend
    ax_final.legend(handles=bar_key, loc="upper center", ncol=2, fontsize=7)


def coding(config: dict, experiment: str) -> str:
    """How the label enters the features in an experiment's cells (its `signal` setting in `config`, the pipeline's
    config; the kind's default is the +-1 coding): as the text's x_i = y + e_i, or as 2y - 1."""
    settings = (((config or {}).get("experiments") or {}).get(experiment) or {}).get("settings") or {}
    if settings.get("signal", "signed") == "label":
        return "the label y in {0,1} enters the features as y (x_i = y + e_i, as the text writes)"
    return "the label y in {0,1} enters the features as 2y-1 (not the text's x_i = y + e_i)"


def note(a: pd.DataFrame, b: pd.DataFrame, config: dict, peaks: dict, variant: bool) -> str:
    """The footer: the data, the Laplace panel's early stopping, the K of each objective's largest mean (`peaks`:
    {name: K}), the variant's marks where drawn, the inputs the mask kept."""
    kept = sorted({int(i) for row in b["kept_inputs"].dropna().astype(str) for i in row.split()})
    return (
        style.source_note(
            a,
            f"synthetic input selection (Lyle et al. 2020): {int(a['n_train'].iloc[0])} train / "
            f"{int(a['n_test'].iloc[0])} test, 30 inputs, " + coding(config, "fig2a"),
        )
        + "; (a) post-hoc diagonal Laplace (Immer et al. 2021), each cell at its evaluation of largest Laplace LML "
        "(early stopping, App. I.4); K of the largest mean objective: "
        + ", ".join(f"{name} {'n/a' if np.isnan(k) else f'{k:g}'}" for name, k in peaks.items())
        + (f"; grey dashed / black ticks: the same cells with the {PM1}" if variant else "")
        + "; (b) inputs kept (keep probability > 0.5) in any seed: "
        + (f"{kept[0]}..{kept[-1]} ({len(kept)} inputs)" if kept else "none")
    )
