"""From finished cells to what a reader sees, in layers by the direction data flows.

    store/  ->  verdicts/  ->  render/  ->  commands/

A module imports its own layer and the layers before it, never one after it (tests/test_package_layout.py).

- `store/`: reading and keeping cells. `cells` is the one reader of a cell's results (metrics.json, config.json,
  curve.csv) and the words every part uses about them (statuses, scale notes, how to get missing data);
  `archive` the committed cell archive; `aggregate` one experiment's cells -> its tidy CSVs (rule `aggregate`);
  `provenance` the record of a built artefact; `stats` mean ± s.e., bootstrap intervals and number formats.
- `verdicts/`: the verdict engine: the papers' numbers and claims (`papers`), the results a scale holds
  (`results`), the one decision rule (`decide`) and the checks by family (`comparisons`, `bounds`, `trends`,
  `convergence`, `readings`; `claims` names them and gives a claim its verdict, `coverage` what its cells cover),
  the single-value noise band (`noise`), what each artefact states (`statement`) and the reproduction report's
  text (`reproduction`). Torch-free and free of plotting.
- `render/`: the figures and tables: a notebook's run (`notebook`: log, artefact, record), styling and footers
  (`style`), n/a panels and footnotes (`na`), the table writers (`tables`) over the LaTeX layout engine
  (`latex`) and its compile check (`latex_check`), the reproduction report written with its z-score figure
  (`reproduction`) and each paper's helpers.
- `commands/`: the command lines (`python -m reprokit.report.commands.<name>`, or `reprokit <name>`): the
  reproduction report, the README's glance, builds from part of a grid, the archive, publishing a build
  (provenance), the compute spent, the seed spread, the aggregate rule's command and the LaTeX check.
"""
