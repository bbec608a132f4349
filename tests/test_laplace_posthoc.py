"""The post-hoc diagonal Laplace baseline of Fig. 2a reports the evaluation of its largest Laplace log marginal
likelihood when the config asks for it (App. I.4: "For both Laplace and partitioned networks, we do early stopping
based on the marginal likelihood objective"): the fig2a config does, its cells run so at test scale, and only the
Laplace cells carry the setting (the partitioned cells' archived lines stay current)."""

from pathlib import Path

import pytest
import torch
from torch import nn

from reprokit.augment.concrete import FixedInputMask
from reprokit.config import grid_of, load_pipeline_config
from reprokit.data.task import TaskData
from reprokit.methods.laplace_posthoc import PosthocDiagLaplace
from reprokit.methods.standard import OptimConfig
from reprokit.models.mlp import MLP
from reprokit.plan import kind
from reprokit.report.store import archive

REPO = Path(__file__).resolve().parents[1]


def small_task(n: int = 120, d: int = 6) -> TaskData:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, d, generator=g) + y[:, None].float() * torch.tensor([1.0] * 3 + [0.0] * (d - 3))
    return TaskData(x[: n // 2], y[: n // 2], x[n // 2 :], y[n // 2 :], task="classification", n_classes=2)


def run(select: str, steps: int = 40, every: int = 10) -> tuple[list[dict], dict]:
    torch.manual_seed(0)
    data = small_task()
    net = nn.Sequential(FixedInputMask(6, 4), MLP(6, [32, 32], 2, "gelu"))
    m = PosthocDiagLaplace(net, data, OptimConfig(lr=3e-2, batch_size=30), steps, 0, marglik_steps=5, select=select)
    curve = [{"step": 0, **m.evaluate(0)}]
    for step in range(1, steps + 1):
        m.train_step(step)
        if step % every == 0:
            curve.append({"step": step, **m.evaluate(step)})
    return curve, m.final_metrics()


def test_best_lml_reports_the_evaluation_of_the_largest_laplace_lml():
    curve, final = run("best_lml")
    lml = [row["laplace_lml"] for row in curve]  # every evaluation is scored
    best = max(range(len(curve)), key=lambda i: lml[i])
    assert final["laplace_lml"] == pytest.approx(lml[best]) and final["best_step"] == curve[best]["step"]
    assert final["test_acc"] == pytest.approx(curve[best]["test_acc"])  # that evaluation's metrics
    assert "last_laplace_lml" in final and "last_train_ll" in final  # the end of training beside it
    assert final["laplace_lml"] >= final["last_laplace_lml"]


def test_last_reports_the_end_of_training():
    curve, final = run("last")
    assert "laplace_lml" not in curve[-1] and "best_step" not in final
    assert final["train_acc"] == pytest.approx(curve[-1]["train_acc"])
    with pytest.raises(ValueError, match="best_lml"):
        PosthocDiagLaplace(nn.Linear(2, 2), small_task(), OptimConfig(), 1, 0, select="best")


def test_fig2a_laplace_cells_stop_early_on_their_lml_and_only_they_carry_the_setting():
    cfg = load_pipeline_config(REPO, {"scale": "paper"})
    plan = kind("input_selection")
    for exp in ("fig2a", "fig2a_pm1"):
        for cell in grid_of(cfg, exp, "paper").cells():
            resolved = plan.resolved_settings(cell)
            if cell.coord_dict["method"] == "laplace":
                assert resolved["laplace_select"] == "best_lml", cell.rel_dir  # App. I.4's early stopping
            else:
                assert "laplace_select" not in resolved, cell.rel_dir
    # an archived Laplace line that ran before the setting existed is not used; a partitioned one still is
    now = archive.current_settings(cfg, "paper", "fig2a")
    lap = next(c for c in now if "method~laplace" in c)
    part = next(c for c in now if "method~partitioned" in c)
    old = {k: v for k, v in now[lap].items() if k != "laplace_select"}
    assert archive.differing_keys(old, now[lap]) == ["laplace_select"]
    assert archive.differing_keys(dict(now[part]), now[part]) == []


def test_a_test_scale_laplace_cell_reports_its_best_evaluation(tmp_path):
    """The builder hands the setting to the method: a test-scale fig2a Laplace cell, run by the pipeline's loop."""
    from reprokit.builders import CellContext
    from reprokit.builders.input_selection import build
    from reprokit.loop import LoopConfig, run_loop

    cfg = load_pipeline_config(REPO, {"scale": "test"})
    cell = next(c for c in grid_of(cfg, "fig2a", "test").cells() if c.coord_dict["method"] == "laplace")
    run_ = build(cell, CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path)))
    result = run_loop(run_.method, LoopConfig(run_.n_steps, run_.eval_every))
    final = run_.method.final_metrics()
    scored = [row for row in result.curve if "laplace_lml" in row]
    assert len(scored) == len(result.curve) >= 3  # every evaluation, step 0 included
    best = max(scored, key=lambda row: row["laplace_lml"])
    assert final["best_step"] == best["step"] and final["laplace_lml"] == pytest.approx(best["laplace_lml"])
