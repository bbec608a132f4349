"""Every artefact of a config family builds through Snakemake at test scale, from the real data mirror.

One snakemake call per family (cells, aggregation and every table/figure notebook): all outputs exist,
are not empty, and test-scale tables carry the TEST DATA mark. The family's artefact list is read from
its config file, so an artefact added to the config is built here without editing the test; those whose
cells are all synthetic are left to the whole build below, which builds and checks them the same way.

And the whole test-scale build (rule all: every artefact and figures/reproduction.md) without any dataset:
an empty mirror folder and no download, as on a machine without the offline mirror. Only the synthetic
cells run; every artefact still builds, and those whose cells are n/a name the missing datasets. Fig. 2 is
all synthetic, so its end-to-end checks (tests/test_pipeline.py) run on that build.
"""

import functools
import re
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from PIL import Image
from test_pipeline import check_fig2_end_to_end, make_workdir, snakemake

from reprokit.config import grid_of, load_pipeline_config
from reprokit.data.specs import SYNTHETIC
from reprokit.report.render.latex import latex_escape

REPO = Path(__file__).resolve().parents[1]

FAMILIES = {  # family -> the config files whose artefacts it builds
    "bali": ["bali_regression.yaml", "bali_classification.yaml"],
    "partitioned_mnist": ["mnist_invariance.yaml", "partitioned_tables.yaml"],
    "federated": ["federated.yaml"],
}


@functools.cache
def _test_config() -> dict:
    return load_pipeline_config(REPO, {"scale": "test"})


def synthetic_only(spec: dict) -> bool:
    """Whether every test-scale cell of an artefact's experiments uses synthetic data only: such an artefact is
    built, and its outputs checked, by the whole build without any dataset (below), so a family build leaves it out."""
    config = _test_config()
    used = {d for e in spec["experiments"] for cell in grid_of(config, e, "test").cells() for d in cell.datasets}
    return used <= set(SYNTHETIC)


def artefact_outputs(files, with_synthetic: bool = False) -> list[str]:
    outs = []
    for name in files:
        cfg = yaml.safe_load((REPO / "config" / "experiments" / name).read_text())
        for art, spec in cfg.get("artefacts", {}).items():
            if with_synthetic or not synthetic_only(spec):
                outs += [f"figures/{art}.{ext}" for ext in spec["outputs"]]
    return outs


def test_family_builds_leave_out_only_the_all_synthetic_artefacts():
    every = {o for files in FAMILIES.values() for o in artefact_outputs(files, with_synthetic=True)}
    kept = {o for files in FAMILIES.values() for o in artefact_outputs(files)}
    left_out = {Path(o).stem for o in every - kept}
    assert "bali_fig1" in left_out and "table8" in left_out  # sinc / two moons / sines; Table 8's random batches
    assert "bali_table1" not in left_out and "fig5" not in left_out and "bali_fig7" not in left_out


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
            assert path.read_text().isascii(), f"{out} is not pure-ASCII LaTeX"
    if family == "federated":  # Fig. 10 keeps a panel for each of the paper's sizes, n/a where none ran
        assert pdf_subject(work / "figures" / "fig10.pdf").count("not in this scale's grid") == 3


def pdf_subject(path: Path) -> str:
    """The /Subject of a PDF's info dictionary (where style.finish_figure puts the n/a panels' text): plain, or
    UTF-16 with a byte-order mark as matplotlib writes non-ASCII text; "" without one."""
    found = re.search(rb"/Subject \(((?:\\.|[^\\)])*)\)", path.read_bytes(), re.DOTALL)
    if not found:
        return ""
    raw = re.sub(rb"\\(.)", rb"\1", found.group(1))
    return raw[2:].decode("utf-16-be") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1")


def names(dataset: str, text: str) -> bool:
    """Whether `text` names `dataset` as a whole word ("mnist" is not named by "fashion_mnist")."""
    return re.search(rf"(?<![\w\\]){re.escape(dataset)}(?!\w)", text) is not None


def missing_datasets(work: Path, experiments) -> set[str]:
    """The datasets of the experiments' cells that are n/a (status 'unavailable' in their aggregate CSVs)."""
    names = set()
    for experiment in experiments:
        df = pd.read_csv(work / "results" / "test" / f"{experiment}.csv")
        names |= set(df.loc[df["status"] == "unavailable", "dataset"].astype(str)) if "dataset" in df else set()
    return names


@pytest.mark.slow
def test_whole_test_scale_builds_without_any_dataset(tmp_path):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    work = make_workdir(tmp_path)
    path = work / "config" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["data"]["mirrors"], cfg["data"]["download"] = [str(empty)], False  # explicit: the default may download
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))

    start = time.monotonic()
    res = snakemake(work, "--cores", "2", "--config", "scale=test", timeout=3600)  # rule all
    took = time.monotonic() - start
    assert res.returncode == 0, res.stdout[-6000:]
    print(f"whole test-scale build without data: {took:.0f} s")

    artefacts = {}
    for name in sorted((REPO / "config" / "experiments").glob("*.yaml")):
        artefacts.update(yaml.safe_load(name.read_text()).get("artefacts") or {})
    assert artefacts
    every_missing = set()
    for art, spec in artefacts.items():
        missing = missing_datasets(work, spec["experiments"])
        every_missing |= missing
        for out in (work / "figures").glob(f"{art}.*"):  # also what a rule writes beside its declared outputs
            assert out.stat().st_size > 0, f"{out.name} is empty"
        for ext in spec["outputs"]:
            out = work / "figures" / f"{art}.{ext}"
            assert out.is_file() and out.stat().st_size > 0, f"{out.name} not built"
            if ext == "tex":  # every test-scale table says so, in pure-ASCII LaTeX
                assert "TEST DATA" in out.read_text(), f"{out.name} lacks the test-scale mark"
                assert out.read_text().isascii(), f"{out.name} is not pure-ASCII LaTeX"
            if not missing:
                continue
            if ext == "tex":
                text = out.read_text()
                assert "TEST DATA" in text and "n/a" in text, out.name
            elif ext == "png":
                text = Image.open(out).info.get("Description", "")
                assert text.startswith("n/a"), f"{out.name} has no n/a panel"
            else:
                text = pdf_subject(out)
                assert text.startswith("n/a"), f"{out.name} has no n/a panel"
            for d in missing:  # the table / n/a panels name each missing dataset of the artefact
                assert names(latex_escape(d) if ext == "tex" else d, text), f"{out.name} does not name {d}"
            assert "data.download: true" in text and "data.mirrors" in text, f"{out.name}: how to get the data?"
    # the mirror is empty and nothing was downloaded: every real dataset is missing, e.g. MNIST and CIFAR-10
    assert {"mnist", "cifar10", "uci_yacht", "spambase"} <= every_missing
    assert not any((work / "data" / "cache").rglob("*.gz"))

    report = (work / "figures" / "reproduction.md").read_text()
    section = report.split("## Missing datasets")[1].split("\n## ")[0]
    for d in every_missing:
        assert names(d, section), f"the report does not name {d}"
    assert "data.download: true" in section
    # Fig. 2's synthetic cells ran here: its end-to-end checks (one-cell re-run, benchmark, HTML report) on them
    check_fig2_end_to_end(work)
