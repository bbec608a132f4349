# The inputs and outputs of each artefact's rule (workflow/rules/artefacts.smk), as functions only
# (snakemake --lint wants rules and functions in separate files). The Snakefile includes this after
# common.smk and before the rules.


def artefact_inputs(name):
    # experiments may be empty (artefacts rendered from code or from `data` files in the repo)
    # its own experiments, then those its claims read beyond them (each figure and table states its claims' verdicts)
    exps = config["artefacts"][name]["experiments"]
    exps = exps + experiments_read(
        config["artefacts"][name], name, config["experiments"]
    )
    data = config["artefacts"][name].get("data") or {}
    numbers = paper_numbers_file(config["artefacts"][name]["paper"])
    own = (
        {"paper_numbers": numbers}
        if numbers and name in PAPER_DOCS[numbers]["artefacts"]
        else {}
    )
    return (
        {e: experiment_csv(e) for e in exps}
        | {f"{e}_curves": f"{RESULTS}/{SCALE}/{e}_curves.csv" for e in exps}
        | own
        | dict(data)
    )


def artefact_outputs(name):
    # Figures go into the HTML report (`snakemake --report`) as they are; a table as the HTML rendering its
    # notebook's write_table (reprokit.report.render.tables) writes next to the .tex. Each needs workflow/report/<name>.rst.
    spec = config["artefacts"][name]
    category = "Partitioned networks" if spec["paper"] == "partitioned" else "BALI"
    caption = workflow.source_path(f"../report/{name}.rst")
    outs = {}
    for ext in spec["outputs"]:
        path = f"figures/{name}.{ext}"
        # (a line must not start with `report(`: Snakemake's parser takes it for the `report:` directive)
        shown = ext in ("pdf", "png")
        outs[ext] = report(path, category=category, caption=caption) if shown else path
    if "tex" in spec["outputs"]:
        outs["html"] = report(
            f"figures/{name}.html", category=category, caption=caption
        )
    return outs
