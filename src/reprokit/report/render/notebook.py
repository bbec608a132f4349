"""A notebook's run as an artefact rule's script: its log, the artefact it builds, and the record left beside it.

`start_log(snakemake)` is every notebook's first line, as in the snakemake workflow template's scripts: it logs
the rule, scale, inputs and outputs to the rule's log file, remembers which artefact is being built (so figures
and tables state what it rebuilds and its claims' verdicts: report/verdicts/statement.py) and whether it is built
from part of its grid, and at exit writes the artefact's provenance record (report/store/provenance.py).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from pathlib import Path

from ..store import provenance
from ..verdicts import statement


def _named(files) -> list[tuple[str, str]]:
    items = files.items() if hasattr(files, "items") else enumerate(files or [])
    return [(str(k), str(v)) for k, v in items]


def _sized(path: str) -> str:
    return f"{path} ({os.path.getsize(path)} bytes)" if os.path.exists(path) else f"{path} (missing)"


# Set by start_log from the rule's `params.partial` ({experiment: [cells found, cells in the grid]}), which only
# reprokit.report.commands.build_partial passes: an artefact built from part of its grid says so in its footer or
# caption.
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
# tables.write_table print which paper artefact it rebuilds and its claims' verdicts (report/verdicts/statement.py).
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
    """The statement (report/verdicts/statement.py: source and claims' verdicts) of the artefact being built, None outside
    an artefact build (a notebook run by hand, the report's own figure). Computed once per build."""
    if not _ARTEFACT:
        return None
    if "statement" not in _ARTEFACT:
        a = _ARTEFACT
        _ARTEFACT["statement"] = statement.for_artefact(
            a["name"], a["spec"], a["scale"], a["inputs"], Path(a["root"]) / "config" / "papers"
        )
        logging.getLogger("reprokit.artefact").info("statement: %s", " | ".join(_ARTEFACT["statement"].lines()))
    return _ARTEFACT["statement"]


def artefact_notes() -> tuple[str, str, list[str]] | None:
    """(name, scale, notes) of the artefact being built where its config entry has `notes` (the explanation the
    reproduction report prints in its section), None otherwise."""
    notes = (_ARTEFACT.get("spec") or {}).get("notes")
    return (_ARTEFACT["name"], _ARTEFACT["scale"], list(notes)) if notes else None


def notes_pointer() -> str:
    """In an artefact build whose config entry has `notes` (how it was built, choices, what its entries mean,
    printed in the reproduction report's section of the artefact): the line that points there ("" otherwise)."""
    art = artefact_notes()
    if not art:
        return ""
    name, scale, _ = art
    return f"How it was built (choices, what its entries mean): figures/{scale}/reproduction.md, section {name}."


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
            write_record(smk, scale, logger)

        sys.excepthook = excepthook
        atexit.register(wrote)
    return logger


def write_record(smk, scale, logger) -> None:
    """`figures/<artefact>.provenance.json` beside an artefact rule's outputs, once they all exist: commit,
    scale, devices, date and the fingerprint of the artefact's resolved config (report/store/provenance.py)."""
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

    csvs = [p for k, p in _named(smk.input) if k in config["artefacts"][name]["experiments"]]
    try:
        rec = provenance.record(config, name, scale, provenance.devices_of(csvs))
        path = Path(outputs[0]).parent / f"{name}{provenance.SUFFIX}"
        provenance.write(path, rec)
        logger.info("wrote provenance: %s (commit %s, fingerprint %s)", path, rec["commit"], rec["fingerprint"])
    except Exception:  # provenance must never fail a built artefact
        logger.exception("could not write the provenance record")
