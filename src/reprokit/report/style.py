"""Shared styling for every table and figure, and the provenance line each one carries.

Each artefact states the scale it was built at, how many seeds, and which data. Test-scale outputs get
a visible "TEST DATA" watermark; quick-scale ones say they are not paper-scale numbers.

Cells whose dataset is unavailable are rows with status 'unavailable' and a `note` (report/aggregate.py).
Every artefact still builds then: a figure panel without data is an n/a panel (`na_panel`: "n/a: <note>"
and how to get the data), a table shows n/a entries and says why in a footnote (`na_footnotes`).
"""

from __future__ import annotations

import atexit
import io
import logging
import os
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..io import atomic_write_bytes
from .results import RAN_STATUSES, outcome_text, unavailable_notes  # noqa: F401 (re-exported)
from .results import read_csv as read_results  # noqa: F401 (the notebooks' reader of a tidy or curves CSV)

SCALE_NOTE = {
    "paper": "paper scale",
    "quick": "quick scale (reduced iterations/seeds; not paper-scale numbers)",
    "test": "TEST scale (tiny CI run; numbers meaningless)",
}


# How to get a dataset that is not in the mirrors: said next to every n/a that a missing dataset causes.
GET_DATA = (
    "To get a missing dataset: set data.download: true in config/config.yaml (fetches it from its official "
    "URL into data.cache_dir), or add a folder holding it in its original layout to data.mirrors"
)
NA_GID = "reprokit-na"  # the gid of an n/a panel's text (finish_figure puts those texts in the file's metadata)


def na_text(notes, otherwise: str = "no cell completed", width: int | None = None) -> str:
    """ "n/a: <note>" per note, then how to get the data (GET_DATA); "n/a: <otherwise>" without notes. `width`:
    wrap each part at that many characters."""
    parts = [f"n/a: {n}" for n in notes] + [GET_DATA] if notes else [f"n/a: {otherwise}"]
    if width:
        parts = [textwrap.fill(p, width) for p in parts]
    return "\n".join(parts)


def na_footnotes(*frames, notes: bool = True) -> list[str]:
    """A table's footnote for the n/a entries that missing datasets cause: their notes as written and how to get the
    data ([] when no cell is unavailable). `notes=False`: only how to get the data (a table whose own footnote
    already quotes the notes)."""
    found = unavailable_notes(*frames)
    if not found:
        return []
    return [(f"n/a: {'; '.join(found)}. " if notes else "") + GET_DATA + "."]


def _na_axes(ax, text: str, title: str | None, fontsize: float, log: bool = True) -> str:
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


