"""Artefacts without data: cells whose dataset is unavailable (status 'unavailable', a `note`) make n/a panels
that quote the note and say how to get the data (report/na.panel), n/a table rows with a footnote
(na.footnotes), a curves CSV that still reads as a table, and report sections naming the dataset."""

import io
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from PIL import Image

from reprokit.config import ExperimentGrid
from reprokit.report.render import bali_regression, invariance, na, style
from reprokit.report.render.reproduction import write_report
from reprokit.report.render.tables import write_table
from reprokit.report.store import aggregate, cells
from reprokit.report.verdicts import reproduction

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("*.yaml"))
NOTE = "dataset unavailable: mnist (not in the mirrors (/nowhere) or data/cache, and data.download is false)"


def unavailable(n: int = 2, note: str = NOTE, **coords) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"scale": "test", "experiment": "e", "seed": s, **coords, "status": "unavailable", "note": note}
            for s in range(n)
        ]
    )


def pdf_subject(data: bytes) -> str:
    """The PDF's /Subject string (plain, or UTF-16 with a BOM as matplotlib writes non-ASCII text)."""
    raw = re.search(rb"/Subject \(((?:\\.|[^\\)])*)\)", data, re.DOTALL).group(1)
    raw = re.sub(rb"\\(.)", rb"\1", raw)
    return raw[2:].decode("utf-16-be") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1")


def test_an_all_na_frame_gives_an_na_panel_naming_the_dataset_and_how_to_get_it(tmp_path):
    fig, (ax, other) = plt.subplots(1, 2)
    text = na.panel(ax, unavailable(), "MNIST")
    one_line = " ".join(text.split())
    assert one_line.startswith("n/a: " + NOTE)  # the note as written, once for the two cells
    assert one_line.count("mnist") == 1 and "data.download: true" in one_line and "data.mirrors" in one_line
    assert ax.get_title() == "MNIST" and not ax.get_xticks().size and not ax.get_yticks().size
    centred = [t for t in ax.texts if t.get_gid() == na.NA_GID]
    assert len(centred) == 1 and centred[0].get_position() == (0.5, 0.5)
    assert centred[0].get_ha() == "center" and centred[0].get_va() == "center"
    other.plot([0, 1], [0, 1])
    assert na.texts(other) == [] and len(na.texts(fig)) == 1

    # the saved files carry the panel's text in their metadata
    pdf, png = tmp_path / "f.pdf", tmp_path / "f.png"
    style.finish_figure(fig, "test", "footer", pdf, png)
    assert NOTE in Image.open(png).info["Description"]
    assert NOTE in pdf_subject(pdf.read_bytes())


def test_an_na_panel_without_unavailable_cells_says_why_and_no_download_hint():
    _, ax = plt.subplots()
    ran = pd.DataFrame([{"scale": "test", "seed": 0, "status": "diverged", "note": ""}])
    assert na.panel(ax, ran, otherwise="no cell completed") == "n/a: no cell completed"
    _, ax2 = plt.subplots()
    assert (
        na.panel(ax2, pd.DataFrame(), otherwise="no cell in this scale's grid") == "n/a: no cell in this scale's grid"
    )
    plt.close("all")


def test_na_panel_takes_several_frames_or_the_notes_and_wraps():
    _, ax = plt.subplots()
    other = "dataset unavailable: fashion_mnist (download failed: HTTP 404)"
    text = na.panel(ax, [unavailable(), unavailable(note=other), pd.DataFrame()], width=30)
    assert all(len(line) <= 30 for line in text.splitlines())
    flat = " ".join(text.split())
    assert "n/a: " + NOTE in flat and "n/a: " + other in flat and flat.index("mnist") < flat.index("fashion_mnist")
    _, ax2 = plt.subplots()
    assert " ".join(na.panel(ax2, [other]).split()).startswith("n/a: " + other)
    plt.close("all")


def test_na_footnotes_quote_the_notes_and_say_how_to_get_the_data(tmp_path):
    ran = pd.DataFrame([{"scale": "test", "seed": 0, "status": "completed", "note": ""}])
    assert na.footnotes(ran) == [] and na.footnotes(ran, notes=False) == []
    (fn,) = na.footnotes(unavailable(), ran, unavailable(note=NOTE.replace("mnist", "cifar10")))
    assert fn.startswith("n/a: " + NOTE + "; dataset unavailable: cifar10") and fn.endswith(cells.GET_DATA + ".")
    assert na.footnotes(unavailable(), notes=False) == [cells.GET_DATA + "."]
    out = tmp_path / "t.tex"
    write_table(
        pd.DataFrame({"Dataset": ["MNIST"], "acc": ["n/a"]}),
        out,
        "demo",
        "test",
        "note",
        footnotes=na.footnotes(unavailable(note="dataset unavailable: uci_yacht")),
    )
    tex = out.read_text()
    assert "MNIST & n/a" in tex and r"n/a: dataset unavailable: uci\_yacht" in tex and r"data.cache\_dir" in tex


