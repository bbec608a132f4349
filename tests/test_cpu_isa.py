"""`run.cpu_isa`: a CPU cell's instruction-set pin (reprokit.runtime_settings.pin_cpu_isa).

The setting's validation, the pin reaching the environment of `python -m reprokit.cell` before torch is
imported (an import spy in a subprocess records the environment at torch's first import), metrics.json's
provenance record of it, `native` leaving the environment alone, a pin asked for after torch loaded, and
the launchers' side (the job's environment; the cell's context, hence its Snakemake parameters, unchanged).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from reprokit import runtime_settings
from reprokit.config import ConfigError, grid_of, load_pipeline_config
from reprokit.job import cell_job
from reprokit.runtime_settings import CPU_ISA_ENV, CPU_ISA_VAR, CPU_ISA_VARS, DeviceConfigError, RuntimeSettings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "src")
HAS_AVX2 = "avx2" in (runtime_settings.cpu_isas_supported() or [])
needs_avx2 = pytest.mark.skipif(not HAS_AVX2, reason="the avx2 pin applies only on an x86 CPU with AVX2")


def _clean_env(**extra) -> dict:
    """This process's environment without any pin, plus `extra`; src/ first on the path."""
    env = {k: v for k, v in os.environ.items() if k not in (*CPU_ISA_VARS, CPU_ISA_VAR)}
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, **extra}


# ------------------------------------------------------------------------------------- the setting


def test_default_is_avx2_and_null_means_native():
    assert RuntimeSettings().cpu_isa == "avx2"
    assert RuntimeSettings.from_dict({"cpu_isa": None}).cpu_isa == "native"
    assert load_pipeline_config(REPO)["run"]["cpu_isa"] == "avx2"  # config/config.yaml states it


def test_a_bad_value_names_the_key_and_the_allowed_values():
    with pytest.raises(DeviceConfigError, match=r"run\.cpu_isa: 'sse4' unknown \(valid: avx2, avx512, native"):
        RuntimeSettings.from_dict({"cpu_isa": "sse4"})
    with pytest.raises(ConfigError, match=r"run\.cpu_isa.*'AVX2'.*avx2.*avx512.*native"):
        load_pipeline_config(REPO, {"run": {"cpu_isa": "AVX2"}})


def test_the_pin_is_in_the_jobs_environment_not_in_its_context(pipeline_config):
    """Every launcher gives the cell REPROKIT_CPU_ISA (and the pin's variables); the cell's context, which is
    its Snakemake parameters, does not name it, so switching it re-runs no finished cell."""
    cell = next(iter(grid_of(pipeline_config(), "fig2a", "quick").cells()))
    job = cell_job(cell, pipeline_config())
    assert job.env == {CPU_ISA_VAR: "avx2", **CPU_ISA_ENV["avx2"]}
    assert "cpu_isa" not in job.context["run"]
    native = cell_job(cell, pipeline_config({"run": {"cpu_isa": "native"}}))
    assert native.env == {CPU_ISA_VAR: "native"} and native.context == job.context


# ------------------------------------------------------------------------------------- in a process


def test_native_leaves_the_environment_untouched():
    environ = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2", "PATH": "/bin"}
    rec = runtime_settings.pin_cpu_isa("native", environ)
    assert environ == {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2", "PATH": "/bin", CPU_ISA_VAR: "native"}
    assert rec["requested"] == "native" and rec["pinned"] is False and rec["ATEN_CPU_CAPABILITY"] == "default"


def test_a_cpu_without_the_instruction_set_stays_unpinned_with_a_warning(monkeypatch):
    monkeypatch.setattr(runtime_settings, "cpu_isas_supported", lambda: [])  # e.g. an ARM machine
    environ: dict = {}
    with pytest.warns(RuntimeWarning, match="run.cpu_isa: avx2 asked for, but this CPU"):
        rec = runtime_settings.pin_cpu_isa("avx2", environ)
    assert environ == {CPU_ISA_VAR: "avx2"} and rec["pinned"] is False


def _run_python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )


