"""The figures' layout, on small synthetic frames: the axes the papers' captions name (Figs. 5-8: parameter
proportions on x, data proportions on y), one colour scale per figure, every plotted method in a legend and drawn so
that no method hides another, log iteration axes where a claim is about early iterations, one n/a text per figure,
titles that describe what is drawn, axis labels on every data panel, and footers wrapped to the figure's width.

Notebooks run as Snakemake runs them (`script:`), with a stand-in `snakemake` object, on CSVs written here."""

import json
import runpy
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from reprokit import predictive_shape
from reprokit.report.render import bali_classification as bc
from reprokit.report.render import invariance, na, style

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "workflow" / "notebooks"
NOTE = "dataset unavailable: cifar10 (not in the data mirrors; FAKE note for this test)"


def run_notebook(name, inputs, tmp_path, scale="quick"):
    """A notebook's globals after it ran (its `fig` is closed but keeps its artists)."""
    outputs = {"pdf": str(tmp_path / f"{Path(name).stem}.pdf"), "png": str(tmp_path / f"{Path(name).stem}.png")}
    fake = types.SimpleNamespace(input=inputs, output=outputs, config={"scale": scale})
    return runpy.run_path(str(NOTEBOOKS / name), init_globals={"snakemake": fake})


def write_csvs(tmp_path, frames: dict) -> dict:
    out = {}
    for name, df in frames.items():
        out[name] = str(tmp_path / f"{name}.csv")
        df.to_csv(out[name], index=False)
    return out


def all_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def legend_labels(fig) -> set[str]:
    labels = set()
    for leg in list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        labels |= {t.get_text() for t in leg.get_texts()}
    return labels


def plotted_labels(axes) -> set[str]:
    """The labels of every line drawn with data in `axes`."""
    return {
        ln.get_label()
        for ax in np.ravel(axes)
        for ln in ax.get_lines()
        if len(ln.get_xdata()) and not ln.get_label().startswith("_")
    }


# ---------------------------------------------------------------------------------------------- Figs. 5-8


def sensitivity_table(chunks: int, cells: dict) -> pd.DataFrame:
    """cells: {(param proportions, chunk proportions): accuracy}."""
    return pd.DataFrame(
        [
            {
                "scale": "quick",
                "seed": 0,
                "param_proportions": str(list(p)),
                "chunk_proportions": str(list(c)),
                "status": "completed",
                "note": "",
                "test_acc": acc,
                "n_steps": 100,
                "n_train": 60000,
                "n_test": 1000,
                "aug_rotation": 0.1,
            }
            for (p, c), acc in cells.items()
        ]
    )


def test_sensitivity_heatmaps_put_parameter_proportions_on_x_and_share_one_colour_scale():
    two = sensitivity_table(
        2, {((8, 1), (8, 1)): 0.979, ((1, 8), (8, 1)): 0.981, ((8, 1), (1, 8)): 0.970, ((1, 8), (1, 8)): 0.983}
    )
    three = sensitivity_table(3, {((8, 1, 1), (8, 1, 1)): 0.983})
    four = sensitivity_table(4, {((8, 1, 1, 1), (8, 1, 1, 1)): 0.988})
    fig, axes = invariance.sensitivity_figure([two, three, four])
    for ax in axes:
        assert "Parameter proportions" in ax.get_xlabel() and "Data proportions" in ax.get_ylabel()
    # x: parameter proportions, y: data proportions; the value of param [1, 8] on data [1, 8] is at that column/row
    ax = axes[0]
    xt = [t.get_text() for t in ax.get_xticklabels()]
    yt = [t.get_text() for t in ax.get_yticklabels()]
    assert xt == ["[8, 1]", "[1, 8]"] and yt == ["[8, 1]", "[1, 8]"]
    grid = ax.images[0].get_array()
    assert grid[yt.index("[8, 1]"), xt.index("[1, 8]")] == pytest.approx(98.1)  # data [8, 1], params [1, 8]
    assert grid[yt.index("[1, 8]"), xt.index("[8, 1]")] == pytest.approx(97.0)
    # one colour scale, in %, as the annotations and the colour bar
    clims = {tuple(np.round(a.images[0].get_clim(), 9)) for a in axes}
    assert len(clims) == 1
    vmin, vmax = clims.pop()
    assert vmin <= 97.0 and vmax >= 98.8 and vmax - vmin >= invariance.MIN_SPAN_PP
    assert "98.1" in [t.get_text() for t in ax.texts]
    assert "%" in fig.colourbar_axes.get_ylabel()
    # every cell the same size: a one-cell panel is not stretched to the size of a 2 x 2 panel
    for a in axes:
        a.apply_aspect()
    w2, w1 = axes[0].get_position().width, axes[1].get_position().width
    h2, h1 = axes[0].get_position().height, axes[1].get_position().height
    assert w1 == pytest.approx(w2 / 2, rel=0.05) and h1 == pytest.approx(h2 / 2, rel=0.05)
    plt.close("all")


