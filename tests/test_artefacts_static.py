"""Artefacts without experiment cells: Tables 5-7 (transcribed in config/papers/partitioned.yaml), Table 9 (model definition),
Fig. 4 (the partition library's assignments); and the artefact rules for an empty `experiments` list."""

import re
import runpy
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from reprokit.config import load_config
from reprokit.models.registry import build_model, describe_architecture
from reprokit.partition import exact_counts, partition
from reprokit.report.render import style

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "workflow" / "notebooks"
PAPER = REPO / "config" / "papers" / "partitioned.yaml"
OWN_CONFIG = REPO / "config" / "experiments" / "partitioned_tables.yaml"
STATIC = ("table5", "table6", "table7", "table9", "fig4")


def run_notebook(name, inputs, outputs, scale="quick"):
    fake = types.SimpleNamespace(input=inputs, output=outputs, config={"scale": scale})
    return runpy.run_path(str(NOTEBOOKS / name), init_globals={"snakemake": fake})


def tex_rows(tex: str) -> list[list[str]]:
    body = tex.split(r"\midrule")[1].split(r"\bottomrule")[0]
    return [[c.strip() for c in line.rstrip("\\ ").split("&")] for line in body.strip().splitlines()]


def test_static_artefacts_have_no_experiments_and_validate():
    cfg = load_config(
        [REPO / "config" / "config.yaml", OWN_CONFIG], REPO / "workflow" / "schemas" / "config.schema.yaml"
    )
    for name in STATIC:
        spec = cfg["artefacts"][name]
        assert spec["experiments"] == []
        assert (NOTEBOOKS / spec["notebook"]).exists()
        for path in (spec.get("data") or {}).values():
            assert (REPO / path).exists()
    assert (REPO / "workflow" / "report" / "fig4.rst").exists()


# -- Table 9 ------------------------------------------------------------------------------------------


def test_table9_rows_are_the_models_layers(tmp_path):
    out = tmp_path / "table9.tex"
    run_notebook("table9.py", {}, {"tex": str(out)})
    rows = tex_rows(out.read_text())
    model = build_model("mnist_cnn")
    layers = describe_architecture(model, input_shape=(1, 28, 28))
    assert len(rows) == len(layers) == 7
    for row, layer in zip(rows, layers):
        assert row[0] == layer["layer"]
        assert row[1] == layer["spec"]
        assert row[3].replace(",", "") == str(layer["params"])
    # the rows follow the module's own leaves (convs, pools, linears) in order
    kinds = [type(m) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.MaxPool2d, nn.Linear))]
    expected = {nn.Conv2d: "2D convolution", nn.MaxPool2d: "Max pooling", nn.Linear: "Fully connected"}
    assert [r[0] for r in rows] == [expected[k] for k in kinds]
    assert rows[-1][1] == "units=10, activation=Softmax" and rows[0][2] == "20x28x28"
    assert "1,276,630 parameters" in out.read_text()


def test_table9_model_matches_the_papers_transcription():
    paper = yaml.safe_load(PAPER.read_text())["artefacts"]["table9"]
    layers = describe_architecture(build_model("mnist_cnn"), input_shape=(1, 28, 28))
    printed = [(paper["rows"][k]["label"], v["Specification"]) for k, v in paper["numbers"].items()]
    assert printed == [(layer["layer"], layer["spec"]) for layer in layers]


# -- Tables 5-7 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["table5", "table6", "table7"])
def test_complexity_tables_render_every_transcribed_cell(tmp_path, name):
    spec = yaml.safe_load(PAPER.read_text())["artefacts"][name]
    out = tmp_path / f"{name}.tex"
    run_notebook(f"{name}.py", {"paper_numbers": str(PAPER)}, {"tex": str(out)})
    tex = out.read_text()
    rows = tex_rows(tex)
    if name == "table5":
        assert [r[0] for r in rows] == [f"${sym}$" for sym in spec["numbers"]]
    else:
        assert [r[0] for r in rows] == list(spec["numbers"])
        for row, cells in zip(rows, spec["numbers"].values()):
            for cell, col in zip(row[1:], spec["columns"]):
                assert f"${cells[col]}$" in cell
    assert "transcribed from" in tex and "not computed" in tex and "TEST DATA" not in tex


