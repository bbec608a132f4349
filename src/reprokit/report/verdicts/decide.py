"""The one rule every check decides by: the statuses a verdict takes, the noise band an effect must exceed, and how
one comparison's outcome (an ordering against a band, an interval against a bound) becomes a claim's verdict.

:data:`NOISE_RULE` states the rule in the report's words; reprokit.report.verdicts.claims says how each family of
check applies it. While a claim is checked (:func:`checking`), every inconclusive comparison records which way its
point estimate leans, and a claim whose words allow a subset of its grid is decided on the entries that ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .noise import LEVEL, n1_fraction, t_quantile, welch_df

HOLDS, FAILS, NOT_RUN = "holds", "does not hold", "not run"
INCONCLUSIVE, NOT_COMPARABLE, NOT_TESTABLE = "inconclusive", "not comparable", "not testable"
BY_CONSTRUCTION = "by construction"  # the check cannot fail whatever was trained: shown, never counted as evidence
STATUSES = (HOLDS, INCONCLUSIVE, FAILS, NOT_COMPARABLE, BY_CONSTRUCTION, NOT_TESTABLE, NOT_RUN)  # the report's order
TESTED = (HOLDS, INCONCLUSIVE, FAILS, NOT_COMPARABLE)  # the statuses of a claim its cells tested
UNRESOLVED = "unresolved"  # one comparison's outcome: the cells cannot resolve it (evaluation grid too coarse)
LEANS_WITH, LEANS_AGAINST = "leans with the paper", "leans against the paper"

# A baseline entry is "far" from the paper's number for it when it is off by more than BASELINE_REL of the paper's
# value AND by more than BASELINE_Z of the paper's s.e. (when printed): the comparison then is not comparable.
BASELINE_REL, BASELINE_Z = 0.5, 5.0
CI_LEVEL = LEVEL  # a correlation's percentile-bootstrap interval over the configurations
NOISE_RULE = (
    f"one rule for every check: an effect counts only outside a two-sided {LEVEL:.0%} Student-t band, t x the "
    "standard error of the difference (paired over the seeds / splits both sides ran, t with k - 1 degrees of "
    "freedom; else Welch's), or, where a side has one seed (no s.e.), t x sqrt 2 x one cell's relative sd measured "
    "on at least 3 seeds of cells of the claim's own family (its experiments, else every experiment of the same kind "
    "at this scale; t with that spread's degrees of freedom; an accuracy's never below its test set's binomial "
    "s.e.); with no such spread a single value orders nothing and the claim is not testable at this scale. "
    "Orderings, thresholds (a mean against a fixed bound), best-of-k comparisons, spreads and similarities (the "
    "margin tol - |difference|) hold outside the band on the paper's side, do not hold outside it on the other "
    "side, and are inconclusive inside it, leaning one way or the other; a correlation holds when its "
    f"{LEVEL:.0%} bootstrap interval over the configurations lies beyond its bound, does not hold when it lies "
    "wholly on the other side, and is inconclusive when it straddles the bound; a table comparison whose baseline "
    f"entry is off its paper number by more than {BASELINE_REL:.0%} and {BASELINE_Z:g} paper s.e. is not comparable "
    "unless it clearly fails. A claim counts as tested only where its cells cover its words (every cell of its "
    "experiments at this scale, or the subset its words allow, the settings its words need, curves fine enough to "
    "order what it orders); a check true whatever was trained is labelled by construction and not counted"
)


@dataclass(frozen=True)
class Verdict:
    status: str  # one of STATUSES
    measured: str  # what was measured, in words and numbers
    n: int = 0  # the fewest seeds / splits behind any compared number (0: nothing ran)
    lean: str = ""  # an inconclusive verdict: LEANS_WITH, LEANS_AGAINST or "leans both ways" (its point estimates)
    subset: str = ""  # the part of the paper's grid the verdict rests on, where the claim's words allow a subset

    @property
    def label(self) -> str:
        """The status as a reader sees it: an inconclusive one with its direction."""
        return f"{self.status} ({self.lean})" if self.status == INCONCLUSIVE and self.lean else self.status


def noise_band(a: float, se_a: float, n_a: int, b: float, se_b: float, n_b: int) -> float:
    """The size an effect between a (mean ± se_a over n_a) and b must exceed to count: t (Welch's degrees of
    freedom) x the combined s.e., or, where a side has a single value (no s.e.), the measured n = 1 band of the
    claim's family (noise.n1_fraction: inf where none was measured) x the larger |value|."""
    if n_a > 1 and n_b > 1 and math.isfinite(se_a) and math.isfinite(se_b):
        return t_quantile(welch_df(se_a, n_a, se_b, n_b)) * math.hypot(se_a, se_b)
    return n1_fraction(pair=True) * max(abs(a), abs(b))


