"""Tables and curves of the BALI classification benchmark (Table 2, Tables 5/6, Figs. 2/3) from the
aggregated CSVs of the `bali_classification` experiments. The notebooks only load, call and save.

Conventions: mean ± standard error over seeds/splits (`stats.format_mean_se`: no ± with one seed); a
cell whose dataset was unavailable shows "n/a"; a diverged cell has NaN metrics and makes its entry "NaN"
(the papers' convention). Tables 5 and 6 are rendered from the hyperparameters each cell recorded in metrics.json
(`info`, columns of the aggregated table), i.e. from what actually ran, not from the config file.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...plan.bali_classification import METHOD_TABLE
from ...plan.methods import Column
from ..store import cells
from ..store.cells import SCALE_NOTE
from ..store.stats import format_mean_se
from . import na, style

DATASETS = {
    "spambase": "Spambase",
    "cdc_diabetes": "Diabetes",
    "magic": "Telescope",
    "mnist": "MNIST",
    "fashion_mnist": "FashionMNIST",
}
# "bali_n": BALI with the other reading of N in Sigma's degrees of freedom (wishart_n n, Alg. 1's actual N;
# experiments bali_cls_image_wishart / bali_cls_uci_wishart), drawn beside the paper's methods where its cells
# ran (ours, not the paper's); "bali" itself reads N_eff (the config's wishart_n)
# The grid's methods' labels, colours and lines come from the kind's method table (plan/bali_classification.py).
METHODS = Column(METHOD_TABLE, "label", {"bali_n": "BALI (Wishart N)"})
COLORS = Column(METHOD_TABLE, "colour", {"bali_n": "tab:purple"})
UCI = ("spambase", "cdc_diabetes", "magic")
ROC_PREFIX = "roc_tpr_at_fpr_"


def load(paths) -> pd.DataFrame:
    """Concatenate aggregated tables (or curve tables); empty files are skipped."""
    frames = []
    for p in paths:
        try:
            frames.append(pd.read_csv(p))
        except pd.errors.EmptyDataError:
            continue
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def as_wishart_variant(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of a `wishart_n` sweep (bali_cls_image_wishart) with method "bali_n" where the cell counted the actual
    N (its `bali.wishart_n` coordinate), so that they sit beside the paper's methods as one more method."""
    if len(df) == 0 or "bali.wishart_n" not in df:
        return df.iloc[0:0]
    out = df[df["bali.wishart_n"].astype(str) == "n"].copy()
    out["method"] = "bali_n"
    return out


def _ran(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] != "unavailable"] if "status" in df else df


def scale_of(df: pd.DataFrame) -> str:
    scales = sorted(set(df["scale"]))
    if len(scales) != 1:
        raise ValueError(f"table mixes scales {scales}")
    return scales[0]


def provenance(df: pd.DataFrame) -> str:
    """Scale, seeds/splits per dataset group, and the data ("<scale>; <counts>; data: <data>", as
    style.source_note: a table states the data in a footnote), for captions and figure footers."""
    parts = [SCALE_NOTE.get(scale_of(df), scale_of(df))]
    data = []
    ran = _ran(df)
    uci = ran[ran["dataset"].isin(UCI)]
    img = ran[~ran["dataset"].isin(UCI)]
    if len(uci):
        parts.append(f"UCI: {_per_dataset(uci, 'split')}")
        data.append("UCI: random 80/20 splits (seed = split)")
    if len(img):
        parts.append(f"MNIST/FashionMNIST: {_per_dataset(img, 'seed')}")
        data.append("MNIST/FashionMNIST: the standard 60000/10000 split")
    sizes = []
    for d in DATASETS:
        rows = ran[ran["dataset"] == d]
        if len(rows) and "n_train" in rows:
            sizes.append(f"{DATASETS[d]} {int(rows['n_train'].iloc[0])}/{int(rows['n_test'].iloc[0])}")
    if sizes:
        data.append("train/test sizes: " + ", ".join(sizes))
    missing = (
        sorted({DATASETS.get(d, d) for d in df.loc[df["status"] == "unavailable", "dataset"]}) if "status" in df else []
    )
    if missing:
        parts.append("n/a = dataset unavailable: " + ", ".join(missing))
    return "; ".join(parts) + (f"; data: {'; '.join(data)}" if data else "")


