"""Plot helpers and table entries for the learned-augmentation artefacts (partitioned paper Figs. 3, 5-9,
Tables 1-3).

Tables are the tidy aggregates of `affine_invariance` experiments (report/store/aggregate.py): one row per
cell with its coordinates (list-valued axes such as `chunk_proportions` appear as "[8, 1, 1]"), the
status, and the metrics (`test_acc`, learned or fixed ranges `aug_<name>`).
"""

from __future__ import annotations

import ast
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...plan.affine_invariance import METHOD_TABLE
from ..store import cells
from ..store.stats import format_mean_se
from . import na, style

AUG_NAMES = ("rotation", "shear", "translate_x", "translate_y", "scale_x", "scale_y")
AUG_LABELS = {
    "rotation": "Rotation",
    "shear": "Shear",
    "translate_x": "Translation X",
    "translate_y": "Translation Y",
    "scale_x": "Scale X",
    "scale_y": "Scale Y",
}
FIG3_ORDER = ("baseline", "last_layer_ml", "augerino", "diff_laplace", "partitioned_ens", "partitioned")  # the paper's
# {method: (label, colour, marker)} of Fig. 3's methods, in its order, from the kind's table (plan/affine_invariance.py)
METHOD_STYLE = {m: (METHOD_TABLE[m].label, METHOD_TABLE[m].colour, METHOD_TABLE[m].line["marker"]) for m in FIG3_ORDER}


