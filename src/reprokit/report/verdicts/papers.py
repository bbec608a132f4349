"""The papers' numbers and claims: one data file per paper, `config/papers/<paper>.yaml`.

Each number is keyed by artefact, row and column (`artefacts.<artefact>.numbers.<row>.<column>`); a value
is `[mean, s.e.]` as printed, `[mean, null]` or a bare mean (no s.e. printed), null (the paper prints
"NaN"), a string printed as is ("OOM", "-"), or `{value: ..., quoted: true, note: ...}`. `quoted: true`
on the artefact, a row, a column or one number marks literature values the paper only cites. The same
file says where our cells for each number are (`rows`/`columns`: experiment, `where`, `metric`,
`factor`, `largest`) and lists the paper's claims in words with the check that decides them
(reprokit/report/verdicts/claims.py). `ours_columns` (same keys as `columns`) are columns of ours the paper does not
have (e.g. BALI with standardised targets): the report shows them next to the paper's rows, with no paper
number. Torch-free: the Snakefile reads it to wire artefact inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

_MISSING = object()


@dataclass(frozen=True)
class PaperNumber:
    """One number as the paper prints it. `mean`/`se` are None when not printed; `text` holds what the paper
    prints instead of a number ("OOM", "-", "NaN" for a crashed run)."""

    artefact: str
    row: str
    column: str
    mean: float | None
    se: float | None
    text: str | None = None
    quoted: bool = False
    note: str = ""

    def shown(self, digits: int | None = None) -> str:
        if self.text is not None:
            return self.text
        m = f"{self.mean:.{digits}f}" if digits is not None else f"{self.mean:g}"
        return m if self.se is None else f"{m} ± {self.se:g}"


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    artefact: str
    words: str
    check: str
    args: dict = field(default_factory=dict)
    # Why the claim is not expected to hold below paper scale (the scale's own settings, with the evidence),
    # from the claim's `below_paper_scale:` key; shown next to a verdict other than "holds" at such a scale.
    below_paper_scale: str = ""
    # What looking into a claim that does not hold AT paper scale found (e.g. the ordering is within the paired
    # s.e.), from the claim's `at_paper_scale:` key; without it such a claim is flagged UNEXPLAINED.
    at_paper_scale: str = ""
    # The scales at which the claim can be tested at all (from `testable_at:`; empty: every scale). Elsewhere its
    # verdict is "not testable" (not counted as failed), with `below_paper_scale` saying why.
    testable_at: tuple = ()
    # A claim re-checked under another reading of a setting the paper leaves open or states differently (from
    # `variant:`, naming the reading, e.g. "the label coded +-1"): reported beside the claim, not counted among the
    # paper's claims.
    variant: str = ""
    # Whom the claim is about (from `about:`): "method" (the paper's own method, the default) or "baseline" (a method
    # it compares against, e.g. Augerino's divergence); counted apart.
    about: str = "method"
    # Why the check holds whatever was trained (from `by_construction:`): an accounting identity, a setting we chose.
    # Shown with its measurement, never counted as evidence.
    by_construction: str = ""
    # The part of the grid the claim's words allow it to be decided on (from `subset:`, in words, e.g. "per row: the
    # rows that ran"): a partial grid then decides it on the cells that ran, said beside the verdict; without it a
    # partial grid leaves the claim not testable.
    subset: str = ""
    # Settings its words need of the cells (from `requires:`, {setting: minimum}, e.g. {rounds: 2000} for "after 2000
    # rounds"; "paper": at least the same configuration's paper-scale value): cells below them leave it not testable
    # at that scale.
    requires: dict = field(default_factory=dict)
    # The claim in a few words for the bottom line (from `headline:`); claims without one are counted there, not
    # named.
    headline: str = ""
    # One line, no typed numbers, on why it does not hold or is inconclusive (from `gist:`), for the bottom line.
    gist: str = ""
    # Why the check reads the words the way it does, in one line (from `reading:`, e.g. "'similar': within one
    # percentage point"): shown in the report next to the words.
    reading: str = ""


REASON_KEYS = ("below_paper_scale", "at_paper_scale")


def load(path: str | Path) -> dict:
    """The paper's data file, checked: every number's row and column is declared. Its claims' reasons
    (`below_paper_scale`, `at_paper_scale`) are kept apart, by claim id, in `reasons/<file name>` beside it
    (config/papers/reasons/<paper>.yaml) and merged into the claims here."""
    doc = yaml.safe_load(Path(path).read_text())
    for key in ("paper", "source", "artefacts"):
        if key not in doc:
            raise ValueError(f"{path}: missing '{key}' (not a config/papers/<paper>.yaml file)")
    for name, art in doc["artefacts"].items():
        rows, cols = art.get("rows") or {}, art.get("columns") or {}
        clash = sorted(set(art.get("ours_columns") or {}) & set(cols))
        if clash:
            raise ValueError(f"{path}: {name} ours_columns {clash} are also paper columns")
        for row, values in (art.get("numbers") or {}).items():
            if rows and row not in rows:
                raise ValueError(f"{path}: {name} number row '{row}' is not in its rows")
            for col in values:
                if cols and col not in cols:
                    raise ValueError(f"{path}: {name} number column '{col}' (row '{row}') is not in its columns")
    ids = [c["id"] for c in doc.get("claims") or []]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: claim ids are not unique")
    reasons_path = Path(path).parent / "reasons" / Path(path).name
    if reasons_path.exists():
        by_id = {c["id"]: c for c in doc.get("claims") or []}
        for cid, reasons in (yaml.safe_load(reasons_path.read_text()).get("claims") or {}).items():
            if cid not in by_id:
                raise ValueError(f"{reasons_path}: no claim '{cid}' in {path}")
            for key, text in reasons.items():
                if key not in REASON_KEYS:
                    raise ValueError(f"{reasons_path}: claim '{cid}': '{key}' is not one of {', '.join(REASON_KEYS)}")
                if key in by_id[cid]:
                    raise ValueError(f"{reasons_path}: claim '{cid}': '{key}' is also set in {path}")
                by_id[cid][key] = text
    return doc


def artefact(doc_or_path, name: str) -> dict:
    doc = load(doc_or_path) if isinstance(doc_or_path, (str, Path)) else doc_or_path
    if name not in doc["artefacts"]:
        raise KeyError(f"the {doc['paper']} paper file has no numbers for artefact '{name}'")
    return doc["artefacts"][name]


def _parse(value):
    """(mean, se, text, quoted, note) of one transcribed value."""
    quoted, note = False, ""
    if isinstance(value, dict):
        quoted, note = bool(value.get("quoted", False)), str(value.get("note", ""))
        value = value.get("value")
    if value is None:
        return None, None, "NaN", quoted, note
    if isinstance(value, str):
        return None, None, value, quoted, note
    if isinstance(value, (list, tuple)):
        mean, se = value
        return float(mean), (None if se is None else float(se)), None, quoted, note
    return float(value), None, None, quoted, note


def numbers(doc: dict, artefact_name: str | None = None) -> list[PaperNumber]:
    """Every number of the paper (of one artefact), in the file's order."""
    out = []
    for name, art in doc["artefacts"].items():
        if artefact_name is not None and name != artefact_name:
            continue
        rows, cols = art.get("rows") or {}, art.get("columns") or {}
        for row, values in (art.get("numbers") or {}).items():
            for col, value in values.items():
                mean, se, text, quoted, note = _parse(value)
                quoted = (
                    quoted
                    or bool(art.get("quoted"))
                    or bool((rows.get(row) or {}).get("quoted"))
                    or bool((cols.get(col) or {}).get("quoted"))
                )
                out.append(PaperNumber(name, str(row), str(col), mean, se, text, quoted, note))
    return out


