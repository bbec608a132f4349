"""Tables and figure helpers for the BALI regression artefacts (Tables 1, 4, 7; Figs. 1, 4-7).

Cells come from the tidy CSVs of the `uci_regression` / `synthetic_predictive` experiments
(report/store/aggregate.py); the paper's numbers from config/papers/bali.yaml (reprokit.report.verdicts.papers).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...plan.methods import Column
from ...plan.uci_regression import METHOD_TABLE
from ...predictive_shape import SHAPE, _nearest, explained, floats, recorded_points, shape_text  # noqa: F401 (re-exported)
from ...predictive_shape import recorded as predictive_shape  # the notebooks read the cells' recorded reading
from ..store import cells
from ..store.stats import format_pm, mean_se
from ..verdicts import papers
from . import na, style
from .tables import write_table

DATASETS = ["uci_yacht", "uci_concrete", "uci_energy", "uci_redwine", "uci_kin8nm", "uci_powerplant", "uci_protein"]
NAMES = {
    "uci_yacht": "Yacht",
    "uci_concrete": "Concrete",
    "uci_energy": "Energy",
    "uci_redwine": "Redwine",
    "uci_kin8nm": "Kin8nm",
    "uci_powerplant": "Powerplant",
    "uci_protein": "Protein",
}
# our methods' labels, from the kind's method table, in the tables' order (a method added later comes last)
OURS = Column(METHOD_TABLE, "label", first=("bali", "bali_yraw", "dropout", "bbb", "vadam", "pbp"))
# which of the paper's columns each of ours is compared with (both BALI readings with the paper's BALI; our
# BBB, VADAM and PBP with the values the paper quotes)
PAPER_COLUMN = {
    "bali": "BALI",
    "bali_yraw": "BALI",
    "dropout": "DO",
    "bbb": "BBB",
    "vadam": "VADAM",
    "pbp": "PBP",
}
PAPER_OWN = ["BALI", "DO"]  # the paper's own runs
QUOTED = ["BBB", "NNG-MVG", "VADAM", "PBP"]  # literature values the paper quotes


def load(paths) -> pd.DataFrame:
    frames = [pd.read_csv(p) for p in paths]
    df = pd.concat(frames, ignore_index=True)
    if len(df):  # an experiment none of whose cells ran stays an empty table
        style.scale_of(df)  # one scale only
    return df


def summarise(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`stats.mean_se` (mean, s.e., n) over splits per (dataset, method), for the
    metric `test_<metric>`. A diverged split (NaN) makes the mean NaN (the papers' convention)."""
    rows = []
    col = f"test_{metric}"
    for (dataset, method), g in df.groupby(["dataset", "method"], sort=False):
        ran = g[g["status"].isin(cells.RAN_STATUSES)]
        if ran.empty:
            rows.append(
                {"dataset": dataset, "method": method, "mean": np.nan, "se": np.nan, "n": 0, "status": "unavailable"}
            )
            continue
        v = ran[col].astype(float).to_numpy() if col in ran else np.full(len(ran), np.nan)
        mean, se, n = mean_se(v)
        rows.append(
            {
                "dataset": dataset,
                "method": method,
                "mean": mean,
                "se": se,
                "n": n,
                "status": {None: "completed", "NaN": "diverged", "OOM": "oom"}[cells.outcome_text(ran["status"])],
            }
        )
    return pd.DataFrame(rows)


def paper_values(path) -> dict:
    """Tables 1 (RMSE) and 7 (LL) of the paper's data file (config/papers/bali.yaml) as
    {"rmse"|"ll": {dataset: {method: [mean, s.e.] or None}}} (None: the paper prints no value)."""
    doc = papers.load(path)
    out = {}
    for key, name in (("rmse", "bali_table1"), ("ll", "bali_table7")):
        numbers = papers.artefact(doc, name)["numbers"]
        out[key] = {
            d: {m: (v if isinstance(v, list) else None) for m in vals for v in [papers.entry(doc, name, d, m)]}
            for d, vals in numbers.items()
        }
    return out


