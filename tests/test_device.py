"""Every cell trains on the device it is given (2026-11-23, commit a542cfa).

CI has no GPU, so placement is checked on the CPU with a trick: after a cell is built (data, model and
generators placed by the runtime), its steps, evaluations and final metrics run with torch's default
device set to "meta". Any tensor a method creates without naming a device then lands on "meta" and
the step fails on mixing devices, exactly where it would create a CPU tensor next to CUDA data on a
GPU. The CUDA-only tests at the end run the same cells on a real GPU where there is one.

Also here: `run.device/precision/deterministic` validation, the OOM outcome (injected), provenance in
metrics.json, and checkpoint contents.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap
import traceback
import types

import pytest
import torch

from reprokit import cell as cell_mod
from reprokit import runtime as runtime_mod
from reprokit import runtime_settings
from reprokit.builders import CellContext, Measurement, Run
from reprokit.config import Cell, grid_of, load_pipeline_config
from reprokit.data import variants
from reprokit.data.variants import variant_path
from reprokit.plan import kind as kind_module
from reprokit.runtime import Runtime, is_oom
from reprokit.runtime_settings import DeviceConfigError, RuntimeSettings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA = torch.cuda.is_available()


def _config():
    return load_pipeline_config(REPO)


def _test_cell(name: str, method: str | None) -> Cell:
    for c in grid_of(_config(), name, "test").cells():
        if method is None or c.coord_dict.get("method") == method:
            return c
    raise LookupError(f"no test-scale cell of {name} with method {method}")


def _context(cell: Cell, mirror: str, tmp_path, device: str = "cpu", precision: str = "fp32") -> CellContext:
    ctx = CellContext(
        mirrors=[mirror],
        cache_dir=None,
        variants_dir=str(tmp_path / "variants"),
        runtime_settings={"device": device, "precision": precision},
    )
    for name, (ds, fn) in kind_module(cell.kind).required_variants(cell).items():
        path = variant_path(ctx.variants_dir, ds, fn)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            variants.build_variant(ds, fn, path, [mirror])
        ctx.variant_paths[name] = path
    return ctx


# One test-scale cell per (kind, method) of both papers: every method the pipeline trains.
CASES = [
    ("fig3a", "baseline"),
    ("fig3a", "augerino"),
    ("fig3a", "partitioned"),
    ("fig3a", "partitioned_ens"),
    ("fig3a", "diff_laplace"),
    ("fig3a", "last_layer_ml"),
    ("fig9_random", "random"),
    ("fig2a", "partitioned"),
    ("fig2a", "laplace"),
    ("fig2b", "partitioned_mask"),
    ("bali_uci", "bali"),
    ("bali_uci", "dropout"),
    ("bali_uci", "bbb"),
    ("bali_uci", "pbp"),
    ("bali_uci", "vadam"),
    ("bali_cls_uci", "bali"),
    ("bali_cls_uci", "dropout"),
    ("bali_cls_uci", "map"),
    ("bali_fig7_local", "bali"),
    ("bali_synthetic", "bali"),
    ("bali_bbb_synthetic", "bbb"),
    ("table8_timing", None),
    ("table4_mnist", "fedavg"),
    ("table4_mnist", "augerino"),
    ("table4_mnist", "partitioned"),
]


def _optimiser_state_follows_the_default_device() -> bool:
    """Older torch (2.11 seen on a GPU box; 2.14 not) creates an optimiser's lazy state (Adam's `step`)
    with no device, i.e. on the default device: under the trick below that is torch's meta tensor, not ours."""
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    opt = torch.optim.Adam([p])
    try:
        with torch.device("meta"):
            opt.step()
    except (RuntimeError, NotImplementedError):
        return True
    return False


OLD_OPTIMISER_STATE = _optimiser_state_follows_the_default_device()


def _in_torch_optim(err: BaseException) -> bool:
    return any(f"torch{os.sep}optim{os.sep}" in frame.filename for frame in traceback.extract_tb(err.__traceback__))


