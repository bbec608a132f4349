"""The committed cell archive (reprokit.report.store.archive): cells survive the loss of results/.

Cells are real cells of the paper-scale `bali_uci` grid (their paths and settings from HEAD's config), with
SYNTHETIC metrics (RMSE 0.5 / 0.7, watermarked "FAKE" in their info): archived, then results/ deleted, the
reproduction report must still show them with their n; an archived cell whose settings differ from the
config's must not count and must be named; a re-run under results/ must replace its archived line.
"""

import json
import shutil
from pathlib import Path

import pytest

from reprokit.config import load_pipeline_config
from reprokit.report.commands import archive as archive_command
from reprokit.report.render.reproduction import write_report
from reprokit.report.store import archive
from reprokit.report.verdicts import reproduction

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("*.yaml"))


@pytest.fixture(scope="module")
def cfg():
    return load_pipeline_config(REPO, {"scale": "paper"})


def yacht_dropout(cfg, splits):
    from reprokit.config import grid_of
    from reprokit.plan import kind

    cells = [
        c
        for c in grid_of(cfg, "bali_uci", "paper").cells()
        if c.coord_dict["dataset"] == "uci_yacht"
        and c.coord_dict["method"] == "dropout"
        and c.coord_dict["seed"] in splits
    ]
    assert len(cells) == len(splits)
    return [(c, kind(c.kind).resolved_settings(c)) for c in cells]


def write_cell(results: Path, cell, settings: dict, rmse: float) -> Path:
    folder = results / cell.rel_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**cell.to_dict(), "settings": settings}))
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "coords": cell.coord_dict,
                "scale": "paper",
                "status": "completed",
                "experiment": "bali_uci",
                "metrics": {"test_rmse": rmse, "test_ll": -1.0},
                "info": {"note": "FAKE synthetic test data"},
                "provenance": {"device": "cpu", "device_name": "FAKE CPU"},
            }
        )
    )
    return folder


def yacht_do_line(text: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith("| Yacht | DO |"))


def report(tmp_path, cfg, results, use_archive=True) -> str:
    expected = {"bali_uci": 480}
    return write_report(
        tmp_path / "out.md",
        results,
        "paper",
        PAPERS,
        expected,
        generated="",
        archive=(tmp_path, cfg) if use_archive else None,
    )


def test_archived_cells_survive_results_loss_and_stale_ones_are_named(tmp_path, cfg):
    results = tmp_path / "results"
    (c0, s0), (c1, s1) = yacht_dropout(cfg, (0, 1))
    write_cell(results, c0, s0, 0.5)
    write_cell(results, c1, s1, 0.7)
    assert archive.update(tmp_path, results, "paper", ["bali_uci"]) == {"bali_uci": (2, 0, 0)}
    target = archive.path_of(tmp_path, "paper", "bali_uci")
    assert len(target.read_text().splitlines()) == 2

    shutil.rmtree(results)
    assert "| — | 0 |" in yacht_do_line(report(tmp_path, cfg, results, use_archive=False))
    text = report(tmp_path, cfg, results)
    row = yacht_do_line(text)
    assert "| 0.6 ± 0.1 | 2 | paper | cpu (FAKE CPU) |" in row, row
    assert "Results: the 2 archived cells (figures/paper/cells) only" in text  # results/ gone: the archive alone
    assert "(2 from the archive figures/paper/cells)" in text

    # a cell archived with other settings (e.g. before a config change) does not count, and is named
    lines = archive.load(target)
    lines[c1.rel_dir]["settings"]["dropout"]["epochs"] += 1
    archive.write(target, lines)
    text = report(tmp_path, cfg, results)
    assert "| 0.5 | 1 |" in yacht_do_line(text)
    assert "## Archived cells not used" in text
    assert f"`bali_uci`: {c1.rel_dir}: ran with other settings (dropout differ from the config)" in text


def test_update_merges_a_rerun_replaces_its_line_and_keeps_the_rest(tmp_path, cfg, capsys):
    results = tmp_path / "results"
    (c0, s0), (c1, s1) = yacht_dropout(cfg, (0, 1))
    write_cell(results, c0, s0, 0.5)
    write_cell(results, c1, s1, 0.7)
    archive.update(tmp_path, results, "paper", ["bali_uci"])
    shutil.rmtree(results)
    write_cell(results, c0, s0, 0.9)  # a re-run on another machine
    assert archive.update(tmp_path, results, "paper", ["bali_uci"]) == {"bali_uci": (0, 1, 1)}
    assert archive_command.main(["--results", str(results), "--root", str(tmp_path), "--experiment", "bali_uci"]) == 0
    assert "0 cells added, 0 replaced (re-run), 1 unchanged, 1 kept (archived only); 2 cells in all" in (
        capsys.readouterr().out
    )
    lines = archive.load(archive.path_of(tmp_path, "paper", "bali_uci"))
    assert lines[c0.rel_dir]["metrics"]["test_rmse"] == 0.9 and lines[c1.rel_dir]["metrics"]["test_rmse"] == 0.7
    # results/ wins over the archive for the same cell: no double count
    row = yacht_do_line(report(tmp_path, cfg, results))
    assert "| 0.8 ± 0.1 | 2 |" in row, row