def na_panel(
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
    text = na_text(notes, otherwise, width)
    return _na_axes(ax, text, title, fontsize)


def na_texts(artist) -> list[str]:
    """The texts of the n/a panels (`na_panel`) in a figure or an axes, each on one line."""
    return [t.get_text().replace("\n", " ") for t in artist.findobj(lambda a: a.get_gid() == NA_GID)]


def _named(files) -> list[tuple[str, str]]:
    items = files.items() if hasattr(files, "items") else enumerate(files or [])
    return [(str(k), str(v)) for k, v in items]


def _sized(path: str) -> str:
    return f"{path} ({os.path.getsize(path)} bytes)" if os.path.exists(path) else f"{path} (missing)"


# Set by start_log from the rule's `params.partial` ({experiment: [cells found, cells in the grid]}), which only
# reprokit.report.build_partial passes: an artefact built from part of its grid says so in its footer / caption.
_PARTIAL: dict = {"note": ""}


def partial_note(partial: dict | None) -> str:
    """'PARTIAL GRID: fig2a 72 of 180 cells' for the experiments whose grid did not all run; '' otherwise."""
    short = {e: (int(n), int(m)) for e, (n, m) in (partial or {}).items() if int(n) < int(m)}
    if not short:
        return ""
    return "PARTIAL GRID: " + ", ".join(f"{e} {n} of {m} cells" for e, (n, m) in short.items())


def set_partial(partial: dict | None) -> str:
    """Make the artefacts written next in this process say `partial_note(partial)` (None: nothing); returns it."""
    _PARTIAL["note"] = partial_note(partial)
    return _PARTIAL["note"]


def with_partial(note: str) -> str:
    """`note` with the partial-grid statement appended (when the artefact is built from part of its grid)."""
    return f"{note}; {_PARTIAL['note']}" if _PARTIAL["note"] else note


# Set by start_log: the artefact being built (its name, config entry, scale and inputs), so that finish_figure and
# tables.write_table print which paper artefact it rebuilds and its claims' verdicts (report/statement.py).
_ARTEFACT: dict = {}


def set_artefact(smk, scale) -> None:
    """Remember the artefact an `artefact_<name>` rule (or build_partial) is building; anything else clears it."""
    _ARTEFACT.clear()
    rule = str(getattr(smk, "rule", "") or "")
    config = getattr(smk, "config", None) or {}
    name = rule.removeprefix("artefact_")
    if rule.startswith("artefact_") and name in (config.get("artefacts") or {}):
        params = getattr(smk, "params", None)
        root = (params.get("root", None) if hasattr(params, "get") else None) or "."
        _ARTEFACT.update(
            name=name, spec=config["artefacts"][name], scale=scale, inputs=dict(_named(smk.input)), root=str(root)
        )


def artefact_statement():
    """The statement (report/statement.py: source and claims' verdicts) of the artefact being built, None outside
    an artefact build (a notebook run by hand, the report's own figure). Computed once per build."""
    if not _ARTEFACT:
        return None
    if "statement" not in _ARTEFACT:
        from . import statement  # the verdict engine imports no plotting: no loop back here

        a = _ARTEFACT
        _ARTEFACT["statement"] = statement.for_artefact(
            a["name"], a["spec"], a["scale"], a["inputs"], Path(a["root"]) / "config" / "papers"
        )
        logging.getLogger("reprokit.artefact").info("statement: %s", " | ".join(_ARTEFACT["statement"].lines()))
    return _ARTEFACT["statement"]


def statement_block(fig) -> None:
    """Below the figure's footer: the paper artefact it rebuilds and each claim about it with its verdict."""
    st = artefact_statement()
    if st is None:
        return
    width = max(80, int(fig.get_figwidth() * 19))
    text = "\n".join(textwrap.fill(line, width) for line in st.lines())
    fig.text(0.01, -0.01, text, fontsize=7, color="0.1", ha="left", va="top", gid="reprokit-statement")


def start_log(smk) -> logging.Logger:
    """Log a notebook's run to its rule's `log:` file, `smk.log[0]` (stderr when the rule has none, as in
    tests), as the snakemake workflow template's scripts do: the rule, scale, inputs with their sizes and
    declared outputs now; warnings and an uncaught exception as they happen; at exit the outputs with
    their sizes. Returns the logger for the notebook's own lines (``log.info(...)``)."""
    name = getattr(smk, "rule", None)
    logger = logging.getLogger("reprokit.artefact")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logs = [str(p) for p in (getattr(smk, "log", None) or [])]
    handler = logging.FileHandler(logs[0], mode="w") if logs else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.handlers[:] = [handler]
    params = getattr(smk, "params", None)
    scale = (params.get("scale", None) if hasattr(params, "get") else None) or getattr(smk, "config", {}).get("scale")
    logger.info("rule %s, scale %s", name or "?", scale)
    if set_partial(params.get("partial", None) if hasattr(params, "get") else None):
        logger.info("%s", _PARTIAL["note"])
    set_artefact(smk, scale)
    for key, path in _named(smk.input):
        logger.info("input %s: %s", key, _sized(path))
    for key, path in _named(smk.output):
        logger.info("output %s: %s", key, path)
    if logs:  # a Snakemake job (its own process): warnings, a failure and the end of the run go there too
        logging.captureWarnings(True)
        logging.getLogger("py.warnings").handlers[:] = [handler]
        hook = sys.excepthook

        def excepthook(kind, value, tb):
            logger.error("failed", exc_info=(kind, value, tb))
            hook(kind, value, tb)

        def wrote():
            for key, path in _named(smk.output):
                logger.info("wrote %s: %s", key, _sized(path))
            write_provenance(smk, scale, logger)

        sys.excepthook = excepthook
        atexit.register(wrote)
    return logger


def write_provenance(smk, scale, logger) -> None:
    """`figures/<artefact>.provenance.json` beside an artefact rule's outputs, once they all exist: commit,
    scale, devices, date and the fingerprint of the artefact's resolved config (report/provenance.py)."""
    rule = str(getattr(smk, "rule", "") or "")
    config = getattr(smk, "config", None) or {}
    name = rule.removeprefix("artefact_")
    outputs = [p for _, p in _named(smk.output)]
    if (
        not rule.startswith("artefact_")
        or name not in config.get("artefacts", {})
        or not outputs
        or not all(os.path.exists(p) for p in outputs)
    ):
        return
    from . import provenance

    csvs = [p for k, p in _named(smk.input) if k in config["artefacts"][name]["experiments"]]
    try:
        rec = provenance.record(config, name, scale, provenance.devices_of(csvs))
        path = Path(outputs[0]).parent / f"{name}{provenance.SUFFIX}"
        provenance.write(path, rec)
        logger.info("wrote provenance: %s (commit %s, fingerprint %s)", path, rec["commit"], rec["fingerprint"])
    except Exception:  # provenance must never fail a built artefact
        logger.exception("could not write the provenance record")


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    plt.rcParams.update({"figure.dpi": 120, "savefig.dpi": 150, "axes.titlesize": 9, "legend.fontsize": 7})


def provenance(table: pd.DataFrame, data: str, seed_column: str = "seed") -> str:
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


def na_shared(ax, parts, title: str | None = None, width: int = 60, fontsize: float = 7) -> str:
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
    return _na_axes(ax, text, title, fontsize)


def na_see(ax, where: str, title: str | None = None, fontsize: float = 7) -> str:
    """An n/a panel that points at the figure's one n/a placeholder (`na_shared`) instead of repeating it."""
    text = f"n/a (see {where})"
    return _na_axes(ax, text, title, fontsize, log=False)


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
    """Annotate (provenance, test watermark), then save atomically. The texts of n/a panels (`na_panel`) also go
    into the files' metadata (PDF Subject, PNG Description), so a reader or a test can find them without OCR."""
    annotate_figure(fig, scale, note)
    statement_block(fig)
    missing = " | ".join(na_texts(fig))
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
