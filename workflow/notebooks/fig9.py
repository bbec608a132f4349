# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 9 — RotMNIST: random search vs partitioned networks (partitioned networks paper, App. G)
# Six 1-D projections of the affine augmentation ranges (half-widths) against test accuracy:
# standard networks trained with ranges drawn at random (rotation U(0, pi), the others U(0, 1/2)),
# the partitioned runs of Fig. 3a on all of RotMNIST (trajectory over training and final point), and
# standard networks retrained with the partitioned runs' final ranges. Same CNN, optimiser, iterations
# and augmentation averaging for all.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import math

import matplotlib.pyplot as plt
import pandas as pd

from reprokit.report.render import na, notebook, style
from reprokit.report.render.invariance import AUG_LABELS, AUG_NAMES, as_bool, completed
from reprokit.report.store import cells

log = notebook.start_log(snakemake)

style.setup()
rand = pd.read_csv(snakemake.input["fig9_random"])
retr = pd.read_csv(snakemake.input["fig9_retrain"])
part_all = pd.read_csv(snakemake.input["fig3a"])
curves_all = cells.read_csv(snakemake.input["fig3a_curves"])
scale = style.scale_of(rand)

# the partitioned runs: fig3a cells on RotMNIST with the largest training set
part_all["rotated"] = as_bool(part_all["rotated"])
n_full = int(retr["n_train"].max()) if len(retr) else None
sel = (part_all["rotated"]) & (part_all["method"] == "partitioned") & (part_all["n_train"] == n_full)
part = completed(part_all[sel])
curves = curves_all.copy()
if len(curves):
    curves["rotated"] = as_bool(curves["rotated"])
    curves = curves[curves["rotated"] & (curves["method"] == "partitioned") & (curves["n_train"] == n_full)]
rand_ok, retr_ok = completed(rand), completed(retr)

# %%
fig, axes = plt.subplots(2, 3, figsize=(11, 6), sharey=True)
for ax, name in zip(axes.flat, AUG_NAMES):
    col = f"aug_{name}"
    title = AUG_LABELS[name] + (" (rad)" if name == "rotation" else "")
    if rand_ok.empty and retr_ok.empty and part.empty:  # no cell ran: the unavailable cells' notes
        na.panel(ax, [rand, retr, part_all[sel]], title, width=55)
        continue
    if len(rand_ok):
        ax.scatter(rand_ok[col], 100 * rand_ok["test_acc"], marker="+", color="tab:gray", s=30, label="Random sampling")
    for i, (_seed, g) in enumerate(curves.groupby("seed") if len(curves) else []):
        g = g.dropna(subset=[col, "test_acc"]).sort_values("step")
        ax.plot(
            g[col],
            100 * g["test_acc"],
            marker=".",
            ms=3,
            lw=0.8,
            color="tab:red",
            alpha=0.6,
            label="Partitioned runs" if i == 0 else None,
        )
    if len(part):
        ax.scatter(
            part[col],
            100 * part["test_acc"],
            marker="*",
            s=90,
            color="tab:red",
            edgecolor="k",
            zorder=3,
            label="Partitioned runs final",
        )
    if len(retr_ok):
        ax.scatter(
            retr_ok[col],
            100 * retr_ok["test_acc"],
            marker="D",
            s=35,
            color="tab:blue",
            edgecolor="k",
            zorder=3,
            label="Partitioned runs final - retrained",
        )
    ax.set_xlabel(title)
    if name == "rotation":
        ax.set_xticks([0, math.pi / 2, math.pi], ["0", "π/2", "π"])
for ax in axes[:, 0]:
    if not na.texts(ax):
        ax.set_ylabel("Test accuracy (%)")
style.figure_legend(fig, axes, ncol=4)  # every series plotted in any panel

# %%
ran = pd.concat([rand_ok, retr_ok, part])
steps = sorted(set(ran["n_steps"].dropna().astype(int))) if "n_steps" in ran else []
best = rand_ok["test_acc"].max() if len(rand_ok) else float("nan")
note = (
    style.source_note(
        pd.concat([rand, part_all[sel], retr]),
        f"RotMNIST, {n_full} training / "
        + (f"{int(rand_ok['n_test'].max())}" if len(rand_ok) else "?")
        + " test examples",
    )
    + f"; {len(rand_ok)} random draws (of {len(rand)}), {len(part)} partitioned run(s), {len(retr_ok)} retrained"
    + f"; {'/'.join(map(str, steps))} iterations; best random {100 * best:.1f}%, partitioned final "
    + (f"{100 * part['test_acc'].mean():.1f}%" if len(part) else "n/a")
    + ", retrained "
    + (f"{100 * retr_ok['test_acc'].mean():.1f}%" if len(retr_ok) else "n/a")
    + (f"; learned rotation {part['aug_rotation'].mean():.2f} rad" if len(part) else "")
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 0.96))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