def test_colour_limits_widen_a_narrow_range_about_its_middle():
    assert invariance.colour_limits([98.0, 98.6]) == pytest.approx((97.3, 99.3))
    assert invariance.colour_limits([90.0, 98.0]) == (90.0, 98.0)
    assert invariance.colour_limits([]) == (0.0, 100.0)


# ---------------------------------------------------------------------------------------------- BALI Fig. 2, Fig. 7


def cls_frames():
    rows, curves = [], []
    for d in ("spambase", "magic"):
        for m in ("bali", "dropout", "map"):
            for seed in (0, 1) if d == "magic" else (0,):
                rows.append(
                    {
                        "scale": "quick",
                        "dataset": d,
                        "method": m,
                        "seed": seed,
                        "status": "completed",
                        "note": "",
                        "eval_every": 60,
                        "eval_doubling_until": 60,
                        "eval_samples": 16,
                        "n_train": 100,
                        "n_test": 20,
                    }
                )
                for step in (0, 1, 2, 4, 8, 16, 32, 60, 120):
                    # DO and MAP identical: one must still be visible over the other
                    nll = 1.0 / (1 + step) ** (0.5 if m == "bali" else 0.3)
                    curves.append(
                        {"dataset": d, "method": m, "seed": seed, "step": step, "test_nll": nll + 0.1, "train_nll": nll}
                    )
    for d in ("mnist", "fashion_mnist", "cdc_diabetes"):
        rows.append(
            {
                "scale": "quick",
                "dataset": d,
                "method": "bali",
                "seed": 0,
                "status": "unavailable",
                "note": f"dataset unavailable: {d}",
            }
        )
    return pd.DataFrame(rows), pd.DataFrame(curves)


def line_style(line) -> tuple:
    return (line.get_linewidth(), line.get_marker(), line.get_alpha(), line.get_zorder())


