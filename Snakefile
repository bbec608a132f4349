# Rebuilds every table and figure of the two papers. See README.md.
#   snakemake --cores 2                              whole reproduction at the default (quick) scale
#   snakemake --cores 2 --config scale=test figures/fig2.pdf
#   snakemake --profile slurm --config scale=paper   every cell as its own SLURM job
from snakemake.utils import min_version

min_version("8.20")


# The config: config/config.yaml, then config/experiments/*.yaml in name order (one file per experiment
# family), then --config / --configfile on top; typed and validated by reprokit.config.load_pipeline_config
# (workflow/rules/common.smk), the loader every other entry point uses too.


include: "workflow/rules/common.smk"
include: "workflow/rules/variants.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/artefacts.smk"
include: "workflow/rules/report.smk"


# Only training cells go to the cluster; everything else is quick and runs where snakemake runs
# (artefact rules are declared local where they are made, in workflow/rules/artefacts.smk).
localrules:
    all,
    dataset,
    variant,
    aggregate,


rule all:
    input:
        all_artefact_outputs(),
        "figures/reproduction.md",