def bound_band(m: float, se: float, n: int, bound: float) -> float:
    """The noise band of a mean m (± se over n) against a fixed `bound` (no noise of its own): t (n - 1 degrees of
    freedom) x se over n > 1 values, else the family's n = 1 band x the larger of |m| and |bound|."""
    if n > 1 and math.isfinite(se):
        return t_quantile(n - 1) * se
    return n1_fraction(pair=False) * max(abs(m), abs(bound))


def paired_band(se: float, k: int) -> float:
    """t (k - 1 degrees of freedom) x the s.e. of k paired differences."""
    return t_quantile(k - 1) * se


_LEANS: ContextVar[list | None] = ContextVar("leans", default=None)
# set while a claim whose words allow a subset of its grid is checked: entries that have not run are left out
_SUBSET_OK: ContextVar[bool] = ContextVar("subset_ok", default=False)


@contextmanager
def checking(subset_ok: bool = False) -> Iterator[list]:
    """While one claim is checked: the list each inconclusive comparison's lean is appended to (True: with the
    paper), and whether its words allow deciding on the part of its grid that ran (`subset_ok`)."""
    leans: list = []
    token, subset_token = _LEANS.set(leans), _SUBSET_OK.set(subset_ok)
    try:
        yield leans
    finally:
        _LEANS.reset(token)
        _SUBSET_OK.reset(subset_token)


def subset_allowed() -> bool:
    """Whether the claim being checked may be decided on the entries that ran (its `subset`)."""
    return _SUBSET_OK.get()


def _lean(with_paper: bool) -> None:
    """Record which way an inconclusive comparison's point estimate leans (for the claim being checked)."""
    found = _LEANS.get()
    if found is not None:
        found.append(with_paper)


def interval_side(lo: float, hi: float, bound: float, above: bool = True):
    """A coefficient's interval [lo, hi] against `bound`: True when it lies wholly above (`above`; below
    otherwise), False when wholly on the other side, INCONCLUSIVE when it straddles the bound (or is NaN)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return INCONCLUSIVE
    if (lo > bound) if above else (hi < bound):
        return True
    if (hi < bound) if above else (lo > bound):
        return False
    _lean(((lo + hi) / 2 > bound) if above else ((lo + hi) / 2 < bound))
    return INCONCLUSIVE


def ordering(gap: float, band: float, min_gap: float = 0.0, max_gap: float | None = None):
    """One comparison's outcome: True (gap clearly above `min_gap`, and not clearly above `max_gap`), False
    (clearly below `min_gap`, or clearly above `max_gap`), INCONCLUSIVE (inside the noise band of a bound)."""
    if gap < min_gap - band or (max_gap is not None and gap > max_gap + band):
        return False
    if gap > min_gap + band and (max_gap is None or gap <= max_gap):
        return True
    _lean(gap > min_gap and (max_gap is None or gap <= max_gap))
    return INCONCLUSIVE


def decide(results: list, measured: str, n: int) -> Verdict:
    """results per comparison: True (holds), False (fails), None (not run), INCONCLUSIVE (inside the noise),
    NOT_COMPARABLE (its baseline is far from the paper's own number). One clear failure fails the claim."""
    if any(r is False for r in results):
        return Verdict(FAILS, measured, n)
    if _SUBSET_OK.get() and any(r is not None for r in results):  # decided on the entries that ran
        results = [r for r in results if r is not None]
    if results and all(r is True for r in results):
        return Verdict(HOLDS, measured, n)
    if not results or any(r is None for r in results):
        return Verdict(NOT_RUN, measured or "no cell ran", n)
    if any(r == UNRESOLVED for r in results):
        return Verdict(NOT_TESTABLE, f"the cells cannot resolve it: {measured}", n)
    if any(r == NOT_COMPARABLE for r in results):
        return Verdict(NOT_COMPARABLE, measured, n)
    return Verdict(INCONCLUSIVE, measured, n)


def mark(outcome, reversed_: str = " (reversed)") -> str:
    return {
        True: "",
        False: reversed_,
        INCONCLUSIVE: " (inside the noise)",
        UNRESOLVED: " (not resolved by the evaluations)",
        NOT_COMPARABLE: " (baseline far from the paper's)",
    }.get(outcome, "")
