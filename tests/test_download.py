"""Data on a researcher's machine: datasets fetched by default from a mirror URL or their official
source, on loopback (a local HTTP server on 127.0.0.1 serving a mirror folder: the real MNIST and UCI
files of the offline mirror, small generated CIFAR-10 and Tiny ImageNet archives in their official
formats), and nested `--config` overrides typed as Snakemake's own command-line parser delivers them.

- a URL mirror is fetched in its mirror layout, before the official source, and verified;
- a source that does not answer gives "download failed: <reason>" (a status, the cells' n/a), a file
  that arrives corrupted gives the checksum error naming it (a failure);
- through Snakemake: a test-scale build whose only mirror is the URL downloads, verifies, extracts and
  builds the artefacts; a dead server ends in n/a rows with the reason, and the run finishes.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import fakes
import pytest
import yaml
from test_pipeline import make_workdir, snakemake

from reprokit.config import ConfigError, coerce_config, validate_config
from reprokit.data import mirrors
from reprokit.data.errors import ChecksumMismatch

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def dead_url() -> str:
    """A loopback URL where nothing listens (a port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def link_from_mirror(shared: str, served: Path, *relpaths: str) -> None:
    for rel in relpaths:
        (served / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(Path(shared) / rel, served / rel)


# ------------------------------------------------------------------------------------ in-process


def test_url_mirror_is_fetched_in_mirror_layout_before_the_official_source(
    shared_data, http_dir, tmp_path, monkeypatch
):
    served, url = http_dir
    link_from_mirror(
        shared_data,
        served,
        *(
            f"MNIST/raw/{f}"
            for f in (
                "train-images-idx3-ubyte.gz",
                "train-labels-idx1-ubyte.gz",
                "t10k-images-idx3-ubyte.gz",
                "t10k-labels-idx1-ubyte.gz",
            )
        ),
    )
    fakes.point_spec(monkeypatch, "mnist", urls=(dead_url() + "/",))  # the official source would fail
    cache = tmp_path / "cache"
    status = mirrors.fetch_status("mnist", [str(tmp_path / "empty"), url], cache, download=True)
    assert status["available"], status
    assert Path(status["path"]) == cache / "MNIST" / "raw"
    got = hashlib.md5((cache / "MNIST/raw/t10k-labels-idx1-ubyte.gz").read_bytes(), usedforsecurity=False).hexdigest()
    assert got == "ec29112dd5afa0611ce80d1b7f02629c"  # torchvision's published md5
    assert not [p for p in (cache / "MNIST" / "raw").iterdir() if p.name.endswith(".part")]
    # found in the cache from now on: no network needed, and the cheap check sees it
    assert mirrors.is_available("mnist", [url], cache)
    assert not mirrors.is_available("mnist", [url])  # a URL mirror is no local copy: the cache is


def test_dead_sources_give_a_status_with_each_reason_not_an_error(tmp_path, monkeypatch):
    dead = dead_url()
    fakes.point_spec(monkeypatch, "uci_yacht", urls=(f"{dead}/official/yacht/data.txt",))
    status = mirrors.fetch_status("uci_yacht", [dead + "/site-mirror"], tmp_path / "cache", download=True)
    assert status["available"] is False
    assert status["reason"].startswith("download failed:")
    assert f"mirror {dead}/site-mirror" in status["reason"] and "official source" in status["reason"]
    assert "connection refused" in status["reason"]
    assert not list((tmp_path / "cache").rglob("*.part"))


def test_http_error_is_named(http_dir, tmp_path, monkeypatch):
    _served, url = http_dir  # serves an empty folder: every file is a 404
    fakes.point_spec(monkeypatch, "spambase", urls=(dead_url() + "/spambase.zip",))
    status = mirrors.fetch_status("spambase", [url], tmp_path / "cache", download=True)
    assert not status["available"]
    assert "HTTP 404" in status["reason"] and "UCI-classification/spambase/spambase.data" in status["reason"]


def test_download_off_says_so(tmp_path):
    status = mirrors.fetch_status("magic", [str(tmp_path)], tmp_path / "cache", download=False)
    assert not status["available"] and "data.download: false" in status["reason"]


def test_corrupted_served_file_is_a_checksum_error_naming_file_and_url(shared_data, http_dir, tmp_path, monkeypatch):
    served, url = http_dir
    rel = "UCI/yacht/data.txt"
    link_from_mirror(shared_data, served, *(f"UCI/yacht/{p.name}" for p in (Path(shared_data) / "UCI/yacht").iterdir()))
    (served / rel).unlink()
    (served / rel).write_text((Path(shared_data) / rel).read_text().replace("0", "1", 1))
    fakes.point_spec(monkeypatch, "uci_yacht", urls=(dead_url() + "/yacht/data.txt",))
    with pytest.raises(ChecksumMismatch) as err:
        mirrors.fetch_status("uci_yacht", [url], tmp_path / "cache", download=True)
    assert rel in str(err.value) and f"{url}/{rel}" in str(err.value)
    assert not (tmp_path / "cache" / rel).exists()


def test_fetch_command_fails_on_a_corrupted_file_and_records_a_failed_download(shared_data, http_dir, tmp_path):
    served, url = http_dir
    rel = "UCI-classification/magic/magic04.data"
    (served / rel).parent.mkdir(parents=True)
    (served / rel).write_bytes(b"not the magic data\n")
    ctx = {
        "mirrors": [url],
        "cache_dir": str(tmp_path / "cache"),
        "variants_dir": str(tmp_path / "v"),
        "download": True,
    }
    out = tmp_path / "status" / "magic.json"
    cmd = [
        sys.executable,
        "-m",
        "reprokit.cell",
        "fetch",
        "--dataset",
        "magic",
        "--out",
        str(out),
        "--context",
        json.dumps(ctx),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode != 0 and "checksum mismatch" in res.stderr and rel in res.stderr
    assert not out.exists()
    # a server that is gone: the job succeeds and records why the dataset is n/a
    ctx["mirrors"] = [dead_url()]
    res = subprocess.run([*cmd[:-1], json.dumps(ctx)], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    status = json.loads(out.read_text())
    assert status["available"] is False and "download failed" in status["reason"]


# ------------------------------------------------------------------- nested --config overrides


def test_nested_config_overrides_are_typed_as_snakemake_delivers_them():
    from snakemake.cli import parse_config

    from reprokit.config import load_pipeline_config

    over = parse_config(
        [
            "data={download: false, mirrors: [http://127.0.0.1:8/m, /tmp/m]}",
            "run={checkpoint_every: 100, deterministic: yes}",
            "experiments={fig2a: {grid: {seed: [0, 1]}, settings: {lr: 0.01, hidden: [8, 8]}}}",
        ]
    )
    assert over["data"]["download"] == "false" and over["run"]["checkpoint_every"] == "100"  # BaseLoader
    cfg = load_pipeline_config(REPO, over)
    assert cfg["data"]["download"] is False and cfg["data"]["mirrors"] == ["http://127.0.0.1:8/m", "/tmp/m"]
    assert cfg["run"]["checkpoint_every"] == 100 and cfg["run"]["deterministic"] is True
    assert cfg["experiments"]["fig2a"]["grid"]["seed"] == [0, 1]
    assert cfg["experiments"]["fig2a"]["settings"]["lr"] == 0.01
    assert cfg["experiments"]["fig2a"]["settings"]["hidden"] == [8, 8]


def test_a_string_the_schema_cannot_read_still_fails_naming_the_key():
    from snakemake.cli import parse_config

    from reprokit.config import load_pipeline_config

    with pytest.raises(ConfigError, match=r"run\.checkpoint_every"):
        load_pipeline_config(REPO, parse_config(["run={checkpoint_every: often}"]))
    with pytest.raises(ConfigError, match=r"data\.download"):
        load_pipeline_config(REPO, parse_config(["data={download: maybe}"]))


def test_strings_the_schema_types_as_strings_stay_strings():
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["artefacts"], cfg["experiments"] = {}, {}
    cfg["paths"]["results"] = "123"  # a folder named 123 is a string
    out = coerce_config(cfg, SCHEMA)
    assert out["paths"]["results"] == "123"
    validate_config(out, SCHEMA)


def test_snakemake_accepts_the_readme_nested_overrides(tmp_path):
    work = make_workdir(tmp_path)
    res = snakemake(
        work,
        "-n",
        "--config",
        "data={download: true}",
        "run={checkpoint_every: 100}",
        "scale=test",
        "--",
        "results/test/fig2b.csv",
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:]


# --------------------------------------------------------------------------- through snakemake


def _official_sources_unreachable() -> bool:
    try:
        socket.create_connection(("www.cs.toronto.edu", 443), timeout=3).close()
    except OSError:
        return True
    return False


# every kind of file a download brings: idx (MNIST), the CIFAR-10 tgz (extracted), the Tiny ImageNet zip,
# UCI regression files and UCI classification tables; two artefacts built from them
# Every dataset the project fetches, then one real cell on each family of them: fetching is what this test is
# for (whole artefacts are built from the mirror folder by tests/test_artefacts_build.py and
# tests/test_invariance_tables.py, so building them here again only doubled CI's longest test).
FETCHED = (
    "mnist",
    "fashion_mnist",
    "cifar10",
    "tinyimagenet",
    "uci_yacht",
    "uci_protein",
    "spambase",
    "magic",
    "cdc_diabetes",
)
LOOPBACK_CELLS = [
    "fig3b/dataset~cifar10/rotated~false/method~baseline/n_train~1000/seed~0",
    "fig3c/dataset~tinyimagenet/rotated~false/method~baseline/n_train~48/seed~0",
    "fig3a_augerino_plain/dataset~mnist/rotated~true/method~augerino/n_train~400/seed~0",
    "bali_uci/method~dropout/dataset~uci_yacht/seed~0",
    "bali_cls_uci/method~dropout/dataset~spambase/seed~0",
]


@pytest.mark.slow
def test_test_scale_cells_from_a_url_mirror_only(shared_data, http_dir, tmp_path):
    served, url = http_dir
    shared = Path(shared_data)
    rels = [
        str(p.relative_to(shared))
        for sub in ("MNIST", "FashionMNIST", "UCI", "UCI-classification")
        for p in (shared / sub).rglob("*")
        if p.is_file()
    ]
    link_from_mirror(shared_data, served, *rels)
    # as many examples as the test scale's subsets ask for (CIFAR-10 1000 train, Tiny ImageNet 48)
    sums = fakes.checksums_of(fakes.make_fake_cifar10(served, n_per_batch=200, n_test=60, archive=True))
    tiny = fakes.make_fake_tinyimagenet(served, n_classes=4, n_train_per_class=12, n_val=60, archive=True)
    checksums = {
        "cifar-10-python.tar.gz": sums["cifar-10-python.tar.gz"],
        **{k: v for k, v in sums.items() if k.startswith("cifar-10-batches-py/")},
        "tiny-imagenet-200.zip": tiny["tiny-imagenet-200.zip"],
    }
    work = make_workdir(
        tmp_path, data={"mirrors": [url], "download": True, "cache_dir": "data/cache", "checksums": checksums}
    )
    targets = [f"data/cache/status/{name}.json" for name in FETCHED]
    targets += [f"results/test/{cell}/metrics.json" for cell in LOOPBACK_CELLS]
    res = snakemake(work, "--cores", "2", *targets, "--config", "scale=test", timeout=1200)
    assert res.returncode == 0, res.stdout[-4000:]
    cache = work / "data" / "cache"
    for name in FETCHED:
        status = json.loads((cache / "status" / f"{name}.json").read_text())
        assert status["available"], status
    assert (cache / "cifar-10-batches-py" / "data_batch_1").is_file()  # extracted from the downloaded tgz
    assert (cache / "tiny-imagenet-200.zip").is_file() and (cache / "MNIST/raw/train-images-idx3-ubyte.gz").is_file()
    for cell in LOOPBACK_CELLS:
        metrics = json.loads((work / "results" / "test" / cell / "metrics.json").read_text())
        assert metrics["status"] == "completed", (cell, metrics.get("note"))


@pytest.mark.slow
def test_dead_server_gives_na_rows_with_the_reason_and_the_run_finishes(tmp_path):
    if not _official_sources_unreachable():
        pytest.skip("this machine reaches the official sources: a dead mirror would fall back to them")
    work = make_workdir(tmp_path, data={"mirrors": [dead_url()], "download": True})
    res = snakemake(
        work,
        "--cores",
        "2",
        "results/test/bali_uci.csv",
        "results/test/table4_cifar.csv",
        "--config",
        "scale=test",
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-4000:]
    import pandas as pd

    for exp, dataset in (("bali_uci", "uci_yacht"), ("table4_cifar", "cifar10")):
        table = pd.read_csv(work / "results" / "test" / f"{exp}.csv")
        assert (table["status"] == "unavailable").all()
        notes = " ".join(table["note"])
        assert dataset in notes and "download failed" in notes and "connection refused" in notes
    # a failed fetch is recorded, not retried on every run: nothing left to do
    again = snakemake(work, "-n", "results/test/bali_uci.csv", "--config", "scale=test", timeout=300)
    assert "Nothing to be done" in again.stdout, again.stdout[-2000:]
