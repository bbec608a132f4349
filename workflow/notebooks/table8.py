# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 8 — time per update relative to a standard update (partitioned networks paper, App. D.2)
# Measured by the `update_timing` cells (src/reprokit/builders/update_timing.py): per model, a
# standard parameter update, the partitioned parameter and hyperparameter updates, the Augerino update
# and the Diff. Laplace (LILA) parameter and hyperparameter updates, on the same batch with S
# augmentation samples, timed in one process, interleaved, after warm-up. Each measured entry is the
# median over all timed repetitions (pooled over seeds) of the per-repetition ratio update / standard
# update, with a 95% bootstrap confidence interval of that median. A Diff. Laplace hyperparameter update
# that ran out of device memory is printed OOM: the cell measured it to (its `dl_hyper_outcome`). The
# paper's RTX 3080 numbers are cited literature, quoted in their own column
# (config/papers/partitioned.yaml), never mixed with ours.
# Run by Snakemake (`script:`), which provides `snakemake.input` / `snakemake.output`.

# %%
import pandas as pd

from reprokit.report.render import notebook, style, timing
from reprokit.report.render.tables import write_table
from reprokit.report.verdicts import papers

log = notebook.start_log(snakemake)

cells = pd.read_csv(snakemake.input["table8_timing"])
paper_all = papers.load(snakemake.input["paper_numbers"])
timings = timing.Timings(cells, pd.read_csv(snakemake.input["table8_timing_curves"]))
models = timings.models(list(papers.artefact(paper_all, "table8")["columns"]))

# %%
measured = timings.entries(models)  # {(model, update): (median, CI low, high, repetitions)}
measured

# %%
table = timing.table(timings, paper_all, models, measured)
table

# %%
write_table(
    table,
    snakemake.output["tex"],
    timing.caption(paper_all),
    style.scale_of(cells),
    timing.source_note(cells),
    footnotes=timing.footnotes(timings, models, measured),
    label="tab:table8",
    parts=[list(table.columns[1:])],  # one part, scaled to the text width: split per model it outgrows the page
)
