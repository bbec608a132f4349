# One tidy CSV (and one curves CSV) per experiment and scale; unavailable cells appear as n/a rows.
# A shell command, not a `run:` block: snakemake runs each `run:` job in a new snakemake process that
# parses the whole workflow again (about 8 s a job here); this command reads no config.


rule aggregate:
    input:
        lambda w: available_cell_outputs(w.experiment, w.scale),
    output:
        table=f"{RESULTS}/{{scale}}/{{experiment}}.csv",
        curves=f"{RESULTS}/{{scale}}/{{experiment}}_curves.csv",
    log:
        f"{LOGS}/aggregate/{{scale}}/{{experiment}}.log",
    conda:
        "../envs/reprokit.yaml"
    params:
        # the results folder, <results> of the table's <results>/<scale>/<experiment>.csv (from the job's own
        # paths, not RESULTS: snakemake --lint, and right where a storage plugin maps paths)
        results=lambda w, output: str(Path(output.table).parent.parent),
        spec=lambda w: shlex.quote(json.dumps(config["experiments"][w.experiment])),
        unavailable=lambda w: shlex.quote(
            json.dumps(unavailable_cells(w.experiment, w.scale, wait=False))
        ),
        reasons=lambda w: shlex.quote(
            json.dumps(unavailable_reasons(w.experiment, w.scale))
        ),
    shell:
        "python -m reprokit.report.commands.aggregate --experiment {wildcards.experiment} --scale {wildcards.scale} "
        "--spec {params.spec} --results {params.results} --unavailable {params.unavailable} --reasons {params.reasons} "
        "--table {output.table} --curves {output.curves} > {log} 2>&1"
