"""Through Snakemake (dry run): a retrain cell (Figs. 7-9) depends on the partitioned cell whose
found ranges it reads, and gets that cell's metrics.json as settings._inputs."""

import subprocess
import sys

import pytest

from test_pipeline import make_workdir


@pytest.mark.slow
def test_retrain_cell_depends_on_its_source_cell(tmp_path):
    work = make_workdir(tmp_path)
    coords = "dataset~mnist/rotated~true/method~{}/param_proportions~1-8/chunk_proportions~8-1/seed~0"
    target = f"results/test/retrain_rotmnist_c2/{coords.format('retrain')}/metrics.json"
    source = f"results/test/sens_rotmnist_c2/{coords.format('partitioned')}/metrics.json"
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", target, "--config", "scale=test"],
                         cwd=work, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert source in out  # the source cell is scheduled first ...
    assert f'"_inputs": {{"found": "{source}"}}' in out  # ... and handed to the retrain cell