def uci_table(df: pd.DataFrame, paper: dict, metric: str, digits: int = 3) -> tuple[pd.DataFrame, list[str]]:
    """Rows: datasets in the paper's order (those in the grid); columns: ours (BALI, DO, BBB, VADAM, PBP, splits), then
    the paper's BALI and DO, then the literature values the paper quotes. Returns (table, footnotes)."""
    summary = summarise(df, metric)
    key = "rmse" if metric == "rmse" else "ll"
    present = [d for d in DATASETS if d in set(df["dataset"])]
    # methods not in this grid (e.g. an older results folder) get no column rather than n/a
    methods = {m: label for m, label in OURS.items() if m in set(df["method"])}
    out, notes = [], []
    for d in present:
        row = {"Dataset": NAMES[d]}
        ns = set()
        for method, label in methods.items():
            s = summary[(summary.dataset == d) & (summary.method == method)]
            if s.empty or s.iloc[0]["status"] == "unavailable":  # uci_artefact's footnote says why (the cells' note)
                row[f"{label} (ours)"] = "n/a"
                continue
            r = s.iloc[0]
            row[f"{label} (ours)"] = (
                "OOM"
                if r["status"] == "oom"
                # one split: no s.e. to print
                else format_pm(r["mean"], r["se"], digits)
                if r["n"] > 1
                else f"{r['mean']:.{digits}f}"
            )
            ns.add(int(r["n"]))
            if r["status"] == "diverged":
                notes.append(f"{NAMES[d]} {label}: at least one split diverged (NaN)")
            elif r["status"] == "oom":
                notes.append(f"{NAMES[d]} {label}: at least one split ran out of device memory (OOM)")
        row["splits"] = "/".join(str(n) for n in sorted(ns)) if ns else "0"
        vals = paper[key].get(d, {})
        for m in PAPER_OWN + QUOTED:
            v = vals.get(m)
            row[f"{m} (paper)" if m in PAPER_OWN else f"{m} (quoted)"] = (
                "-" if v is None else format_pm(v[0], v[1], digits)
            )
        out.append(row)
    return pd.DataFrame(out), notes


def within_two_se(df: pd.DataFrame, paper: dict, metric: str) -> pd.DataFrame:
    """Our mean vs the paper's: difference in units of the paper's s.e. (for captions and reports)."""
    summary = summarise(df, metric)
    key = "rmse" if metric == "rmse" else "ll"
    rows = []
    for _, r in summary.iterrows():
        label = OURS.get(r["method"])
        v = paper[key].get(r["dataset"], {}).get(PAPER_COLUMN.get(r["method"]))
        if v is None or r["n"] == 0:
            continue
        z = (r["mean"] - v[0]) / v[1] if v[1] > 0 else float("inf")
        rows.append(
            {
                "dataset": r["dataset"],
                "method": label,
                "ours": r["mean"],
                "ours_se": r["se"],
                "n": r["n"],
                "paper": v[0],
                "paper_se": v[1],
                "z_paper_se": z,
                "within_2se": abs(z) <= 2,
            }
        )
    return pd.DataFrame(rows)


def table4(df: pd.DataFrame) -> pd.DataFrame:
    """Table 4 rendered from what the BALI cells recorded (values that ran); a dataset of the grid none of whose
    BALI cells ran is a row of n/a (its cells' note: `na.footnotes`)."""
    b = df[(df["method"] == "bali") & df["status"].isin(["completed", "diverged"])]
    columns = ["Dataset", "size", "α", "β", "σ_r²", "σ_u²", "N_eff", "B", "# iterations"]
    rows = []
    for d in [x for x in DATASETS if x in set(df.loc[df["method"] == "bali", "dataset"])]:
        g = b[b["dataset"] == d]
        if g.empty:
            rows.append({"Dataset": NAMES[d], **dict.fromkeys(columns[1:], "n/a")})
            continue

        def one(col, f=lambda v: f"{v:g}", g=g):
            vals = sorted({f(v) for v in g[col].dropna()}) if col in g else []
            return ", ".join(vals) if vals else "n/a"

        n_total = (g["n_train"] + g["n_test"]).iloc[0]
        div = float(g["n_eff_divisor"].iloc[0])
        rows.append(
            {
                "Dataset": NAMES[d],
                "size": f"{int(n_total)}",
                "α": one("alpha"),
                "β": one("beta"),
                "σ_r²": one("sigma_r2"),
                "σ_u²": f"{one('sigma_u2_factor')}·N_eff",
                "N_eff": "N" if div == 1 else f"N/{div:g}",
                "B": one("batch_size", lambda v: f"{int(v)}"),
                "# iterations": one("n_steps", lambda v: f"{int(v)}"),
            }
        )
    return pd.DataFrame(rows, columns=columns)


