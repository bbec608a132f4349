# One job per grid cell. Ask for a cell's metrics.json to run exactly that cell (add --force to run a
# finished one again), e.g.
#   snakemake --cores 1 --force results/quick/fig2a/method~partitioned/n_inputs~15/seed~0/metrics.json
# A cell may depend on other cells' results (its plan's `required_cells`): they run first.
# Everything here asks the kind's plan (reprokit.plan, torch-free); the cell itself gets the resolved
# variant paths and upstream results and recomputes nothing.

from reprokit.budget import runtime_minutes
from reprokit.config import format_value


_UPSTREAM = {}
_VARIANTS = {}


def kind_of(cell):
    try:
        return plan_of_kind(cell.kind)
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


def cell_variant_paths(cell):
    """{name: path} of the variant files the cell reads (its plan's required_variants)."""
    key = id(cell)  # cells live as long as the DAG (cell_of caches them): no rel_dir formatting per call
    if key not in _VARIANTS:
        _VARIANTS[key] = {name: str(variant_path(VARIANTS, d, f))
                          for name, (d, f) in kind_of(cell).required_variants(cell).items()}
    return _VARIANTS[key]


def cell_variants(wildcards):
    return list(cell_variant_paths(cell_of(wildcards)).values())


def cell_upstream(cell):
    """{name: metrics.json} of the cells this cell reads (a kind's optional `required_cells(cell)`,
    {name: (experiment, coords)}, e.g. a retrain cell reading the hyperparameters another cell found)."""
    key = id(cell)
    if key in _UPSTREAM:
        return _UPSTREAM[key]
    out = {}
    for name, (exp, coords) in kind_of(cell).required_cells(cell).items():
        try:
            src = grid(exp, cell.scale)
            missing = [a for a in src.axes if a not in coords]
            if missing:
                raise ConfigError(f"cell {cell.rel_dir} needs a cell of '{exp}' but does not give its axes {missing}")
            rel = "/".join(f"{a}~{format_value(coords[a])}" for a in src.axes)
            out[name] = f"{cell_dir(src.parse(rel))}/metrics.json"
        except ConfigError as err:
            raise WorkflowError(f"{cell.rel_dir}: input '{name}': {err}") from None
    _UPSTREAM[key] = out
    return out


def cell_upstream_inputs(wildcards):
    return list(cell_upstream(cell_of(wildcards)).values())


def cell_json(wildcards):
    # Upstream results reach the cell as settings["_inputs"] = {name: path of metrics.json}.
    # The plan's `cell_settings(cell)` keeps only the settings the cell uses, so a change elsewhere
    # (e.g. another method's block) does not mark the cell's parameters changed and re-run it.
    cell = cell_of(wildcards)
    d = cell.to_dict()
    d["settings"] = kind_of(cell).cell_settings(cell)
    upstream = cell_upstream(cell)
    if upstream:
        d["settings"] = {**d["settings"], "_inputs": upstream}
    return shlex.quote(json.dumps(d))


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
        cell=cell_json,
        context=shlex.quote(json.dumps(CELL_CONTEXT)),
        variants=lambda w: shlex.quote(json.dumps(cell_variant_paths(cell_of(w)))),
        checkpoint=lambda w: f"{CHECKPOINTS}/{w.scale}/{w.experiment}/{w.coords}/checkpoint.pt",
        checkpoint_every=config["run"].get("checkpoint_every", 500),
    threads: config["run"].get("threads_per_cell", 1)
    resources:
        runtime=cell_runtime,
        # a cell is one process with `threads` intra-op threads (no data-loading workers)
        cpus_per_task=lambda wildcards, threads: threads,
    shell:
        "python -m reprokit.cell run --cell {params.cell} --context {params.context} --variants {params.variants} "
        "--out $(dirname {output.metrics}) --checkpoint {params.checkpoint} "
        "--checkpoint-every {params.checkpoint_every} --threads {threads} > {log} 2>&1"
