# One tidy CSV (and one curves CSV) per experiment and scale; unavailable cells appear as n/a rows.


rule aggregate:
    input:
        lambda w: available_cell_outputs(w.experiment, w.scale),
    output:
        table=f"{RESULTS}/{{scale}}/{{experiment}}.csv",
        curves=f"{RESULTS}/{{scale}}/{{experiment}}_curves.csv",
    run:
        from reprokit.report.aggregate import write_aggregate

        cells = list(grid(wildcards.experiment, wildcards.scale).cells())
        write_aggregate(cells, RESULTS, output.table, output.curves,
                        unavailable_cells(wildcards.experiment, wildcards.scale, wait=False),
                        reasons=unavailable_reasons(wildcards.experiment, wildcards.scale),
                        axes=list(grid(wildcards.experiment, wildcards.scale).axes))