def test_bali_fig2_names_every_method_draws_each_visibly_and_uses_a_log_axis_over_positive_iterations():
    df, curves = cls_frames()
    fig, axes = bc.nll_figure(df, curves)
    drawn = [ax for ax in axes if ax.get_lines()]
    assert len(drawn) == 2
    assert plotted_labels(axes) <= legend_labels(fig)
    assert {f"{bc.METHODS[m]} {s}" for m in ("bali", "dropout", "map") for s in ("train", "test")} <= legend_labels(fig)
    for ax in drawn:
        assert ax.get_xscale() == "log"
        assert all(min(ln.get_xdata()) > 0 for ln in ax.get_lines() if len(ln.get_xdata()))
        assert min(ln.get_xdata().min() for ln in ax.get_lines()) == 1  # the first evaluations are on the axis
        styles = {}
        for ln in ax.get_lines():
            styles.setdefault(ln.get_label().rsplit(" ", 1)[0], line_style(ln))
        assert len(set(styles.values())) == len(styles)  # DO and MAP (same numbers here) drawn differently
        # ... and each shows its own markers: at alternate evaluations, so neither set hides the other's
        marks = {ln.get_label(): ln.get_markevery() for ln in ax.get_lines()}
        assert marks["DO test"] != marks["MAP test"] and marks["DO train"] != marks["MAP train"]
        do, map_ = (next(ln for ln in ax.get_lines() if ln.get_label() == f"{m} test") for m in ("DO", "MAP"))
        assert map_.get_zorder() > do.get_zorder() and map_.get_linewidth() < do.get_linewidth()  # thin over wide
    assert "log" in drawn[0].get_xlabel()
    plt.close("all")
    # the caption says where they coincide
    assert bc.coinciding(curves) == [
        ("Spambase", "test"),
        ("Spambase", "train"),
        ("Telescope", "test"),
        ("Telescope", "train"),
    ]
    text = bc.coinciding_text(curves)
    assert "DO and MAP coincide" in text and "Spambase (test and train)" in text and "alternate evaluations" in text
    apart = curves.assign(test_nll=np.where(curves["method"] == "map", curves["test_nll"] * 1.5, curves["test_nll"]))
    assert bc.coinciding(apart) == [("Spambase", "train"), ("Telescope", "train")]


def test_bali_provenance_counts_the_splits_of_each_dataset():
    df, _ = cls_frames()
    text = bc.provenance(df)
    assert "Spambase 1, Telescope 2 splits" in text
    assert "2 random" not in text


def test_bali_fig7_names_both_variants_and_draws_bali_w_under_bali_l(tmp_path):
    rows = []
    for variant in ("BALI-W", "BALI-L"):
        for step in (0, 1, 2, 4, 8, 60):
            rows.append(
                {
                    "dataset": "spambase",
                    "variant": variant,
                    "seed": 0,
                    "step": step,
                    "test_nll": 0.5 / (1 + step),
                    "train_nll": 0.4 / (1 + step),
                }
            )
    fig, axes, datasets = bc.variant_figure(pd.DataFrame(rows), {"spambase": "Spambase"})
    assert datasets == ["spambase"]
    assert {"BALI-W test", "BALI-W train", "BALI-L test", "BALI-L train"} <= legend_labels(fig)
    lines = {ln.get_label(): ln for ln in axes[0, 0].get_lines()}
    w, loc = lines["BALI-W test"], lines["BALI-L test"]
    assert w.get_linewidth() > loc.get_linewidth() and w.get_zorder() < loc.get_zorder()  # wide, underneath
    assert w.get_marker() != loc.get_marker()
    assert axes[0, 0].get_xscale() == "log" and min(w.get_xdata()) > 0
    # one seed: no band, and the footer says so; two seeds: a band, and the footer says mean +- s.e.
    assert not axes[0, 0].collections
    assert bc.spread_text(pd.DataFrame(rows), {"spambase": "Spambase"}).startswith("one seed per curve, no band")
    two = pd.DataFrame(rows + [{**r, "seed": 1, "test_nll": r["test_nll"] * 1.1} for r in rows])
    fig, axes, _ = bc.variant_figure(two, {"spambase": "Spambase"})
    assert axes[0, 0].collections  # the +- s.e. bands
    assert bc.spread_text(two, {"spambase": "Spambase"}) == "mean over 2 seeds, ± s.e. band"
    mixed = pd.DataFrame(rows + [{**r, "seed": 1} for r in rows if r["variant"] == "BALI-L"])
    assert bc.spread_text(mixed, {"spambase": "Spambase"}) == (
        "mean over 2 seeds with a ± s.e. band; one seed, no band: BALI-W Spambase"
    )
    # no cell ran (a build without datasets): the curves have a seed column but no step, and the footer says so
    assert bc.spread_text(pd.DataFrame({"seed": [], "variant": []}), {"spambase": "Spambase"}) == "no curve"
    plt.close("all")


# ---------------------------------------------------------------------------------------------- Fig. 10


