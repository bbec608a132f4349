"""A cell's curve.csv, written without pandas, reads back in pandas as the frame of its rows."""

import math

import pandas as pd
import pytest

from reprokit.atomic import rows_csv


def test_rows_csv_reads_back_as_the_rows_frame(tmp_path):
    rows = [
        {"step": 0, "test_acc": 0.1, "loss": math.nan},
        {"step": 200, "test_acc": 0.9340000152587891, "loss": 0.058314159512519836, "mask_p": 0.25},
        {"step": 400, "test_acc": 1e-12, "loss": -3.5, "status": 'ok, "quoted"'},
    ]
    (tmp_path / "c.csv").write_text(rows_csv(rows))
    got = pd.read_csv(tmp_path / "c.csv")
    want = pd.DataFrame(rows)
    assert list(got.columns) == ["step", "test_acc", "loss", "mask_p", "status"]
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert got["test_acc"].tolist() == [r["test_acc"] for r in rows]  # floats round-trip exactly


@pytest.mark.parametrize("rows", [[], [{"step": 0}], [{"step": 0, "loss": math.nan}, {"step": 1, "loss": 0.5}]])
def test_rows_csv_edge_cases_match_pandas(rows):
    assert rows_csv(rows).strip() == pd.DataFrame(rows).to_csv(index=False).strip()