@pytest.mark.parametrize("name,method", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_steps_create_no_tensor_off_the_cells_device(name, method, shared_data, tmp_path):
    cell = _test_cell(name, method)
    ctx = _context(cell, shared_data, tmp_path)
    run = kind_module(cell.kind).build(cell, ctx)
    try:
        _steps_under_meta(run, method)
    except (RuntimeError, NotImplementedError) as err:
        if OLD_OPTIMISER_STATE and _in_torch_optim(err):
            pytest.skip(
                f"torch {torch.__version__} puts an optimiser's lazy state on the default device; this "
                "method's optimiser first steps under the trick (the check runs on torch >= 2.14)"
            )
        raise


@pytest.mark.parametrize("method", ["fedavg", "augerino", "partitioned"])
def test_batched_federated_clients_create_no_tensor_off_the_cells_device(method, shared_data, tmp_path):
    """The vmap client path (the default on CUDA) draws every client's randomness outside vmap: on its device too."""
    cell = _test_cell("table4_mnist", method)
    cell = dataclasses.replace(cell, settings={**cell.settings, "client_batching": "vmap"})
    run = kind_module(cell.kind).build(cell, _context(cell, shared_data, tmp_path))
    assert run.method.batching == "vmap"  # the setting reached the method: this checks the batched path
    try:
        _steps_under_meta(run, method)
    except (RuntimeError, NotImplementedError) as err:
        if OLD_OPTIMISER_STATE and _in_torch_optim(err):
            pytest.skip(f"torch {torch.__version__} puts an optimiser's lazy state on the default device")
        raise


def _steps_under_meta(run, method):
    if isinstance(run, Measurement):  # Table 8: a measurement, no training loop
        with torch.device("meta"):
            curve, metrics = run.measure()
        assert metrics and curve
        return
    m = run.method
    # The first step runs on the real default device (optimisers made before the trick get their lazy
    # state as torch makes it). Later steps run under the trick, and every per-step draw (minibatch, k,
    # augmentation, noise) is made again there.
    out = m.train_step(0)
    assert math.isfinite(float(out["loss"]))
    with torch.device("meta"):  # a factory call without a device now makes a meta tensor -> device mismatch
        for step in range(1, min(3, run.n_steps)):
            out = m.train_step(step)
            assert math.isfinite(float(out["loss"]))
        if method != "laplace":
            run.evaluation.curve(1)
            metrics = run.evaluation.final()
    if method == "laplace":  # laplace-torch's fit and prior optimisation (each evaluation with best_lml, and the
        run.evaluation.curve(1)  # final one) make their own tensors: they follow the model's device on a GPU,
        metrics = run.evaluation.final()  # not a meta default, so they are checked outside the trick
    assert metrics


def test_the_meta_trick_catches_a_tensor_created_without_a_device():
    """The check above is not vacuous: a step that makes a constant without a device fails under it."""
    x = torch.ones(3)
    with torch.device("meta"), pytest.raises((RuntimeError, NotImplementedError)):
        float((x * torch.ones(3)).sum())  # torch.ones(3) is meta here: mixing it with a CPU tensor fails
    with torch.device("meta"), pytest.raises((RuntimeError, NotImplementedError)):
        float(torch.ones(3).sum())  # a loss or metric computed from such a tensor cannot be read


def test_samplers_draw_on_their_generators_device():
    """Index sampling is the one place the meta trick is blind (a CPU tensor indexed by meta indices stays
    CPU), so samplers are checked directly: without device= their indices would be meta here."""
    from reprokit.methods.common import EpochSampler
    from reprokit.partition import PartitionSchedule

    sampler = EpochSampler(10, 4, torch.Generator().manual_seed(0))  # built as build() does, then sampled
    schedule = PartitionSchedule(torch.tensor([0] * 5 + [1] * 5), None, torch.Generator().manual_seed(0), device="cpu")
    with torch.device("meta"):
        for _ in range(4):  # crosses an epoch boundary (reshuffle)
            assert sampler.next().device.type == "cpu"
        assert schedule.param_step(3)[1].device.type == "cpu"
        assert schedule.hyper_step(3)[1].device.type == "cpu"


# ------------------------------------------------------------------------------------- the runtime


def test_runtime_settings_name_the_bad_key_and_value():
    with pytest.raises(DeviceConfigError, match=r"run.device: 'gpu'"):
        RuntimeSettings.from_dict({"device": "gpu"})
    with pytest.raises(DeviceConfigError, match=r"run.precision: 'fp16'"):
        RuntimeSettings.from_dict({"precision": "fp16"})
    assert RuntimeSettings.from_dict({"device": "cuda:1"}).device == "cuda:1"
    assert RuntimeSettings.from_dict(None) == RuntimeSettings()  # defaults: auto, fp32, not deterministic


def test_config_schema_rejects_a_bad_device_before_any_job(tmp_path):
    from reprokit.config import ConfigError

    with pytest.raises(ConfigError, match="device"):
        load_pipeline_config(REPO, {"run": {"device": "tpu"}})


@pytest.mark.skipif(CUDA, reason="checks the error on a machine without CUDA")
def test_asking_for_cuda_without_cuda_fails_clearly():
    with pytest.raises(DeviceConfigError, match="sees no CUDA device"):
        Runtime(RuntimeSettings(device="cuda"))


def test_auto_is_cuda_when_available_else_cpu():
    assert Runtime(RuntimeSettings(device="auto")).device.type == ("cuda" if CUDA else "cpu")


def test_bf16_runs_under_autocast_and_fp32_does_not():
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with Runtime(RuntimeSettings(device="cpu", precision="bf16")).autocast():
        assert lin(x).dtype == torch.bfloat16
        assert (x.double() @ x.double().T).dtype == torch.float64  # float64 (BALI statistics) is never autocast
    with Runtime(RuntimeSettings(device="cpu", precision="fp32")).autocast():
        assert lin(x).dtype == torch.float32


def test_bf16_puts_conv_nets_in_channels_last_only():
    rt = Runtime(RuntimeSettings(device="cpu", precision="bf16"))
    conv = rt.model(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()))
    assert conv[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert not conv[0].weight.is_contiguous()
    fp32 = Runtime(RuntimeSettings(device="cpu", precision="fp32")).model(torch.nn.Conv2d(3, 8, 3))
    assert fp32.weight.is_contiguous()


def test_a_cpu_runtime_keeps_freed_memory_and_numbers_do_not_change(monkeypatch):
    """Runtime.apply() on a CPU keeps freed blocks in the heap (glibc: no page faults on every step's
    activations); a computation gives the same bits either way, and glibc's defaults come back."""
    monkeypatch.delenv("REPROKIT_MALLOC_DEFAULTS", raising=False)
    real, calls = runtime_mod.retain_freed_memory, []
    monkeypatch.setattr(runtime_mod, "retain_freed_memory", lambda enable=True: calls.append(enable) or real(enable))
    torch.manual_seed(0)
    x, w = torch.randn(64, 1, 28, 28), torch.randn(20, 1, 5, 5)
    try:
        before = torch.nn.functional.conv2d(x, w, padding=2)
        Runtime(RuntimeSettings(device="cpu")).apply()
        assert calls == [True]
        assert torch.equal(torch.nn.functional.conv2d(x, w, padding=2), before)
    finally:
        restored = real(False)
    assert restored == real(True)  # True twice with glibc, False twice without (nothing changed)
    real(False)
    monkeypatch.setenv("REPROKIT_MALLOC_DEFAULTS", "1")  # the opt-out (a tight memory limit) changes nothing
    assert real(True) is False


def test_bf16_cell_trains_and_records_its_precision(shared_data, tmp_path):
    cell = _test_cell("fig3a", "partitioned")
    ctx = _context(cell, shared_data, tmp_path, precision="bf16")
    record = cell_mod.run_cell(cell, ctx, tmp_path / "out", None)
    assert record["status"] == "completed"
    assert record["provenance"]["precision"] == "bf16"
    assert math.isfinite(record["metrics"]["test_acc"])


# ------------------------------------------------------------------------------- OOM and provenance


class _OOMAt:
    """Trains normally, then raises CUDA's out-of-memory error at step `at` (or in build if at is None)."""

    def __init__(self, at: int):
        self.at, self.w = at, 0.0

    def train_step(self, step):
        if step == self.at:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (injected)")
        self.w += 1.0
        return {"loss": 1.0 / self.w}

    def evaluate(self, step):
        return {"test_acc": 0.5}

    def final_metrics(self):
        return {"test_acc": 0.5}

    def state_dict(self):
        return {"w": self.w}

    def load_state_dict(self, s):
        self.w = s["w"]


def _fake_kind(monkeypatch, build):
    mod = types.ModuleType("reprokit.builders.fake")
    mod.required_variants = lambda cell: {}
    mod.build = build
    monkeypatch.setattr(cell_mod, "kind", lambda kind: mod)


@pytest.mark.parametrize("where", ["step", "build"])
def test_out_of_memory_is_the_cells_outcome_not_a_crash(monkeypatch, tmp_path, where):
    def build(cell, ctx):
        if where == "build":
            raise torch.OutOfMemoryError("CUDA out of memory (injected in build)")
        return Run(_OOMAt(7), n_steps=20, eval_every=5)

    _fake_kind(monkeypatch, build)
    cell = Cell(scale="test", experiment="big", coords=(("seed", 0),), settings={}, kind="fake")
    ctx = {"mirrors": [], "cache_dir": None, "variants_dir": str(tmp_path / "v"), "run": {"device": "cpu"}}
    ckpt = tmp_path / "ckpt" / "c.pt"
    args = [
        "run",
        "--cell",
        json.dumps(cell.to_dict()),
        "--context",
        json.dumps(ctx),
        "--out",
        str(tmp_path / "out"),
        "--checkpoint",
        str(ckpt),
        "--checkpoint-every",
        "2",
    ]
    assert cell_mod.main(args) == 0
    record = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert record["status"] == "oom"
    if where == "step":
        assert record["steps"] == 7 and math.isnan(record["metrics"]["test_acc"])
    else:
        assert record["metrics"] == {}
    assert not ckpt.exists()  # an OOM is final: a re-run would OOM again


def test_a_cell_run_by_the_cli_records_its_machine_and_threads(monkeypatch, tmp_path):
    """`python -m reprokit.cell run --threads 2`: metrics.json's provenance names the CPU model, torch's CPU
    capability and the 2 intra-op threads the cell ran with; an archived line carries the same block, and the
    report's device string names the CPU model."""
    from reprokit.report.store import archive
    from reprokit.report.store.cells import device_of

    _fake_kind(monkeypatch, lambda cell, ctx: Run(_OOMAt(-1), n_steps=4, eval_every=2))
    cell = Cell(scale="test", experiment="tiny", coords=(("seed", 0),), settings={}, kind="fake")
    ctx = {"mirrors": [], "cache_dir": None, "variants_dir": str(tmp_path / "v"), "run": {"device": "cpu"}}
    out = tmp_path / "results" / "test" / "tiny" / "seed~0"
    threads = torch.get_num_threads()
    try:
        assert (
            cell_mod.main(
                [
                    "run",
                    "--cell",
                    json.dumps(cell.to_dict()),
                    "--context",
                    json.dumps(ctx),
                    "--out",
                    str(out),
                    "--threads",
                    "2",
                ]
            )
            == 0
        )
    finally:
        torch.set_num_threads(threads)
    record = json.loads((out / "metrics.json").read_text())
    prov = record["provenance"]
    assert record["status"] == "completed" and record["metrics"] == {"test_acc": 0.5}
    assert prov["threads"] == 2
    assert prov["cpu_model"] == runtime_settings.cpu_model() and prov["cpu_capability"]
    assert not {"gpu_model", "gpu_driver"} & set(prov)
    assert device_of(record) == f"cpu ({runtime_settings.cpu_model()})"
    (out / "config.json").write_text(json.dumps({"settings": {}}))
    line = archive.from_results(tmp_path / "results", "test", "tiny")["test/tiny/seed~0"]
    assert line["provenance"] == prov


def test_machine_names_the_gpu_and_its_driver_on_cuda_only(monkeypatch):
    # FAKE GPU: CI has none, so torch's name lookup and the driver query are stood in for
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "FAKE H100")
    monkeypatch.setattr(runtime_mod, "gpu_driver", lambda: "550.54.15")
    on_gpu, on_cpu = runtime_mod.machine("cuda:0"), runtime_mod.machine("cpu")
    assert on_gpu["gpu_model"] == "FAKE H100" and on_gpu["gpu_driver"] == "550.54.15"
    assert not {"gpu_model", "gpu_driver"} & set(on_cpu)
    assert {"cpu_model", "cpu_capability", "threads"} <= set(on_gpu) & set(on_cpu)