def test_errors_name_the_file(tmp_path, cfg):
    results = tmp_path / "results"
    ((c0, s0),) = yacht_dropout(cfg, (0,))
    folder = write_cell(results, c0, s0, 0.5)
    (folder / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        archive.update(tmp_path, results, "paper", ["bali_uci"])
    bad = archive.path_of(tmp_path, "paper", "bali_uci")
    bad.parent.mkdir(parents=True)
    bad.write_text('{"cell": "x"}\n')
    with pytest.raises(ValueError, match=r"bali_uci.jsonl:1: lacks"):
        archive.load(bad)
    assert archive_command.main(["--results", str(tmp_path / "none"), "--root", str(tmp_path)]) == 2


def test_cells_both_archived_and_in_results_count_once_and_not_as_archived(tmp_path, cfg):
    results = tmp_path / "results"
    ((c0, s0),) = yacht_dropout(cfg, (0,))
    write_cell(results, c0, s0, 0.5)
    archive.update(tmp_path, results, "paper", ["bali_uci"])
    text = report(tmp_path, cfg, results)
    assert "| 0.5 | 1 |" in yacht_do_line(text)
    assert "archived cells" not in text and "from the archive" not in text


def test_archived_cells_keep_their_learning_curves_for_the_curve_claims(tmp_path, cfg):
    """Curve claims (Fig. 2's convergence, Fig. 7) read ctx.curves: an archived cell's curve must be there once
    results/ is gone, with its coordinates, and a cell both archived and under results/ must count once."""
    results = tmp_path / "results"
    (c0, s0), (c1, s1) = yacht_dropout(cfg, (0, 1))
    for c, s, nll in ((c0, s0, 2.0), (c1, s1, 3.0)):
        folder = write_cell(results, c, s, 0.5)
        (folder / "curve.csv").write_text(f"step,test_nll\n0,{nll}\n10,{nll / 2}\n")  # FAKE synthetic curve
    archive.update(tmp_path, results, "paper", ["bali_uci"])
    docs = [reproduction.papers.load(p) for p in PAPERS]

    def curves(res):
        return reproduction.Context(res, "paper", docs, archive=(tmp_path, cfg)).curves(
            "bali_uci", {"dataset": "uci_yacht", "method": "dropout"}
        )

    both = curves(results)  # under results/ and archived: read from results/ only
    assert len(both) == 4 and sorted(both["seed"]) == [0, 0, 1, 1]
    shutil.rmtree(results / c1.rel_dir)
    assert len(curves(results)) == 4  # c1 from the archive, c0 from results/
    shutil.rmtree(results)
    only = curves(results)
    assert sorted(zip(only["seed"], only["step"], only["test_nll"])) == [
        (0, 0, 2.0),
        (0, 10, 1.0),
        (1, 0, 3.0),
        (1, 10, 1.5),
    ]
    assert reproduction.Context(results, "paper", docs).curves("bali_uci", {}).empty  # no archive: nothing


@pytest.mark.slow  # ~20 s in CI: every archived line's settings against HEAD's config
def test_every_committed_archived_cell_still_matches_heads_config():
    """As for a committed artefact's provenance: a config change that touches archived cells must re-run them
    (or drop their lines, saying so in the commit), not leave lines the report silently cannot use."""
    files = sorted((REPO / "figures").glob("*/cells/*.jsonl"))
    stale = []
    for path in files:
        scale, experiment = path.parent.parent.name, path.stem
        config = load_pipeline_config(REPO, {"scale": scale})
        stale += archive.split(archive.load(path), archive.current_settings(config, scale, experiment))[1]
    assert stale == [], "archived cells whose settings differ from HEAD's config:\n" + "\n".join(stale)


def test_pipeline_glue_keys_are_not_settings_but_real_keys_still_differ():
    then = {"n_steps": 1200, "sizes": (8, 1), "_inputs": {"found": "results/quick/x/metrics.json"}}
    assert archive.differing_keys(then, {"n_steps": 1200, "sizes": [8, 1]}) == []
    assert archive.differing_keys(then, {"n_steps": 1500, "sizes": [8, 1]}) == ["n_steps"]


def _spambase_wishart(cfg):
    from reprokit.config import grid_of

    return next(
        c
        for c in grid_of(cfg, "bali_cls_uci_wishart", "paper").cells()
        if c.coord_dict["dataset"] == "spambase" and c.coord_dict["seed"] == 0
    )


def test_a_changed_default_re_runs_and_flags_exactly_the_cells_it_changes(cfg):
    """A default the config never writes is part of what a cell records: changing it changes the cell's
    Snakemake parameters (its job's cell JSON) and marks its archived line stale, naming the key; the cells
    of another kind are untouched."""
    from pydantic import create_model

    from reprokit.config import grid_of
    from reprokit.job import cell_job
    from reprokit.plan import kind

    plan = kind("bali_classification")
    cells = [c for c in grid_of(cfg, "bali_cls_uci", "paper").cells() if c.coord_dict["seed"] == 0]
    other = next(iter(grid_of(cfg, "bali_uci", "paper").cells()))
    before = {c.rel_dir: cell_job(c, cfg).cell["settings"] for c in cells}
    before_other = kind(other.kind).resolved_settings(other)
    field = plan.Settings.model_fields["train_subset"]
    assert "train_subset" not in cells[0].settings and field.default is None  # a default, written nowhere
    changed = create_model("Changed", __base__=plan.Settings, train_subset=(field.annotation, 5000))
    original = plan.Settings
    plan._cache.clear()
    try:
        plan.Settings = changed
        after = {c.rel_dir: cell_job(c, cfg).cell["settings"] for c in cells}
        assert kind(other.kind).resolved_settings(other) == before_other
    finally:
        plan.Settings = original
        plan._cache.clear()
    assert all(
        after[r]["train_subset"] == 5000 and archive.differing_keys(before[r], after[r]) == ["train_subset"]
        for r in before
    )
    fresh, stale = archive.split({r: {"cell": r, "settings": s} for r, s in before.items()}, after)
    assert fresh == [] and len(stale) == len(cells) and all("(train_subset differ" in m for m in stale)


def test_a_migrated_line_is_kept_over_results_copy_of_the_same_run_and_used_by_build_partial(tmp_path, cfg):
    """results/ may still hold a run whose archived line was migrated since (its config.json recorded the older
    form of its settings): archiving again keeps the migrated line (same run, not a re-run), and build_partial
    uses it instead of dropping the cell as stale; a real re-run still replaces it."""
    from reprokit.report.commands.build_partial import found_lines

    results = tmp_path / "results"
    ((c0, s0),) = yacht_dropout(cfg, (0,))
    written = {k: v for k, v in s0.items() if k != "n_evals"}  # as a run before resolved settings recorded it
    assert written != s0
    write_cell(results, c0, written, 0.5)
    archive.update(tmp_path, results, "paper", ["bali_uci"])
    target = archive.path_of(tmp_path, "paper", "bali_uci")
    migrated = {
        c: {**line, "settings": s0, "migrations": [{"migration": "resolved_settings"}]}
        for c, line in archive.load(target).items()
    }
    archive.write(target, migrated)
    assert archive.update(tmp_path, results, "paper", ["bali_uci"]) == {"bali_uci": (0, 0, 0)}
    assert archive.load(target) == migrated
    assert [line["settings"] for line in found_lines(cfg, "bali_uci", "paper", results, tmp_path)] == [s0]
    write_cell(results, c0, s0, 0.9)  # a re-run with the current settings
    assert archive.update(tmp_path, results, "paper", ["bali_uci"]) == {"bali_uci": (0, 1, 0)}
    assert [line["metrics"]["test_rmse"] for line in found_lines(cfg, "bali_uci", "paper", results, tmp_path)] == [0.9]


def test_rename_moves_an_experiments_cells_with_a_migration_entry(tmp_path):
    old = archive.path_of(tmp_path, "paper", "fig2a")
    old.parent.mkdir(parents=True)
    line = {
        "cell": "paper/fig2a/method~laplace/n_inputs~1/seed~0",
        "experiment": "fig2a",
        "settings": {"signal": "signed"},
        "status": "completed",
        "coords": {"method": "laplace", "n_inputs": 1, "seed": 0},
        "metrics": {"lml": -1.0},
    }
    archive.write(old, {line["cell"]: line})
    assert archive.rename(tmp_path, "paper", "fig2a", "fig2a_pm1", "2026-11-28", "the +-1 coding became a variant") == 1
    assert not old.exists()
    (moved,) = archive.load(archive.path_of(tmp_path, "paper", "fig2a_pm1")).values()
    assert moved["cell"] == "paper/fig2a_pm1/method~laplace/n_inputs~1/seed~0" and moved["experiment"] == "fig2a_pm1"
    assert moved["settings"] == line["settings"] and moved["metrics"] == line["metrics"]
    assert moved["migrations"][-1] == {
        "migration": "renamed",
        "date": "2026-11-28",
        "from": "fig2a",
        "to": "fig2a_pm1",
        "what": "the +-1 coding became a variant",
    }
    with pytest.raises(FileNotFoundError):  # nothing left to move
        archive.rename(tmp_path, "paper", "fig2a", "fig2a_x", "2026-11-28", "")
    archive.write(old, {line["cell"]: line})
    with pytest.raises(FileExistsError):  # never into an experiment that has cells
        archive.rename(tmp_path, "paper", "fig2a", "fig2a_pm1", "2026-11-28", "")
