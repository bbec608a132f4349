"""Where and how a cell computes: the one place that decides the device (:class:`Runtime`, from the `run:`
block's :class:`reprokit.runtime_settings.RuntimeSettings`) and sets the numeric precision and determinism, and
that places data, models and random generators on that device. Imports torch; the settings, the CPU
instruction-set pin and the host facts that need no torch are in :mod:`reprokit.runtime_settings`.

`fp32` is the default because both papers report float32 results; `tf32` lets CUDA matmuls and
convolutions use TensorFloat-32 (10-bit mantissa inputs); `bf16` runs forward passes under
``torch.autocast(dtype=bfloat16)`` and stores convolutional networks in channels_last. float64
tensors (BALI's Kronecker statistics) are never autocast (torch leaves float64 alone), so BALI's
statistics stay float64 at every precision.

A kind's ``build`` receives the :class:`Runtime` through its cell context and moves the task data
(once: MNIST, CIFAR-10, UCI and the synthetic sets all fit on a GPU) and the model there; methods
then take the device from the data they were given (``TaskData.device``) and create their random
generators there with :func:`generator`, so minibatch and augmentation sampling run on the device.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys

import torch

from .runtime_settings import DeviceConfigError, RuntimeSettings, cpu_family, cpu_isa_record, cpu_model, gpu_driver


class Runtime:
    """The resolved device + precision of one process (one cell, one benchmark)."""

    def __init__(self, settings: RuntimeSettings | None = None):
        self.settings = settings or RuntimeSettings()
        dev = self.settings.device
        if dev == "auto":
            dev = "cuda" if torch.cuda.is_available() else "cpu"
        if dev.startswith("cuda") and not torch.cuda.is_available():
            raise DeviceConfigError(
                f"run.device: '{self.settings.device}' asked for, but torch {torch.__version__} "
                "sees no CUDA device (use run.device: auto or cpu)"
            )
        self.device = torch.device(dev)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.precision = self.settings.precision
        self.deterministic = bool(self.settings.deterministic)

    # -- process-wide switches ------------------------------------------------------------------

    def apply(self) -> Runtime:
        """Set the global numeric switches this runtime implies (call once, before building)."""
        tf32 = self.precision in ("tf32", "bf16")
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        if self.deterministic:
            # cuBLAS needs a fixed workspace to be deterministic; read when cuBLAS initialises.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
        elif self.is_cuda:
            torch.backends.cudnn.benchmark = True
        if self.is_cuda:
            torch.cuda.set_device(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            retain_freed_memory(True)
        return self

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    # -- placement ------------------------------------------------------------------------------

    def to(self, obj):
        """Move a tensor, a module, or anything with `.to(device)` (e.g. TaskData) to the device."""
        return obj.to(self.device)

    def model(self, module):
        """A model on the device; in bf16, convolutional networks in channels_last memory format."""
        module = module.to(self.device)
        if self.precision == "bf16" and any(isinstance(m, torch.nn.Conv2d) for m in module.modules()):
            module = module.to(memory_format=torch.channels_last)
        return module

    def generator(self, seed: int):
        return generator(seed, self.device)

    def autocast(self):
        """The context forward passes run under (bf16: autocast; otherwise nothing)."""
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def synchronize(self) -> None:
        synchronize(self.device)

    # -- provenance -----------------------------------------------------------------------------

    def device_name(self) -> str:
        if self.is_cuda:
            return torch.cuda.get_device_name(self.device)
        return cpu_model()

    def peak_memory_mb(self) -> float:
        """Peak device memory of this process: CUDA allocator peak, or the process's peak RSS on CPU."""
        if self.is_cuda:
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return rss / (2**20 if sys.platform == "darwin" else 2**10)

    def provenance(self) -> dict:
        """What a cell's numbers may depend on besides its settings: device, precision, library versions, and the
        machine (:func:`machine`: CPU model, torch's CPU capability, intra-op threads; GPU model and driver on
        CUDA), and the CPU instruction-set pin in effect (:func:`cpu_isa_record`). The same code gives different float
        rounding on another CPU (unless pinned to an instruction set both have) or thread count."""
        return {
            "device": str(self.device),
            "device_name": self.device_name(),
            "precision": self.precision,
            "deterministic": self.deterministic,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            **machine(self.device),
            "cpu_isa": cpu_isa_record(),
            "peak_memory_mb": round(self.peak_memory_mb(), 1),
            "peak_memory_kind": "cuda_max_allocated" if self.is_cuda else "process_max_rss",
        }


# glibc's mallopt parameters (malloc.h) and their defaults
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536


