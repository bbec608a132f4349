# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # BALI Fig. 1 — posterior predictive of BALI on synthetic data (Sec. 5.1, App. H.1)
# Sines-trend and sinc (regression): predictive mean ± 1 sd (weight uncertainty plus the inferred noise),
# two-moons (classification): predictive p(class 1), each from Monte Carlo weight samples (256 in the
# paper). 3 hidden layers of 256 tanh units.

# %%
import textwrap

import matplotlib.pyplot as plt

from reprokit.report import bali_regression as br
from reprokit.report import style

log = style.start_log(snakemake)  # noqa: F821 (injected by Snakemake)

style.setup()
df = br.load([snakemake.input["bali_synthetic"]])  # noqa: F821
scale = style.scale_of(df)
titles = {"sines_trend": "sines-trend", "sinc": "sinc", "two_moons": "two moons"}
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
for ax, name in zip(axes, ["sines_trend", "sinc", "two_moons"]):
    rows = df[df.dataset == name]
    if rows.empty:
        ax.set_axis_off()
        continue
    row = rows.iloc[0]
    br.plot_predictive(ax, row, f"BALI, {titles[name]} (N = {int(row['n_train'])})")
axes[0].legend(loc="upper left", fontsize=6)
r = df.iloc[0]
shapes = {name: br.predictive_shape(rows.iloc[0]) for name, rows in df.groupby("dataset")}
for name, sh in shapes.items():
    log.info("%s: %s", name, br.shape_text(sh))
reading = "\n".join(f"{titles.get(n, n)}: {br.shape_text(sh)} ({'meets' if sh.get('smooth') else 'fails'} Sec. 5.1's "
                     "reading)" for n, sh in shapes.items() if sh)
note = style.provenance(df, "synthetic sines-trend (32 pts), sinc (256 pts, App. H.1), two moons (128 pts)") + (
    f"; {int(r['n_steps'])} iterations, full batch, {int(r['final_samples'])} weight samples; regression "
    "sigma_init 3, sigma_r 80, classification sigma_init 1, sigma_r 20, sigma_u^2 = 0.01 N; "
    f"alpha {float(r['alpha']):g}, beta {float(r['beta']):g} and the iteration count are not stated in the paper "
    "(the sweep table bali_fig1_sweep compares alternatives)")
note = "\n".join(textwrap.fill(part, 190) for part in note.split("\n")) + "\n" + reading
fig.tight_layout(rect=(0, 0.24, 1, 1))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
