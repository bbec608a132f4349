# One job per grid cell. Ask for a cell's metrics.json to (re-)run exactly that cell, e.g.
#   snakemake --cores 1 results/quick/fig2a/method~partitioned/n_inputs~15/seed~0/metrics.json


def cell_variants(wildcards):
    cell = cell_of(wildcards)
    return [str(variant_path(VARIANTS, d, f)) for d, f in kind_module(cell.kind).required_variants(cell).values()]


def cell_json(wildcards):
    return shlex.quote(json.dumps(cell_of(wildcards).to_dict()))


rule cell:
    input:
        cell_variants,
    output:
        metrics=f"{RESULTS}/{{scale}}/{{experiment}}/{{coords}}/metrics.json",
        curve=f"{RESULTS}/{{scale}}/{{experiment}}/{{coords}}/curve.csv",
        config=f"{RESULTS}/{{scale}}/{{experiment}}/{{coords}}/config.json",
    log:
        f"{LOGS}/{{scale}}/{{experiment}}/{{coords}}.log",
    params:
        cell=cell_json,
        context=shlex.quote(json.dumps(CONTEXT)),
        checkpoint=lambda w: f"{CHECKPOINTS}/{w.scale}/{w.experiment}/{w.coords}/checkpoint.pt",
        checkpoint_every=config["run"].get("checkpoint_every", 500),
    threads: config["run"].get("threads_per_cell", 1)
    shell:
        "python -m reprokit.cell run --cell {params.cell} --context {params.context} "
        "--out $(dirname {output.metrics}) --checkpoint {params.checkpoint} "
        "--checkpoint-every {params.checkpoint_every} --threads {threads} > {log} 2>&1"
