"""Through Snakemake (dry run): a retrain cell (Figs. 7-9) depends on the partitioned cell whose
found ranges it reads, and gets that cell's metrics.json as settings._inputs."""

import json
import re
import shlex
import subprocess
import sys

import pytest
from test_pipeline import make_workdir


def dry_run_jobs(text: str) -> list[dict]:
    """The jobs of `snakemake -n -p` output: {rule, input: [...], output: [...], shell: argv}."""
    jobs = []
    for block in re.split(r"^rule ", text, flags=re.M)[1:]:
        job = {"rule": block.split(":", 1)[0], "input": [], "output": [], "shell": []}
        for line in block.splitlines():
            key, _, value = line.strip().partition(": ")
            if key in ("input", "output"):
                job[key] = value.split(", ")
            elif key == "Shell command":
                job["shell"] = shlex.split(value)
        jobs.append(job)
    return jobs


@pytest.mark.slow
def test_retrain_cell_depends_on_its_source_cell(tmp_path):
    work = make_workdir(tmp_path)
    coords = "dataset~mnist/rotated~true/method~{}/param_proportions~1-8/chunk_proportions~8-1/seed~0"
    target = f"results/test/retrain_rotmnist_c2/{coords.format('retrain')}/metrics.json"
    source = f"results/test/sens_rotmnist_c2/{coords.format('partitioned')}/metrics.json"
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", target, "--config", "scale=test"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = {out: job for job in dry_run_jobs(res.stdout) for out in job["output"]}
    assert jobs[source]["rule"] == "cell"  # the source cell is a job of this run ...
    assert source in jobs[target]["input"]  # ... that the retrain cell waits for ...
    argv = jobs[target]["shell"]
    cell = json.loads(argv[argv.index("--cell") + 1])
    assert cell["experiment"] == "retrain_rotmnist_c2" and cell["coords"]["method"] == "retrain"
    assert cell["settings"]["_inputs"] == {"found": source}  # ... and whose metrics.json it is handed
