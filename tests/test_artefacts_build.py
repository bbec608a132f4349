"""Every artefact of a config family builds through Snakemake at test scale, from the real data mirror.

One snakemake call per family (cells, aggregation and every table/figure notebook): all outputs exist,
are not empty, and test-scale tables carry the TEST DATA mark. The family's artefact list is read from
its config file, so an artefact added to the config is built here without editing the test.
"""

from pathlib import Path

import pytest
import yaml

from test_pipeline import make_workdir, snakemake

REPO = Path(__file__).resolve().parents[1]

FAMILIES = {  # family -> the config files whose artefacts it builds
    "bali": ["bali_regression.yaml", "bali_classification.yaml"],
    "partitioned_mnist": ["mnist_invariance.yaml", "partitioned_tables.yaml"],
    "federated": ["federated.yaml"],
}


def artefact_outputs(files) -> list[str]:
    outs = []
    for name in files:
        cfg = yaml.safe_load((REPO / "config" / "experiments" / name).read_text())
        for art, spec in cfg.get("artefacts", {}).items():
            outs += [f"figures/{art}.{ext}" for ext in spec["outputs"]]
    return outs


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_artefact_of_a_family_builds_at_test_scale(tmp_path, shared_data, family):
    outputs = artefact_outputs(FAMILIES[family])
    assert outputs, f"no artefacts declared for {family}"
    work = make_workdir(tmp_path)
    res = snakemake(work, "--cores", "2", *outputs, "--config", "scale=test", timeout=1800)
    assert res.returncode == 0, res.stdout[-4000:]
    for out in outputs:
        path = work / out
        assert path.is_file() and path.stat().st_size > 0, out
        if path.suffix == ".tex":
            assert "TEST DATA" in path.read_text(), f"{out} lacks the test-scale mark"