def test_table7_colours_the_laplace_hyperparameter_memory(tmp_path):
    out = tmp_path / "t7.tex"
    run_notebook("table7.py", {"paper_numbers": str(PAPER)}, {"tex": str(out)}, scale="test")
    rows = tex_rows(out.read_text())
    laplace = rows[-1]
    assert laplace[0] == "Diff. Laplace"
    assert not laplace[1].startswith(r"\textcolor") and all(c.startswith(r"\textcolor{red}") for c in laplace[2:])
    assert "D^2" in laplace[2]
    assert "TEST DATA" in out.read_text()


# -- Fig. 4 ------------------------------------------------------------------------------------------


def test_fig4_draws_the_librarys_assignments(tmp_path, monkeypatch):
    captured = {}

    def capture(fig, scale, note, pdf, png):
        captured.update(fig=fig, scale=scale, note=note)

    monkeypatch.setattr(style, "finish_figure", capture)
    ns = run_notebook("fig4.py", {}, {"pdf": str(tmp_path / "f.pdf"), "png": str(tmp_path / "f.png")}, scale="test")
    fig = captured["fig"]
    axes = [ax for ax in fig.axes if ax.images]
    assert len(axes) == 2
    for ax, scheme in zip(axes, ("random", "node")):
        drawn = np.asarray(ax.images[0].get_array())
        # independently rebuild the library's assignment of an nn.Linear(5, 6) with the notebook's settings
        torch.manual_seed(ns["SEED"])
        pm = partition(nn.Linear(5, 6), ns["PROPORTIONS"], scheme=scheme, seed=ns["SEED"])
        expected = pm.assignments["weight"].numpy()
        assert drawn.shape == (6, 5)
        np.testing.assert_array_equal(drawn, expected)
        # the numbers printed in the cells are the same ids
        texts = [int(t.get_text()) for t in ax.texts if t.get_text().isdigit()][:30]
        np.testing.assert_array_equal(np.array(texts).reshape(6, 5), expected)
        counts = np.bincount(expected.ravel(), minlength=4)[1:]
        if scheme == "random":
            assert counts.tolist() == exact_counts(30, ns["PROPORTIONS"]).tolist()
        else:
            assert (expected == expected[:, :1]).all()  # whole output rows share a partition
    assert captured["scale"] == "test"


# -- through Snakemake ---------------------------------------------------------------------------------


def make_workdir(tmp_path: Path) -> Path:
    """A copy of the workflow with only this family's config (other families may be work in progress)."""
    work = tmp_path / "wf"
    (work / "config" / "experiments").mkdir(parents=True)
    shutil.copy(REPO / "Snakefile", work / "Snakefile")
    shutil.copytree(REPO / "workflow", work / "workflow", ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
    shutil.copy(REPO / "config" / "config.yaml", work / "config" / "config.yaml")
    shutil.copy(OWN_CONFIG, work / "config" / "experiments" / OWN_CONFIG.name)
    shutil.copytree(REPO / "config" / "papers", work / "config" / "papers")
    return work


def snakemake(work, *args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=work, capture_output=True, text=True, timeout=timeout
    )


def test_empty_experiment_list_schedules_no_cells(tmp_path):
    work = make_workdir(tmp_path)
    targets = ["figures/table5.tex", "figures/table9.tex", "figures/fig4.pdf"]
    res = snakemake(work, "-n", *targets, "--config", "scale=test")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = set(re.findall(r"^rule (\w+):", res.stdout, flags=re.M))
    assert jobs == {"artefact_table5", "artefact_table9", "artefact_fig4"}, res.stdout[-2000:]


@pytest.mark.slow
def test_each_artefact_rule_runs_its_own_notebook(tmp_path):
    # Regression: the script path of rules made in a loop must not late-bind to the last artefact's notebook.
    work = make_workdir(tmp_path)
    res = snakemake(work, "--cores", "2", "figures/table5.tex", "figures/table9.tex", "--config", "scale=test")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Notation for complexity analysis" in (work / "figures" / "table5.tex").read_text()
    assert "CNN architecture for the MNIST experiments" in (work / "figures" / "table9.tex").read_text()
    assert "TEST DATA" in (work / "figures" / "table9.tex").read_text()
    # the test-scale (watermarked) build is not reused at another scale although no input names the scale
    res = snakemake(work, "-n", "figures/table9.tex", "--config", "scale=quick")
    assert res.returncode == 0 and "rule artefact_table9:" in res.stdout, res.stdout[-2000:]
    res = snakemake(work, "-n", "figures/table9.tex", "--config", "scale=test")
    assert res.returncode == 0 and "rule artefact_table9:" not in res.stdout, res.stdout[-2000:]
