"""The committed cell archive (reprokit.report.archive): cells survive the loss of results/.

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
from reprokit.report import archive, reproduction

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("*.yaml"))


@pytest.fixture(scope="module")
def cfg():
    return load_pipeline_config(REPO, {"scale": "paper"})


def yacht_dropout(cfg, splits):
    from reprokit.config import experiment
    from reprokit.plan import kind

    cells = [
        c
        for c in experiment(cfg, "bali_uci", "paper").cells()
        if c.coord_dict["dataset"] == "uci_yacht"
        and c.coord_dict["method"] == "dropout"
        and c.coord_dict["seed"] in splits
    ]
    assert len(cells) == len(splits)
    return [(c, kind(c.kind).cell_settings(c)) for c in cells]


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
    return reproduction.write_report(
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
    assert "2 archived cells that are not under it (figures/paper/cells)" in text
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
    assert archive.main(["--results", str(results), "--root", str(tmp_path), "--experiment", "bali_uci"]) == 0
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
    assert archive.main(["--results", str(tmp_path / "none"), "--root", str(tmp_path)]) == 2


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


def test_wishart_migration_moves_each_line_to_the_cell_its_computation_belongs_to():
    """The wishart_n_eff migration (archive_migrations.py): a main-experiment line that ran with the old default
    `n` where N_eff < N moves to the `*_wishart` experiment's `n` cell; an `n_eff` line of that experiment moves
    into the main one; N_eff = N lines gain the config's value (one computation); a block whose config says `n`
    gains `n`; a line whose other settings differ is left stale; lines without a BALI block are untouched; a
    second run changes nothing."""
    from reprokit.report.archive_migrations import wishart_n_eff

    def line(exp, cell, method, block, coords=None, ran="n"):
        settings = {"hidden": [50], method: block} if block is not None else {"hidden": [50]}
        return {
            "cell": f"paper/{exp}/{cell}",
            "experiment": exp,
            "coords": {"method": method, **(coords or {})},
            "settings": settings,
            "status": "completed",
            "metrics": {"ll": 1.0},
            "info": {"wishart_n": ran},
        }

    four, one = {"alpha": 0.3, "n_eff_divisor": 4}, {"alpha": 0.3, "n_eff_divisor": 1}
    main = {
        x["cell"]: x
        for x in (
            line("m", "method~bali/dataset~kin/seed~0", "bali", four),
            line("m", "method~bali/dataset~yacht/seed~0", "bali", one),
            line("m", "method~bali_ystd/dataset~kin/seed~0", "bali_ystd", four),
            line("m", "method~bali/dataset~kin/seed~1", "bali", {**four, "alpha": 0.5}),  # ran with other settings
            line("m", "method~dropout/dataset~kin/seed~0", "dropout", None),
        )
    }
    alt = {
        x["cell"]: x
        for x in (
            line(
                "a",
                "method~bali/dataset~kin/seed~0/bali.wishart_n~n_eff",
                "bali",
                four,
                {"bali.wishart_n": "n_eff"},
                ran="n_eff",
            ),
        )
    }
    neff = {"hidden": [50], "bali": {**four, "wishart_n": "n_eff"}}
    heads = {
        "m": {
            "paper/m/method~bali/dataset~kin/seed~0": neff,
            "paper/m/method~bali/dataset~kin/seed~1": neff,
            "paper/m/method~bali/dataset~yacht/seed~0": {"hidden": [50], "bali": {**one, "wishart_n": "n_eff"}},
            "paper/m/method~bali_ystd/dataset~kin/seed~0": {"hidden": [50], "bali_ystd": {**four, "wishart_n": "n"}},
            "paper/m/method~dropout/dataset~kin/seed~0": {"hidden": [50]},
        },
        "a": {
            "paper/a/method~bali/dataset~kin/seed~0/bali.wishart_n~n": neff,
            "paper/a/method~bali/dataset~kin/seed~1/bali.wishart_n~n": neff,
        },
    }
    out, log = wishart_n_eff({"m": main, "a": alt}, heads, "2026-11-26", pairs=(("m", "a"),))
    moved_out = out["a"]["paper/a/method~bali/dataset~kin/seed~0/bali.wishart_n~n"]
    assert moved_out["coords"]["bali.wishart_n"] == "n" and moved_out["experiment"] == "a"
    assert moved_out["info"]["wishart_n"] == "n" and "moved from paper/m/" in moved_out["migrations"][0]["what"]
    moved_in = out["m"]["paper/m/method~bali/dataset~kin/seed~0"]
    assert moved_in["info"]["wishart_n"] == "n_eff" and "bali.wishart_n" not in moved_in["coords"]
    assert moved_in["settings"] == neff
    assert out["m"]["paper/m/method~bali/dataset~yacht/seed~0"]["settings"]["bali"]["wishart_n"] == "n_eff"
    assert out["m"]["paper/m/method~bali_ystd/dataset~kin/seed~0"]["settings"]["bali_ystd"]["wishart_n"] == "n"
    stale = out["m"]["paper/m/method~bali/dataset~kin/seed~1"]
    assert stale == main["paper/m/method~bali/dataset~kin/seed~1"] and any("left stale" in m for m in log)
    assert out["m"]["paper/m/method~dropout/dataset~kin/seed~0"] == main["paper/m/method~dropout/dataset~kin/seed~0"]
    # every line but the stale one now matches its cell's settings; a second run moves nothing
    for name in ("m", "a"):
        left = archive.split(out[name], heads[name])[1]
        stale_cell = "paper/m/method~bali/dataset~kin/seed~1"
        assert left == ([] if name == "a" else [f"{stale_cell}: ran with other settings (bali differ from the config)"])
    again = wishart_n_eff(out, heads, "2026-11-26", pairs=(("m", "a"),))[0]
    assert again == out


def test_method_blocks_migration_nests_method_keys_keeps_the_own_block_and_leaves_other_settings_stale():
    """The method_blocks migration (affine_invariance kind here): `dl_*` / `augerino_*` / `llml_*` / `finetune_*` become their method's
    block with the same values; another method's keys are dropped (named in the line's `migrations`); a line
    whose other settings differ from HEAD's stays as it was; a second run changes nothing."""
    from reprokit.report.archive_migrations import method_blocks

    aug = {"augerino_reg": 0.01, "augerino_reg_kind": "safe"}

    def line(cell, method, **settings):
        return {
            "cell": f"quick/e/{cell}",
            "experiment": "e",
            "coords": {"method": method},
            "settings": {"n_steps": 10, **aug, **settings},
            "status": "completed",
            "metrics": {"test_acc": 0.5},
        }

    lines = {
        "e": {
            x["cell"]: x
            for x in (
                line("method~augerino", "augerino"),
                line("method~diff_laplace", "diff_laplace", dl_burnin=100, dl_n_aug_marglik=4),
                line("method~validation_opt", "validation_opt", finetune_epochs=1, finetune_lr=0.01),
                line("method~baseline", "baseline", n_steps=20),
            )
        }
    }  # ran 20 steps; HEAD says 10: stale
    heads = {
        "e": {
            "quick/e/method~augerino": {"n_steps": 10, "augerino": {"reg": 0.01, "reg_kind": "safe"}},
            "quick/e/method~diff_laplace": {"n_steps": 10, "diff_laplace": {"burnin": 100, "n_aug_marglik": 4}},
            "quick/e/method~validation_opt": {
                "n_steps": 10,
                "validation_opt": {"finetune_epochs": 1, "finetune_lr": 0.01},
            },
            "quick/e/method~baseline": {"n_steps": 10},
        }
    }
    out, log = method_blocks(lines, heads, "2026-11-27", {"e": "affine_invariance"})
    new = out["e"]
    assert new["quick/e/method~augerino"]["settings"] == heads["e"]["quick/e/method~augerino"]
    dl = new["quick/e/method~diff_laplace"]
    assert dl["settings"] == heads["e"]["quick/e/method~diff_laplace"]
    assert "dropped augerino_reg, augerino_reg_kind" in dl["migrations"][0]["what"]
    assert new["quick/e/method~validation_opt"]["settings"]["validation_opt"] == {
        "finetune_epochs": 1,
        "finetune_lr": 0.01,
    }
    assert new["quick/e/method~baseline"] == lines["e"]["quick/e/method~baseline"]
    assert log == [
        f"quick/e/method~{m}: nested" + (", 2 keys of another method dropped" if m != "augerino" else "")
        for m in ("augerino", "diff_laplace", "validation_opt")
    ] + ["quick/e/method~baseline: left stale (['n_steps'] differ)"]
    assert archive.split(new, heads["e"])[1] == [
        (
            "quick/e/method~baseline: ran with other settings (augerino_reg, augerino_reg_kind, n_steps differ from the "
            "config)"
        )
    ]
    assert method_blocks(out, heads, "2026-11-27", {"e": "affine_invariance"})[0] == out
    # a kind without a method axis (update_timing) keeps every block
    timing = {
        "cell": "quick/t/model~m",
        "experiment": "t",
        "coords": {"model": "m"},
        "settings": {"dl_n_repeats": 2, "augerino_reg": 0.01},
    }
    want = {"diff_laplace": {"n_repeats": 2}, "augerino": {"reg": 0.01}}
    moved = method_blocks({"t": {timing["cell"]: timing}}, {"t": {timing["cell"]: want}}, "d", {"t": "update_timing"})
    assert moved[0]["t"][timing["cell"]]["settings"] == want


