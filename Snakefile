# Rebuilds every table and figure of the two papers. See README.md.
#   snakemake --cores 2                              whole reproduction at the default (quick) scale
#   snakemake --cores 2 --config scale=test figures/fig2.pdf
#   snakemake --profile slurm --config scale=paper   every cell as its own SLURM job
from snakemake.utils import min_version

min_version("8.20")


import glob


configfile: "config/config.yaml"


# Every experiment family has its own file (artefacts + experiment grids), merged in name order.
for _path in sorted(glob.glob("config/experiments/*.yaml")):

    configfile: _path



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
