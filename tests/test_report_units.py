"""The report's shared units: mean ± s.e. (report/store/stats.py), the LaTeX table writer (report/render/tables.py)
and the notebooks' log file (report/notebook.start_log)."""

import math
import subprocess
import sys
import types

import numpy as np
import pandas as pd
import pytest

from reprokit.report.render import notebook, style
from reprokit.report.render.tables import write_table
from reprokit.report.store import stats


def test_mean_se_hand_example():
    m, se, n = stats.mean_se([1.0, 2.0, 6.0])  # mean 3, sd sqrt(7), s.e. sqrt(7/3)
    assert (m, n) == (3.0, 3) and se == pytest.approx(math.sqrt(7 / 3))
    assert stats.mean_se([0.4]) == (0.4, 0.0, 1)
    m, se, n = stats.mean_se([0.4, float("nan")])
    assert math.isnan(m) and math.isnan(se) and n == 2
    m, se, n = stats.mean_se([])
    assert math.isnan(m) and n == 0


def test_mean_se_formatting():
    assert stats.format_mean_se([0.5]) == "0.500"
    assert stats.format_mean_se([0.4, 0.6]) == "0.500 ± 0.100"
    assert stats.format_mean_se([0.4, float("nan")]) == "NaN"
    assert stats.format_mean_se([]) == "n/a"
    assert stats.format_mean_se([1.0, 2.0, 6.0], digits=2) == "3.00 ± 1.53"
    assert stats.format_pm(0.6, 0.0) == "0.600 ± 0.000" and stats.format_pm(float("nan"), 0.1) == "NaN"


def test_grouped_mean_se_drops_nan_and_gives_one_value_zero_se():
    df = pd.DataFrame({"k": [2, 1, 1, 1, 3, 3], "v": [5.0, 1.0, 2.0, 6.0, np.nan, np.nan]})
    out = stats.grouped_mean_se(df, "k", "v")
    assert list(out.columns) == ["k", "mean", "se", "n"] and list(out["k"]) == [1, 2, 3]
    assert out["mean"].iloc[0] == 3.0 and out["se"].iloc[0] == pytest.approx(math.sqrt(7 / 3))
    assert (out["mean"].iloc[1], out["se"].iloc[1], out["n"].iloc[1]) == (5.0, 0.0, 1)
    assert math.isnan(out["mean"].iloc[2]) and out["se"].iloc[2] == 0.0 and out["n"].iloc[2] == 0
    two = stats.grouped_mean_se(pd.DataFrame({"a": [0, 0], "b": ["x", "x"], "v": [1.0, 3.0]}), ["a", "b"], "v")
    assert two.to_dict("records") == [{"a": 0, "b": "x", "mean": 2.0, "se": 1.0, "n": 2}]


def test_write_table_caption_scale_note_footnotes_and_escapes(tmp_path):
    df = pd.DataFrame({"σ_r²": ["a_b", "50%"], "x": [1.5, np.nan]})
    out = tmp_path / "t.tex"
    write_table(
        df, out, "Caption with R_0 & 60%", "test", "quick_scale; 2 seed(s)", footnotes=["U_0 = σ_u² I"], label="tab:t"
    )
    tex = out.read_text()
    lines = tex.splitlines()
    # the first line names the packages beyond booktabs (graphicx: \resizebox; xcolor: the TEST DATA mark)
    assert lines[0] == r"% needs: \usepackage{booktabs,graphicx,xcolor}"
    assert lines[1:3] == [r"\begin{table}[tp]", r"\centering"] and lines[-1] == r"\end{table}"
    assert lines[3] == (
        r"\caption{\textcolor{red}{\textbf{TEST DATA}} Caption with R\_0 \& 60\% "
        r"(quick\_scale; 2 seed(s))}"
    )
    assert lines[4] == r"\label{tab:t}"
    assert r"\toprule" in tex and r"\ensuremath{\sigma}\_r\ensuremath{^2} & x \\" in tex
    assert r"a\_b & 1.500000 \\" in tex and r"50\% & n/a \\" in tex
    assert lines[-2] == r"\par\footnotesize{U\_0 = \ensuremath{\sigma}\_u\ensuremath{^2} I}"
    assert tex.isascii()
    write_table(df, out, "Plain", "quick", "note")
    assert "TEST DATA" not in out.read_text() and r"\label" not in out.read_text()
    # escape=False writes caption, cells and footnotes as LaTeX; the provenance note is still escaped
    write_table(pd.DataFrame({"m": ["$x_1$"]}), out, r"$\alpha$", "paper", "a_b", footnotes=[r"$y_2$"], escape=False)
    tex = out.read_text()
    assert r"\caption{$\alpha$ (a\_b)}" in tex and r"$x_1$ \\" in tex and r"\footnotesize{$y_2$}" in tex