def test_fig10_names_every_method_in_a_legend_clear_of_the_curves(tmp_path):
    cells, curves = [], []
    for n, rounds in ((1250, 40), (5000, 20)):
        for m in ("fedavg", "augerino", "partitioned"):
            cells.append(
                {
                    "scale": "quick",
                    "rotated": False,
                    "method": m,
                    "n_train": n,
                    "seed": 0,
                    "status": "completed",
                    "note": "",
                    "n_evaluations_last": 3,
                    "rounds": rounds,
                }
            )
            for step in range(0, rounds + 1, 5):
                curves.append(
                    {
                        "rotated": False,
                        "method": m,
                        "n_train": n,
                        "seed": 0,
                        "step": step,
                        "val_acc": 0.1 + step / 100,
                        "comm_bytes": 1e8 * step,
                    }
                )
    inputs = write_csvs(tmp_path, {"table4_mnist": pd.DataFrame(cells), "table4_mnist_curves": pd.DataFrame(curves)})
    g = run_notebook("fig10.py", inputs, tmp_path)
    fig, axes = g["fig"], g["axes"]
    assert {"FedAvg", "FedAvg + Augerino", "FedAvg + Partitioned"} <= legend_labels(fig)
    assert plotted_labels(axes) <= legend_labels(fig)
    assert not any(ax.get_legend() for ax in fig.axes)  # one legend, above the panels: none over a curve
    footer = "\n".join(all_texts(fig))
    assert "20/40" not in footer and "1.25k examples 40" in footer


# ---------------------------------------------------------------------------------------------- Fig. 3


def fig3_frames(b_rows: bool = True):
    a = []
    for rot in (False, True):
        for m in ("baseline", "partitioned"):
            for n in (1000, 10000):
                a.append(
                    {
                        "scale": "quick",
                        "rotated": rot,
                        "method": m,
                        "n_train": n,
                        "seed": 0,
                        "status": "completed",
                        "note": "",
                        "test_acc": 0.9,
                        "n_test": 100,
                        "n_steps": 10,
                        "aug_rotation": 0.5,
                    }
                )
    b = (
        [
            {
                "scale": "quick",
                "rotated": rot,
                "method": m,
                "n_train": 1000,
                "seed": 0,
                "status": "unavailable",
                "note": NOTE,
            }
            for rot in (False, True)
            for m in ("baseline", "partitioned")
        ]
        if b_rows
        else []
    )
    cols = ["scale", "rotated", "method", "n_train", "seed", "status", "note"]
    plain = pd.DataFrame(
        [
            {
                "scale": "quick",
                "rotated": False,
                "method": "augerino",
                "n_train": 1000,
                "seed": 0,
                "status": "diverged",
                "note": "",
                "aug_rotation": np.nan,
            }
        ]
    )
    return {
        "fig3a": pd.DataFrame(a),
        "fig3b": pd.DataFrame(b, columns=cols),
        "fig3c": pd.DataFrame(columns=cols),
        "fig3a_augerino_plain": plain,
        "fig3a_augerino_plain_reg1": plain,
    }


def test_fig3_prints_the_na_text_once_a_figure(tmp_path):
    inputs = write_csvs(tmp_path, fig3_frames())
    g = run_notebook("fig3.py", inputs, tmp_path)
    fig = g["fig"]
    texts = "\n".join(all_texts(fig))
    flat = texts.replace("\n", " ")
    assert flat.count("cifar10 (not in the data") == 1  # the note: once, not once a panel and again in the footer
    assert flat.count("To get a missing dataset") == 1
    na_lines = na.texts(fig)
    assert len(na_lines) == 1 and na_lines[0].startswith("n/a: (b) CIFAR10")
    assert "TinyImagenet" in na_lines[0] and "scale's grid" in na_lines[0]  # (c)'s reason is in the same text
    assert len(fig.axes) == 3  # (a) twice and one area for the four panels without data


