"""From finished cells to what a reader sees, in the order the data flows.

- `cells`: the one reader of a cell's results (metrics.json, config.json, curve.csv) and the words every part
  uses about them (statuses, scale notes, how to get missing data).
- `stats`: mean ± s.e., bootstrap intervals and number formats, shared by the verdicts and the rendering.
- `aggregate`: the aggregate step (rule `aggregate`): one experiment's cells -> its tidy CSVs.
- `verdicts/`: the verdict engine: the papers' numbers and claims (`papers`), the checks (`claims`), the results a
  scale holds (`results`), what each artefact states (`statement`) and the reproduction report (`reproduction`,
  `glance`). Torch-free and free of plotting.
- `render/`: the figures and tables: a notebook's run (`notebook`: log, artefact, record), styling and footers
  (`style`), n/a panels and footnotes (`na`), the LaTeX table writer (`tables`) and each paper's helpers.
- `records/`: what is kept of a run: the committed cell archive (`archive`), the provenance record of a built
  artefact (`provenance`) and builds from part of a grid (`build_partial`).
"""
