# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fig. 3 — learning affine augmentations on subsets of data (partitioned networks paper)
# Test accuracy vs training-set size. (a) MNIST and RotMNIST with the MNIST CNN (Table 9): Baseline
# (no augmentation), Last-layer ML (Schwöbel et al. 2021: invariant sparse GP on the CNN's last-layer
# features, psi on its ELBO), Augerino (safe variant), Diff. Laplace (Immer et al. 2022, LILA: psi on a
# KFAC Laplace marginal likelihood), Partitioned (Ens.) (C separate networks, network k fit on D_1:k)
# and Partitioned (3 chunks [0.8, 0.1, 0.1]); the augmentation ranges are learned.
# (b) CIFAR-10 / RotCIFAR-10 with a fixup ResNet-8 and (c) TinyImageNet / RotTinyImageNet with a
# ResNet-50 (GroupNorm) are drawn from their own experiments; without the data they are n/a.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import matplotlib.pyplot as plt
import pandas as pd

from reprokit.report import style
from reprokit.report.invariance import METHOD_STYLE, as_bool, completed
from reprokit.report.stats import grouped_mean_se

log = style.start_log(snakemake)  # noqa: F821 (injected by Snakemake)

style.setup()
a = pd.read_csv(snakemake.input["fig3a"])  # noqa: F821 (injected by Snakemake)
b = pd.read_csv(snakemake.input["fig3b"])  # noqa: F821
c = pd.read_csv(snakemake.input["fig3c"])  # noqa: F821
plain = pd.read_csv(snakemake.input["fig3a_augerino_plain"])  # noqa: F821 (App. E: no safe switch)
plain_reg1 = pd.read_csv(snakemake.input["fig3a_augerino_plain_reg1"])  # noqa: F821 (App. E, lambda = 1)
scale = style.scale_of(a)
for t in (a, b, c):
    t["rotated"] = as_bool(t["rotated"])


# %%
def panel(ax, df, title):
    """Mean ± s.e. over seeds of test accuracy vs subset size, one line per method."""
    ok = completed(df)
    if ok.empty:  # n/a: the unavailable cells' notes and how to get the data, or why no cell is here
        style.na_panel(ax, df, title, otherwise="no cell completed" if len(df) else "no cell in this scale's grid",
                       width=45)
        return
    for method, (label, color, marker) in METHOD_STYLE.items():
        sub = ok[ok["method"] == method]
        if sub.empty:
            continue
        ms = grouped_mean_se(sub, "n_train", "test_acc")
        x = ms["n_train"] / 1000
        ax.errorbar(x, 100 * ms["mean"], yerr=100 * ms["se"], color=color, marker=marker, ms=3.5, lw=1.2,
                    capsize=2, label=label)
    ax.set_xscale("log")
    sizes = sorted(ok["n_train"].unique())
    ax.set_xticks([s / 1000 for s in sizes], [f"{s / 1000:g}" for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("Dataset size (x1000)")
    ax.set_ylabel("Test accuracy (%)")
    ax.set_title(title)


fig, axes = plt.subplots(2, 3, figsize=(11, 6))
for row, rot in enumerate((False, True)):
    prefix = "Rot" if rot else ""
    panel(axes[row, 0], a[a["rotated"] == rot], f"(a) {prefix}MNIST, MNIST CNN")
    panel(axes[row, 1], b[b["rotated"] == rot], f"(b) {prefix}CIFAR10, fixup ResNet-8")
    panel(axes[row, 2], c[c["rotated"] == rot], f"(c) {prefix}TinyImagenet, ResNet-50 GN")
style.figure_legend(fig, axes)  # every method plotted in any panel

# %% [markdown]
# Footer: scale, seeds, data, the subset sizes and iterations (a choice: the paper does not state
# them), the learned rotation range of the partitioned runs, and what is missing.

# %%
ok = completed(a)


def rotation_text(method):
    """Learned rotation half-width (rad, mean over seeds) per dataset and training-set size."""
    sub = ok[ok["method"] == method]
    if sub.empty or "aug_rotation" not in sub:
        return "n/a"
    parts = []
    for rot, g in sub.groupby("rotated"):
        sizes = ", ".join(f"{n // 1000 if n >= 1000 else n}{'k' if n >= 1000 else ''} {v:.2f}"
                          for n, v in g.groupby("n_train")["aug_rotation"].mean().items())
        parts.append(f"{'RotMNIST' if rot else 'MNIST'} {sizes}")
    return "; ".join(parts)


def augerino_switch_text():
    """App. E: outcome and largest |psi| of Augerino with (fig3a) and without (plain) the safe switch, n_train 1000,
    at the paper's lambda = 0.01 and at lambda = 1 (plain only)."""
    parts = []
    for label, df in (("safe", a[(a["method"] == "augerino") & (a["n_train"] == 1000)]), ("plain", plain),
                      ("plain lambda=1", plain_reg1)):
        for rot, g in df.groupby("rotated"):
            ranges = [col for col in g.columns if col.startswith("aug_") and not col.endswith("_samples")]
            widths = g[ranges].abs().max(axis=1)
            status = ", ".join(f"{n} {s}" for s, n in g["status"].value_counts().items())
            biggest = f"max |psi| {widths.max():.3g}" if widths.notna().any() else "psi NaN"
            parts.append(f"{label} {'RotMNIST' if rot else 'MNIST'}: {status} ({biggest})")
    return "; ".join(parts) or "not run"


steps = ", ".join(f"{n}: {int(s)}" for n, s in ok.groupby("n_train")["n_steps"].max().items()) if len(ok) else "?"
missing = []
for name, t in (("CIFAR-10", b), ("TinyImageNet", c)):
    if completed(t).empty:
        missing.append(f"{name}: " + (", ".join(sorted(set(t["note"].dropna()) - {""}))
                                      or ("paper scale only (no cell in this scale's grid)" if t.empty else "not run")))
note = "\n".join([
    style.provenance(a, "MNIST (60k train / 10k test; RotMNIST: each image rotated once by U[-pi, pi])")
    + f"; test examples {int(ok['n_test'].max()) if len(ok) else '?'}; training-set sizes and iterations per size "
    f"({steps}) are our choice (not stated in the paper)",
    "Learned rotation half-width (rad) - Partitioned: " + rotation_text("partitioned")
    + " | Partitioned (Ens.): " + rotation_text("partitioned_ens"),
    "Last-layer ML: " + rotation_text("last_layer_ml") + " | Diff. Laplace: " + rotation_text("diff_laplace")
    + " | Augerino: " + rotation_text("augerino"),
    "Augerino 1k, App. E safe switch vs plain -lambda||psi|| (lambda 0.01 unless named; diverged = NaN): "
    + augerino_switch_text(),
    "n/a: " + ("; ".join(missing) or "none")
    + " | not in this scale's grid: " + (", ".join(label for m, (label, *_) in METHOD_STYLE.items()
                                                   if m not in set(a["method"])) or "none"),
])
fig.tight_layout(rect=(0, 0.07, 1, 0.97))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])  # noqa: F821