def test_tables_are_pure_ascii_latex_in_text_and_in_math(tmp_path):
    out = tmp_path / "t.tex"
    write_table(
        pd.DataFrame({"ACC ↑": ["0.95 ± 0.01"], "ECE ↓": ["$β = 0.1$"]}), out, "α sweep", "quick", "n = 3", escape=False
    )
    tex = out.read_text()
    assert tex.isascii()
    assert r"ACC \ensuremath{\uparrow} & ECE \ensuremath{\downarrow}" in tex
    assert r"0.95 \ensuremath{\pm} 0.01 & $\ensuremath{\beta} = 0.1$" in tex  # \ensuremath: also inside $...$
    with pytest.raises(ValueError, match=r"t2.tex: character '☃'"):
        write_table(pd.DataFrame({"x": ["☃"]}), tmp_path / "t2.tex", "c", "quick", "n")


def test_one_split_prints_no_standard_error():
    from reprokit.report.render import bali_regression

    rows = [
        {"dataset": "uci_protein", "method": "bali", "status": "completed", "seed": 0, "test_rmse": 4.5},
        {"dataset": "uci_yacht", "method": "bali", "status": "completed", "seed": 0, "test_rmse": 0.6},
        {"dataset": "uci_yacht", "method": "bali", "status": "completed", "seed": 1, "test_rmse": 0.8},
    ]
    paper = {"rmse": {"uci_protein": {}, "uci_yacht": {}}}
    table, _ = bali_regression.uci_table(pd.DataFrame(rows), paper, "rmse")
    entries = dict(zip(table["Dataset"], table["BALI (ours)"]))
    assert entries == {"Protein": "4.500", "Yacht": "0.700 ± 0.100"}


def test_the_figure_legend_names_every_plotted_method():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3)
    axes[0].plot([0, 1], label="Partitioned")
    axes[0].plot([0, 1], label="Baseline")
    axes[1].plot([0, 1], label="Baseline")
    axes[2].plot([0, 1], label="Diff. Laplace")  # only in a later panel
    axes[2].plot([0, 1])  # unlabelled
    legend = style.figure_legend(fig, axes)
    assert [t.get_text() for t in legend.get_texts()] == ["Partitioned", "Baseline", "Diff. Laplace"]
    assert style.figure_legend(*plt.subplots(1, 2)) is None
    plt.close("all")


def test_start_log_writes_inputs_scale_outputs_and_warnings_to_the_rule_log(tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("a\n1\n")
    log = tmp_path / "logs" / "x.log"
    log.parent.mkdir()
    code = f"""
import types, warnings
from reprokit.report.render import notebook
smk = types.SimpleNamespace(input={{"table": {str(data)!r}}}, output={{"tex": {str(tmp_path / "out.tex")!r}}},
                            log=[{str(log)!r}], params={{"scale": "test"}}, config={{}}, rule="artefact_x")
log = notebook.start_log(smk)
log.info("own line")
warnings.warn("careful")
open({str(tmp_path / "out.tex")!r}, "w").write("done")
raise SystemExit(0)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    text = log.read_text()
    assert "rule artefact_x, scale test" in text
    assert f"input table: {data} (4 bytes)" in text and f"output tex: {tmp_path / 'out.tex'}" in text
    assert "own line" in text and "careful" in text
    assert f"wrote tex: {tmp_path / 'out.tex'} (4 bytes)" in text  # at exit


def test_start_log_records_an_uncaught_exception(tmp_path):
    log = tmp_path / "x.log"
    code = f"""
import types
from reprokit.report.render import notebook
notebook.start_log(types.SimpleNamespace(input={{}}, output={{"pdf": "nothing.pdf"}}, log=[{str(log)!r}], config={{"scale": "quick"}}))
raise RuntimeError("broken notebook")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0 and "broken notebook" in result.stderr  # still on the console
    text = log.read_text()
    assert "scale quick" in text and "RuntimeError: broken notebook" in text and "nothing.pdf (missing)" in text


def test_start_log_without_a_log_file_logs_to_stderr(capsys):
    logger = notebook.start_log(types.SimpleNamespace(input={}, output={}, config={"scale": "test"}))
    logger.warning("a warning of the notebook's own")
    err = capsys.readouterr().err
    assert "scale test" in err and "a warning of the notebook's own" in err
