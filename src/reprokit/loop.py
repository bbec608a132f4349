"""The training loop: one copy for every method (see methods/base.py for the hooks).

Responsibilities: step counting, periodic evaluation into a per-step curve, checkpoints (periodic and
on SIGTERM, e.g. SLURM preemption or time limit), resuming bit-identically, divergence detection
(non-finite loss => status 'diverged'), and progress (a tqdm bar on a terminal, log lines otherwise).
A checkpoint that cannot be read (truncated, corrupt, missing keys) is moved aside and the run starts
afresh (`load_checkpoint`), so a retried job succeeds instead of failing on the same file again.
Steps and evaluations run under the runtime's precision context (bf16 autocast, or nothing); the
checkpoint holds the global CPU and CUDA random states next to the method's own generators.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import math
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .atomic import atomic_save_torch
from .methods.base import Method
from .runtime import is_oom

log = logging.getLogger("reprokit.loop")

CHECKPOINT_VERSION = 2  # 2: + CUDA random states
EXIT_PREEMPTED = 143  # 128 + SIGTERM: the scheduler sees a signalled job and may requeue/retry it


class Preempted(SystemExit):
    def __init__(self, step: int):
        super().__init__(EXIT_PREEMPTED)
        self.step = step


@dataclass
class LoopConfig:
    n_steps: int
    eval_every: int
    # also evaluate at steps 1, 2, 4, 8, ... below this step: a doubling schedule that shows a curve's start,
    # which a long period would step over (0: none)
    eval_doubling_until: int = 0
    # evaluations per doubling of that schedule: steps round(2 ** (k / n)) (1: 1, 2, 4, ..; 2: 1, 2, 3, 4, 6, 8, ..)
    evals_per_doubling: int = 1
    checkpoint_every: int = (
        0  # 0: a checkpoint only when the run is interrupted (the pipeline passes run.checkpoint_every)
    )
    log_every_seconds: float = 30.0
    label: str = "train"


@functools.cache
def early_eval_steps(until: int, per_doubling: int = 1) -> frozenset[int]:
    """The log-spaced evaluation steps below `until`: round(2 ** (k / per_doubling)) for k = 0, 1, 2, .., each
    once (1, 2, 4, 8, .. with one per doubling; every doubling step is among them whatever `per_doubling`)."""
    if per_doubling < 1:
        raise ValueError(f"evals_per_doubling must be at least 1, not {per_doubling}")
    steps, k = set(), 0
    while 2 ** (k / per_doubling) < until:
        steps.add(round(2 ** (k / per_doubling)))
        k += 1
    return frozenset(x for x in steps if x < until)


def _is_eval_step(step: int, cfg: LoopConfig) -> bool:
    """A curve row after `step`: every `eval_every` steps, the last step, and the log-spaced early steps
    (`early_eval_steps`: 1, 2, 4, .. with `evals_per_doubling` 1) below `eval_doubling_until`."""
    if step % cfg.eval_every == 0 or step == cfg.n_steps:
        return True
    return step < cfg.eval_doubling_until and step in early_eval_steps(cfg.eval_doubling_until, cfg.evals_per_doubling)


@dataclass
class LoopResult:
    status: str  # "completed" | "diverged" | "oom"
    steps: int
    curve: list
    resumed_from: int
    seconds: float


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


class CheckpointNeedsCuda(RuntimeError):
    """A sound checkpoint written on a CUDA device, resumed where there is none: not healed (the file is
    fine; resume it on a GPU node)."""


def _set_rng_state(state: dict) -> None:
    if state.get("cuda") is not None and not torch.cuda.is_available():
        raise CheckpointNeedsCuda(
            "checkpoint was written on a CUDA device; resume it where CUDA is available "
            "(or delete the checkpoint to restart the cell)"
        )
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if state.get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["cuda"])


class _SigtermFlag:
    """Turn SIGTERM into a flag checked between steps, so a checkpoint is written at a step boundary."""

    def __init__(self):
        self.raised = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread (e.g. called from a notebook worker): no handler
            self._previous = None
        return self

    def _handle(self, signum, frame):
        self.raised = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        return False


class _Progress:
    def __init__(self, cfg: LoopConfig, start: int):
        self.cfg = cfg
        self.bar = None
        self.last_log = time.monotonic()
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=cfg.n_steps, initial=start, desc=cfg.label, dynamic_ncols=True)

    def update(self, step: int, loss: float):
        if self.bar is not None:
            self.bar.update(1)
            if step % 50 == 0:
                self.bar.set_postfix(loss=f"{loss:.4g}")
        elif time.monotonic() - self.last_log >= self.cfg.log_every_seconds:
            self.last_log = time.monotonic()
            peak = ""
            if torch.cuda.is_available() and torch.cuda.is_initialized():  # long GPU runs: memory so far
                peak = f" peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"
            log.info("%s: step %d/%d loss %.4g%s", self.cfg.label, step, self.cfg.n_steps, loss, peak)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def save_checkpoint(path: Path, step: int, method: Method, curve: list) -> None:
    atomic_save_torch(
        {
            "version": CHECKPOINT_VERSION,
            "step": step,
            "method": method.state_dict(),
            "rng": _rng_state(),
            "curve": curve,
        },
        path,
    )


def move_aside(path: Path) -> Path:
    """Rename `path` to `<path>.unreadable-<YYYYmmdd-HHMMSS>` (a new name if that exists) and return it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.unreadable-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.unreadable-{stamp}-{n}")
        n += 1
    os.replace(path, target)
    return target