def test_a_record_is_restamped_only_when_its_builds_settings_renamed_equal_heads():
    """method_blocks --provenance: HEAD's fingerprint goes into an artefact's record only when the settings its
    build saw (the config at its commit), nested, equal HEAD's; a changed value or a record its commit's config
    does not reproduce is left for a rebuild."""
    from reprokit.report.archive_migrations import nested_settings, restamp_provenance
    from reprokit.report.provenance import digest

    def nest(rel, settings):  # method_blocks' rewrite of one cell's settings
        return nested_settings(settings, "affine_invariance", rel.split("method~")[1].split("/")[0])[0]

    entry = {"notebook": "fig3.py", "experiments": ["e"]}
    old = {
        "artefact": entry,
        "cells": {
            "quick/e/method~augerino/seed~0": {"n_steps": 10, "augerino_reg": 0.01},
            "quick/e/method~baseline/seed~0": {"n_steps": 10, "augerino_reg": 0.01},
        },
    }
    head = {
        "artefact": entry,
        "cells": {
            "quick/e/method~augerino/seed~0": {"n_steps": 10, "augerino": {"reg": 0.01}},
            "quick/e/method~baseline/seed~0": {"n_steps": 10},
        },
    }
    rec = {"artefact": "fig3", "commit": "abc1234", "scale": "quick", "fingerprint": digest(old)}
    new, why = restamp_provenance(rec, old, head, nest, digest(head), "2026-11-27")
    assert new["fingerprint"] == digest(head) and new["commit"] == "abc1234"
    assert new["migrations"][0]["fingerprint_before"] == digest(old) and "->" in why
    changed = {
        **head,
        "cells": {**head["cells"], "quick/e/method~augerino/seed~0": {"n_steps": 10, "augerino": {"reg": 1.0}}},
    }
    assert restamp_provenance(rec, old, changed, nest, digest(changed), "d") == (
        None,
        ("left for a rebuild: 1 cells differ beyond the method_blocks rewrite (first: quick/e/method~augerino/seed~0)"),
    )
    assert restamp_provenance({**rec, "fingerprint": "0" * 16}, old, head, nest, digest(head), "d")[0] is None


