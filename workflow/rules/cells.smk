# One job per grid cell. Ask for a cell's metrics.json to run exactly that cell (add --force to run a
# finished one again), e.g.
#   snakemake --cores 1 --force results/quick/fig2a/method~partitioned/n_inputs~15/seed~0/metrics.json
# A cell may depend on other cells' results (its plan's `required_cells`): they run first.
# Everything here asks the package (reprokit.job.cell_job, torch-free, also what
# benchmarks/run_cells.py runs); the cell itself gets the resolved variant paths and upstream results.
# The functions and settings used here (job_of, cell_runtime, cell_group, PACK, ...) are in
# workflow/rules/common_cells.smk.


onstart:
    # the main Snakemake process, once the DAG is built (not in a dry run, not inside SLURM jobs)
    if PACK is not None:
        for gid in _PACKED_HERE:
            write_pack_manifest(gid)
    _STARTED.append(True)


CELL_ARGS = (
    "--cell {params.cell} --context {params.context} --variants {params.variants} "
    "--out $(dirname {output.metrics}) --checkpoint {params.checkpoint} "
    "--checkpoint-every {params.checkpoint_every} --threads {threads} > {log} 2>&1"
)


rule cell:
    input:
        cell_variants,
        cell_upstream_inputs,
    output:
        metrics=f"{RESULTS}/{{scale}}/{{experiment}}/{{coords}}/metrics.json",
        curve=f"{RESULTS}/{{scale}}/{{experiment}}/{{coords}}/curve.csv",
        config=f"{RESULTS}/{{scale}}/{{experiment}}/{{coords}}/config.json",
    log:
        f"{LOGS}/{{scale}}/{{experiment}}/{{coords}}.log",
    # Snakemake's own measurement of the job (wall s, max RSS, CPU time): logs/benchmarks/<scale>/<exp>/<coords>.tsv
    benchmark:
        f"{LOGS}/benchmarks/{{scale}}/{{experiment}}/{{coords}}.tsv"
    # SLURM only (ignored by local runs): cells of one group id are one SLURM job when the profile packs
    group:
        cell_group
    conda:
        "../envs/reprokit.yaml"
    threads: config["run"]["threads_per_cell"]
    resources:
        **cell_slurm_resources(),
        runtime=cell_runtime,
        # a cell is one process with `threads` intra-op threads (no data-loading workers); packed: at_once of them
        cpus_per_task=cell_cpus,
    params:
        # upstream results reach the cell as settings["_inputs"] = {name: metrics.json}
        cell=lambda w: shlex.quote(json.dumps(job_of(w).cell)),
        context=lambda w: shlex.quote(json.dumps(job_of(w).context)),
        variants=lambda w: shlex.quote(json.dumps(job_of(w).variants)),
        checkpoint=lambda w: job_of(w).checkpoint,
        checkpoint_every=config["run"]["checkpoint_every"],
    # packed, a cell runs through reprokit.packing (alone, or outside SLURM, it is exactly reprokit.cell run)
    shell:
        (
            "python -m reprokit.packing run --pack '{resources.pack}' "
            if PACK is not None
            else "python -m reprokit.cell run "
        )
        + CELL_ARGS