def load_checkpoint(path: Path, method: Method, label: str = "train") -> tuple[int, list] | None:
    """Resume `method` and the global random states from the checkpoint at `path`; (step, curve), or None
    when there is no checkpoint to resume.

    The one place a checkpoint is read. One that cannot be read - a truncated or corrupt file (e.g. cut
    short on a shared filesystem), any error of torch.load, a version this code does not know, missing
    keys, a method state that does not load - is moved aside to `<path>.unreadable-<time>` (kept for
    inspection) with a warning naming the file and the error, `method` and the random states are left
    as they were before the attempt, and None is returned: the run starts afresh, and a retried job
    succeeds instead of failing on the same file every time. A sound CUDA checkpoint resumed where there
    is no CUDA still raises (CheckpointNeedsCuda), as does running out of memory."""
    path = Path(path)
    if not path.exists():
        return None
    rng_before = _rng_state()
    method_before = None  # serialised, so a GPU method's snapshot sits in host memory and loads back in place
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(ckpt, dict):
            raise TypeError(f"holds a {type(ckpt).__name__}, not a checkpoint")
        if ckpt.get("version") not in (1, CHECKPOINT_VERSION):  # 1: CPU-only, readable as is
            raise ValueError(f"has version {ckpt.get('version')}, expected {CHECKPOINT_VERSION}")
        missing = [k for k in ("step", "method", "rng", "curve") if k not in ckpt]
        if missing:
            raise ValueError(f"missing keys {missing}")
        step, curve = int(ckpt["step"]), list(ckpt["curve"])
        buf = io.BytesIO()
        torch.save(method.state_dict(), buf)
        method_before = buf
        method.load_state_dict(ckpt["method"])
        _set_rng_state(ckpt["rng"])
        return step, curve
    except Exception as err:
        if isinstance(err, CheckpointNeedsCuda) or is_oom(err):
            raise
        if method_before is not None:  # a half-loaded state must not leak into the fresh run
            method_before.seek(0)
            method.load_state_dict(torch.load(method_before, weights_only=False))
        _set_rng_state(rng_before)
        reason = (str(err).strip().splitlines() or [""])[0][:300]
        aside = move_aside(path)
        log.warning(
            "%s: checkpoint %s cannot be read (%s: %s); moved it aside to %s (kept for inspection) and starting afresh",
            label,
            path,
            type(err).__name__,
            reason,
            aside,
        )
        return None


def run_loop(
    method: Method,
    cfg: LoopConfig,
    checkpoint_path: Path | None = None,
    precision: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    evaluate: Callable[[int], dict] | None = None,
) -> LoopResult:
    """Train `method` for cfg.n_steps, resuming from `checkpoint_path` when it exists. `precision()` is
    the context every step and evaluation runs in (`Runtime.autocast`: bf16 autocast, or nothing);
    `evaluate(step)` makes a curve row (default: `method.evaluate`; a cell passes its Evaluation's).
    An unreadable checkpoint is moved aside and the run starts from step 0 (see `load_checkpoint`)."""
    evaluate = evaluate or method.evaluate
    t0 = time.monotonic()
    start, curve = 0, []
    resumed = load_checkpoint(Path(checkpoint_path), method, cfg.label) if checkpoint_path is not None else None
    if resumed is not None:
        start, curve = resumed
        log.info("%s: resumed from checkpoint at step %d", cfg.label, start)
    resumed_from = start
    status = "completed"
    progress = _Progress(cfg, start)
    step = start
    try:
        with _SigtermFlag() as sigterm:
            if start == 0 and cfg.eval_every > 0:
                with precision():
                    curve.append({"step": 0, **evaluate(0)})
            while step < cfg.n_steps:
                try:
                    with precision():
                        out = method.train_step(step)
                except Exception as err:
                    if not is_oom(err):
                        raise
                    log.error("%s: out of device memory at step %d: %s", cfg.label, step + 1, str(err).splitlines()[0])
                    status = "oom"
                    break
                step += 1
                loss = float(out["loss"])
                if not math.isfinite(loss):
                    log.warning("%s: loss is %s at step %d: run diverged", cfg.label, loss, step)
                    curve.append({"step": step, "loss": loss})
                    status = "diverged"
                    break
                progress.update(step, loss)
                if cfg.eval_every > 0 and _is_eval_step(step, cfg):
                    with precision():
                        curve.append({"step": step, "loss": loss, **evaluate(step)})
                if sigterm.raised:
                    if checkpoint_path is not None:
                        save_checkpoint(checkpoint_path, step, method, curve)
                        log.warning("%s: SIGTERM at step %d: checkpoint written, exiting", cfg.label, step)
                    raise Preempted(step)
                if (
                    checkpoint_path is not None
                    and cfg.checkpoint_every > 0
                    and step % cfg.checkpoint_every == 0
                    and step < cfg.n_steps
                ):
                    save_checkpoint(checkpoint_path, step, method, curve)
    finally:
        progress.close()
    return LoopResult(status=status, steps=step, curve=curve, resumed_from=resumed_from, seconds=time.monotonic() - t0)