def test_gpu_driver_is_none_without_nvml_or_nvidia_smi(monkeypatch):
    import builtins
    import shutil

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    runtime_settings.gpu_driver.cache_clear()
    try:
        assert runtime_settings.gpu_driver() is None
    finally:
        runtime_settings.gpu_driver.cache_clear()


def test_device_of_names_the_cpu_model_and_still_reads_old_records():
    from reprokit.report.store.cells import device_of

    assert (
        device_of({"provenance": {"device": "cpu", "device_name": "x86_64"}}) == "cpu (x86_64)"
    )  # recorded before e309fe4
    assert (
        device_of(
            {
                "provenance": {
                    "device": "cpu",
                    "device_name": "x86_64",
                    "cpu_model": "AMD EPYC 7B13",
                    "cpu_capability": "AVX512",
                    "threads": 1,
                }
            }
        )
        == "cpu (AMD EPYC 7B13)"
    )
    assert (
        device_of(
            {
                "provenance": {
                    "device": "cuda:0",
                    "device_name": "NVIDIA H100 80GB HBM3",
                    "cpu_model": "Intel Xeon",
                    "gpu_model": "NVIDIA H100 80GB HBM3",
                    "gpu_driver": "550.54.15",
                }
            }
        )
        == "cuda:0 (NVIDIA H100 80GB HBM3)"
    )
    assert device_of({}) is None


