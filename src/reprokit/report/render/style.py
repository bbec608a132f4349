"""Shared styling for every table and figure, and the footer each one carries.

Each artefact states the scale it was built at, how many seeds, and which data (`source_note`). Test-scale
outputs get a visible "TEST DATA" watermark; quick-scale ones say they are not paper-scale numbers. Below a
figure's footer: the paper artefact it rebuilds and its claims' verdicts (`statement_block`).
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ...atomic import atomic_write_bytes
from ..store.cells import SCALE_NOTE
from . import na
from .notebook import artefact_statement, notes_pointer, with_partial


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    plt.rcParams.update({"figure.dpi": 120, "savefig.dpi": 150, "axes.titlesize": 9, "legend.fontsize": 7})


def source_note(table: pd.DataFrame, data: str, seed_column: str = "seed") -> str:
    """A caption's or footer's note on where the numbers come from: scale, seeds and data."""
    scales = sorted(set(table["scale"])) if "scale" in table else ["?"]
    seeds = table[seed_column].nunique() if seed_column in table else 1
    return f"{', '.join(SCALE_NOTE.get(s, s) for s in scales)}; {seeds} seed(s); data: {data}"


def scale_of(table: pd.DataFrame) -> str:
    scales = sorted(set(table["scale"]))
    if len(scales) != 1:
        raise ValueError(f"table mixes scales {scales}")
    return scales[0]


def figure_legend(fig, axes, **kwargs):
    """One legend for the whole figure naming every labelled artist of every panel, each label once, in the order
    first drawn (a method plotted only in a later panel is named too). None when nothing is labelled (every panel
    n/a). `kwargs` go to `fig.legend` (default: above the panels, one row, no frame)."""
    import numpy as np

    handles, labels = [], []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    if not labels:
        return None
    opts = {"loc": "upper center", "ncol": len(labels), "frameon": False, "bbox_to_anchor": (0.5, 1.02), **kwargs}
    return fig.legend(handles, labels, **opts)


# Footers are wrapped, and room is left for them, as if set at this size (annotate_figure sets them no larger), so a
# footer never runs past the figure's width nor into the panels' axis labels.
FOOTER_PT = 8


def wrap_note(fig, note: str, fontsize: float = FOOTER_PT) -> str:
    """`note` (a figure's footer) wrapped to the figure's width: each of its lines filled to the characters that fit
    across the figure at `fontsize` (0.6 em a character, a little wider than DejaVu Sans' average)."""
    chars = max(60, int(fig.get_figwidth() * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) if line else line for line in note.split("\n"))


def footer_room(fig, note: str, fontsize: float = FOOTER_PT, extra_lines: int = 1) -> float:
    """The fraction of the figure's height below the panels that a footer of `note`'s lines needs (plus
    `extra_lines`: the partial-grid statement): the bottom of a `tight_layout` rect, so the panels' x labels stay
    clear of it."""
    lines = note.count("\n") + 1 + extra_lines
    return min(0.6, (lines * 1.25 * fontsize + 6) / 72 / fig.get_figheight())


def statement_block(fig) -> None:
    """Below the figure's footer: where the report explains it (its config entry's `notes`, if any), the paper
    artefact it rebuilds and each claim about it with its verdict."""
    st = artefact_statement()
    if st is None:
        return
    width = max(80, int(fig.get_figwidth() * 19))
    lines = [notes_pointer()] + st.lines()  # where the report explains it, when its config entry has notes
    text = "\n".join(textwrap.fill(line, width) for line in lines if line)
    fig.text(0.01, -0.01, text, fontsize=7, color="0.1", ha="left", va="top", gid="reprokit-statement")


def log_steps(ax, steps, label: str = "iteration (log scale)") -> None:
    """A log x axis over positive iterations (curves' step 0, the initialisation, cannot be drawn on it): the
    early iterations take as much of the axis as the late ones."""
    ax.set_xscale("log")
    pos = [float(s) for s in steps if s > 0]
    if pos:
        ax.set_xlim(min(pos) / 1.3, max(pos) * 1.3)
    ax.set_xlabel(label)


def annotate_figure(fig, scale: str, note: str) -> None:
    """The provenance footer (with the partial-grid statement, if any), and a "TEST DATA" watermark on test-scale
    figures."""
    fig.text(0.01, 0.005, with_partial(note), fontsize=7.5, color="0.3", ha="left", va="bottom")
    if scale == "test":
        fig.text(
            0.5,
            0.5,
            "TEST DATA",
            fontsize=48,
            color="red",
            alpha=0.25,
            ha="center",
            va="center",
            rotation=30,
            transform=fig.transFigure,
        )


def finish_figure(fig, scale: str, note: str, pdf: str | Path | None, png: str | Path | None) -> None:
    """Annotate (provenance, test watermark), then save atomically. The texts of n/a panels (`na.panel`) also go
    into the files' metadata (PDF Subject, PNG Description), so a reader or a test can find them without OCR."""
    annotate_figure(fig, scale, note)
    statement_block(fig)
    missing = " | ".join(na.texts(fig))
    for path, fmt in ((pdf, "pdf"), (png, "png")):
        if path is None:
            continue
        buf = io.BytesIO()
        meta = {"Subject" if fmt == "pdf" else "Description": missing} if missing else {}
        if (st := artefact_statement()) is not None:  # what it rebuilds and its verdicts, readable without OCR
            meta["Title"] = " | ".join(st.lines())
        fig.savefig(buf, format=fmt, bbox_inches="tight", metadata=meta or None)
        atomic_write_bytes(path, buf.getvalue())
    plt.close(fig)
