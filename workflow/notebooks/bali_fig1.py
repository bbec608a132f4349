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
import matplotlib.pyplot as plt

from reprokit.report.render import bali_regression as br
from reprokit.report.render import notebook, style

log = notebook.start_log(snakemake)

style.setup()
df = br.load([snakemake.input["bali_synthetic"]])
scale = style.scale_of(df)
titles = {"sines_trend": "sines-trend", "sinc": "sinc", "two_moons": "two moons"}
fig, axes = plt.subplots(1, 3, figsize=(12, 4.8))
for ax, name in zip(axes, ["sines_trend", "sinc", "two_moons"]):
    rows = df[df.dataset == name]
    if rows.empty:
        ax.set_axis_off()
        continue
    row = rows.iloc[0]
    br.plot_predictive(ax, row, f"BALI, {titles[name]} (N = {int(row['n_train'])})")
style.figure_legend(fig, axes, markerscale=2)  # above the panels, clear of the data
r = df.iloc[0]
shapes = {name: br.predictive_shape(rows.iloc[0]) for name, rows in df.groupby("dataset")}
for name, sh in shapes.items():
    log.info("%s: %s", name, br.shape_text(sh))


def in_words(sh):
    """One dataset's numbers of the reading of Sec. 5.1 (reprokit/predictive_shape.py, SHAPE), each named in words."""
    if not sh:
        return "no shape reading recorded"
    if "tv_ratio" in sh:
        return (
            f"over the data's range the mean varies {sh['tv_ratio']:.2f}x as much as the true function (total "
            f"variation) and bends {sh['roughness']:.2f}x as much (summed |second difference|); near the data its "
            f"RMS error is {sh['fit_err']:.2f} and its largest weight sd {sh['epi_near']:.2f} inferred noise sds "
            f"(noise sd {sh['noise']:.3f}); the predictive sd far from the data is {sh['far_over_near']:.1f}x "
            "that near it"
        )
    return (
        f"median predictive entropy {sh['entropy_near']:.3f} nats near the data, {sh['entropy_far']:.3f} far "
        f"from it ({sh['far_over_near']:.3g}x)"
    )


reading = "\n".join(
    f"{titles.get(n, n)}: {in_words(sh)}: {'meets' if sh.get('smooth') else 'fails'} our numeric "
    "reading of Sec. 5.1's words"
    for n, sh in shapes.items()
    if sh
)
note = (
    style.source_note(df, "synthetic sines-trend (32 pts), sinc (256 pts, App. H.1), two moons (128 pts)")
    + (
        f"; {int(r['n_steps'])} iterations, full batch, {int(r['final_samples'])} weight samples; initial weight sd "
        "(sigma_init) 3 for regression, 1 for classification; sigma_r 80 and 20; noise prior scale sigma_u^2 = 0.01 N; "
        f"alpha {float(r['alpha']):g}, beta {float(r['beta']):g} and the iteration count are not stated in the paper "
        "(the table bali_fig1_sweep compares alternatives)"
    )
    + "\n"
    + reading
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 0.92))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
