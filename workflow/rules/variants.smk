# Dataset variants (subsets, rotated copies, chunk assignments, federated splits): built once,
# shared by every cell that names them. The file name encodes the variant and its seed.
rule variant:
    output:
        f"{VARIANTS}/{{dataset}}/{{filename}}",
    log:
        f"{LOGS}/variants/{{dataset}}/{{filename}}.log",
    params:
        context=shlex.quote(json.dumps(CONTEXT)),
    shell:
        "python -m reprokit.cell variant --dataset {wildcards.dataset} --out {output} "
        "--context {params.context} > {log} 2>&1"
