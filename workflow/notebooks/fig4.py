# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 4 — random weight vs node partitioning of a 6x5 weight matrix (partitioned networks paper, App. C)
# An actual `nn.Linear(5, 6)` (weight W in R^{6x5}) is wrapped with `reprokit.partition.partition()`
# into 3 partitions of equal proportion, once with `scheme="random"` (every entry of every layer gets a
# partition at random, exact proportions per tensor) and once with `scheme="node"` (whole output rows,
# i.e. units, share a partition; the bias entry follows its row). The colours are the library's
# assignments (`PartitionedModel.assignments["weight"]`, 1-based ids); the row of small squares
# on the right of each panel shows the bias. No experiment cells: identical at every scale.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from torch import nn

from reprokit.partition import partition
from reprokit.report.render import notebook, style
from reprokit.report.render.tables import static_note

log = notebook.start_log(snakemake)

PROPORTIONS = [1, 1, 1]  # 3 partitions, equal proportions
SEED = 0  # seed of the partition assignment (and of the layer's initialisation)
SCHEMES = {"random": "(a) Random weight partitioned", "node": "(b) Node partitioned"}

style.setup()
scale = snakemake.config["scale"]


def assignments(scheme: str) -> dict[str, np.ndarray]:
    torch.manual_seed(SEED)
    layer = nn.Linear(5, 6)
    pm = partition(layer, PROPORTIONS, scheme=scheme, seed=SEED)
    return {name: a.numpy().astype(int) for name, a in pm.assignments.items()}


# %%
cmap = ListedColormap(["#4C72B0", "#DD8452", "#55A868"][: len(PROPORTIONS)])
fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4))
for ax, (scheme, title) in zip(axes, SCHEMES.items()):
    a = assignments(scheme)
    w, b = a["weight"], a["bias"]
    ax.imshow(w, cmap=cmap, vmin=0.5, vmax=len(PROPORTIONS) + 0.5)
    for (i, j), k in np.ndenumerate(w):
        ax.text(j, i, str(k), ha="center", va="center", color="white", fontsize=9, fontweight="bold")
    # bias: one square per output unit, right of the matrix (not part of the 6x5 image)
    for i, k in enumerate(b):
        ax.add_patch(plt.Rectangle((w.shape[1] + 0.1, i - 0.35), 0.7, 0.7, color=cmap(int(k) - 1), clip_on=False))
        ax.text(w.shape[1] + 0.45, i, str(k), ha="center", va="center", color="white", fontsize=7, clip_on=False)
    ax.text(w.shape[1] + 0.45, w.shape[0] - 0.45, "bias", ha="center", va="top", fontsize=7, clip_on=False)
    ax.set_xticks(range(w.shape[1]), [f"{j + 1}" for j in range(w.shape[1])])
    ax.set_yticks(range(w.shape[0]), [f"{i + 1}" for i in range(w.shape[0])])
    ax.set_xlabel("input j")
    ax.set_ylabel("output unit i")
    ax.set_title(title)
    ax.grid(False)
    ax.set_xlim(-0.5, w.shape[1] + 0.9)
handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(k)) for k in range(len(PROPORTIONS))]
fig.legend(
    handles,
    [f"partition {k + 1}" for k in range(len(PROPORTIONS))],
    loc="upper center",
    ncol=len(PROPORTIONS),
    frameon=False,
    bbox_to_anchor=(0.5, 1.02),
)

# %%
note = static_note(
    scale,
    f"reprokit.partition.partition(nn.Linear(5, 6), {PROPORTIONS}, scheme=random|node, seed={SEED}); "
    "colours = the library's uint8 assignments",
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 0.95))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
