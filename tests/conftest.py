import os

import pytest
import torch

# CI and dev machines have 2 cores; intra-op threads fight with pytest workers and helpers.
torch.set_num_threads(1)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# REPROKIT_TEST_DATA points elsewhere, e.g. a copy carried to a GPU box without the ../shared checkout.
SHARED_DATA = os.environ.get("REPROKIT_TEST_DATA") or os.path.abspath(os.path.join(REPO, "..", "shared", "data"))


# A FAKE family seed spread for the tests' fake cells: one cell's relative sd 0.3 % at 30 degrees of freedom in every
# experiment family, so a one-seed ordering has a band of about 0.9 % of the value (t 2.04 x sqrt 2 x 0.3 %).
FAKE_FAMILY_SD = 0.003
FAKE_SCORES = (
    "test_acc",
    "test_ll",
    "test_nll",
    "test_rmse",
    "test_ece",
    "test_auc",
    "train_acc",
    "train_ll",
    "train_nll",
    "lml",
    "ood_auroc",
    "val_acc",
    "noise_sd",
)


def fake_families(rel_sd: float = FAKE_FAMILY_SD, df: float = 30.0) -> dict:
    """A seed_spread.json record: `rel_sd` at `df` degrees of freedom for every score of every experiment kind."""
    kinds = (
        "input_selection",
        "affine_invariance",
        "federated",
        "bali_classification",
        "uci_regression",
        "synthetic_predictive",
        "update_timing",
    )
    rec = {"rel_sd": rel_sd, "df": df, "groups": 10, "cells": 40, "experiments": ["FAKE"], "date": "FAKE"}
    return {"scale": "FAKE", "families": {k: {m: dict(rec) for m in FAKE_SCORES} for k in kinds}}


def pytest_collection_modifyitems(config, items):
    """The longest work first, so that `-n 2 --dist loadgroup` does not end with one worker still running a long
    chain while the other idles: the SLURM group (one cluster, its runs one after another), then the other `slow`
    tests, then the rest, each in collection order (a stable sort)."""

    def rank(item) -> int:
        group = item.get_closest_marker("xdist_group")
        if group is not None and group.args and group.args[0] == "slurm":
            return 0
        return 1 if item.get_closest_marker("slow") is not None else 2

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def no_committed_noise(tmp_path_factory, monkeypatch):
    """Verdicts computed in a test are decided by the bands their (fake) cells carry and a FAKE family spread
    (:func:`fake_families`), never by the spreads committed in figures/<scale>/ (seed_spread.json,
    verdict_stability.json), which change whenever the archive is re-measured. A test of those files points
    noise.pooled_path at its own."""
    import json

    from reprokit.report.verdicts import noise

    folder = tmp_path_factory.mktemp("fake_noise")
    (folder / "seed_spread.json").write_text(json.dumps(fake_families()))
    monkeypatch.setattr(noise, "pooled_path", lambda scale: folder / "seed_spread.json")


@pytest.fixture(autouse=True)
def no_artefact_left_from_another_test():
    """A notebook run in this process (start_log) leaves the artefact it built and its partial-grid note in
    render/notebook.py's module state, which the next write_table or finish_figure of the same worker would print
    as its own statement: each test starts and ends with none."""
    from reprokit.report.render import notebook

    notebook._ARTEFACT.clear()
    notebook.set_partial(None)
    yield
    notebook._ARTEFACT.clear()
    notebook.set_partial(None)


@pytest.fixture
def shared_data():
    """Path to the offline dataset mirror; tests that need real data skip with a reason without it."""
    if not os.path.isdir(SHARED_DATA):
        pytest.skip(f"offline data mirror not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def http_dir(tmp_path):
    """A folder served over HTTP on 127.0.0.1: (folder, base URL); the download tests' mirror."""
    import fakes

    root = tmp_path / "served"
    root.mkdir()
    srv, url = fakes.serve_folder(root)
    yield root, url
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def pipeline_config():
    """The project's config through its one loader (reprokit.config.load_pipeline_config):
    `pipeline_config({"scale": "paper"})`. Each call returns a fresh copy, so a test may change it."""
    import copy
    import json

    from reprokit.config import load_pipeline_config

    loaded: dict = {}

    def load(overrides: dict | None = None) -> dict:
        key = json.dumps(overrides or {}, sort_keys=True)
        if key not in loaded:
            loaded[key] = load_pipeline_config(REPO, overrides)
        return copy.deepcopy(loaded[key])

    return load
