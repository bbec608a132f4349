# Each table and figure is built by its own notebook (workflow/notebooks/<notebook>, jupytext
# py:percent) from the experiments' tidy CSVs. One rule per artefact in config `artefacts:`; the
# notebook gets `snakemake.input[<experiment>]`, `snakemake.input[<experiment>_curves]`,
# `snakemake.input[<name>]` for each `data: {name: path}` file of the artefact,
# the same for each experiment its claims read beyond its own (report/verdicts/statement.py: experiments_read),
# `snakemake.input["paper_numbers"]` (config/papers/<paper>.yaml) when that file has numbers for the
# artefact, and `snakemake.output[pdf|png|tex]` (a table's `html`, its rendering for the report, is written
# by write_table beside its tex). Each notebook starts with `notebook.start_log(snakemake)`, which writes
# the rule's `log:` file (inputs, scale, outputs, warnings, a failure's traceback).
# artefact_inputs and artefact_outputs are in workflow/rules/common_artefacts.smk.


for _name, _spec in config["artefacts"].items():

    rule:
        name:
            f"artefact_{_name}"
        input:
            **artefact_inputs(_name),
        output:
            **artefact_outputs(_name),
        log:
            f"{LOGS}/artefacts/{_name}.log",
        localrule: True
        conda:
            "../envs/reprokit.yaml"
        params:
            notebook=_spec["notebook"],
            scale=SCALE,  # a change of scale re-builds artefacts whose inputs do not name it (no cells)
        # The script path is evaluated when the job runs, not here: a loop variable in it would name
        # the *last* artefact's notebook for every rule. Snakemake formats it with the rule's params.
        script:
            "../notebooks/{params.notebook}"