def entry(doc: dict, artefact_name: str, row: str, column: str, default=_MISSING):
    """One number as the artefact notebooks use it: [mean, s.e.], a bare mean, None (the paper's NaN) or a
    string ("OOM", "-"); `default` when the paper has no such number (KeyError without one)."""
    values = (artefact(doc, artefact_name).get("numbers") or {}).get(row, {})
    if column not in values:
        if default is _MISSING:
            raise KeyError(f"{doc['paper']} paper, {artefact_name}: no number at row '{row}', column '{column}'")
        return default
    mean, se, text, _, _ = _parse(values[column])
    if text is not None:
        return None if text == "NaN" else text
    return mean if se is None else [mean, se]


CLAIM_KEYS = (
    "id",
    "artefact",
    "words",
    "check",
    "args",
    "below_paper_scale",
    "at_paper_scale",
    "testable_at",
    "variant",
    "about",
    "by_construction",
    "subset",
    "requires",
    "headline",
    "gist",
    "reading",
)
ABOUT = ("method", "baseline")


def claims(doc: dict) -> list[Claim]:
    """The paper file's claims; a key a claim does not know (a misspelt reason would be silently dropped) is
    an error naming the claim and the key."""
    out = []
    for c in doc.get("claims") or []:
        unknown = sorted(set(c) - set(CLAIM_KEYS))
        if unknown:
            raise KeyError(
                f"{doc['paper']} paper, claim '{c.get('id')}': unknown key(s) {unknown} "
                f"(known: {', '.join(CLAIM_KEYS)})"
            )
        notes = [" ".join(str(c.get(key) or "").split()) for key in ("below_paper_scale", "at_paper_scale")]
        about = c.get("about", "method")
        if about not in ABOUT:
            raise ValueError(
                f"{doc['paper']} paper, claim '{c.get('id')}': about must be one of {ABOUT}, not {about!r}"
            )
        requires = dict(c.get("requires") or {})
        bad = {
            k: v
            for k, v in requires.items()
            if v != "paper" and (not isinstance(v, (int, float)) or isinstance(v, bool))
        }
        if bad:
            raise ValueError(
                f"{doc['paper']} paper, claim '{c.get('id')}': requires takes numbers or 'paper', not {bad}"
            )
        out.append(
            Claim(
                c["id"],
                doc["paper"],
                c["artefact"],
                c["words"],
                c["check"],
                dict(c.get("args") or {}),
                *notes,
                tuple(c.get("testable_at") or ()),
                " ".join(str(c.get("variant") or "").split()),
                about,
                " ".join(str(c.get("by_construction") or "").split()),
                " ".join(str(c.get("subset") or "").split()),
                requires,
                " ".join(str(c.get("headline") or "").split()),
                " ".join(str(c.get("gist") or "").split()),
                " ".join(str(c.get("reading") or "").split()),
            )
        )
    return out