def _per_dataset(rows: pd.DataFrame, what: str) -> str:
    """How many seeds (splits) ran, counted per dataset from the cells: "1 split each", or "Spambase 1, Telescope 2
    splits" where the datasets differ."""
    n = rows.groupby("dataset")["seed"].nunique()
    n = n.reindex([d for d in DATASETS if d in n.index] + [d for d in n.index if d not in DATASETS])
    if n.nunique() == 1:
        return f"{int(n.iloc[0])} {what}{'s' if int(n.iloc[0]) > 1 else ''} each"
    return ", ".join(f"{DATASETS.get(d, d)} {int(k)}" for d, k in n.items()) + f" {what}s"


def _datasets(df: pd.DataFrame) -> list[str]:
    present = set(df["dataset"])
    return [d for d in DATASETS if d in present]


def _methods(df: pd.DataFrame) -> list[str]:
    present = set(df["method"])
    return [m for m in METHODS if m in present]


# ---------------------------------------------------------------------------------------------- Table 2


def table2(df: pd.DataFrame) -> pd.DataFrame:
    """Rows (dataset, metric): ACC, ECE and, for binary sets, AUC; columns BALI, DO, MAP (mean ± s.e.)."""
    rows = []
    for d in _datasets(df):
        sub = df[df["dataset"] == d]
        binary = d in UCI
        for key, label in (("test_acc", "ACC ↑"), ("test_ece", "ECE ↓"), ("test_auc", "AUC ↑")):
            if key == "test_auc" and not binary:
                continue
            row = {"Dataset": DATASETS[d], "Metric": label}
            for m in _methods(df):
                ran = _ran(sub[sub["method"] == m])
                if len(ran) == 0:
                    row[METHODS[m]] = "n/a"
                elif cells.outcome_text(ran["status"]) == "OOM":
                    row[METHODS[m]] = "OOM"
                else:
                    vals = ran[key] if key in ran else pd.Series([np.nan] * len(ran))
                    row[METHODS[m]] = format_mean_se(vals.to_numpy(dtype=np.float64))
            rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- Tables 5/6


def _recorded(rows: pd.DataFrame, column: str, fmt=lambda v: f"{v:g}") -> str:
    """The value a column holds in every cell of `rows` (several distinct values are all listed)."""
    if column not in rows or rows[column].isna().all():
        return "n/a"
    values = list(dict.fromkeys(rows[column].dropna().tolist()))

    def one(v):
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        return fmt(v) if isinstance(v, (int, float, np.number)) else str(v)

    return " / ".join(one(v) for v in values)


def _int(v) -> str:
    return f"{int(round(float(v)))}"


def table5(df: pd.DataFrame) -> pd.DataFrame:
    """BALI hyperparameters per dataset as recorded by the BALI cells (paper Table 5 layout)."""
    bali = _ran(df[df["method"] == "bali"])
    rows = []
    for d in _datasets(df):
        r = bali[bali["dataset"] == d]
        if len(r) == 0:
            rows.append({"Dataset": DATASETS[d], "size": "n/a"})
            continue
        rows.append(
            {
                "Dataset": DATASETS[d],
                "size": _recorded(r, "n_total", _int),
                "N_train": _recorded(r, "n_train", _int),
                "α": _recorded(r, "alpha"),
                "β": _recorded(r, "beta"),
                "σ_r²": _recorded(r, "sigma_r2"),
                "σ_u²": f"{_recorded(r, 'sigma_u2_factor')}·N_eff = {_recorded(r, 'sigma_u2', lambda v: f'{v:.4g}')}",
                "N_eff": f"N_train/{_recorded(r, 'n_eff_divisor')} = {_recorded(r, 'n_eff', lambda v: f'{v:.6g}')}",
                "B": _recorded(r, "batch_size", _int),
                "# iterations": _recorded(r, "n_steps", _int),
            }
        )
    return pd.DataFrame(rows)


def table5_footnotes(df: pd.DataFrame) -> list[str]:
    bali = _ran(df[df["method"] == "bali"])
    if len(bali) == 0:
        return []
    return [
        f"β decays by a factor {_recorded(bali, 'beta_decay')} after fractions {_recorded(bali, 'beta_milestones')} "
        f"of the iterations; initial weights N(0, σ_init² I) with σ_init = {_recorded(bali, 'sigma_init')}; "
        f"reparametrisation: {_recorded(bali, 'reparam')}; first-layer input scaling: "
        f"{_recorded(bali, 'scale_input_layer')}; architecture {_recorded(bali, 'hidden')} "
        f"{_recorded(bali, 'activation')}. Values read from the cells' metrics.json (what ran)."
    ]


