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

from reprokit.report.render import na, notebook, style
from reprokit.report.render.invariance import METHOD_STYLE, as_bool, completed
from reprokit.report.store.stats import grouped_mean_se

log = notebook.start_log(snakemake)

style.setup()
a = pd.read_csv(snakemake.input["fig3a"])
b = pd.read_csv(snakemake.input["fig3b"])
c = pd.read_csv(snakemake.input["fig3c"])
plain = pd.read_csv(snakemake.input["fig3a_augerino_plain"])
plain_reg1 = pd.read_csv(snakemake.input["fig3a_augerino_plain_reg1"])
scale = style.scale_of(a)
for t in (a, b, c):
    t["rotated"] = as_bool(t["rotated"])


# %%
def panel(ax, df, title):
    """Mean ± s.e. over seeds of test accuracy vs subset size, one line per method."""
    ok = completed(df)
    for method, (label, color, marker) in METHOD_STYLE.items():
        sub = ok[ok["method"] == method]
        if sub.empty:
            continue
        ms = grouped_mean_se(sub, "n_train", "test_acc")
        x = ms["n_train"] / 1000
        ax.errorbar(
            x, 100 * ms["mean"], yerr=100 * ms["se"], color=color, marker=marker, ms=3.5, lw=1.2, capsize=2, label=label
        )
    ax.set_xscale("log")
    sizes = sorted(ok["n_train"].unique())
    ax.set_xticks([s / 1000 for s in sizes], [f"{s / 1000:g}" for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("Dataset size (x1000)")
    ax.set_ylabel("Test accuracy (%)")
    ax.set_title(title)


# The panels: (a) MNIST, (b) CIFAR-10, (c) TinyImageNet (columns), unrotated / rotated (rows). A column none of whose
# panels has a completed cell is one n/a area over both rows (two such columns side by side: one area over both),
# and the figure's one n/a text (`na.shared`: each missing panel's reason, how to get the data once) is in the
# first n/a area; any other n/a area points to it.
COLUMNS = [
    ("(a)", "MNIST", "MNIST CNN", a),
    ("(b)", "CIFAR10", "fixup ResNet-8", b),
    ("(c)", "TinyImagenet", "ResNet-50 GN", c),
]


def rows_of(df, rot):
    return df[df["rotated"] == rot]


def why(df):
    return "no cell completed" if len(df) else "no cell in this scale's grid (paper scale only)"


empty = [[completed(rows_of(df, rot)).empty for rot in (False, True)] for *_, df in COLUMNS]
whole = [all(e) for e in empty]  # columns with no completed cell in either row
fig = plt.figure(figsize=(11, 6.2))
gs = fig.add_gridspec(2, 3)
axes, areas, done = [], [], set()  # areas: (axes, [(label, rows, why)]) without data
for j, (tag, name, net, df) in enumerate(COLUMNS):
    if j in done:
        continue
    if whole[j]:  # this column, and the next if it is empty too, as one area
        span = [j] + ([j + 1] if j + 1 < len(COLUMNS) and whole[j + 1] else [])
        done.update(span)
        ax = fig.add_subplot(gs[:, span[0] : span[-1] + 1])
        parts = [
            (f"{COLUMNS[i][0]} {COLUMNS[i][1]} and Rot{COLUMNS[i][1]}", COLUMNS[i][3], why(COLUMNS[i][3])) for i in span
        ]
        title = "; ".join(f"{COLUMNS[i][0]} {COLUMNS[i][1]}, Rot{COLUMNS[i][1]} ({COLUMNS[i][2]})" for i in span)
        areas.append((ax, parts, title))
        axes.append(ax)
        continue
    for row, rot in enumerate((False, True)):
        ax = fig.add_subplot(gs[row, j])
        axes.append(ax)
        title = f"{tag} {'Rot' if rot else ''}{name}, {net}"
        if empty[j][row]:
            areas.append(
                (ax, [(f"{tag} {'Rot' if rot else ''}{name}", rows_of(df, rot), why(rows_of(df, rot)))], title)
            )
        else:
            panel(ax, rows_of(df, rot), title)
if areas:  # one n/a text for the figure
    first, _, first_title = areas[0]
    na.shared(
        first,
        [p for _, parts, _ in areas for p in parts],
        first_title,
        width=70 if first.get_subplotspec().colspan.stop - first.get_subplotspec().colspan.start > 1 else 40,
    )
    for ax, _, title in areas[1:]:
        na.see(ax, f"the n/a note in {first_title.split(' ')[0]}", title)
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
        sizes = ", ".join(
            f"{n // 1000 if n >= 1000 else n}{'k' if n >= 1000 else ''} {v:.2f}"
            for n, v in g.groupby("n_train")["aug_rotation"].mean().items()
        )
        parts.append(f"{'RotMNIST' if rot else 'MNIST'} {sizes}")
    return "; ".join(parts)


def augerino_switch_text():
    """App. E: outcome and largest |psi| of Augerino with (fig3a) and without (plain) the safe switch, n_train 1000,
    at the paper's lambda = 0.01 and at lambda = 1 (plain only)."""
    parts = []
    for label, df in (
        ("safe", a[(a["method"] == "augerino") & (a["n_train"] == 1000)]),
        ("plain", plain),
        ("plain lambda=1", plain_reg1),
    ):
        for rot, g in df.groupby("rotated"):
            ranges = [col for col in g.columns if col.startswith("aug_") and not col.endswith("_samples")]
            widths = g[ranges].abs().max(axis=1)
            status = ", ".join(f"{n} {s}" for s, n in g["status"].value_counts().items())
            biggest = f"max |psi| {widths.max():.3g}" if widths.notna().any() else "psi NaN"
            parts.append(f"{label} {'RotMNIST' if rot else 'MNIST'}: {status} ({biggest})")
    return "; ".join(parts) or "not run"


steps = (
    ", ".join(
        f"{n // 1000 if n >= 1000 else n}{'k' if n >= 1000 else ''} examples: {int(s)}"
        for n, s in ok.groupby("n_train")["n_steps"].max().items()
    )
    if len(ok)
    else "?"
)
absent = [label for m, (label, *_) in METHOD_STYLE.items() if m not in set(a["method"])]
note = "\n".join(
    [
        style.source_note(a, "MNIST (60k train / 10k test; RotMNIST: each image rotated once by U[-pi, pi])")
        + f"; test examples {int(ok['n_test'].max()) if len(ok) else '?'}; training iterations per training-set size "
        f"({steps}) are our choice (not stated in the paper)"
        + (f"; methods not in this scale's grid: {', '.join(absent)}" if absent else ""),
        "Learned rotation half-width (radians) per training-set size - Partitioned: "
        + rotation_text("partitioned")
        + " | Partitioned (Ens.): "
        + rotation_text("partitioned_ens")
        + " | Last-layer ML: "
        + rotation_text("last_layer_ml")
        + " | Diff. Laplace: "
        + rotation_text("diff_laplace")
        + " | Augerino: "
        + rotation_text("augerino"),
        "Augerino at 1k examples with App. E's safe switch vs. without it (plain: the loss -lambda||psi|| alone; "
        "lambda 0.01 unless named; diverged = NaN): " + augerino_switch_text(),
    ]
)
note = style.wrap_note(fig, note)
fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 0.95))
style.finish_figure(fig, scale, note, snakemake.output["pdf"], snakemake.output["png"])