def test_fig3_points_other_na_panels_to_the_one_text(tmp_path):
    frames = fig3_frames()
    b = frames["fig3b"]
    ran = {
        "scale": "quick",
        "rotated": False,
        "method": "baseline",
        "n_train": 1000,
        "seed": 0,
        "status": "completed",
        "note": "",
        "test_acc": 0.5,
    }
    frames["fig3b"] = pd.concat([b[b["rotated"]], pd.DataFrame([ran])])  # (b): CIFAR10 ran, RotCIFAR10 did not
    inputs = write_csvs(tmp_path, frames)
    fig = run_notebook("fig3.py", inputs, tmp_path)["fig"]
    na_lines = na.texts(fig)  # (b) RotCIFAR10's panel and (c)'s area
    assert len(na_lines) == 2 and na_lines[0].startswith("n/a: (b) RotCIFAR10") and na_lines[1].startswith("n/a (see")
    assert " ".join(all_texts(fig)).replace("\n", " ").count("cifar10 (not in the data") == 1


# ---------------------------------------------------------------------------------------------- Fig. 2


def test_fig2_titles_describe_and_the_panels_are_labelled(tmp_path):
    a = []
    for m, obj in (("partitioned", "lml"), ("laplace", "laplace_lml")):
        for k in range(1, 31):
            a.append(
                {
                    "scale": "quick",
                    "method": m,
                    "n_inputs": k,
                    "seed": 0,
                    "status": "completed",
                    "note": "",
                    obj: -((15 - k) ** 2) if k < 15 else -0.5 * (k - 15),  # a rise to K = 15, then flat
                    "train_acc": 0.9,
                    "test_acc": 0.9,
                    "train_ll": -0.2,
                    "test_ll": -0.3,
                    "n_train": 300,
                    "n_test": 100,
                }
            )
    probs = {f"p_keep_{i:02d}": 0.9 for i in range(30)}
    b = pd.DataFrame([{"scale": "quick", "seed": 0, "kept_inputs": "1 2 3", **probs}])
    curves = pd.DataFrame([{"seed": 0, "step": s, **probs} for s in (0, 10, 20)])
    inputs = write_csvs(tmp_path, {"fig2a": pd.DataFrame(a), "fig2b": b, "fig2b_curves": curves})
    g = run_notebook("fig2.py", inputs, tmp_path)
    axes = g["axes"]
    for ax in axes.ravel():
        assert "peak" not in ax.get_title().lower()  # a title describes, it does not assert a result
        assert ax.get_xlabel() and ax.get_ylabel()
    for ax in axes[:, 2]:  # the mask panels say which colour is which input
        labels = {t.get_text() for t in ax.get_legend().get_texts()}
        assert any("informative" in t for t in labels) and any("spurious" in t for t in labels)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(g["fig"])
    canvas.draw()
    renderer = canvas.get_renderer()
    for main in axes[0, :2]:
        inset = list(main.child_axes)[0]
        assert "1 seed" in inset.get_title()  # says what n is
        # the inset sits where the panel has no data: no point of the panel's curves (sampled along each segment)
        # falls inside its box, and the zoom shows K = 15
        box = inset.get_window_extent(renderer)
        for line in main.get_lines():
            xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
            xy = xy[np.isfinite(xy).all(axis=1)]
            t = np.linspace(0, 1, 50)[:, None, None]
            pts = main.transData.transform((xy[:-1] * (1 - t) + xy[1:] * t).reshape(-1, 2) if len(xy) > 1 else xy)
            inside = (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
            assert not inside.any(), f"{main.get_title()}: the inset covers {line.get_label()}"
        assert inset.get_xlim()[0] < 15 < inset.get_xlim()[1]
    # every legend of the K panels lies below its axes, clear of its y label (inside, it covered the peak, its
    # star and, wider than the axes, the y label)
    for ax in axes[:, :2].ravel():
        legend, frame = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
        assert legend.y1 < frame.y0, ax.get_title()
        assert not legend.overlaps(ax.yaxis.label.get_window_extent(renderer)), ax.get_title()


# ---------------------------------------------------------------------------------------------- BALI Figs. 4-6


def bbb_rows(dataset: str, task: str):
    from reprokit.data import registry

    bundle = registry.load(dataset, seed=0)
    rows = []
    for kl, train_nll in ((1.0, 0.5), (0.01, 0.1)):
        row = {
            "scale": "quick",
            "dataset": dataset,
            "method": "bbb",
            "seed": 0,
            "kl_factor": kl,
            "task": task,
            "status": "completed",
            "note": "",
            "data_kwargs": json.dumps({"seed": 0}),
            "n_steps": 10,
            "lr": 0.001,
            "prior_sigma": 1.0,
            "final_samples": 4,
            "train_nll": train_nll,
            "test_nll": train_nll + 0.1,
        }
        if task == "regression":
            fg = bundle.meta["f_grid"].numpy().ravel()
            row.update(grid_mean=" ".join(f"{v:.4g}" for v in fg), grid_sd=" ".join("0.1" for _ in fg))
        else:
            gx, gy = bundle.meta["grid_axes"]
            row.update(grid_p1=" ".join("0.3" for _ in range(len(gx) * len(gy))))
        row.update(predictive_shape.plot_points(bundle))  # what the cell records for its figure
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("dataset,task", [("sinc", "regression"), ("two_moons", "classification")])
def test_a_synthetic_panel_draws_the_points_the_cell_recorded_without_loading_data(monkeypatch, dataset, task):
    from reprokit.data import registry
    from reprokit.report.render import bali_regression as br

    row = bbb_rows(dataset, task).iloc[0]
    bundle = registry.load(dataset, seed=0)

    def no_loading(*a, **k):
        raise AssertionError("the figure reloaded the training data")

    monkeypatch.setattr(registry, "load", no_loading)
    fig, ax = plt.subplots()
    br.plot_predictive(ax, row, "t")
    drawn = np.concatenate([np.asarray(c.get_offsets()) for c in ax.collections if c.get_label().startswith("train")])
    x = bundle.x_train.numpy()
    want = np.c_[x.ravel(), bundle.y_train.numpy().ravel()] if task == "regression" else x
    assert len(drawn) == len(want)  # every training point, once
    np.testing.assert_allclose(np.sort(drawn, 0), np.sort(want, 0), rtol=1e-5, atol=1e-6)
    plt.close(fig)
    bare = row.drop([k for k in row.index if k.startswith(predictive_shape.PLOT)])
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="record_shape.py --migration plot_points"):
        br.plot_predictive(ax, bare, "t")
    plt.close(fig)


