# One job per grid cell. Ask for a cell's metrics.json to run exactly that cell (add --force to run a
# finished one again), e.g.
#   snakemake --cores 1 --force results/quick/fig2a/method~partitioned/n_inputs~15/seed~0/metrics.json
# A cell may depend on other cells' results (its plan's `required_cells`): they run first.
# Everything here asks the package (reprokit.plan.job.cell_job, torch-free, also what
# benchmarks/run_cells.py runs); the cell itself gets the resolved variant paths and upstream results.

from reprokit.budget import runtime_minutes


_JOBS = {}


def kind_of(cell):
    try:
        return plan_of_kind(cell.kind)
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


def job_of(wildcards):
    """The cell's job (reprokit.plan.job.cell_job: cell JSON, context, variant files, checkpoint), built once."""
    cell = cell_of(wildcards)
    key = id(cell)  # cells live as long as the DAG (cell_of caches them)
    if key not in _JOBS:
        try:
            _JOBS[key] = cell_job(cell, config, grid)
        except ConfigError as err:
            raise WorkflowError(str(err)) from None
    return _JOBS[key]


def cell_variants(wildcards):
    return list(job_of(wildcards).variants.values())


def cell_upstream_inputs(wildcards):
    return list(job_of(wildcards).upstream.values())


def cell_runtime(wildcards):
    # SLURM wall time (minutes): the cost model's estimate of this cell x 1.5 + 10 min (reprokit.budget;
    # `python -m reprokit.budget` prints the totals). Torch-free, priced from data/step_costs.tsv.
    return runtime_minutes(cell_of(wildcards), config)


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
    params:
        # upstream results reach the cell as settings["_inputs"] = {name: metrics.json}
        cell=lambda w: shlex.quote(json.dumps(job_of(w).cell)),
        context=lambda w: shlex.quote(json.dumps(job_of(w).context)),
        variants=lambda w: shlex.quote(json.dumps(job_of(w).variants)),
        checkpoint=lambda w: job_of(w).checkpoint,
        checkpoint_every=config["run"]["checkpoint_every"],
    threads: config["run"]["threads_per_cell"]
    resources:
        runtime=cell_runtime,
        # a cell is one process with `threads` intra-op threads (no data-loading workers)
        cpus_per_task=lambda wildcards, threads: threads,
    shell:
        "python -m reprokit.cell run --cell {params.cell} --context {params.context} --variants {params.variants} "
        "--out $(dirname {output.metrics}) --checkpoint {params.checkpoint} "
        "--checkpoint-every {params.checkpoint_every} --threads {threads} > {log} 2>&1"
