"""The reproduction report written out: its markdown (reprokit.report.verdicts.reproduction) and, beside it, its
z-score figure, one dot per compared number.

    python -m reprokit.report.commands.reproduction --scale quick --out figures/quick/reproduction.md
"""

from __future__ import annotations

import datetime as _dt
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from ...atomic import atomic_write_text
from ..store import provenance
from ..verdicts import papers
from ..verdicts.reproduction import PAPER_NAMES, WITHIN_Z, method_name, render, z_rows
from ..verdicts.results import Context
from .style import finish_figure


def write_report(
    out: str | Path,
    results: str | Path,
    scale: str,
    paper_files: list[str | Path],
    expected: dict | None = None,
    generated: str | None = None,
    artefacts: dict | None = None,
    archive: tuple[str | Path, dict] | None = None,
) -> str:
    """Render the report from what is under `results` now and write it atomically to `out`. `artefacts`: the
    pipeline config's `artefacts:` (each gets a section, "not run" where nothing exists). `archive`:
    (repository root, pipeline config) to read the committed cells of figures/<scale>/cells too."""
    docs = [papers.load(p) for p in paper_files]
    if generated is None:
        commit, dirty = provenance.git_state()
        generated = (
            f"Generated {_dt.datetime.now().isoformat(timespec='seconds')} at commit {commit[:12]}"
            + (" (config/ modified)" if dirty else "")
            + "."
        )
    ctx = Context(results, scale, docs, expected, artefacts, archive)
    figure = z_figure(ctx, z_figure_path(out))
    text = render(ctx, generated, figure.name)
    atomic_write_text(out, text)
    return text


def z_figure_path(out: str | Path) -> Path:
    """Where the report's z-score figure goes: beside the report, `<name>_z.png`."""
    return Path(out).with_name(Path(out).stem + "_z.png")


def z_figure(ctx: Context, out: str | Path) -> Path:
    """One labelled dot per compared number (dataset / row, method / column; the metric in the panel's y labels), a
    panel per paper; x = z_better, ours - paper in units of the paper's s.e., signed so that right is better than
    the paper, on a symlog axis (linear within +-2, so large z do not pile up at a clip); colour: within 2 s.e.,
    better, worse (legend). Numbers the paper prints with an s.e. that we did not measure are counted under the
    panel with why; a paper none of whose numbers was compared gets a panel saying so. Written atomically (PNG)."""
    per_paper = {
        doc["paper"]: pd.DataFrame(
            z_rows(ctx, doc, with_missing=True),
            columns=[
                "paper",
                "artefact",
                "row",
                "column",
                "label",
                "metric",
                "role",
                "z_paper",
                "z_better",
                "n",
                "why",
            ],
        )
        for doc in ctx.docs
    }
    heights = [max(1.6, 0.17 * int(d["z_better"].notna().sum()) + 1.2) for d in per_paper.values()] or [1.6]
    fig, axes = plt.subplots(
        max(1, len(per_paper)), 1, figsize=(8, sum(heights)), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    colours = {"within": "tab:blue", "better": "tab:green", "worse": "tab:red"}
    lim = 1.0
    for ax, (paper, d) in zip(axes[:, 0], per_paper.items()):
        done, missing = d[d["z_better"].notna()], d[d["z_better"].isna()]
        name = PAPER_NAMES.get(paper, paper)
        why = "; ".join(f"{n} {w}" for w, n in missing.groupby("why").size().sort_values(ascending=False).items())
        if done.empty:
            text = f"{name}: none of its {len(d)} numbers with a printed s.e. was compared at {ctx.scale} scale" + (
                f" (not measured: {why})" if why else ""
            )
            ax.text(
                0.5,
                0.5,
                "\n".join(textwrap.wrap(text, 100)),
                ha="center",
                va="center",
                fontsize=7.5,
                transform=ax.transAxes,
            )
            ax.set_yticks([])
            ax.set_xticks([])
            continue
        done = done.sort_values(["artefact", "z_better"]).reset_index(drop=True)
        y = range(len(done))
        kind = ["within" if abs(z) <= WITHIN_Z else ("better" if z > 0 else "worse") for z in done["z_better"]]
        ax.axvspan(-WITHIN_Z, WITHIN_Z, color="0.92", zorder=0)
        ax.axvline(0, color="0.5", lw=0.6, zorder=1)
        for role, marker in (("method", "o"), ("baseline", "s")):
            pick = (done["role"] == role).to_numpy()
            ax.scatter(
                done["z_better"][pick],
                [i for i, p in zip(y, pick) if p],
                s=16,
                marker=marker,
                c=[colours[k] for k, p in zip(kind, pick) if p],
                zorder=2,
            )
        ax.set_yticks(
            list(y),
            [
                f"{a} ({m}): {lab}" + ("" if r == "method" else " [baseline]")
                for a, m, lab, r in zip(done["artefact"], done["metric"], done["label"], done["role"])
            ],
            fontsize=6.5,
        )
        ax.set_xscale("symlog", linthresh=WITHIN_Z)
        lim = max(lim, float(done["z_better"].abs().max()) * 1.3)
        ax.set_ylim(len(done) - 0.5, -0.5)
        doc = next(d for d in ctx.docs if d["paper"] == paper)
        by_role = []
        for role in ("method", "baseline"):
            part = done[done["role"] == role]
            who = method_name(doc) if role == "method" else "its baselines"
            by_role.append(f"{who} {int((part['z_better'].abs() <= WITHIN_Z).sum())} of {len(part)}")
        title = f"{name}: numbers within {WITHIN_Z:g} paper s.e.: " + "; ".join(by_role)
        if len(missing):
            title += f"; not compared: {why}"
        ax.set_title("\n".join(textwrap.wrap(title, 110)), fontsize=8)
    ticks = [t for t in (-1000, -100, -10, -2, 0, 2, 10, 100, 1000) if abs(t) <= lim]
    for ax in axes[:, 0]:
        if ax.get_xscale() == "symlog":
            ax.set_xlim(-lim, lim)
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_xlabel(
                "z = (ours - paper) / s.e.(paper), signed so that right is better than the paper "
                "(symlog axis: linear within +-2)",
                fontsize=7.5,
            )
    handles = [
        Line2D([], [], marker="o", ls="", color=c, label=lab)
        for lab, c in (
            (f"within {WITHIN_Z:g} paper s.e.", colours["within"]),
            ("better than the paper", colours["better"]),
            ("worse than the paper", colours["worse"]),
        )
    ] + [
        Line2D([], [], marker=m, ls="", color="0.4", label=lab)
        for m, lab in (("o", "the paper's method"), ("s", "a baseline it compares against"))
    ]
    fig.legend(handles=handles, loc="upper center", ncol=5, frameon=False, bbox_to_anchor=(0.5, 1.0), fontsize=7)
    fig.suptitle(
        f"Reproduction at {ctx.scale} scale: every number the papers print with a standard error"
        + ("" if ctx.scale == "paper" else f" ({ctx.scale}-scale numbers, not paper scale)"),
        fontsize=9,
        y=1.03,
    )
    fig.tight_layout()
    n = sum(int(d["z_better"].notna().sum()) for d in per_paper.values())
    finish_figure(
        fig,
        ctx.scale,
        f"{n} numbers compared; results at {ctx.scale} scale "
        f"({ctx.results / ctx.scale}, archived cells included where read)",
        None,
        out,
    )
    return Path(out)
