"""benchmarks/build_time_split.py: a build's job times from Snakemake's log, cells' loop against overhead."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_time_split", REPO / "benchmarks" / "build_time_split.py")
bts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bts)

LOG = """Select jobs to execute...
[Thu Nov 26 08:17:22 2026]
localrule cell:
    output: results/quick/e/a~1/metrics.json
    jobid: 41
    wildcards: scale=quick, experiment=e, coords=a~1
    resources: tmpdir=/tmp
[Thu Nov 26 08:17:22 2026]
localrule variant:
    jobid: 7
    wildcards: dataset=mnist, filename=x.npz
[Thu Nov 26 08:17:23 2026]
localcheckpoint dataset:
    jobid: 9
    wildcards: dataset=cifar10
[Thu Nov 26 08:17:25 2026]
Finished jobid: 9 (Rule: dataset)
[Thu Nov 26 08:17:29 2026]
Finished jobid: 7 (Rule: variant)
1 of 3 steps (33%) done
[Thu Nov 26 08:17:36 2026]
Finished jobid: 41 (Rule: cell)
[Thu Nov 26 08:17:36 2026]
rule artefact_fig2:
    jobid: 3
[Thu Nov 26 08:17:56 2026]
Finished jobid: 3 (Rule: artefact_fig2)
"""


def test_jobs_rules_and_the_cells_loop_against_overhead(tmp_path):
    cell = tmp_path / "quick" / "e" / "a~1"
    cell.mkdir(parents=True)
    (cell / "metrics.json").write_text(json.dumps({"seconds_this_run": 10.5}))
    jobs = bts.parse_log(LOG.splitlines(keepends=True))
    assert [(j["jobid"], j["rule"]) for j in jobs] == [
        ("9", "dataset"),
        ("7", "variant"),
        ("41", "cell"),
        ("3", "artefact_fig2"),
    ]
    out = bts.split(jobs, tmp_path)
    assert out["per_rule"] == {"dataset": 2.0, "variant": 7.0, "cell": 14.0, "artefact_fig2": 20.0}
    assert out["wall_s"] == 34.0 and out["cells"] == 1
    assert out["cell_loop_s"] == 10.5 and out["cell_overhead_s"] == 3.5
    assert out["per_experiment"] == {"e": 14.0}


def test_a_job_that_never_finished_is_not_counted():
    jobs = bts.parse_log(
        LOG.replace("Finished jobid: 3 (Rule: artefact_fig2)", "Error in rule artefact_fig2").splitlines()
    )
    assert [j["jobid"] for j in jobs] == ["9", "7", "41"]