def test_other_errors_still_fail_the_cell(monkeypatch, tmp_path):
    def build(cell, ctx):
        raise RuntimeError("a real bug")

    _fake_kind(monkeypatch, build)
    cell = Cell(scale="test", experiment="bug", coords=(("seed", 0),), settings={}, kind="fake")
    ctx = CellContext(mirrors=[], cache_dir=None, variants_dir=str(tmp_path / "v"))
    with pytest.raises(RuntimeError, match="a real bug"):
        cell_mod.run_cell(cell, ctx, tmp_path / "out", None)
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_is_oom_recognises_cuda_oom_only():
    assert is_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_oom(RuntimeError("CUDA error: out of memory"))
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(MemoryError())


def test_cpu_memory_guard_refuses_an_allocation_beyond_it_and_restores_the_limit():
    """On a CPU, an allocation past the guard's headroom fails as a catchable error (the kernel would otherwise
    kill the process); the same allocation outside the guard succeeds, the old limit is back after the block,
    and on a CUDA device the guard leaves the limit alone. In a fresh process: RLIMIT_AS is process-wide."""
    code = textwrap.dedent(
        """
        import resource, torch
        from reprokit.runtime import cpu_memory_guard, is_cpu_oom, is_oom
        before = resource.getrlimit(resource.RLIMIT_AS)
        big = 512 * 2**20
        torch.empty(big, dtype=torch.uint8).fill_(1)  # unguarded: allowed
        try:
            with cpu_memory_guard("cpu", headroom_bytes=64 * 2**20):
                torch.empty(big, dtype=torch.uint8).fill_(1)
        except Exception as err:
            print("refused", is_cpu_oom(err), is_oom(err))
        else:
            print("allowed")
        assert resource.getrlimit(resource.RLIMIT_AS) == before
        with cpu_memory_guard("cpu", headroom_bytes=64 * 2**20):
            torch.empty(8 * 2**20, dtype=torch.uint8).fill_(1)  # within the headroom
        with cpu_memory_guard("cuda", headroom_bytes=1):
            assert resource.getrlimit(resource.RLIMIT_AS) == before
        print("done")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["refused", "True", "False", "done"]


def test_tables_print_oom_for_an_oom_cell():
    import pandas as pd

    from reprokit.report.render import bali_classification as bc
    from reprokit.report.render import bali_regression as br

    df = pd.DataFrame(
        [
            {
                "scale": "test",
                "dataset": "uci_yacht",
                "method": "bali",
                "split": s,
                "seed": s,
                "status": st,
                "test_rmse": v,
            }
            for s, (st, v) in enumerate([("completed", 1.0), ("oom", float("nan"))])
        ]
    )
    paper = {"rmse": {}, "ll": {}}
    table, notes = br.uci_table(df, paper, "rmse")
    assert table.iloc[0]["BALI (ours)"] == "OOM" and any("OOM" in n for n in notes)
    cls = pd.DataFrame(
        [
            {
                "scale": "test",
                "dataset": "mnist",
                "method": "bali",
                "seed": 0,
                "status": "oom",
                "test_acc": float("nan"),
                "test_ece": float("nan"),
            }
        ]
    )
    assert set(bc.table2(cls)["BALI"]) == {"OOM"}


def test_metrics_json_records_device_precision_versions_memory_and_speed(shared_data, tmp_path):
    cell = _test_cell("bali_synthetic", "bali")
    record = cell_mod.run_cell(cell, _context(cell, shared_data, tmp_path), tmp_path / "out", None)
    prov = record["provenance"]
    assert prov["device"] == "cpu" and prov["precision"] == "fp32"
    assert prov["torch"] == torch.__version__ and "cuda" in prov
    assert prov["peak_memory_mb"] > 10  # this process has at least torch loaded
    # the machine: another CPU moves float rounding, so the record names it
    assert prov["cpu_model"] and prov["cpu_model"] == runtime_settings.cpu_model()
    assert prov["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert prov["threads"] == torch.get_num_threads()
    assert "gpu_model" not in prov and "gpu_driver" not in prov  # a CPU cell has no GPU to name
    assert record["seconds_per_step"] > 0
    assert record["seconds_per_step"] * record["steps"] == pytest.approx(record["seconds_this_run"], abs=1e-3)


def test_checkpoint_carries_random_states_and_cpu_checkpoints_need_no_cuda(tmp_path):
    from reprokit.loop import CHECKPOINT_VERSION, save_checkpoint

    method = _OOMAt(at=-1)
    path = tmp_path / "c.pt"
    save_checkpoint(path, 3, method, [])
    ckpt = torch.load(path, weights_only=False)
    assert ckpt["version"] == CHECKPOINT_VERSION
    assert {"torch", "numpy", "python"} <= set(ckpt["rng"])
    assert ("cuda" in ckpt["rng"]) == (CUDA and torch.cuda.is_initialized())


# ----------------------------------------------------------------------------------- on a real GPU

gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on a GPU node: pytest tests/test_device.py)")


@gpu
@pytest.mark.parametrize("name,method", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_every_method_runs_on_cuda(name, method, shared_data, tmp_path):
    cell = _test_cell(name, method)
    ctx = _context(cell, shared_data, tmp_path, device="cuda")
    record = cell_mod.run_cell(cell, ctx, tmp_path / "out", None)
    assert record["status"] == "completed"
    assert record["provenance"]["device"].startswith("cuda")
    assert record["provenance"]["peak_memory_kind"] == "cuda_max_allocated"
    assert record["provenance"]["gpu_model"] == torch.cuda.get_device_name()
    assert "gpu_driver" in record["provenance"] and record["provenance"]["cpu_model"]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=gpu)])
def test_a_resumed_deterministic_cell_ends_with_the_same_metrics(device, shared_data, tmp_path):
    """Runs on the CPU too, so the harness cannot rot unseen between GPU sessions."""
    cell = _test_cell("fig3a", "partitioned")
    ctx = CellContext(
        mirrors=[shared_data],
        cache_dir=None,
        variants_dir=str(tmp_path / "variants"),
        runtime_settings={"device": device, "deterministic": True},
    )
    ctx.variant_paths.update(_context(cell, shared_data, tmp_path).variant_paths)
    ref = cell_mod.run_cell(cell, ctx, tmp_path / "ref", None)
    n = ref["steps"]

    from reprokit.loop import Preempted

    ckpt = tmp_path / "ckpt.pt"
    real_loop = cell_mod.run_loop

    def interrupted(method, loop, path, precision, **kwargs):
        loop.n_steps = n // 2
        loop.checkpoint_every = max(1, n // 2)
        real_loop(method, loop, path, precision, **kwargs)
        from reprokit.loop import save_checkpoint

        save_checkpoint(path, n // 2, method, [])
        raise Preempted(n // 2)

    cell_mod.run_loop = interrupted
    try:
        with pytest.raises(SystemExit):
            cell_mod.run_cell(cell, ctx, tmp_path / "resumed", ckpt)
    finally:
        cell_mod.run_loop = real_loop
    resumed = cell_mod.run_cell(cell, ctx, tmp_path / "resumed", ckpt)
    assert resumed["resumed_from_step"] == n // 2
    assert resumed["metrics"] == ref["metrics"]


def test_bali_ignores_bf16_autocast(shared_data, tmp_path):
    """BALI's statistics are float64 and its forward stays float32 under run.precision: bf16."""
    cell = _test_cell("bali_synthetic", "bali")
    run = kind_module(cell.kind).build(cell, _context(cell, shared_data, tmp_path, precision="bf16"))
    with Runtime(RuntimeSettings(device="cpu", precision="bf16")).autocast():
        samples = run.method.sample_outputs(run.method.data.x_test[:5], 2)
        run.method.train_step(0)
    assert samples.dtype in (torch.float32, torch.float64)
    assert all(b.dtype == torch.float64 for n, b in run.method.model.named_buffers() if n.endswith("psi_xx"))