def retain_freed_memory(enable: bool = True) -> bool:
    """glibc: keep the memory a process frees in its heap (no mmap for large blocks, no trimming) instead of
    handing it back to the kernel. On a CPU, torch allocates every large activation (250 MB for the MNIST CNN's
    first layer at 4000 images) afresh each step; glibc serves such blocks with mmap and unmaps them when they
    are freed, so every step page-faults them in again and the kernel zeroes each page: nearly half of a
    paper-scale Partitioned MNIST step's CPU time (12.9 s against 6.8 s; benchmarks/bench_partitioned_step.py).
    Numbers are unchanged (only where memory comes from); the price is memory: the heap keeps its peak and
    fragments (a paper-scale MNIST Partitioned cell: peak RSS 2.4 GB instead of 1.7 GB). `enable=False`
    restores glibc's defaults for blocks allocated from then on. Returns False where there is no glibc, or
    where $REPROKIT_MALLOC_DEFAULTS=1 keeps glibc's defaults (a tight memory limit), and changes nothing then."""
    import ctypes

    if enable and os.environ.get("REPROKIT_MALLOC_DEFAULTS", "") not in ("", "0"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt, malloc_trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return False
    if enable:
        ok = mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    else:
        ok = mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX) and mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
        malloc_trim(0)
    return bool(ok)


def machine(device=None) -> dict:
    """The machine a cell ran on, for its provenance: `cpu_model` (:func:`cpu_model`), `cpu_family` (family /
    model numbers, where /proc/cpuinfo gives them), `cpu_capability` (the vector instructions torch's CPU kernels
    dispatch to: torch.backends.cpu.get_cpu_capability(), e.g. "AVX512"), `threads` (torch's intra-op threads
    now), and on a CUDA `device` `gpu_model` (torch.cuda.get_device_name) and `gpu_driver` (:func:`gpu_driver`);
    the GPU keys are absent on a CPU."""
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # an older torch
        capability = None
    out = {"cpu_model": cpu_model(), "cpu_capability": capability, "threads": torch.get_num_threads()}
    family = cpu_family()
    if family is not None:
        out["cpu_family"] = family
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda":
        out["gpu_model"] = torch.cuda.get_device_name(device)
        out["gpu_driver"] = gpu_driver()
    return out


def synchronize(device) -> None:
    """Wait for `device`'s queued kernels (CUDA); nothing on a CPU. Timings call it before reading a clock."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# Images per forward pass in no-grad evaluation on a CPU: a 4000-image forward of the MNIST CNN (1000 test images
# x 4 augmentation samples) runs 1.7x slower per image than 400-image ones there (cache-bound activations;
# 0.77 against 0.44 ms per image on one thread of this 2-core EPYC, 2026-11-26). Accelerators take the whole batch.
CPU_INFERENCE_CHUNK = 512


def inference_chunk(device) -> int | None:
    """How many inputs one no-grad forward pass takes on `device`: CPU_INFERENCE_CHUNK on a CPU, None
    (all at once) elsewhere. Splitting a forward changes no number beyond float rounding."""
    return CPU_INFERENCE_CHUNK if torch.device(device).type == "cpu" else None


def generator(seed: int, device=None):
    """A torch.Generator on `device` (default CPU) seeded with `seed`."""
    gen = torch.Generator(device=device if device is not None else "cpu")
    gen.manual_seed(int(seed))
    return gen


def is_oom(err: BaseException) -> bool:
    """A CUDA (or other accelerator) out-of-memory error."""
    oom_types = tuple(
        t
        for t in (getattr(torch, "OutOfMemoryError", None), getattr(torch.cuda, "OutOfMemoryError", None))
        if t is not None
    )
    return isinstance(err, oom_types) or (
        isinstance(err, RuntimeError) and "out of memory" in str(err).lower() and "CUDA" in str(err)
    )


def is_cpu_oom(err: BaseException) -> bool:
    """A CPU allocation refused, as it is under `cpu_memory_guard`: torch's "DefaultCPUAllocator: can't allocate
    memory" or Python's MemoryError. Only a guarded block reads it as out of memory (`is_oom` does not)."""
    return isinstance(err, MemoryError) or (
        isinstance(err, RuntimeError) and "DefaultCPUAllocator: can't allocate memory" in str(err)
    )


def _proc_bytes(path: str, key: str) -> int | None:
    """The value of `key` (given in kB) in a /proc file, in bytes; None where the file does not say:
    ("/proc/meminfo", "MemAvailable") is the memory a new allocation gets without swapping, ("/proc/self/status",
    "VmSize") this process's virtual size."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@contextlib.contextmanager
def cpu_memory_guard(device, fraction: float = 0.9, headroom_bytes: int | None = None):
    """On a CPU, make an allocation beyond the machine's available memory fail inside the block as a catchable
    error (torch's "DefaultCPUAllocator: can't allocate memory", Python's MemoryError: `is_cpu_oom`)
    instead of the kernel's out-of-memory killer ending the process with nothing written. It caps the process's
    address space (RLIMIT_AS, soft limit only) at its size on entry plus `fraction` x MemAvailable (or
    `headroom_bytes`) for the block and restores the old limit after. Elsewhere (CUDA: torch raises its own
    OutOfMemoryError), or where /proc or setrlimit is missing, it does nothing. Written here because no library
    turns the CPU's out-of-memory kill into an exception."""
    if torch.device(device).type != "cpu":
        yield
        return
    now = _proc_bytes("/proc/self/status", "VmSize")
    extra = headroom_bytes if headroom_bytes is not None else _proc_bytes("/proc/meminfo", "MemAvailable")
    if now is None or extra is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = now + int(extra * (1.0 if headroom_bytes is not None else fraction))
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