def bali_scaling_note(df: pd.DataFrame, method: str = "bali") -> str:
    """What BALI's cells did with inputs / targets / the first layer, from the recorded info columns."""
    b = df[(df["method"] == method) & df["status"].isin(["completed", "diverged"])]

    def flag(col):
        vals = sorted({bool(v) for v in b[col].dropna()}) if col in b else []
        return "mixed" if len(vals) > 1 else (vals[0] if vals else None)

    sx, sy, si = flag("standardize_x"), flag("standardize_y"), flag("scale_input_layer")
    word = {True: "z-scored", False: "in original units", "mixed": "mixed", None: "n/a"}
    text = f"{OURS[method]} inputs {word[sx]}, targets {word[sy]}"
    if si is not None:
        text += ", first-layer features " + ("scaled by 1/sqrt(D+1)" if si is True else "not scaled (x_1 = (x, 1))")
    return text


def provenance(df: pd.DataFrame) -> str:
    ran = df[df["status"].isin(["completed", "diverged"])]
    splits = ran.groupby("dataset")["seed"].nunique()
    text = ", ".join(f"{NAMES.get(d, d)} {n}" for d, n in splits.items())
    scales = sorted(set(df["scale"]))
    return (
        f"{', '.join(cells.SCALE_NOTE.get(s, s) for s in scales)}; splits per dataset: {text}; "
        "data: UCI regression, standard 90/10 splits of Hernandez-Lobato & Adams (2015)"
    )


