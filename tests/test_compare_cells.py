"""benchmarks/compare_cells.py: a refactor's before / after metrics.json comparison finds a changed number."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("compare_cells", REPO / "benchmarks" / "compare_cells.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cell(root: Path, rel: str, **metrics) -> None:
    path = root / rel / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"status": "completed", "steps": 4, "metrics": metrics}))


def test_a_changed_metric_or_a_missing_cell_fails_and_timings_are_skipped(tmp_path, capsys):
    mod = _module()
    before, after = tmp_path / "before", tmp_path / "after"
    _cell(before, "fig3a/seed~0", test_acc=0.5, loss=float("nan"))
    _cell(after, "fig3a/seed~0", test_acc=0.5, loss=float("nan"))
    _cell(before, "table8_timing/seed~0", param_ratio=1.01, dl_hyper_n=2)
    _cell(after, "table8_timing/seed~0", param_ratio=0.97, dl_hyper_n=2)  # a measurement: not compared
    assert mod.main([str(before), str(after)]) == 0
    assert "2 identical, 0 differ" in capsys.readouterr().out
    _cell(before, "bali_uci/seed~1", test_ll=-1.0)
    assert mod.main([str(before), str(after)]) == 1  # missing after
    _cell(after, "bali_uci/seed~1", test_ll=-1.0000001)
    assert mod.main([str(before), str(after)]) == 1
    assert "differs: bali_uci/seed~1/metrics.json: [('test_ll', -1.0, -1.0000001)]" in capsys.readouterr().out
