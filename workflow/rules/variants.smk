# Datasets: one `dataset` job per dataset that is in no local mirror nor the cache (and only with
# data.download on). It fetches the files into the cache (each http(s) mirror, then the official URLs),
# verifies them, and writes data/cache/status/<dataset>.json: available, or n/a with the reason (no
# network, HTTP error), which the dataset's cells then show as n/a rows. A checkpoint: the DAG is
# re-evaluated after it, so the cells of a dataset that could not be had are not scheduled. A failed
# fetch stays recorded (runs do not rebuild everything each time the network is down): to try again,
# `snakemake --forcerun dataset` (or delete the status file). A checksum mismatch fails the job.
checkpoint dataset:
    output:
        f"{CACHE}/status/{{dataset}}.json",
    log:
        f"{LOGS}/data/{{dataset}}.log",
    conda:
        "../envs/reprokit.yaml"
    params:
        context=shlex.quote(json.dumps(CONTEXT)),
    shell:
        "python -m reprokit.cell fetch --dataset {wildcards.dataset} --out {output} "
        "--context {params.context} > {log} 2>&1"


# Dataset variants (subsets, rotated copies, chunk assignments, federated splits): built once,
# shared by every cell that names them. The file name encodes the variant and its seed.
rule variant:
    output:
        f"{VARIANTS}/{{dataset}}/{{filename}}",
    log:
        f"{LOGS}/variants/{{dataset}}/{{filename}}.log",
    conda:
        "../envs/reprokit.yaml"
    params:
        context=shlex.quote(json.dumps(CONTEXT)),
    shell:
        "python -m reprokit.cell variant --dataset {wildcards.dataset} --out {output} "
        "--context {params.context} > {log} 2>&1"