def table6(df: pd.DataFrame) -> pd.DataFrame:
    """Adam hyperparameters of MC dropout and MAP per dataset as recorded by their cells (paper Table 6)."""
    rows = []
    for d in _datasets(df):
        for m in ("dropout", "map"):
            r = _ran(df[(df["dataset"] == d) & (df["method"] == m)])
            if m not in set(df["method"]):
                continue
            if len(r) == 0:
                rows.append({"Dataset": DATASETS[d], "Method": METHODS[m], "learning rate": "n/a"})
                continue
            rows.append(
                {
                    "Dataset": DATASETS[d],
                    "Method": METHODS[m],
                    "learning rate": _recorded(r, "lr"),
                    "weight decay": _recorded(r, "weight_decay"),
                    "dropout probability": _recorded(r, "dropout_p"),
                    "batch size B": _recorded(r, "batch_size", _int),
                    "# iterations": _recorded(r, "n_steps", _int),
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- Fig. 2 / Fig. 3


def nll_curves(curves: pd.DataFrame, dataset: str, method: str) -> pd.DataFrame:
    """Mean over seeds of train/test NLL per step (rows with NaN NLL, e.g. a divergence row, dropped)."""
    sub = curves[(curves["dataset"] == dataset) & (curves["method"] == method)]
    cols = [c for c in ("train_nll", "test_nll") if c in sub]
    if sub.empty or not cols:
        return pd.DataFrame(columns=["step", "train_nll", "test_nll", "n_seeds"])
    sub = sub.dropna(subset=cols)
    g = sub.groupby("step")
    out = g[cols].mean()
    out["n_seeds"] = g["seed"].nunique()
    return out.reset_index()


def roc_grid(df: pd.DataFrame) -> np.ndarray:
    cols = sorted((c for c in df.columns if c.startswith(ROC_PREFIX)), key=lambda c: float(c[len(ROC_PREFIX) :]))
    return np.asarray([float(c[len(ROC_PREFIX) :]) for c in cols])


def roc_mean(df: pd.DataFrame, dataset: str, method: str) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """(fpr grid, mean TPR over seeds, per-seed AUROCs) for one trained-on dataset and method."""
    grid = roc_grid(df)
    rows = _ran(df[(df["dataset"] == dataset) & (df["method"] == method)])
    if "ood_auroc" in rows:
        rows = rows.dropna(subset=["ood_auroc"])
    else:
        rows = rows.iloc[0:0]
    if len(rows) == 0 or grid.size == 0:
        return grid, np.full(grid.shape, np.nan), []
    cols = [f"{ROC_PREFIX}{g:.3f}" for g in grid]
    return grid, rows[cols].to_numpy(dtype=np.float64).mean(0), rows["ood_auroc"].astype(float).tolist()


# ---------------------------------------------------------------------------------------------- plotting

# How each method's curve is drawn, so that none hides another where they overlap: DO wide and pale under the
# others, MAP thin on top of it, BALI in between, and a marker of its own each (also `bali_fig7`'s variants).
# (the grid's methods: their table's `line`)
LINE = Column(METHOD_TABLE, "line", {"bali_n": {"lw": 1.0, "zorder": 6, "marker": "v"}})
SPLIT_LS = {"test": "-", "train": "--"}
FIG2_ORDER = ["mnist", "fashion_mnist", "spambase", "cdc_diabetes", "magic"]


def _markevery(n: int, offset: int = 0, of: int = 1):
    """Every evaluation marked when there are few (so their spacing shows), else evenly along the log axis. With
    `of` > 1, every `of`-th evaluation from `offset` (the `offset`-th of `of` staggered marker sets), so that two
    methods whose curves coincide each show their own markers."""
    if of > 1:
        return (offset, of) if n <= 40 else (0.04 * offset, 0.08 * of / 2)
    return None if n <= 40 else 0.08


# Methods drawn with staggered markers (DO and MAP, whose curves can coincide: MAP is DO without dropout): the
# position of each method's marker set among them
STAGGER = {"dropout": 0, "map": 1}
COINCIDE_REL = 0.02  # two curves "coincide" where they differ by less than this fraction at every evaluation


def nll_figure(df: pd.DataFrame, curves: pd.DataFrame, order=FIG2_ORDER):
    """BALI Fig. 2: train (dashed) and test (solid) NLL of every method against the iteration, one panel per
    dataset, on a log x axis over the positive iterations (`style.log_steps`: the first evaluations, where the
    paper's claim about convergence speed is, take as much room as the last). Every method drawn is named in one
    legend above the panels (`style.figure_legend`). Returns (fig, axes)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(order), figsize=(3.2 * len(order), 3.4))
    axes = np.atleast_1d(axes)
    for ax, d in zip(axes, order):
        rows = df[df["dataset"] == d] if len(df) else df
        ax.set_title(DATASETS.get(d, d))
        if rows.empty or (rows["status"] == "unavailable").all():  # the cells' notes and how to get the data
            na.panel(ax, rows, otherwise="no cell of this dataset ran at this scale", width=40, fontsize=6.5)
            continue
        steps = []
        for m in METHODS:
            c = nll_curves(curves, d, m) if len(curves) else None
            if c is None or c.empty:
                continue
            c = c[c["step"] > 0]  # step 0 (the initialisation) has no place on a log axis
            steps += c["step"].tolist()
            for split in ("test", "train"):
                ax.plot(
                    c["step"],
                    c[f"{split}_nll"],
                    color=COLORS[m],
                    ls=SPLIT_LS[split],
                    ms=3,
                    markevery=_markevery(len(c), STAGGER.get(m, 0), 2 if m in STAGGER else 1),
                    label=f"{METHODS[m]} {split}",
                    **LINE[m],
                )
        ax.set_yscale("log")
        style.log_steps(ax, steps)
    for ax in axes:
        if not na.texts(ax):
            ax.set_ylabel("NLL (log scale)")
            break
    style.figure_legend(fig, axes, ncol=6, frameon=True, bbox_to_anchor=(0.5, 1.06))  # every plotted method
    return fig, axes


def coinciding(curves: pd.DataFrame, a: str = "dropout", b: str = "map", rel: float = COINCIDE_REL, order=FIG2_ORDER):
    """Where methods `a` and `b`'s mean NLL curves coincide: [(dataset label, split)] where they differ by less
    than `rel` of their value at every evaluation both have (iteration > 0), in `order`."""
    out = []
    for d in order:
        ca, cb = (nll_curves(curves, d, m) if len(curves) else None for m in (a, b))
        if ca is None or cb is None or ca.empty or cb.empty:
            continue
        both = ca[ca["step"] > 0].merge(cb[cb["step"] > 0], on="step", suffixes=("_a", "_b"))
        for split in ("test", "train"):
            x, y = both[f"{split}_nll_a"].to_numpy(float), both[f"{split}_nll_b"].to_numpy(float)
            ok = np.isfinite(x) & np.isfinite(y)
            if ok.any() and (np.abs(x[ok] - y[ok]) <= rel * np.maximum(np.abs(x[ok]), np.abs(y[ok]))).all():
                out.append((DATASETS.get(d, d), split))
    return out


def coinciding_text(curves: pd.DataFrame, a: str = "dropout", b: str = "map", rel: float = COINCIDE_REL) -> str:
    """The figure's words for `coinciding`: where DO and MAP coincide and how both are drawn there."""
    found = coinciding(curves, a, b, rel)
    how = f"{METHODS[b]} drawn thin over {METHODS[a]}'s wide pale line, their markers at alternate evaluations"
    if not found:
        return f"{METHODS[a]} and {METHODS[b]}: {how}"
    where: dict[str, list[str]] = {}
    for d, split in found:
        where.setdefault(d, []).append(split)
    return (
        f"{METHODS[a]} and {METHODS[b]} coincide (within {rel:.0%} at every evaluation) on "
        + ", ".join(f"{d} ({' and '.join(s)})" for d, s in where.items())
        + f": {how}"
    )


def eval_text(df: pd.DataFrame, order=FIG2_ORDER) -> str:
    """When the curves' NLL was evaluated, per dataset, from the cells: "Spambase every 18 iterations; MNIST every
    30 and at 1, 2, 4, .. < 30" (with n > 1 evaluations per doubling: "and at round(2^(k/n)) < 30")."""
    parts = []
    for d in order:
        ran = _ran(df[df["dataset"] == d]) if len(df) else df
        if ran.empty or "eval_every" not in ran:
            continue
        every = "/".join(str(int(v)) for v in sorted(set(ran["eval_every"].dropna())))
        doubling = int(ran["eval_doubling_until"].fillna(0).max()) if "eval_doubling_until" in ran else 0
        per = int(ran["evals_per_doubling"].fillna(1).max()) if "evals_per_doubling" in ran else 1
        also = f" and at 1, 2, 4, .. < {doubling}" if doubling > 1 else ""
        if doubling > 1 and per > 1:
            also = f" and at round(2^(k/{per})) < {doubling} (1, 2, 3, ..)"
        parts.append(f"{DATASETS.get(d, d)} every {every}{also}")
    return "; ".join(parts)


def seeds_per_dataset(curves: pd.DataFrame, method: str | None = None) -> str:
    """The seeds (splits) each dataset's curves average over, counted from the curves: "Spambase 1, Telescope 2"."""
    c = curves if method is None or "method" not in curves else curves[curves["method"] == method]
    if c.empty or "seed" not in c:
        return "none"
    n = c.groupby("dataset")["seed"].nunique()
    n = n.reindex([d for d in DATASETS if d in n.index] + [d for d in n.index if d not in DATASETS])
    return ", ".join(f"{DATASETS.get(d, d)} {int(k)}" for d, k in n.items())


VARIANT_LINE = {
    "BALI-W": {"color": "tab:blue", "lw": 3.2, "alpha": 0.45, "zorder": 2, "marker": "o"},
    "BALI-L": {"color": "tab:orange", "lw": 1.2, "zorder": 4, "marker": "^"},
}


def variant_figure(curves: pd.DataFrame, names: dict):
    """BALI Fig. 7: train (dashed) and test (solid) NLL of BALI-W and BALI-L (`variant` column of `curves`) per
    dataset, mean over seeds with a ± s.e. band where more than one seed ran (`spread_text` says which), on a log x
    axis over the positive iterations. BALI-W is drawn wide and pale under BALI-L so that neither hides the other.
    Returns (fig, axes, datasets drawn)."""
    import matplotlib.pyplot as plt

    datasets = [d for d in names if d in set(curves.get("dataset", []))]
    n = max(len(datasets), 1)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False)
    for ax, d in zip(axes[0], datasets):
        steps = []
        for variant, line in VARIANT_LINE.items():
            c = curves[(curves.dataset == d) & (curves.variant == variant) & (curves.step > 0)]
            for split in ("test", "train"):
                col = f"{split}_nll"
                if col not in c or c[col].dropna().empty:
                    continue
                g = c.dropna(subset=[col]).groupby("step")[col]
                m, k = g.mean(), g.count()
                se = (g.std(ddof=1) / np.sqrt(k)).fillna(0)
                steps += m.index.tolist()
                ax.plot(
                    m.index,
                    m.values,
                    ls=SPLIT_LS[split],
                    ms=3,
                    markevery=_markevery(len(m)),
                    label=f"{variant} {split}",
                    **line,
                )
                if "seed" in c and c["seed"].nunique() > 1:  # one seed: no band (it has no s.e.)
                    ax.fill_between(m.index, m - se, m + se, color=line["color"], alpha=0.15, lw=0)
        ax.set_title(names[d])
        ax.set_ylabel("NLL (log scale)")
        ax.set_yscale("log")
        style.log_steps(ax, steps)
    if datasets:
        style.figure_legend(fig, axes, ncol=4, frameon=True, bbox_to_anchor=(0.5, 1.08))
    return fig, axes, datasets


def spread_text(curves: pd.DataFrame, names: dict) -> str:
    """What Fig. 7's curves are, from the seeds each variant's curves have per dataset: "one seed, no band" where
    every curve has one, "mean over 3 seeds, ± s.e. band" where every curve has the same n > 1, else both, the
    one-seed curves named."""
    has = {"step", "seed", "variant", "dataset"} <= set(curves.columns)  # no cell ran: no curve columns
    n = curves[curves.step > 0].groupby(["variant", "dataset"])["seed"].nunique() if has else None
    if n is None or n.empty:
        return "no curve"
    if (n == 1).all():
        return "one seed per curve, no band (no s.e. with one seed)"
    if n.nunique() == 1:
        return f"mean over {int(n.iloc[0])} seeds, ± s.e. band"
    one = [f"{v} {names.get(d, d)}" for (v, d), k in n.items() if k == 1]
    lo, hi = int(n[n > 1].min()), int(n[n > 1].max())
    count = str(lo) if lo == hi else f"{lo}-{hi}"
    return f"mean over {count} seeds with a ± s.e. band" + (f"; one seed, no band: {', '.join(one)}" if one else "")
