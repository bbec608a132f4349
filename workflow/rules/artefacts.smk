# Each table and figure is built by its own notebook (workflow/notebooks/*.py, jupytext py:percent)
# from the experiments' tidy CSVs.


def artefact_inputs(name):
    exps = config["artefacts"][name]["experiments"]
    return {e: experiment_csv(e) for e in exps} | {f"{e}_curves": f"{RESULTS}/{SCALE}/{e}_curves.csv" for e in exps}


rule artefact_fig2:
    input:
        **artefact_inputs("fig2"),
    output:
        pdf=report("figures/fig2.pdf", category="Partitioned networks", caption="../report/fig2.rst"),
        png="figures/fig2.png",
    log:
        f"{LOGS}/artefacts/fig2.log",
    script:
        "../notebooks/fig2.py"
