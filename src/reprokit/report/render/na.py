"""n/a in figures and tables: what a panel or an entry without data says, and how to get the data.

Cells whose dataset is unavailable are rows with status 'unavailable' and a `note` (report/store/aggregate.py).
Every artefact still builds then: a figure panel without data is an n/a panel (`panel`: "n/a: <note>" and how
to get the data), a table shows n/a entries and says why in a footnote (`footnotes`).
"""

from __future__ import annotations

import logging
import textwrap

import pandas as pd

from ..store.cells import GET_DATA, unavailable_notes

NA_GID = "reprokit-na"  # the gid of an n/a panel's text (finish_figure puts those texts in the file's metadata)


def text_of(notes, otherwise: str = "no cell completed", width: int | None = None) -> str:
    """ "n/a: <note>" per note, then how to get the data (GET_DATA); "n/a: <otherwise>" without notes. `width`:
    wrap each part at that many characters."""
    parts = [f"n/a: {n}" for n in notes] + [GET_DATA] if notes else [f"n/a: {otherwise}"]
    if width:
        parts = [textwrap.fill(p, width) for p in parts]
    return "\n".join(parts)


def footnotes(*frames, notes: bool = True) -> list[str]:
    """A table's footnote for the n/a entries that missing datasets cause: their notes as written and how to get the
    data ([] when no cell is unavailable). `notes=False`: only how to get the data (a table whose own footnote
    already quotes the notes)."""
    found = unavailable_notes(*frames)
    if not found:
        return []
    return [(f"n/a: {'; '.join(found)}. " if notes else "") + GET_DATA + "."]


def _axes(ax, text: str, title: str | None, fontsize: float, log: bool = True) -> str:
    """`ax` as an n/a panel showing `text` (its gid lets finish_figure find it): no ticks, labels or grid."""
    ax.text(
        0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=fontsize, color="0.2", gid=NA_GID
    )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax.grid(False)
    if title is not None:
        ax.set_title(title)
    if log:
        logging.getLogger("reprokit.artefact").info("n/a panel %s: %s", repr(ax.get_title()), text.replace("\n", " "))
    return text


def panel(
    ax, rows, title: str | None = None, otherwise: str = "no cell completed", width: int = 50, fontsize: float = 6.5
) -> str:
    """Make `ax` an n/a panel: a centred "n/a: <note>" for each unavailable cell's note and how to get the data
    (or "n/a: <otherwise>" when no cell of the panel is unavailable, e.g. none is in this scale's grid), no ticks.
    `rows`: the panel's cells (a frame, or several) or the notes themselves. Returns the text (also logged)."""
    if isinstance(rows, pd.DataFrame):
        notes = unavailable_notes(rows)
    elif isinstance(rows, (list, tuple)) and all(isinstance(r, pd.DataFrame) for r in rows):
        notes = unavailable_notes(*rows)
    else:
        notes = list(dict.fromkeys(str(r) for r in rows or []))
    text = text_of(notes, otherwise, width)
    return _axes(ax, text, title, fontsize)


def texts(artist) -> list[str]:
    """The texts of the n/a panels (`panel`) in a figure or an axes, each on one line."""
    return [t.get_text().replace("\n", " ") for t in artist.findobj(lambda a: a.get_gid() == NA_GID)]


def shared(ax, parts, title: str | None = None, width: int = 60, fontsize: float = 7) -> str:
    """One n/a placeholder for several panels without data (drawn once a figure, not once a panel): for each part
    (label, rows, otherwise), "n/a: <label>: <note>" per unavailable cell's note of `rows` (or "n/a: <label>:
    <otherwise>" without one), then how to get the data once if any dataset is missing. No ticks. Returns the text."""
    lines, notes_seen = [], False
    for label, rows, otherwise in parts:
        notes = unavailable_notes(*(rows if isinstance(rows, (list, tuple)) else [rows]))
        notes_seen |= bool(notes)
        lines += [f"n/a: {label}: {n}" for n in notes] or [f"n/a: {label}: {otherwise}"]
    if notes_seen:
        lines.append(GET_DATA)
    text = "\n".join(textwrap.fill(line, width) for line in lines)
    return _axes(ax, text, title, fontsize)


def see(ax, where: str, title: str | None = None, fontsize: float = 7) -> str:
    """An n/a panel that points at the figure's one n/a placeholder (`shared`) instead of repeating it."""
    text = f"n/a (see {where})"
    return _axes(ax, text, title, fontsize, log=False)
