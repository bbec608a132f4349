"""Shared styling for every table and figure, and the provenance line each one carries.

Each artefact states the scale it was built at, how many seeds, and which data. Test-scale outputs get
a visible "TEST DATA" watermark; quick-scale ones say they are not paper-scale numbers.
"""

from __future__ import annotations

import atexit
import io
import logging
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..io import atomic_write_bytes  # noqa: E402

SCALE_NOTE = {
    "paper": "paper scale",
    "quick": "quick scale (reduced iterations/seeds; not paper-scale numbers)",
    "test": "TEST scale (tiny CI run; numbers meaningless)",
}


# How a table entry reads when a cell did not produce numbers (cell.py's statuses): an out-of-memory
# run is "OOM" (as the partitioned paper's Table 1), a diverged one "NaN" (both papers' convention).
# Statuses that still count as "ran" for a table (their NaN metrics are part of the mean).
RAN_STATUSES = ("completed", "diverged", "oom")


def outcome_text(statuses) -> str | None:
    """'OOM' if any cell ran out of memory, 'NaN' if any diverged, None when every cell completed."""
    statuses = set(statuses)
    if "oom" in statuses:
        return "OOM"
    if "diverged" in statuses:
        return "NaN"
    return None


def _named(files) -> list[tuple[str, str]]:
    items = files.items() if hasattr(files, "items") else enumerate(files or [])
    return [(str(k), str(v)) for k, v in items]


def _sized(path: str) -> str:
    return f"{path} ({os.path.getsize(path)} bytes)" if os.path.exists(path) else f"{path} (missing)"


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
    if not rule.startswith("artefact_") or name not in config.get("artefacts", {}) or not outputs \
            or not all(os.path.exists(p) for p in outputs):
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


def annotate_figure(fig, scale: str, note: str) -> None:
    """The provenance footer, and a "TEST DATA" watermark on test-scale figures."""
    fig.text(0.01, 0.005, note, fontsize=6, color="0.3", ha="left", va="bottom")
    if scale == "test":
        fig.text(0.5, 0.5, "TEST DATA", fontsize=48, color="red", alpha=0.25, ha="center", va="center",
                 rotation=30, transform=fig.transFigure)


def finish_figure(fig, scale: str, note: str, pdf: str | Path | None, png: str | Path | None) -> None:
    """Annotate (provenance, test watermark), then save atomically."""
    annotate_figure(fig, scale, note)
    for path, fmt in ((pdf, "pdf"), (png, "png")):
        if path is None:
            continue
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, bbox_inches="tight")
        atomic_write_bytes(path, buf.getvalue())
    plt.close(fig)

