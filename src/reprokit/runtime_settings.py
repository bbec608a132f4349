"""The config's `run:` block and what a process sets from it before torch loads. Torch-free: the launchers
(the Snakefile, benchmarks/run_cells.py, reprokit.job), the config loader and `python -m reprokit.cell` import it
before torch, which :mod:`reprokit.runtime` (the device decision, placement) then imports.

    run:                                    (RuntimeSettings below: every default and allowed value)
      device: auto | cpu | cuda | cuda:N    auto = CUDA when available, else CPU (decided by reprokit.runtime.Runtime)
      precision: fp32 | tf32 | bf16         fp32 (default) keeps numbers comparable with the papers
      deterministic: false                  true: deterministic kernels (a resumed GPU cell then ends
                                            with the same metrics as an uninterrupted one)
      cpu_isa: avx2 | avx512 | native       the instruction set torch, oneDNN and MKL dispatch to on a CPU
                                            (avx2, the default, pins it; native / null: the widest the CPU has)

`cpu_isa` pins CPU numerics to one instruction set: torch's own kernels, oneDNN (convolutions) and MKL
(matmuls, LAPACK) each pick the widest one the CPU has, and a small CNN's numbers differ between an AVX2 and
an AVX-512 dispatch. The three libraries read their environment variables (:data:`CPU_ISA_ENV`) once, when
torch loads, so :func:`pin_cpu_isa` must run before ``import torch``: ``python -m reprokit.cell`` does it
first thing, from ``REPROKIT_CPU_ISA`` (which the Snakefile and benchmarks/run_cells.py export from the
config, :func:`cpu_isa_env`; absent, the default). On a CUDA device it changes nothing that matters; each
cell's provenance records what was in effect (:func:`cpu_isa_record`).

Also here, the facts about the host that need no torch: the CPU model and flags (/proc/cpuinfo) and the NVIDIA
driver version.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import sys
import warnings
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEVICES_HELP = "auto, cpu, cuda or cuda:N"
PRECISIONS = ("fp32", "tf32", "bf16")
CPU_ISAS = ("avx2", "avx512", "native")  # native: no pin (null in the config means the same)
# What a pinned instruction set sets before torch loads: the widest instruction set torch's own CPU kernels
# (ATen's dispatch), oneDNN (convolutions) and MKL (matmuls, LAPACK) may use. MKL is capped with
# MKL_ENABLE_INSTRUCTIONS, not MKL_CBWR: any MKL_CBWR value switches MKL into its conditional-reproducibility
# mode, whose small matrix products round differently from its default mode on an AVX2 CPU too (every value,
# AVX2 to AVX512, gave the same numbers on this project's AMD EPYC, all of them other than unset's: the MNIST
# CNN's 50 -> 10 output layer, and a quick fig3a cell's test LL -0.28094 -> -0.27814, 2026-12-07), so it would
# move the numbers of the CPUs the archive was computed on. MKL_CBWR stays the user's, recorded in provenance.
CPU_ISA_ENV = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx512": {
        "ATEN_CPU_CAPABILITY": "avx512",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512",
    },
}
CPU_ISA_VARS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")  # recorded
CPU_ISA_VAR = "REPROKIT_CPU_ISA"  # the requested setting, from a launcher to the cell process
# /proc/cpuinfo flags torch needs before it dispatches to that capability (it does not check an env request)
CPU_ISA_FLAGS = {"avx2": ("avx2", "fma"), "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq")}


class DeviceConfigError(ValueError):
    """A bad `run:` value, e.g. `run.device` / `run.precision` (named in the message)."""


class RuntimeSettings(BaseModel):
    """The config's `run:` block: each key's default and allowed values here and nowhere else. The JSON
    schema that validates `run:` in the config is generated from this model (:func:`run_schema`), so the
    two cannot drift; pydantic v2 because it gives both the typed object and that schema from one class."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(
        "auto",
        pattern=r"^(auto|cpu|cuda|cuda:[0-9]+)$",
        description=f"where cells compute: {DEVICES_HELP} (auto = CUDA when available)",
    )
    precision: Literal["fp32", "tf32", "bf16"] = Field(
        "fp32", description="fp32 (comparable with the papers), tf32, or bf16 (autocast + channels_last)"
    )
    deterministic: bool = Field(
        False, description="deterministic kernels: a resumed GPU cell ends with an uninterrupted one's metrics"
    )
    checkpoint_every: int = Field(500, ge=1, description="training iterations between a cell's checkpoints")
    threads_per_cell: int = Field(1, ge=1, description="intra-op threads of one cell (the cell rule's threads)")
    cpu_isa: Literal["avx2", "avx512", "native"] | None = Field(
        "avx2",
        description="instruction set a CPU cell's torch, oneDNN and MKL dispatch to (set before torch loads): "
        "avx2 (default: an AVX-512 CPU dispatches as an AVX2 one does), avx512, or native / null (no pin)",
    )

    @field_validator("cpu_isa", mode="before")
    @classmethod
    def _no_pin(cls, v):
        return "native" if v is None else v

    @classmethod
    def from_dict(cls, d: dict | None) -> RuntimeSettings:
        """The block's settings; a bad key or value raises DeviceConfigError naming `run.<key>`."""
        try:
            return cls.model_validate(dict(d or {}))
        except ValidationError as err:
            e = err.errors()[0]
            key = ".".join(map(str, e["loc"])) or "(block)"
            value = (d or {}).get(e["loc"][0]) if e["loc"] else d
            if e["type"] == "extra_forbidden":
                raise DeviceConfigError(f"run.{key}: unknown key (valid: {', '.join(cls.model_fields)})") from None
            if key == "device":
                raise DeviceConfigError(f"run.device: '{value}' is not a device (valid: {DEVICES_HELP})") from None
            if key == "precision":
                raise DeviceConfigError(f"run.precision: '{value}' unknown (valid: {', '.join(PRECISIONS)})") from None
            if key == "cpu_isa":
                raise DeviceConfigError(
                    f"run.cpu_isa: '{value}' unknown (valid: {', '.join(CPU_ISAS)}, or null for native)"
                ) from None
            raise DeviceConfigError(f"run.{key}: {value!r}: {e['msg']}") from None

    def to_dict(self) -> dict:
        return self.model_dump()

    def numeric_dict(self) -> dict:
        """The keys that choose a cell's numerics (device, precision, determinism): what a cell's context (its
        Snakemake parameters) carries, so that changing how often it checkpoints re-runs nothing. The thread
        count and `cpu_isa` change float rounding as a change of machine does: provenance records them
        (`threads`, `cpu_isa`), and switching them re-runs no finished cell either."""
        return self.model_dump(include={"device", "precision", "deterministic"})


