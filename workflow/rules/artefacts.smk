# Each table and figure is built by its own notebook (workflow/notebooks/<notebook>, jupytext
# py:percent) from the experiments' tidy CSVs. One rule per artefact in config `artefacts:`; the
# notebook gets `snakemake.input[<experiment>]`, `snakemake.input[<experiment>_curves]`,
# `snakemake.input[<name>]` for each `data: {name: path}` file of the artefact,
# the same for each experiment its claims read beyond its own (report/statement.py: experiments_read),
# `snakemake.input["paper_numbers"]` (config/papers/<paper>.yaml) when that file has numbers for the
# artefact, and `snakemake.output[pdf|png|tex]` (a table's `html`, its rendering for the report, is written
# by write_table beside its tex). Each notebook starts with `style.start_log(snakemake)`, which writes
# the rule's `log:` file (inputs, scale, outputs, warnings, a failure's traceback).


def artefact_inputs(name):
    # experiments may be empty (artefacts rendered from code or from `data` files in the repo)
    # its own experiments, then those its claims read beyond them (each figure and table states its claims' verdicts)
    exps = config["artefacts"][name]["experiments"]
    exps = exps + experiments_read(config["artefacts"][name], name, config["experiments"])
    data = config["artefacts"][name].get("data") or {}
    numbers = paper_numbers_file(config["artefacts"][name]["paper"])
    own = {"paper_numbers": numbers} if numbers and name in PAPER_DOCS[numbers]["artefacts"] else {}
    return ({e: experiment_csv(e) for e in exps} | {f"{e}_curves": f"{RESULTS}/{SCALE}/{e}_curves.csv" for e in exps}
            | own | dict(data))


def artefact_outputs(name):
    # Figures go into the HTML report (`snakemake --report`) as they are; a table as the HTML rendering its
    # notebook's write_table (reprokit.report.tables) writes next to the .tex. Each needs workflow/report/<name>.rst.
    spec = config["artefacts"][name]
    category = "Partitioned networks" if spec["paper"] == "partitioned" else "BALI"
    caption = workflow.source_path(f"../report/{name}.rst")
    outs = {}
    for ext in spec["outputs"]:
        path = f"figures/{name}.{ext}"
        outs[ext] = report(path, category=category, caption=caption) if ext in ("pdf", "png") else path
    if "tex" in spec["outputs"]:
        outs["html"] = report(f"figures/{name}.html", category=category, caption=caption)
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
        params:
            notebook=_spec["notebook"],
            scale=SCALE,  # a change of scale re-builds artefacts whose inputs do not name it (no cells)
        # The script path is evaluated when the job runs, not here: a loop variable in it would name
        # the *last* artefact's notebook for every rule. Snakemake formats it with the rule's params.
        script:
            "../notebooks/{params.notebook}"