def test_a_curves_csv_without_rows_reads_back_as_a_table_with_the_grid_axes(tmp_path):
    spec = {
        "kind": "input_selection",
        "grid": {"dataset": ["mnist"], "method": ["a", "b"], "seed": [0]},
        "settings": {},
    }
    grid_cells = list(ExperimentGrid("t", spec, "test").cells())
    table_csv, curves_csv = tmp_path / "t.csv", tmp_path / "t_curves.csv"
    aggregate.write_aggregate(grid_cells, tmp_path, table_csv, curves_csv, {c.rel_dir: ["mnist"] for c in grid_cells})
    curves = pd.read_csv(curves_csv)
    assert curves.empty and list(curves.columns) == ["seed", "method", "dataset"]
    assert set(pd.read_csv(table_csv)["status"]) == {"unavailable"}
    # an older, header-less empty file reads as an empty frame
    (tmp_path / "old.csv").write_text("\n")
    assert cells.read_csv(tmp_path / "old.csv").empty
    assert cells.read_csv(curves_csv).columns.tolist() == ["seed", "method", "dataset"]


def _sensitivity(chunks: int, note=None, acc=None) -> pd.DataFrame:
    props = str([8] + [1] * (chunks - 1))
    rows = []
    for p in (props, str([1] * (chunks - 1) + [8])):
        row = {"scale": "test", "dataset": "mnist", "param_proportions": p, "chunk_proportions": props, "seed": 0}
        rows.append(
            {**row, "status": "unavailable", "note": note}
            if note
            else {**row, "status": "completed", "note": "", "test_acc": acc}
        )
    return pd.DataFrame(rows)


def test_sensitivity_figure_draws_na_panels_for_chunk_counts_without_cells():
    fig, axes = invariance.sensitivity_figure([_sensitivity(c, NOTE) for c in (2, 3, 4)])
    texts = na.texts(fig)
    assert len(texts) == 3 and all(t.startswith("n/a: " + NOTE) for t in texts)
    assert [ax.get_title() for ax in axes] == ["(a) 2 chunks", "(b) 3 chunks", "(c) 4 chunks"]
    fig, axes = invariance.sensitivity_figure([_sensitivity(2, acc=0.9), _sensitivity(3, NOTE), _sensitivity(4, NOTE)])
    assert len(na.texts(fig)) == 2 and not na.texts(axes[0]) and axes[0].images  # a heatmap
    plt.close("all")


def test_bali_uci_tables_without_data_have_na_rows_and_name_the_dataset(tmp_path):
    for name, datasets in (("bali_uci", ["uci_yacht", "uci_energy"]), ("bali_uci_protein", ["uci_protein"])):
        pd.concat(
            [
                unavailable(1, f"dataset unavailable: {d} (not in the mirrors)", dataset=d, method=m)
                for d in datasets
                for m in ("bali", "dropout")
            ]
        ).to_csv(tmp_path / f"{name}.csv", index=False)
    inputs = {
        "bali_uci": tmp_path / "bali_uci.csv",
        "bali_uci_protein": tmp_path / "bali_uci_protein.csv",
        "paper_numbers": REPO / "config" / "papers" / "bali.yaml",
    }
    table, _ = bali_regression.uci_artefact(inputs, tmp_path / "t1.tex", "rmse")
    assert list(table["Dataset"]) == ["Yacht", "Energy", "Protein"] and set(table["BALI (ours)"]) == {"n/a"}
    tex = (tmp_path / "t1.tex").read_text()
    for d in ("uci\\_yacht", "uci\\_energy", "uci\\_protein"):
        assert f"dataset unavailable: {d} (not in the mirrors)" in tex
    assert "data.download: true" in tex

    t4 = bali_regression.table4(bali_regression.load([inputs["bali_uci"], inputs["bali_uci_protein"]]))
    assert list(t4["Dataset"]) == ["Yacht", "Energy", "Protein"]
    assert (t4.drop(columns="Dataset") == "n/a").all().all() and "# iterations" in t4


def test_reproduction_report_names_the_missing_datasets(tmp_path):
    (tmp_path / "quick").mkdir()
    rows = unavailable(1, NOTE, dataset="mnist", method="bali")
    rows.assign(scale="quick", experiment="bali_cls_image").to_csv(
        tmp_path / "quick" / "bali_cls_image.csv", index=False
    )
    (tmp_path / "quick" / "bali_cls_image_curves.csv").write_text("\n")  # an older empty curves file
    _, artefacts = reproduction.pipeline_config(REPO, "quick")
    text = write_report(tmp_path / "out.md", tmp_path, "quick", PAPERS, generated="", artefacts=artefacts)
    missing = text.split("## Missing datasets")[1].split("\n## ")[0]
    assert f"- {NOTE}: `bali_cls_image`" in missing and cells.GET_DATA in missing
    section = text.split("### bali_fig3")[1].split("###")[0]
    assert "Missing data" in section and NOTE in section
    # without unavailable cells there is no such section
    other = tmp_path / "none"
    text = write_report(other / "out.md", other, "quick", PAPERS, generated="", artefacts=artefacts)
    assert "## Missing datasets" not in text and "Missing data" not in text


@pytest.mark.parametrize("fmt", ["png", "pdf"])
def test_a_figure_without_na_panels_has_no_na_metadata(tmp_path, fmt):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = tmp_path / f"f.{fmt}"
    style.finish_figure(fig, "quick", "footer", path if fmt == "pdf" else None, path if fmt == "png" else None)
    data = path.read_bytes()
    if fmt == "png":
        assert "Description" not in Image.open(io.BytesIO(data)).info
    else:
        assert b"/Subject" not in data
