# The reproduction report: every number the papers state next to ours, and a verdict per claim, computed
# by reprokit.report.commands.reproduction from the experiments' results at this scale (config/papers/*.yaml hold
# the papers' numbers and claims). Also `python -m reprokit.report.commands.reproduction` on partial results.

PAPER_FILES = sorted(str(p) for p in Path("config/papers").glob("*.yaml"))
# their claims' reasons, merged in by claim id when a paper file is loaded (not passed as paper files)
PAPER_REASONS = sorted(str(p) for p in Path("config/papers/reasons").glob("*.yaml"))
REPORT_EXPERIMENTS = sorted(
    {e for spec in config["artefacts"].values() for e in spec["experiments"]}
)


rule reproduction_report:
    input:
        csvs=[experiment_csv(e) for e in REPORT_EXPERIMENTS],
        papers=PAPER_FILES,
        reasons=PAPER_REASONS,
    output:
        md=report(
            "figures/reproduction.md",
            category="Reproduction report",
            caption="../report/reproduction.rst",
        ),
        # one dot per compared number (z_paper), written beside the report by the same command
        z=report(
            "figures/reproduction_z.png",
            category="Reproduction report",
            caption="../report/reproduction.rst",
        ),
    log:
        f"{LOGS}/artefacts/reproduction.log",
    localrule: True
    conda:
        "../envs/reprokit.yaml"
    params:
        scale=SCALE,
        # <results> of the inputs' <results>/<scale>/<experiment>.csv (as in rule aggregate)
        results=lambda w, input: (
            str(Path(input.csvs[0]).parent.parent) if input.csvs else RESULTS
        ),
        expected=lambda w: shlex.quote(
            json.dumps(
                {e: sum(1 for _ in grid(e, SCALE).cells()) for e in REPORT_EXPERIMENTS}
            )
        ),
        artefacts=shlex.quote(json.dumps(config["artefacts"])),
    shell:
        "python -m reprokit.report.commands.reproduction --scale {params.scale} --results {params.results} --out {output.md} "
        "--papers {input.papers} --expected {params.expected} --artefacts {params.artefacts} --no-archive "
        "> {log} 2>&1"
