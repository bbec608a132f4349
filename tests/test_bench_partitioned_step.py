"""benchmarks/bench_partitioned_step.py: its phase marks leave the pipeline's step unchanged, and a tiny run
prints every phase with phases that add up to the step."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def load():
    spec = importlib.util.spec_from_file_location(
        "bench_partitioned_step", REPO / "benchmarks" / "bench_partitioned_step.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # the glibc column's child process imports it by name
    spec.loader.exec_module(mod)
    return mod


def test_marked_step_trains_as_the_pipelines_step():
    bench = load()
    cell, st = bench.paper_cell()
    plain, marked = (bench.build_partitioned(cell, st, batch=2, aug_samples=2) for _ in range(2))
    step = bench.phase_step(marked)
    for i in range(3):
        plain.train_step(i)
        phases = step()
        assert set(phases) >= {*bench.PARAM_PHASES, *bench.PSI_PHASES, "total"}
        assert abs(sum(v for k, v in phases.items() if k != "total") - phases["total"]) < 1e-6
    a, b = plain.net.state_dict(), marked.net.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))
    assert torch.equal(plain.schedule.generator.get_state(), marked.schedule.generator.get_state())
    assert torch.equal(plain.net.generator.get_state(), marked.net.generator.get_state())


def test_tiny_run_reports_the_ratios(capsys):
    out = load().main(["--batch", "2", "--aug-samples", "2", "--repeats", "1", "--warmup", "0", "--no-compare-heap"])
    assert {"step/plain", "step/ideal", "plain/ideal"} <= set(out)
    text = capsys.readouterr().out
    assert "psi backward" in text and "GFLOP/s" in text