def _spambase_wishart(cfg):
    from reprokit.config import experiment

    return next(
        c
        for c in experiment(cfg, "bali_cls_uci_wishart", "paper").cells()
        if c.coord_dict["dataset"] == "spambase" and c.coord_dict["seed"] == 0
    )


def test_resolved_settings_migration_fills_defaults_checks_them_against_info_and_applies_coordinates(cfg):
    """resolved_settings: a line recorded with the config as written gets what `cell_settings` records now
    (HEAD's defaults filled in, the dotted coordinate `bali.wishart_n~n` applied inside the block, the axes
    left out, `_inputs` glue kept); a filled default the run's info contradicts leaves the line stale; a
    second run changes nothing."""
    from reprokit.plan import kind
    from reprokit.report.archive_migrations import resolved_settings

    cell = _spambase_wishart(cfg)
    written = {**cell.settings, "_inputs": {"found": "FAKE"}}
    assert "gram_dtype" not in written["bali"] and written["bali"]["wishart_n"] == "n_eff"  # the block's value

    def line(info):
        return {
            "cell": cell.rel_dir,
            "experiment": cell.experiment,
            "coords": cell.coord_dict,
            "settings": written,
            "info": {"note": "FAKE synthetic test data", **info},
            "metrics": {"test_acc": 0.5},
        }

    head = kind(cell.kind).cell_settings(cell)
    kinds = {cell.experiment: cell.kind}
    out, log = resolved_settings(
        {cell.experiment: {cell.rel_dir: line({"gram_dtype": "float64"})}},
        {cell.experiment: {cell.rel_dir: head}},
        "2026-11-27",
        kinds,
        "paper",
    )
    new = out[cell.experiment][cell.rel_dir]
    assert new["settings"] == {**head, "_inputs": {"found": "FAKE"}}
    assert new["settings"]["bali"]["wishart_n"] == "n" and new["settings"]["bali"]["gram_dtype"] == "float64"
    assert not {"method", "dataset", "seed"} & set(new["settings"])
    entry = new["migrations"][-1]
    assert entry["migration"] == "resolved_settings" and "bali.gram_dtype" in entry["filled"]
    assert entry["checked"] == ["bali.gram_dtype"] and entry["changed"] == ["bali.wishart_n"]
    assert archive.split({cell.rel_dir: new}, {cell.rel_dir: head}) == ([new], [])
    assert resolved_settings(out, {}, "2026-11-27", kinds, "paper") == (out, [])
    # the run's info says float32: HEAD's default float64 is not what ran, the line stays as it was (stale)
    ran32 = line({"gram_dtype": "float32"})
    out, log = resolved_settings({cell.experiment: {cell.rel_dir: ran32}}, {}, "d", kinds, "paper")
    assert out[cell.experiment][cell.rel_dir] == ran32
    assert log == [f"{cell.rel_dir}: left stale (ran otherwise: bali.gram_dtype (info 'float32', default 'float64'))"]