def role(doc: dict, num: PaperNumber) -> str:
    """ "method" where the number is the paper's own method's (its row or column is one of the file's
    `method_entries`, e.g. BALI's "BALI" column), else "baseline": counts keep the two apart."""
    keys = {str(k) for k in doc.get("method_entries") or []}
    return "method" if num.row in keys or num.column in keys else "baseline"


def z_scores(ours: float, ours_se: float, paper: float, paper_se: float | None) -> tuple[float, float]:
    """(ours - paper) in units of the paper's s.e., and of the combined s.e. sqrt(se_p² + se_o²); NaN where
    the unit is zero or the paper prints no s.e. (a printed 0.0 leaves the combined unit our s.e.)."""
    if paper_se is None:
        return math.nan, math.nan
    diff = ours - paper
    z_p = diff / paper_se if paper_se else math.nan
    se_o = ours_se if ours_se is not None and math.isfinite(ours_se) else 0.0
    comb = math.sqrt(paper_se**2 + se_o**2)
    z_c = diff / comb if comb > 0 else math.nan
    return z_p, z_c


def claim_experiments(claim: Claim, known, doc: dict | None = None) -> list[str]:
    """The experiments a claim's check reads: every string among its arguments (nested too) that names one of
    `known`, in order, each once; with the paper's `doc`, also those of the table a check compares entries of
    (an `artefact` argument: its rows' and columns' experiments)."""

    def walk(x):
        if isinstance(x, str):
            if x in known:
                yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from walk(v)

    found = list(walk(claim.args))
    if doc is not None and claim.args.get("artefact") in (doc.get("artefacts") or {}):
        found += list(walk(doc["artefacts"][claim.args["artefact"]]))
    return list(dict.fromkeys(found))