@pytest.mark.parametrize("dataset,task", [("sinc", "regression"), ("two_moons", "classification")])
def test_bbb_pages_show_the_training_nll_label_their_axes_and_name_the_likelihood(tmp_path, dataset, task):
    from reprokit.report.render import bali_regression as br

    path = tmp_path / "bbb.csv"
    bbb_rows(dataset, task).to_csv(path, index=False)
    fig, _, note = br.bbb_synthetic_page({"bali_bbb_synthetic": str(path)}, dataset, dataset)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 2
    for ax, nll in zip(panels, (0.5, 0.1)):  # largest KL factor first
        assert ax.get_xlabel() and ax.get_ylabel()
        assert any(f"train NLL {nll:.3f}" in t.get_text() for t in ax.texts)
    if task == "classification":
        assert "noise" not in note and "Bernoulli" in note
    else:
        assert "noise sd" in note and panels[0].get_ylabel() == "y"
    plt.close("all")


# ---------------------------------------------------------------------------------------------- footers


def test_wrap_note_fits_the_figure_and_footer_room_grows_with_the_lines():
    fig = plt.figure(figsize=(6, 4))
    note = style.wrap_note(fig, "word " * 200 + "\nsecond part")
    width = int(6 * 72 / (0.6 * style.FOOTER_PT))
    assert all(len(line) <= width for line in note.split("\n")) and note.count("\n") >= 3
    assert style.footer_room(fig, note) > style.footer_room(fig, "one line")
    plt.close("all")
