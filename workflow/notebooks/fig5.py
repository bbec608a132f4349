# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 5 — MNIST: sensitivity to the partitioning (partitioned networks paper, App. F.1)
# Partitioned networks learning affine augmentations (CNN fit on all 60k examples): test accuracy (mean over seeds) for 2, 3 and 4 chunks; rows are the parameter
# proportions of the partitions, columns the data proportions of the chunks (unnormalised).
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import pandas as pd

from reprokit.report import style
from reprokit.report.invariance import completed, sensitivity_figure

style.setup()
names = [f"sens_mnist_c{c}" for c in (2, 3, 4)]
tables = [pd.read_csv(snakemake.input[n]) for n in names]  # noqa: F821 (injected by Snakemake)
scale = style.scale_of(pd.concat(tables))
fig, axes = sensitivity_figure(tables, "test_acc")

# %%
ok = pd.concat([completed(t) for t in tables])
bad = sum(len(t) - len(completed(t)) for t in tables)
rot = f"{ok['aug_rotation'].mean():.2f} (range {ok['aug_rotation'].min():.2f}-{ok['aug_rotation'].max():.2f})" if len(ok) else "n/a"
steps = sorted(set(ok["n_steps"].astype(int))) if len(ok) else []
note = (style.provenance(pd.concat(tables), "MNIST, " + (f"{int(ok['n_train'].max())} training / {int(ok['n_test'].max())} test examples" if len(ok) else "?"))
        + f"; {'/'.join(map(str, steps))} iterations; proportions grid: our choice (the paper's tick values are not in its text)"
        + f"; learned rotation half-width (rad): mean {rot}"
        + (f"; {bad} cell(s) not completed (n/a)" if bad else ""))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