# ------------------------------------------------------------------ synthetic figures
def plot_predictive(ax, row: pd.Series, title: str) -> None:
    """Mean +- 1 sd (regression) or the predictive p(class 1) map (classification) of one cell, with the training
    points and grid the cell recorded (reprokit.predictive_shape.plot_points)."""
    if row.get("status") != "completed":
        ax.text(0.5, 0.5, f"{row.get('status')}", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return
    pts = recorded_points(row)
    if not pts:
        raise ValueError(
            f"cell {row.get('method')}/{row.get('dataset')}/seed {row.get('seed')} records no plot points (plot_x_train ...): it ran before "
            "cells recorded them; re-run it, or migrate its archived line (benchmarks/record_shape.py "
            "--migration plot_points)"
        )
    if "x_grid" in pts:  # regression
        xg, fg = pts["x_grid"], pts["f_grid"]
        mean, sd = floats(row["grid_mean"]), floats(row["grid_sd"])
        ax.fill_between(xg, mean - sd, mean + sd, color="tab:blue", alpha=0.3, lw=0, label="±1 sd")
        ax.plot(xg, mean, color="tab:blue", lw=1.2, label="predictive mean")
        ax.plot(xg, fg, color="k", lw=0.8, ls="--", label="true f")
        ax.scatter(pts["x_train"], pts["y_train"], s=6, color="tab:red", zorder=3, label="train")
        lo, hi = float(np.min(fg)), float(np.max(fg))
        pad = 0.5 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    else:
        gx, gy = pts["grid_x1"], pts["grid_x2"]
        p1 = floats(row["grid_p1"]).reshape(len(gx), len(gy))
        cs = ax.contourf(gx, gy, p1.T, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.8)
        ax.contour(gx, gy, p1.T, levels=[0.5], colors="k", linewidths=0.8)
        x, y = pts["x_train"], pts["y_train"]
        ax.scatter(
            x[y == 0, 0], x[y == 0, 1], s=6, color="tab:blue", edgecolor="w", linewidth=0.3, label="train, class 0"
        )
        ax.scatter(
            x[y == 1, 0], x[y == 1, 1], s=6, color="tab:red", edgecolor="w", linewidth=0.3, label="train, class 1"
        )
        ax.plot([], [], color="k", lw=0.8, label="p(class 1) = 0.5")  # the contour's legend entry
        ax.figure.colorbar(cs, ax=ax, label="predictive p(class 1)")
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
    ax.set_title(title)


UCI_ARTEFACTS = {  # metric -> (paper table, caption)
    "rmse": (
        "bali_table1",
        "BALI Table 1: test RMSE (lower is better) on the UCI regression benchmark, mean ± s.e. over splits",
    ),
    "ll": (
        "bali_table7",
        "BALI Table 7: test log-likelihood (higher is better) on the UCI regression benchmark, mean ± s.e. over splits",
    ),
}


def _named(inputs, *keys):
    """The first of `keys` that `inputs` (a dict or Snakemake's named input list) has."""
    for key in keys:
        try:
            return inputs[key]
        except (KeyError, AttributeError):
            continue
    raise KeyError(f"inputs name none of {keys}")


def uci_artefact(inputs, tex_path, metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """BALI Tables 1 (metric "rmse") and 7 ("ll"): ours next to the paper's, written to `tex_path`.

    `inputs` maps bali_uci, bali_uci_protein (tidy CSVs) and paper_numbers (config/papers/bali.yaml; the
    older key `paper` is read when paper_numbers is absent).
    Returns (table, check) where check holds our mean minus the paper's in units of the paper's s.e.
    """
    if metric not in UCI_ARTEFACTS:
        raise ValueError(f"metric '{metric}' unknown (valid: {', '.join(UCI_ARTEFACTS)})")
    label, caption = UCI_ARTEFACTS[metric]
    df = load([inputs["bali_uci"], inputs["bali_uci_protein"]])
    paper = paper_values(_named(inputs, "paper_numbers", "paper"))
    table, notes = uci_table(df, paper, metric)
    check = within_two_se(df, paper, metric)
    footnotes = (
        [
            "(ours): run here; (paper): the paper's BALI and DO; (quoted): its literature values; original units "
            "(scaling, our baselines: the report's notes).",
        ]
        + notes
        + na.footnotes(df)
    )
    if len(check):
        far = [r for r in check.itertuples() if abs(r.z_paper_se) > 2]
        footnotes.append(
            f"Outside 2 paper s.e. ({len(far)} of {len(check)} entries compared; our mean minus the paper's, in its "
            "s.e.): "
            + ("; ".join(f"{NAMES.get(r.dataset, r.dataset)} {r.method} {r.z_paper_se:+.1f}" for r in far) or "none")
            + "."
        )
    write_table(
        table,
        tex_path,
        caption=caption,
        scale=style.scale_of(df),
        note=provenance(df),
        footnotes=footnotes,
        label=f"tab:{label}",
    )
    return table, check


def bbb_synthetic_page(inputs, dataset: str, label: str):
    """BALI Figs. 4-6: Bayes by Backprop predictives on one synthetic set, one panel per KL factor.

    `inputs` maps bali_bbb_synthetic to the tidy CSV; `dataset` is its dataset value (sines_trend, sinc,
    two_moons), `label` how captions name it. Returns (figure, scale, footer note).
    """
    import matplotlib.pyplot as plt

    df = load([inputs["bali_bbb_synthetic"]])
    rows = df[df.dataset == dataset].sort_values("kl_factor", ascending=False)
    n = max(len(rows), 1)
    fig, axes = plt.subplots(1, n, figsize=(4 * n, 3.4), squeeze=False)
    regression = bool(len(rows)) and rows.iloc[0].get("task") == "regression"
    for ax, (_, row) in zip(axes[0], rows.iterrows()):
        plot_predictive(ax, row, f"BBB, {label}, KL factor {row['kl_factor']:g}")
        nll_box(ax, row, "upper right" if regression else "lower right")
    style.figure_legend(fig, axes, markerscale=2)  # above the panels, clear of the data
    r = rows.iloc[0] if len(rows) else df.iloc[0]
    likelihood = (
        "Gaussian likelihood with a learned noise sd; shading: predictive mean ± 1 sd"
        if regression
        else "Bernoulli likelihood (two-class classification); colour: predictive p(class 1), black line: "
        "p(class 1) = 0.5"
    )
    note = style.source_note(df, f"synthetic {label} (App. H.1)") + (
        f"; {int(r['n_steps'])} Adam iterations (lr {r['lr']:g}), full batch, N(0, {r['prior_sigma']:g}^2) prior, "
        f"{likelihood}; {int(r['final_samples'])} weight samples; loss = NLL + KL factor x KL / N"
        "\nEach panel's box: the mean negative log-likelihood per training (test) point of its predictive, lower = "
        "closer fit; the training fit against the best constant prediction (R^2; two moons: 1 - NLL / label entropy) "
        "and the predictive "
        + ("sd" if regression else "entropy")
        + " far from the data over that near it. The paper's claim, underfitting at a large KL factor and "
        "overconfidence at a small one, is read as a fit under 0.5 at factor 1 and a ratio under 2 at 0.01"
    )
    note = style.wrap_note(fig, note)
    fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 0.92))
    return fig, style.scale_of(df), note


