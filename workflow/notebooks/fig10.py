# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 10 — federated MNIST learning curves against communication (partitioned networks paper, App. J.3)
# One panel per training-set size (paper: 1.25k, 5k, 50k): validation accuracy of FedAvg, FedAvg + Augerino
# and FedAvg + Partitioned, each seed's curve smoothed by a moving average over 10 evaluations (fewer at
# small scales: `last_k` of the cells), then mean ± s.e. over seeds, against the total communication
# (bytes uploaded + downloaded, cumulative, measured in the cells by counting the tensors sent).
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reprokit.plan.federated import METHOD_TABLE
from reprokit.report.render import invariance as inv
from reprokit.report.render import na, notebook, style
from reprokit.report.store.cells import read_csv

log = notebook.start_log(snakemake)
style.setup()

METHODS = {m: (e.label, e.colour) for m, e in METHOD_TABLE.items()}  # plan/federated.py
cells = pd.read_csv(snakemake.input["table4_mnist"])
curves = read_csv(snakemake.input["table4_mnist_curves"])
scale = style.scale_of(cells)
cells["rotated"] = inv.as_bool(cells["rotated"])
ok = inv.completed(cells[~cells["rotated"]])
window = int(ok["n_evaluations_last"].max()) if len(ok) else 10
if len(curves):
    curves["rotated"] = inv.as_bool(curves["rotated"])
    curves = curves[~curves["rotated"] & (curves["step"] > 0)].dropna(subset=["val_acc", "comm_bytes"])
sizes = sorted(int(n) for n in ok["n_train"].unique()) if len(ok) else []
PAPER_SIZES = [1250, 5000, 50000]  # the paper's three panels (Fig. 10): one panel each, n/a where none ran here
grid_sizes = {int(n) for n in cells.loc[~cells["rotated"], "n_train"].dropna().unique()}  # this scale's, ran or not
panels = sorted(set(PAPER_SIZES) | grid_sizes | set(sizes))
n_seeds = int(ok["seed"].nunique()) if len(ok) else 0

# %%
fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2), squeeze=False)
for ax, n in zip(axes[0], panels):
    if n not in sizes:  # a size of the paper's with no completed cell at this scale: say why
        here = cells[~cells["rotated"] & (cells["n_train"] == n)]
        na.panel(
            ax,
            here,
            f"MNIST, {n / 1000:g}k examples",
            width=40,
            otherwise="no cell completed" if len(here) else "not in this scale's grid",
        )
        continue
    for method, (label, color) in METHODS.items():
        sub = curves[(curves["n_train"] == n) & (curves["method"] == method)]
        if sub.empty:
            continue
        per_seed = []
        for _seed, g in sub.groupby("seed"):
            g = g.sort_values("step")
            per_seed.append(
                pd.DataFrame(
                    {
                        "step": g["step"].to_numpy(),
                        "comm": g["comm_bytes"].to_numpy() / 1e9,
                        "acc": 100 * g["val_acc"].rolling(window, min_periods=1).mean().to_numpy(),
                    }
                )
            )
        stacked = pd.concat(per_seed).groupby("step")
        mean, comm = stacked["acc"].mean(), stacked["comm"].mean()
        se = stacked["acc"].std(ddof=1).fillna(0) / np.sqrt(stacked["acc"].count())
        ax.plot(comm, mean, color=color, lw=1.2, label=label)
        if n_seeds > 1:  # one seed: no s.e. to draw
            ax.fill_between(comm, mean - se, mean + se, color=color, alpha=0.2, lw=0)
    ax.set_title(f"MNIST, {n / 1000:g}k examples")
    ax.set_xlabel("total communication (GB, up + down, measured)")
    ax.set_ylabel("validation accuracy (%)")
style.figure_legend(fig, axes)  # above the panels: no curve under it
done = inv.completed(cells[~cells["rotated"]])
rounds = (
    ", ".join(f"{n / 1000:g}k examples {int(r)}" for n, r in done.groupby("n_train")["rounds"].max().items())
    if len(done) and "rounds" in done
    else "n/a"
)
note = style.source_note(
    cells,
    "MNIST split over 100 clients, not identically distributed (labels drawn per client "
    "from a Dirichlet distribution with concentration 0.1), 10k validation examples held out",
) + (
    f"; communication rounds: {rounds}; each curve a moving average over {window} evaluations "
    "(the paper: 10), then " + (f"mean ± s.e. over {n_seeds} seeds" if n_seeds > 1 else "one seed (no s.e. band)")
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 0.9))  # room for the legend above, the footer below
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
