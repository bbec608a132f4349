# Each table and figure is built by its own notebook (workflow/notebooks/<notebook>, jupytext
# py:percent) from the experiments' tidy CSVs. One rule per artefact in config `artefacts:`; the
# notebook gets `snakemake.input[<experiment>]`, `snakemake.input[<experiment>_curves]` and
# `snakemake.output[pdf|png|tex]`.


def artefact_inputs(name):
    exps = config["artefacts"][name]["experiments"]
    return {e: experiment_csv(e) for e in exps} | {f"{e}_curves": f"{RESULTS}/{SCALE}/{e}_curves.csv" for e in exps}


def artefact_outputs(name):
    spec = config["artefacts"][name]
    category = "Partitioned networks" if spec["paper"] == "partitioned" else "BALI"
    caption = workflow.source_path(f"../report/{name}.rst")
    outs = {}
    for ext in spec["outputs"]:
        path = f"figures/{name}.{ext}"
        outs[ext] = report(path, category=category, caption=caption) if ext in ("pdf", "png") else path
    return outs


for _name, _spec in config["artefacts"].items():

    rule:
        name:
            f"artefact_{_name}"
        localrule: True
        input:
            **artefact_inputs(_name),
        output:
            **artefact_outputs(_name),
        log:
            f"{LOGS}/artefacts/{_name}.log",
        script:
            f"../notebooks/{_spec['notebook']}"