def run_schema() -> dict:
    """The JSON schema of the config's `run:` block, generated from :class:`RuntimeSettings`."""
    schema = RuntimeSettings.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


class CpuIsaError(RuntimeError):
    """A CPU instruction-set pin asked for after torch loaded with another one (it cannot change then)."""


def cpu_isa_env(setting: str | None) -> dict[str, str]:
    """The environment a launcher gives a cell process for `run.cpu_isa` = `setting`: REPROKIT_CPU_ISA and,
    for a pin, its variables (:data:`CPU_ISA_ENV`); the cell sets them again itself
    (:func:`pin_cpu_isa`), where the CPU has that instruction set."""
    setting = RuntimeSettings.from_dict({"cpu_isa": setting}).cpu_isa
    return {CPU_ISA_VAR: setting, **CPU_ISA_ENV.get(setting, {})}


def cpu_isas_supported() -> list[str] | None:
    """The pinnable instruction sets this CPU has (e.g. ["avx2"] here, ["avx2", "avx512"] on an AVX-512 CPU),
    from /proc/cpuinfo's flags; [] on a CPU that is not x86; None on an x86 without /proc/cpuinfo (macOS)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return []
    flags = set(_cpuinfo().get("flags", "").split())
    if not flags:
        return None
    return [isa for isa, needs in CPU_ISA_FLAGS.items() if set(needs) <= flags]


def _torch_capability() -> str | None:
    torch = sys.modules.get("torch")
    try:
        return torch.backends.cpu.get_cpu_capability() if torch is not None else None
    except Exception:  # an older torch
        return None


def pin_cpu_isa(setting: str | None = None, environ=None) -> dict:
    """Pin torch, oneDNN and MKL to the instruction set `setting` (`run.cpu_isa`; None: REPROKIT_CPU_ISA, else
    the default) by setting :data:`CPU_ISA_ENV`'s variables in `environ` (default os.environ). Call it before
    torch is imported: torch reads them once, when it loads, and a pin asked for after that raises
    :class:`CpuIsaError` (unless torch already runs with exactly that pin). `native` leaves the environment as
    it is; a CPU without that instruction set (not x86, or an x86 without AVX2) is left unpinned, with a warning.
    Returns :func:`cpu_isa_record` of `environ`. REPROKIT_CPU_ISA records the request for provenance."""
    environ = os.environ if environ is None else environ
    if setting is None:
        setting = environ.get(CPU_ISA_VAR) or RuntimeSettings.model_fields["cpu_isa"].default
    setting = RuntimeSettings.from_dict({"cpu_isa": setting}).cpu_isa
    environ[CPU_ISA_VAR] = setting
    want = CPU_ISA_ENV.get(setting)
    if want is None:  # native: no pin
        return cpu_isa_record(environ)
    supported = cpu_isas_supported()
    if supported is not None and setting not in supported:
        warnings.warn(
            f"run.cpu_isa: {setting} asked for, but this CPU ({cpu_model()}, {platform.machine()}) does not have it: "
            "left unpinned, so its numbers follow this CPU's own instruction set",
            RuntimeWarning,
            stacklevel=2,
        )
        return cpu_isa_record(environ)
    if "torch" in sys.modules:
        have = {k: environ.get(k) for k in want}
        capability = _torch_capability()
        if have != want or (capability is not None and capability.lower() != want["ATEN_CPU_CAPABILITY"]):
            raise CpuIsaError(
                f"run.cpu_isa: {setting} asked for after torch was imported (it dispatches to {capability}, "
                f"environment {have}): torch reads the pin when it loads; set "
                + " ".join(f"{k}={v}" for k, v in want.items())
                + " before importing torch, or start a new process (python -m reprokit.cell does it first)"
            )
        return cpu_isa_record(environ)
    overridden = {k: environ[k] for k in want if environ.get(k) not in (None, want[k])}
    if overridden:
        warnings.warn(
            f"run.cpu_isa: {setting} replaces {overridden} from the environment (run.cpu_isa: native keeps them)",
            RuntimeWarning,
            stacklevel=2,
        )
    environ.update(want)
    return cpu_isa_record(environ)


def cpu_isa_record(environ=None) -> dict:
    """The instruction-set pin in effect, for a cell's provenance: `requested` (REPROKIT_CPU_ISA; None where no
    reprokit entry point pinned this process), the variables of :data:`CPU_ISA_VARS` as they are, `torch_capability` (where torch
    is loaded), `cpu_has` (:func:`cpu_isas_supported`) and `pinned`: the requested pin is in effect."""
    environ = os.environ if environ is None else environ
    requested = environ.get(CPU_ISA_VAR)
    rec = {"requested": requested, **{k: environ.get(k) for k in CPU_ISA_VARS}}
    rec["torch_capability"] = _torch_capability()
    rec["cpu_has"] = cpu_isas_supported()
    want = CPU_ISA_ENV.get(requested or "")
    rec["pinned"] = bool(
        want
        and all(environ.get(k) == v for k, v in want.items())
        and (rec["torch_capability"] is None or rec["torch_capability"].lower() == want["ATEN_CPU_CAPABILITY"])
    )
    return rec


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (lower-case keys); {} where there is none."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # first processor only
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_model(with_family: bool = False) -> str:
    """The CPU model: /proc/cpuinfo's "model name" (e.g. "AMD EPYC 7B13"), else platform.processor() /
    platform.machine(). `with_family`: append "(family F, model M)", since virtual machines often report a
    generic name such as "AMD EPYC"."""
    name = _cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    family = cpu_family() if with_family else None
    return f"{name} ({family})" if family else name


def cpu_family() -> str | None:
    """The CPU's family and model numbers, "family F, model M", from /proc/cpuinfo; None where it gives none."""
    fields = _cpuinfo()
    if "cpu family" in fields and "model" in fields:
        return f"family {fields['cpu family']}, model {fields['model']}"
    return None


@functools.lru_cache(maxsize=1)
def gpu_driver() -> str | None:
    """The NVIDIA driver version (e.g. "550.54.15") via NVML when installed, else nvidia-smi (5 s at most);
    None when neither answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # not installed, or no NVML: try nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None