def nll_box(ax, row: pd.Series, loc: str = "upper right") -> None:
    """The cell's training and test NLL, its training fit (reprokit.predictive_shape.explained) and its uncertainty far from
    the data over near it in a box in a corner of its panel: what the BBB claims of Figs. 4-6 read."""
    parts = [
        f"{split} NLL {float(row[f'{split}_nll']):.3f}"
        for split in ("train", "test")
        if f"{split}_nll" in row and pd.notna(row[f"{split}_nll"])
    ]
    fit, shape = explained(row), predictive_shape(row)
    if fit is not None:
        parts.append(f"train fit {fit:.2f}")
    if shape:
        parts.append(f"far / near {shape['far_over_near']:.3g}")
    if not parts:
        return
    x, ha = (0.98, "right") if "right" in loc else (0.02, "left")
    y, va = (0.98, "top") if "upper" in loc else (0.02, "bottom")
    ax.text(
        x,
        y,
        "\n".join(parts),
        transform=ax.transAxes,
        ha=ha,
        va=va,
        fontsize=8,
        zorder=6,
        bbox={"facecolor": "w", "edgecolor": "0.6", "alpha": 0.85, "boxstyle": "round,pad=0.3"},
    )


# ------------------------------------------------------------------ readings of the unstated settings
def readings_table(readings: dict[str, pd.DataFrame], paper: dict, datasets=None) -> tuple[pd.DataFrame, dict, dict]:
    """Each reading's test RMSE and LL (mean ± s.e. over its splits) beside the paper's BALI, one row per
    (dataset, metric), and which reading is nearest the paper there: |ours - paper| in units of the combined
    s.e. (sqrt(se_ours^2 + se_paper^2)). `readings`: {label: the BALI rows of that reading (one method)}.
    Returns (table, {label: rows where it is nearest}, {label: (summed distance, rows summed)}); a reading with
    no completed split is n/a and never nearest."""
    keys = {"RMSE": ("rmse", "test_rmse"), "LL": ("ll", "test_ll")}
    datasets = datasets or [d for d in DATASETS if any(len(r) and d in set(r["dataset"]) for r in readings.values())]
    rows, nearest, totals = [], dict.fromkeys(readings, 0), dict.fromkeys(readings, (0.0, 0))
    for d in datasets:
        for label, (key, column) in keys.items():
            p = paper[key].get(d, {}).get("BALI")
            row = {"dataset": NAMES.get(d, d), "metric": label, "paper BALI": format_pm(p[0], p[1]) if p else "-"}
            z = {}
            for name, df in readings.items():
                ran = df[(df["dataset"] == d) & df["status"].isin(cells.RAN_STATUSES)] if len(df) else df
                v = ran[column].astype(float).to_numpy() if len(ran) and column in ran else np.array([])
                if v.size == 0:
                    row[name] = "n/a"
                    continue
                mean, se, n = mean_se(v)
                row[name] = f"{format_pm(mean, se)} ({n})" if n > 1 else f"{mean:.3f} (1)"
                if p and np.isfinite(mean):
                    z[name] = abs(mean - p[0]) / max(np.hypot(se, p[1]), 1e-12)
            best = min(z, key=z.get) if z else None
            if best is not None:
                nearest[best] += 1
            for name, dist in z.items():
                totals[name] = (totals[name][0] + dist, totals[name][1] + 1)
            row["nearest the paper"] = f"{best} ({z[best]:.1f} s.e.)" if best is not None else "-"
            rows.append(row)
    return pd.DataFrame(rows), nearest, totals