def as_tuple(value) -> tuple:
    """'[8, 1, 1]' / '8-1-1' / [8, 1, 1] -> (8, 1, 1) (numbers as written)."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    text = str(value).strip()
    if text.startswith("["):
        return tuple(ast.literal_eval(text))
    return tuple(ast.literal_eval(v) for v in text.split("-"))


def props_label(value) -> str:
    return "[" + ", ".join(f"{v:g}" for v in as_tuple(value)) + "]"


def as_bool(series: pd.Series) -> pd.Series:
    return series.map(lambda v: v if isinstance(v, bool) else str(v).strip().lower() == "true")


def completed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "completed"]


def accuracy_entry(rows: pd.DataFrame, metric: str = "test_acc", digits: int = 1) -> str:
    """A table entry of `metric` (an accuracy) in %: mean ± s.e. over the seeds that ran
    (`stats.format_mean_se`); "n/a" when none ran (dataset unavailable, not in this scale's grid), "OOM" when
    one ran out of memory, "NaN" when one diverged (the paper's convention for a crashed run)."""
    ran = rows[rows["status"].isin(cells.RAN_STATUSES)] if "status" in rows else rows.iloc[0:0]
    if ran.empty:
        return "n/a"
    if cells.outcome_text(ran["status"]) == "OOM":
        return "OOM"
    values = 100 * ran[metric].astype(float) if metric in ran else pd.Series(np.nan, index=ran.index)
    return format_mean_se(values.to_numpy(), digits)


def paper_entry(value, digits: int = 1) -> str:
    """A value the paper prints, transcribed as [mean, s.e.]: "mean ± s.e." (the s.e. as printed); a bare
    number: printed without an s.e.; null is the paper's "NaN" (a crashed run); a string ("OOM") stays."""
    if value is None:
        return "NaN"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):  # printed without an s.e.
        return f"{value:g}"
    mean, se = value
    return f"{float(mean):.{digits}f} ± {se}"


def outcome_notes(rows: pd.DataFrame, label: str) -> list[str]:
    """Cells of `rows` that ran without a number: "label: 1 of 3 cell(s) diverged (NaN)", "label: 1 of 3
    cell(s) out of memory (OOM)"."""
    notes = []
    for status, what in (("diverged", "diverged (NaN)"), ("oom", "out of memory (OOM)")):
        n = int((rows["status"] == status).sum()) if "status" in rows else 0
        if n:
            notes.append(f"{label}: {n} of {len(rows)} cell(s) {what}")
    return notes


def n_test_text(df: pd.DataFrame) -> str:
    """The test examples the completed cells of `df` were evaluated on ("10000", "50/20"), "n/a" if none."""
    ok = completed(df)
    if ok.empty or "n_test" not in ok:
        return "n/a"
    return "/".join(str(int(v)) for v in sorted(set(ok["n_test"].dropna())))


def unavailable_text(df: pd.DataFrame) -> str:
    """Why cells did not run ("dataset unavailable: cifar10"), "" when all of them ran."""
    if "status" not in df:
        return ""
    return "; ".join(sorted(set(df.loc[df["status"] == "unavailable", "note"].dropna())))


def steps_text(rows: pd.DataFrame, column: str = "n_steps") -> str:
    """The iterations the completed cells of `rows` ran ("40000", "2400/4800"), "n/a" when none did."""
    ok = completed(rows)
    if ok.empty or column not in ok:
        return "n/a"
    return "/".join(str(int(v)) for v in sorted(set(ok[column].dropna())))


def seeds_text(tables) -> str:
    n = sorted({int(t["seed"].nunique()) for t in tables if "seed" in t and len(t)})
    return "/".join(map(str, n)) or "0"


# The colour scale of Figs. 5-8 spans at least this many percentage points of test accuracy, so that differences
# of a few tenths of a point (seed noise on MNIST) are not drawn as the colour map's two ends.
MIN_SPAN_PP = 2.0
PARAM_LABEL = "Parameter proportions (partitions)"  # x: the paper's "x- ticks: ratios of parameters per partition"
DATA_LABEL = "Data proportions (chunks)"  # y: "... y- ticks: ratios of datapoints per chunk"


def colour_limits(values, min_span: float = MIN_SPAN_PP) -> tuple[float, float]:
    """(vmin, vmax) of one colour scale for every panel of a figure: the values' range (in the unit drawn),
    widened about its middle to `min_span` when narrower; (0, 100) without values."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    if not v.size:
        return 0.0, 100.0
    lo, hi = float(v.min()), float(v.max())
    if hi - lo < min_span:
        mid = (lo + hi) / 2
        lo, hi = mid - min_span / 2, mid + min_span / 2
    return lo, hi


def _axis_labels(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(parameter proportions, data proportions) of a table's cells, each once, by the share of the first
    partition / chunk, largest first (the config's order: [8, 1], [4, 1], [1, 1], [1, 8])."""

    def order(column):
        values = list(dict.fromkeys(table[column].map(props_label)))
        return sorted(values, key=lambda v: -as_tuple(v)[0] / sum(as_tuple(v)))

    return order("param_proportions"), order("chunk_proportions")


def heatmap(ax, table: pd.DataFrame, value: str = "test_acc", vmin=None, vmax=None, title: str = ""):
    """Mean over seeds of `value` (an accuracy) in %, as the paper's Figs. 5-8: columns (x) = parameter
    proportions of the partitions, rows (y) = data proportions of the chunks; square cells, so panels with
    fewer cells are smaller rather than stretched. `vmin`/`vmax` in %, shared by the panels of a figure. Cells
    that did not complete (diverged, n/a) are drawn as NaN and labelled."""
    t = table.copy()
    t["param"] = t["param_proportions"].map(props_label)
    t["chunk"] = t["chunk_proportions"].map(props_label)
    cols, rows = _axis_labels(t)
    ok = completed(t)
    grid = np.full((len(rows), len(cols)), np.nan)
    for (p, c), sub in ok.groupby(["param", "chunk"]):
        grid[rows.index(c), cols.index(p)] = 100 * sub[value].mean()
    im = ax.imshow(grid, cmap="viridis", vmin=vmin, vmax=vmax, aspect="equal")
    mid = (vmin + vmax) / 2 if vmin is not None and vmax is not None else np.nanmean(grid)
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = grid[i, j]
            ax.text(
                j,
                i,
                "n/a" if not math.isfinite(v) else f"{v:.1f}",
                ha="center",
                va="center",
                color="w" if not math.isfinite(v) or v < mid else "k",
                fontsize=8,
            )
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(PARAM_LABEL)
    ax.set_ylabel(DATA_LABEL)
    ax.set_title(title)
    ax.grid(False)
    ax.set_anchor("N")  # panels with fewer rows line up at the top
    return im


def fit_colourbar(fig, axes, cax) -> None:
    """Give the colour bar the height of the tallest heatmap (after the figure's layout is final)."""
    maps = [ax for ax in np.ravel(axes) if ax.images]
    if not maps or not cax.get_visible():
        return
    for ax in maps:
        ax.apply_aspect()
    tall = max((ax.get_position() for ax in maps), key=lambda b: b.height)
    box = cax.get_position()
    cax.set_position([box.x0, tall.y0, box.width, tall.height])


def sensitivity_figure(tables: list[pd.DataFrame], value: str = "test_acc"):
    """One heatmap per chunk count (tables in order of 2, 3, 4 chunks) on one colour scale in % (`colour_limits`
    over every panel's cells) with one colour bar; every cell is drawn the same size. A chunk count none of whose
    cells ran is an n/a panel (`na.panel`: the unavailable cells' notes)."""
    done = [100 * completed(t)[value].astype(float) for t in tables if value in t and len(completed(t))]
    vmin, vmax = colour_limits(pd.concat(done, ignore_index=True) if done else [])
    drawn = [value in t and t["status"].isin(cells.RAN_STATUSES).any() for t in tables]
    shapes = [tuple(map(len, _axis_labels(t))) if d else (3, 2) for t, d in zip(tables, drawn)]  # (x cells, y cells)
    cell = min(1.0, 3.2 / max(c for c, _ in shapes))  # inches a cell
    n_rows = max(r for _, r in shapes)
    widths = [c * cell for c, _ in shapes]  # each cell as wide in every panel
    fig = plt.figure(figsize=(sum(widths) + 1.6 * len(tables) + 1.0, n_rows * cell + 2.2))
    gs = fig.add_gridspec(1, len(tables) + 1, width_ratios=widths + [0.12])
    axes = np.array([fig.add_subplot(gs[0, i]) for i in range(len(tables))])
    im = None
    for i, (ax, t) in enumerate(zip(axes, tables)):
        c = len(as_tuple(t["chunk_proportions"].iloc[0])) if len(t) else i + 2
        title = f"({chr(97 + i)}) {c} chunks"
        if not drawn[i]:  # no cell ran: nothing to map
            na.panel(ax, t, title, width=40)
            continue
        im = heatmap(ax, t, value, vmin, vmax, title)
    cax = fig.add_subplot(gs[0, len(tables)])
    if im is not None:
        fig.colorbar(im, cax=cax, label="Test accuracy (%)")
    else:
        cax.set_visible(False)
    fig.colourbar_axes = cax  # for fit_colourbar once the page is laid out
    return fig, axes


def learned_ranges_text(table: pd.DataFrame, names=("rotation",)) -> str:
    """'rotation 1.68 (mean of 2)' per dataset for completed cells, e.g. for a footer."""
    ok = completed(table)
    parts = []
    for name in names:
        col = f"aug_{name}"
        if col in ok and len(ok):
            parts.append(f"{name} {ok[col].mean():.2f}")
    return ", ".join(parts)


def sensitivity_page(inputs, family: str, dataset_label: str, retrained: bool):
    """Figs. 5-8: the 2/3/4-chunk heatmaps of one experiment family and their footer.

    `inputs` maps f"{family}_c{C}" to the tidy CSVs (Snakemake's `input`); `retrained` says whether the
    rotation column is what the partitioned network learned (Figs. 5, 6) or what a retrained standard
    network used (Figs. 7, 8). Returns (figure, scale, footer note).
    """
    tables = [pd.read_csv(inputs[f"{family}_c{c}"]) for c in (2, 3, 4)]
    whole = pd.concat(tables)
    scale = style.scale_of(whole)
    fig, axes = sensitivity_figure(tables, "test_acc")
    ok = pd.concat([completed(t) for t in tables])
    bad = sum(len(t) - len(completed(t)) for t in tables)
    rot = (
        f"{ok['aug_rotation'].mean():.2f} (range {ok['aug_rotation'].min():.2f}-{ok['aug_rotation'].max():.2f})"
        if len(ok)
        else "n/a"
    )
    sizes = f"{int(ok['n_train'].max())} training / {int(ok['n_test'].max())} test examples" if len(ok) else "?"
    per_chunks = ", ".join(
        f"{c} chunks {int(s)}"
        for c, s in zip(
            (2, 3, 4), (completed(t)["n_steps"].max() if len(completed(t)) else float("nan") for t in tables)
        )
        if math.isfinite(s)
    )
    note = (
        style.source_note(whole, f"{dataset_label}, {sizes}")
        + f"; training iterations: {per_chunks or 'n/a'}"
        + "; the proportions on the axes are our choice (the paper's tick values are not in its text)"
        + f"; one colour scale for all panels, at least {MIN_SPAN_PP:g} percentage points wide"
        + f"\n{'Rotation half-width the retrained network used' if retrained else 'Learned rotation half-width'}"
        + f" (radians): mean {rot}"
        + (f"; {bad} cell(s) not completed (n/a)" if bad else "")
    )
    note = style.wrap_note(fig, note)
    fig.tight_layout(rect=(0, style.footer_room(fig, note), 1, 1))
    fit_colourbar(fig, axes, fig.colourbar_axes)
    return fig, scale, note
