# Rebuilds every table and figure of the two papers. See README.md.
#   snakemake --cores 2                              whole reproduction at the default (quick) scale
#   snakemake --cores 2 --config scale=test figures/fig2.pdf
#   snakemake --profile slurm --config scale=paper   paper scale on SLURM (short cells packed per job: docs/slurm.md)
from snakemake.utils import min_version

min_version("8.20")


# The software every rule runs, used only with --sdm (without it both are ignored and every rule runs
# with the python that runs snakemake, as before). `--sdm conda`: each rule's `conda:`, the env file
# workflow/envs/reprokit.yaml (environment.yml's packages and pins, plus this repository's package).
# `--sdm apptainer`: this image, built from that env file by workflow/envs/Containerfile; replace the
# placeholder with where you pushed it, or with the path of a local .sif. docs/slurm.md.
container: "docker://ghcr.io/change-me/reprokit:0.1.0"


# The config: config/config.yaml, then config/experiments/*.yaml in name order (one file per experiment
# family), then --config / --configfile on top; typed and validated by reprokit.config.load_pipeline_config
# (workflow/rules/common.smk), the loader every other entry point uses too.


include: "workflow/rules/common.smk"
# functions only, for the rules of cells.smk and artefacts.smk (snakemake --lint keeps them apart)
include: "workflow/rules/common_cells.smk"
include: "workflow/rules/common_artefacts.smk"
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