@needs_avx2
def test_a_pin_after_torch_loaded_fails_loudly():
    """A library user who imported torch first cannot pin any more: pin_cpu_isa says so and how to fix it."""
    res = _run_python(
        """
        import torch
        from reprokit.runtime_settings import CpuIsaError, pin_cpu_isa
        try:
            pin_cpu_isa("avx2")
        except CpuIsaError as err:
            print("ERROR", err)
        """,
        _clean_env(),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "ERROR run.cpu_isa: avx2 asked for after torch was imported" in res.stdout
    assert "ATEN_CPU_CAPABILITY=avx2" in res.stdout and "before importing torch" in res.stdout
    # with the pin already in the environment when torch loaded, asking again is fine
    res = _run_python(
        "import torch; from reprokit.runtime_settings import pin_cpu_isa; print(pin_cpu_isa('avx2')['pinned'])",
        _clean_env(**CPU_ISA_ENV["avx2"]),
    )
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr[-2000:]


# The cell entry point as `python -m reprokit.cell run ...` runs it (runpy, __name__ == "__main__"), with a
# torch-free fake kind registered first and an import spy that records the environment when torch is first
# imported; prints that environment as JSON.
_CELL_SCRIPT = """
import importlib.abc, json, os, runpy, sys

VARS = {vars!r}
at_torch = {{}}


class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not at_torch:
            at_torch.update({{k: os.environ.get(k) for k in VARS}})
        return None


sys.meta_path.insert(0, Spy())
from reprokit import plan

assert "torch" not in sys.modules


class Method:
    def train_step(self, step):
        return {{"loss": 1.0}}

    def evaluate(self, step):
        return {{"test_acc": 0.5}}

    def final_metrics(self):
        return {{"test_acc": 0.5}}

    def state_dict(self):
        return {{}}

    def load_state_dict(self, s):
        pass


class Fake:
    name = "fake"

    def required_variants(self, cell):
        return {{}}

    def build(self, cell, ctx):
        from reprokit.builders import Run

        return Run(Method(), n_steps=2, eval_every=1)


plan.KINDS["fake"] = Fake()
sys.argv = ["reprokit.cell", *json.loads(sys.argv[1])]
try:
    runpy.run_module("reprokit.cell", run_name="__main__", alter_sys=True)
except SystemExit as e:
    assert not e.code, e.code
print(json.dumps(at_torch))
"""


def _cell_run(tmp_path, env: dict) -> tuple[dict, dict]:
    """(environment at torch's first import, metrics.json) of a fake cell run through the entry point."""
    cell = {"scale": "test", "experiment": "tiny", "coords": {"seed": 0}, "settings": {}, "kind": "fake"}
    ctx = {"mirrors": [], "cache_dir": None, "variants_dir": str(tmp_path / "v"), "run": {"device": "cpu"}}
    out = tmp_path / "out"
    argv = ["run", "--cell", json.dumps(cell), "--context", json.dumps(ctx), "--out", str(out)]
    script = _CELL_SCRIPT.format(vars=(CPU_ISA_VAR, *CPU_ISA_VARS))
    res = subprocess.run(
        [sys.executable, "-c", script, json.dumps(argv)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), json.loads((out / "metrics.json").read_text())


@needs_avx2
def test_the_cell_entry_point_pins_before_torch_loads_and_records_it(tmp_path):
    """No REPROKIT_CPU_ISA (a cell started by hand): the default pin is in the environment when torch is first
    imported, torch dispatches to AVX2, and metrics.json's provenance says so."""
    at_torch, record = _cell_run(tmp_path, _clean_env())
    assert at_torch == {CPU_ISA_VAR: "avx2", **CPU_ISA_ENV["avx2"], "MKL_CBWR": None}
    isa = record["provenance"]["cpu_isa"]
    assert isa["requested"] == "avx2" and isa["pinned"] is True
    assert {k: isa[k] for k in CPU_ISA_ENV["avx2"]} == CPU_ISA_ENV["avx2"]
    assert isa["torch_capability"] == "AVX2" == record["provenance"]["cpu_capability"]
    assert "avx2" in isa["cpu_has"]


@needs_avx2
def test_native_cell_keeps_the_users_environment(tmp_path):
    """REPROKIT_CPU_ISA=native: the cell sets nothing; a variable the user set reaches torch as it was (here
    ATEN_CPU_CAPABILITY=default, which torch honours), and the provenance records it, unpinned."""
    at_torch, record = _cell_run(tmp_path, _clean_env(**{CPU_ISA_VAR: "native", "ATEN_CPU_CAPABILITY": "default"}))
    assert at_torch == {
        CPU_ISA_VAR: "native",
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": None,
        "MKL_ENABLE_INSTRUCTIONS": None,
        "MKL_CBWR": None,
    }
    isa = record["provenance"]["cpu_isa"]
    assert isa["requested"] == "native" and isa["pinned"] is False
    assert isa["ATEN_CPU_CAPABILITY"] == "default" and isa["torch_capability"] == "DEFAULT"