def test_a_changed_default_re_runs_and_flags_exactly_the_cells_it_changes(cfg):
    """A default the config never writes is part of what a cell records: changing it changes the cell's
    Snakemake parameters (its job's cell JSON) and marks its archived line stale, naming the key; the cells
    of another kind are untouched."""
    from pydantic import create_model

    from reprokit.config import experiment
    from reprokit.plan import kind
    from reprokit.plan.job import cell_job

    plan = kind("bali_classification")
    cells = [c for c in experiment(cfg, "bali_cls_uci", "paper").cells() if c.coord_dict["seed"] == 0]
    other = next(iter(experiment(cfg, "bali_uci", "paper").cells()))
    before = {c.rel_dir: cell_job(c, cfg).cell["settings"] for c in cells}
    before_other = kind(other.kind).cell_settings(other)
    field = plan.Settings.model_fields["train_subset"]
    assert "train_subset" not in cells[0].settings and field.default is None  # a default, written nowhere
    changed = create_model("Changed", __base__=plan.Settings, train_subset=(field.annotation, 5000))
    original = plan.Settings
    plan._cache.clear()
    try:
        plan.Settings = changed
        after = {c.rel_dir: cell_job(c, cfg).cell["settings"] for c in cells}
        assert kind(other.kind).cell_settings(other) == before_other
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
    from reprokit.report.build_partial import found_lines

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
