"""Checks decided on what the cells recorded, without a noise band: every cell ended with a status
(`all_have_status`), and the shape readings of single predictives (`smooth_predictive`,
`underfits_and_overconfident`; reprokit.predictive_shape).
"""

from __future__ import annotations

from ...predictive_shape import SHAPE, explained, shape_text, uncertainty_grows
from ...predictive_shape import meets as meets_shape
from ...predictive_shape import recorded as predictive_shape
from .decide import FAILS, HOLDS, NOT_RUN, Verdict, decide
from .sides import fits, side_coords, side_words


def all_have_status(ctx, experiment: str, status: str, where: dict | None = None) -> Verdict:
    """Every cell of `experiment` (with the coordinates `where`) that ran ended with `status` (e.g. every
    Augerino run without the safe switch 'diverged': a non-finite loss)."""
    rows = ctx.cells(experiment, where or {})
    if rows.empty:
        return Verdict(NOT_RUN, "no cell ran")
    counts = rows["status"].value_counts()
    measured = f"{experiment} {side_words(where or {})}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
    return Verdict(HOLDS if set(counts.index) == {status} else FAILS, measured, len(rows))


def smooth_predictive(
    ctx, experiment: str, where: dict | None = None, by: str = "dataset", entropy_far_min: float | None = None
) -> Verdict:
    """Every cell's predictive meets the numeric reading of "excellent and smooth fit, small uncertainty close to
    the data, increased further away" (reprokit.predictive_shape.SHAPE, decided by reprokit.predictive_shape.meets), per value of `by`:
    from the numbers each cell recorded (its shape_<name> metrics); a cell that recorded none counts as not run.
    Classification's "increased" is relative (entropy far from the data over close to it); `entropy_far_min` (nats)
    adds an absolute floor far from the data, a reading of ours shown as a variant."""

    rows = ctx.cells(experiment, where or {})
    if rows.empty or by not in rows:
        return Verdict(NOT_RUN, "no cell ran")
    results, parts = [], []
    for value, g in rows.groupby(by, sort=True):
        shapes = [predictive_shape(r) for _, r in g.iterrows()]
        shapes = [sh for sh in shapes if sh]
        if not shapes:
            results.append(None)
            continue
        ok = [meets_shape(sh, entropy_far_min) for sh in shapes]
        results.append(all(ok))
        parts.append(
            f"{value}: "
            + "; ".join(shape_text(sh) + ("" if good else " (short of the reading)") for sh, good in zip(shapes, ok))
        )
    return decide(results, " | ".join(parts), min((len(g) for _, g in rows.groupby(by)), default=0))


def underfits_and_overconfident(
    ctx, experiment: str, large: dict, small: dict, where: dict | None = None, by: str = "dataset"
) -> Verdict:
    """Both halves of "underfitting if the KL down-weighting factor is large and overconfidence if the factor is
    small" (BALI App. I.2), per value of `by`, from the shape numbers each cell recorded (reprokit.predictive_shape):
    underfitting, the cells at `large` explain under SHAPE's `underfit_explained_max` of their training targets
    against the best constant prediction (reprokit.predictive_shape.explained) where those at `small` explain at least that
    much; overconfidence, the cells at `small` lack Fig. 1's "increased predictive uncertainty further away"
    (reprokit.predictive_shape.uncertainty_grows: their uncertainty far from the data under 2x that close to it). A shape
    reading of single predictives, decided on its numbers without a band, as :func:`smooth_predictive`. A side's
    `label` names it ("KL factor 1")."""
    bound = SHAPE["underfit_explained_max"]
    rows = ctx.cells(experiment, where or {})
    if rows.empty or by not in rows:
        return Verdict(NOT_RUN, "no cell ran")
    results, parts, ns = [], [], []
    for value, g in rows.groupby(by, sort=True):
        at_large = g[[fits(dict(r), side_coords(large)) for _, r in g.iterrows()]]
        at_small = g[[fits(dict(r), side_coords(small)) for _, r in g.iterrows()]]
        fit_large = [explained(r) for _, r in at_large.iterrows()]
        fit_small = [explained(r) for _, r in at_small.iterrows()]
        shapes = [predictive_shape(r) for _, r in at_small.iterrows()]
        if not fit_large or not fit_small or any(x is None for x in fit_large + fit_small) or not all(shapes):
            results.append(None)
            parts.append(f"{value}: not run")
            continue
        ns.append(min(len(at_large), len(at_small)))
        underfit = max(fit_large) < bound <= min(fit_small)
        confident = not any(uncertainty_grows(sh) for sh in shapes)
        results.append(underfit and confident)
        classification = "entropy_far" in shapes[0]
        what = "training fit (1 - NLL / label entropy)" if classification else "training fit R^2"
        grows = "; ".join(
            f"entropy far from the data {sh['entropy_far']:.3g} nats, {sh['far_over_near']:.3g}x that near it"
            if classification
            else f"predictive sd far from the data {sh['far_over_near']:.2f}x that near it"
            for sh in shapes
        )
        limit = f"under {SHAPE['far_over_near_min']:g}x" + (
            f", or under {SHAPE['entropy_resolution']:g} nats far away" if classification else ""
        )
        parts.append(
            f"{value}: underfitting at {side_words(large)}: {what} {', '.join(f'{x:.3g}' for x in fit_large)} against "
            f"{', '.join(f'{x:.3g}' for x in fit_small)} at {side_words(small)} (bound: below {bound:g} at "
            f"{side_words(large)}, at least {bound:g} at {side_words(small)}){'' if underfit else ' (not underfit)'}; "
            f"overconfidence at {side_words(small)}: {grows} "
            f"(bound: {limit}){'' if confident else ' (not overconfident: it grows)'}"
        )
    return decide(results, " | ".join(parts), min(ns, default=0))


CHECKS = (all_have_status, smooth_predictive, underfits_and_overconfident)
