"""Table 8 (App. D.2): time per update relative to a standard parameter update, measured.

Grid axes: `model` (a name of `reprokit.models.registry`, e.g. mnist_cnn | fixup_resnet8 |
fixup_resnet14) and `seed` (initialisation, partition assignment, synthetic batch, k draws).
Settings (typed, defaults): `UpdateTimingSettings` in plan/update_timing.py.

One cell times, in one process and on one fixed batch of `batch_size` images (synthetic N(0, 1) pixels
of the model's input shape and random labels: the cost of a dense update does not depend on the pixel
values), the updates of Table 8 for the same architecture, all averaging predictions over
`n_aug_samples` learnable affine augmentation samples (`AugmentedModel`, S*B images per forward):

* ``standard``: the unpartitioned network, augmentation held fixed (no gradient for psi), negative
  log-likelihood, ``backward()``, one step of torch's Adam / SGD: "a regular parameter update during
  standard training" (the paper's reference, x1).
* ``param`` (Partitioned parameter update, App. I.1): k ~ Cat(u) drawn by `PartitionSchedule`, forward
  through subnetwork k of a `partition()`-ed copy (same initial weights), backward, and
  ``PartitionedAdam/SGD.step(k)``.
* ``hyper`` (Partitioned hyperparameter update): k ~ Cat(u_2..u_C), forward through subnetwork k-1,
  gradient w.r.t. psi, one Adam step on psi.
* ``augerino`` (Augerino, Benton et al. 2020, methods/augerino.py: "Param. + hyperparam." in one):
  the unpartitioned network, NLL + `augerino.reg` x the safe width regulariser, one backward w.r.t.
  weights and psi, a step of the weights' optimiser and of psi's Adam.
* ``dl_param`` (Diff. Laplace parameter update, methods/diff_laplace.py `map_loss`): the MAP loss
  (NLL + the layerwise Gaussian prior / N), backward, a step of the weights' optimiser.
* ``dl_hyper`` (Diff. Laplace hyperparameter update, `methods.diff_laplace.hyper_update`, the very
  function LILA training steps with): the KFAC(+ exact diagonal)-GGN Laplace marginal likelihood of the
  unpartitioned network on the same batch with the same S augmentation samples (N = `schedule_examples`,
  one prior precision per parameter tensor), its gradient w.r.t. psi and the log prior precision
  (``create_graph`` through the curvature), one Adam step. It costs 10-2000 standard updates, so it runs
  in the last `diff_laplace.n_warmup` warm-up and the first `diff_laplace.n_repeats` timed repetitions only. A
  ``torch.OutOfMemoryError`` in it (the paper's fixup ResNet-14 on a 10 GB GPU) is caught around this
  update only and recorded: ``dl_hyper_outcome`` = "oom" with the message, and the update is not run
  again; the other updates go on (an out-of-memory error anywhere else ends the cell as "oom"). On a CPU
  the update runs under `runtime.cpu_memory_guard`, so an allocation beyond the machine's available memory
  fails the same way instead of the kernel killing the process (fixup ResNet-8 at batch 250 x 20 samples
  needs more than 24 GB there).

`backward` chooses what each partitioned update differentiates: ``minimal`` (default) runs the very
update functions the partitioned method trains with (`methods.partitioned.param_update` /
`hyper_update`: network weights only for ``param``, psi only for ``hyper``); ``full`` =
``loss.backward()`` w.r.t. everything that requires grad (kept to show what that costs).

Measurement: every loop step is one *repetition* that runs each update once, in an order rotated
by one each repetition (so drift and ordering effects hit all kinds alike), with Python's garbage
collector paused. The first `n_warmup` repetitions are discarded. Each update is timed with the
process CPU clock (``time.process_time``; robust to other processes on a shared machine, exact for a
single intra-op thread) and the wall clock; on CUDA the wall clock after ``synchronize()``.
The reported ratio of an update is the median over the repetitions that ran it of (its time / the
standard update's time in the same repetition), with the inter-quartile range; the per-repetition times go to the curve (one row per
repetition). ``torch.set_num_threads(num_threads)`` fixes the intra-op threads. A cell of this kind
is a measurement, not a training: `build` returns an `experiments.Measurement` and the cell runs it
without the training loop (no checkpoints; an interrupted measurement starts again).

The timing loop is hand-written on purpose: `torch.utils.benchmark.Timer` times one statement at a time with
one clock (blocked autorange), while this measurement interleaves the updates in a rotating order and reads
both the process CPU clock and the wall clock around each call, so that each repetition gives paired ratios.
"""

from __future__ import annotations

import copy
import gc
import logging
import math
import time

import numpy as np
import torch

from .. import seeds
from ..augment.affine import AugmentedModel, augerino_regularizer, build_augmentation
from ..methods import diff_laplace
from ..methods.partitioned import hyper_update, optimised_params, param_update
from ..models.registry import build_model
from ..partition import (
    PartitionedAdam,
    PartitionedSGD,
    PartitionSchedule,
    chunk_assignment,
    partition,
)
from ..plan.update_timing import PLAN, UpdateTimingSettings
from ..report.store.stats import median_ci
from ..runtime import cpu_memory_guard, is_cpu_oom, is_oom
from ..runtime_settings import cpu_model
from . import CellContext, Measurement

log = logging.getLogger("reprokit.update_timing")
KINDS = ("standard", "param", "hyper", "augerino", "dl_param", "dl_hyper")
RATIO_KINDS = KINDS[1:]  # each as a ratio to the standard update of its repetition


def cpu_model_name() -> str:
    """The CPU model string with family/model numbers (reprokit.runtime.cpu_model: virtual machines often report
    a generic name such as "AMD EPYC"); platform fallbacks elsewhere."""
    return cpu_model(with_family=True)


def device_description(device: torch.device, num_threads: int) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model_name()}, {num_threads} intra-op thread{'s' if num_threads != 1 else ''}"


def _make_optimizer(name: str, params, lr: float, momentum: float, weight_decay: float):
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    raise ValueError(f"update_timing: optimizer '{name}' unknown (valid: adam, sgd)")


class UpdateTiming:
    """A timing "method" for the training loop: `train_step` is one timed repetition of every update.

    `settings` are a cell's typed settings (`PLAN.typed_settings(cell)`, or `UpdateTimingSettings.from_dict`
    of a mapping with `model` and `seed`); `device` is the cell's runtime device.
    """

    def __init__(self, settings: UpdateTimingSettings, device="cpu"):

        st = settings
        # bound here, not imported inside the timed update functions
        self._param_update, self._hyper_update = param_update, hyper_update
        self._augerino_regularizer = augerino_regularizer
        self._dl_map_loss, self._dl_hyper_update = diff_laplace.map_loss, diff_laplace.hyper_update
        self.backward = st.backward
        self.n_warmup = int(st.n_warmup)
        self.n_steps = int(st.n_steps)  # repetitions: warm-up + timed
        self.dl_warmup, self.dl_repeats = st.dl_warmup, st.dl_repeats
        self.device = torch.device(device)  # the cell's runtime device (run.device), cell.py decides
        self.timer = ("wall" if self.device.type == "cuda" else "cpu") if st.timer == "auto" else st.timer
        if self.device.type == "cuda" and self.timer == "cpu":
            raise ValueError("update_timing: timer 'cpu' cannot time CUDA kernels; use 'wall' or 'auto'")
        self.seed = int(st.seed)
        torch.manual_seed(seeds.stream_seed(self.seed, "init"))
        gen = seeds.generator(self.seed, "timing_data")

        base = build_model(str(st.model), **dict(st.model_kwargs))
        pmodel_src = copy.deepcopy(base)  # identical initial weights for both networks
        props = list(st.chunk_proportions)
        self.pmodel = partition(
            pmodel_src,
            props,
            scheme=st.partition_scheme,
            default=st.partition_default,
            seed=seeds.stream_seed(self.seed, "partition_masks"),
        )
        self.aug = build_augmentation(st.augmentation, init=st.augmentation_init)
        self.psi = list(self.aug.parameters())
        S = int(st.n_aug_samples)
        self.standard_net = AugmentedModel(base, self.aug, S).to(self.device)
        self.partitioned_net = AugmentedModel(self.pmodel, self.aug, S).to(self.device)

        shape = tuple(int(d) for d in st.input_shape)
        B = int(st.batch_size)
        self.x = torch.randn((B, *shape), generator=gen).to(self.device)
        self.y = torch.randint(0, int(st.n_classes), (B,), generator=gen).to(self.device)

        n_virtual = int(st.schedule_examples)
        chunk_ids = chunk_assignment(n_virtual, props, seeds.generator(self.seed, "schedule_examples"))
        sizes = np.bincount(chunk_ids, minlength=len(props)).tolist()
        self.schedule = PartitionSchedule(chunk_ids, generator=seeds.generator(self.seed, "minibatches"))
        opt, lr, mom, wd = st.optimizer, float(st.lr), float(st.momentum), float(st.weight_decay)
        self.opt = _make_optimizer(opt, base.parameters(), lr, mom, wd)
        popt_cls = PartitionedAdam if opt == "adam" else PartitionedSGD
        pkw = {"lr": lr, "weight_decay": wd, "chunk_sizes": sizes, "wd_scaling": st.wd_scaling}
        if opt == "sgd":
            pkw["momentum"] = mom
        self.popt = popt_cls(self.pmodel, **pkw)
        self.hopt = torch.optim.Adam(self.psi, lr=float(st.hyper_lr))
        # Augerino: psi's own Adam; Diff. Laplace: Adam on (psi, log prior precision), one per parameter tensor
        self.augerino_reg = float(st.augerino.reg)
        self.augerino_hopt = torch.optim.Adam(self.psi, lr=float(st.hyper_lr))
        diff_laplace.split_modules(base)  # a TypeError now, not in the first repetition
        self.n_data = n_virtual  # the training set the marginal likelihood's batch stands for
        self.log_prior_prec = torch.zeros(len(list(base.parameters())), device=self.device, requires_grad=True)
        self.dl_hopt = torch.optim.Adam([*self.psi, self.log_prior_prec], lr=float(st.hyper_lr))
        self.dl_gen = seeds.generator(self.seed, "marglik_augment", self.device)
        self.dl_outcome = "measured" if self.dl_warmup + self.dl_repeats > 0 else "not measured"
        self.dl_error = ""
        self.weight_params = optimised_params(self.popt)
        self.n_params = sum(p.numel() for p in base.parameters())
        self.info = {
            "device": self.device.type,
            "device_name": device_description(self.device, torch.get_num_threads()),
            "num_threads": torch.get_num_threads(),
            "timer": self.timer,
            "backward": self.backward,
            "dl_warmup": self.dl_warmup,
            "dl_repeats": self.dl_repeats,
            "batch_size": B,
            "n_aug_samples": S,
            "n_params": self.n_params,
            "chunk_sizes": " ".join(map(str, sizes)),
            "torch": torch.__version__,
        }

    # -- the three updates ------------------------------------------------------------------------
    def _set_psi_grad(self, flag: bool) -> None:
        for p in self.psi:
            p.requires_grad_(flag)

    def _nll(self, net, x, y):
        return torch.nn.functional.nll_loss(net(x), y)

    def update_standard(self) -> torch.Tensor:
        self._set_psi_grad(False)
        loss = self._nll(self.standard_net, self.x, self.y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def _partitioned_loss(self) -> torch.Tensor:
        return self._nll(self.partitioned_net, self.x, self.y)

    def update_param(self, k: int) -> torch.Tensor:
        self._set_psi_grad(True)
        if self.backward == "minimal":
            return self._param_update(self.pmodel, self.popt, k, self._partitioned_loss, self.weight_params)
        with self.pmodel.subnetwork(k):
            loss = self._partitioned_loss()
        self.popt.zero_grad(set_to_none=True)
        self.hopt.zero_grad(set_to_none=True)
        loss.backward()
        self.popt.step(k)
        return loss.detach()

    def update_hyper(self, k: int) -> torch.Tensor:
        """Hyper step of App. I.1: k >= 2 is the chunk, subnetwork k-1 is evaluated."""
        self._set_psi_grad(True)
        if self.backward == "minimal":
            return self._hyper_update(self.pmodel, self.hopt, k, self._partitioned_loss, self.psi)
        with self.pmodel.subnetwork(k - 1):
            loss = self._partitioned_loss()
        self.hopt.zero_grad(set_to_none=True)
        self.popt.zero_grad(set_to_none=True)
        loss.backward()
        self.hopt.step()
        return loss.detach()

    def update_augerino(self) -> torch.Tensor:
        """Augerino: weights and psi in one backward (NLL + the safe width regulariser)."""
        self._set_psi_grad(True)
        loss = self._nll(self.standard_net, self.x, self.y)
        loss = loss + self.augerino_reg * self._augerino_regularizer(self.aug, "safe")
        self.opt.zero_grad(set_to_none=True)
        self.augerino_hopt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.augerino_hopt.step()
        return loss.detach()

    def update_dl_param(self) -> torch.Tensor:
        """Diff. Laplace parameter update: the MAP loss, the prior precision held fixed."""
        self._set_psi_grad(False)
        _, loss = self._dl_map_loss(self.standard_net, self.x, self.y, self.log_prior_prec.detach().exp(), self.n_data)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def update_dl_hyper(self) -> torch.Tensor:
        """Diff. Laplace hyperparameter update: one Adam step on -marginal likelihood / N w.r.t. (psi,
        log prior precision), S = n_aug_samples augmentation samples of the same batch."""
        self._set_psi_grad(True)
        return self._dl_hyper_update(
            self.standard_net,
            self.x,
            self.y,
            self.log_prior_prec,
            self.dl_hopt,
            self.standard_net.n_samples,
            self.dl_gen,
            self.n_data,
        )

    def runs_dl_hyper(self, step: int) -> bool:
        """Whether repetition `step` runs the Diff. Laplace hyper update (module docstring)."""
        if self.dl_outcome == "oom":
            return False
        if step < self.n_warmup:
            return step >= self.n_warmup - self.dl_warmup
        return step - self.n_warmup < self.dl_repeats

    def _dl_out_of_memory(self, err: BaseException) -> None:
        self.dl_outcome, self.dl_error = "oom", str(err).splitlines()[0] if str(err) else type(err).__name__
        log.warning("update timing: Diff. Laplace hyper update out of memory on %s: %s", self.device, self.dl_error)
        self.dl_hopt.zero_grad(set_to_none=True)

    # -- timing -----------------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _timed(self, fn, *args) -> tuple[float, float, float]:
        self._sync()
        c0, w0 = time.process_time(), time.perf_counter()
        loss = fn(*args)
        self._sync()
        c1, w1 = time.process_time(), time.perf_counter()
        return c1 - c0, w1 - w0, float(loss)

    def repetition(self, step: int) -> dict:
        """Run every update once (order rotated by `step`); return their times and the k's drawn."""
        k_param, _ = self.schedule.param_step(1)
        k_hyper, _ = self.schedule.hyper_step(1)
        fns = {
            "standard": (self.update_standard,),
            "param": (self.update_param, k_param),
            "hyper": (self.update_hyper, k_hyper),
            "augerino": (self.update_augerino,),
            "dl_param": (self.update_dl_param,),
            "dl_hyper": (self.update_dl_hyper,),
        }
        kinds = [k for k in KINDS if k != "dl_hyper" or self.runs_dl_hyper(step)]
        order = [kinds[(i + step) % len(kinds)] for i in range(len(kinds))]
        row = {"rep": step, "warmup": step < self.n_warmup, "k_param": k_param, "subnet_hyper": k_hyper - 1}
        gc.collect()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for kind in order:
                fn, *args = fns[kind]
                if kind != "dl_hyper":
                    cpu, wall, loss = self._timed(fn, *args)
                else:
                    try:  # only here is running out of memory an outcome (module docstring)
                        with cpu_memory_guard(self.device):
                            cpu, wall, loss = self._timed(fn, *args)
                    except Exception as err:
                        if not (is_oom(err) or is_cpu_oom(err)):
                            raise
                        self._dl_out_of_memory(err)
                        row["dl_hyper_oom"] = True
                        continue
                row[f"{kind}_cpu_s"], row[f"{kind}_wall_s"], row[f"{kind}_loss"] = cpu, wall, loss
        finally:
            if gc_was_enabled:
                gc.enable()
        if row.get("dl_hyper_oom"):
            gc.collect()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return row

    # -- the measurement (the cell's entry: experiments.Measurement) -------------------------------
    def measure(self) -> tuple[list[dict], dict]:
        """Every repetition (warm-up included, flagged) as one curve row, and the summary metrics."""
        rows, last_log = [], time.monotonic()
        for step in range(self.n_steps):
            row = self.repetition(step)
            rows.append(row)
            if time.monotonic() - last_log >= 30.0:
                last_log = time.monotonic()
                log.info("update timing: repetition %d/%d", step + 1, self.n_steps)
        curve = [
            {"step": r["rep"] + 1, "loss": r["standard_loss"], **{k: v for k, v in r.items() if k != "rep"}}
            for r in rows
        ]
        metrics = summarize(rows, self.timer)
        metrics["dl_hyper_outcome"], metrics["dl_hyper_error"] = self.dl_outcome, self.dl_error
        return curve, metrics


def _quantiles(values) -> tuple[float, float, float]:
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return (math.nan,) * 3
    q25, q50, q75 = np.quantile(a, [0.25, 0.5, 0.75])
    return float(q25), float(q50), float(q75)


def summarize(rows: list[dict], timer: str = "cpu") -> dict:
    """Median ratios (per repetition, update / standard) over the non-warm-up repetitions that ran the update.

    Keys, for every update of :data:`RATIO_KINDS`: ``{kind}_ratio`` (+ ``_q25``/``_q75`` quartiles,
    ``_ci_lo``/``_ci_hi`` 95% bootstrap interval of the median) for the primary `timer`, the same with
    ``_cpu``/``_wall`` suffixes for both clocks, ``{kind}_ratio_of_medians`` / ``_of_minima``, and
    ``{kind}_n`` (repetitions); median milliseconds ``{kind}_ms`` (+ ``_wall_ms``) for every update;
    per-subnetwork medians (``param_ratio_k{k}``, ``hyper_ratio_subnet{k}``); and ``n_repeats``. An
    update no timed repetition ran has NaN values and ``_n`` 0.
    """
    rows = [r for r in rows if not r["warmup"]]
    out: dict = {"n_repeats": len(rows)}

    def ran(kind):
        return [r for r in rows if f"{kind}_cpu_s" in r and np.isfinite(r[f"{kind}_cpu_s"])]

    for clock in ("cpu", "wall"):
        for kind in KINDS:
            _, med, _ = _quantiles([r[f"{kind}_{clock}_s"] for r in ran(kind)])
            out[f"{kind}_{'ms' if clock == 'cpu' else 'wall_ms'}"] = 1000 * med
        for kind in RATIO_KINDS:
            ratios = [
                r[f"{kind}_{clock}_s"] / r[f"standard_{clock}_s"] for r in ran(kind) if r[f"standard_{clock}_s"] > 0
            ]
            q25, med, q75 = _quantiles(ratios)
            out[f"{kind}_ratio_{clock}"], out[f"{kind}_ratio_{clock}_q25"], out[f"{kind}_ratio_{clock}_q75"] = (
                med,
                q25,
                q75,
            )
            out[f"{kind}_ratio_{clock}_ci_lo"], out[f"{kind}_ratio_{clock}_ci_hi"] = median_ci(ratios)
    for kind in RATIO_KINDS:
        sel = ran(kind)
        out[f"{kind}_n"] = len(sel)
        for suffix in ("", "_q25", "_q75", "_ci_lo", "_ci_hi"):
            out[f"{kind}_ratio{suffix}"] = out[f"{kind}_ratio_{timer}{suffix}"]
        std = out["standard_ms" if timer == "cpu" else "standard_wall_ms"]
        own = out[f"{kind}_ms" if timer == "cpu" else f"{kind}_wall_ms"]
        out[f"{kind}_ratio_of_medians"] = own / std if std > 0 else math.nan
        # interference from other processes only adds time, so the fastest repetitions are a second,
        # less noisy estimate of the intrinsic cost (as `timeit` reports the minimum)
        fastest_std = min((r[f"standard_{timer}_s"] for r in rows), default=math.nan)
        fastest_own = min((r[f"{kind}_{timer}_s"] for r in sel), default=math.nan)
        out[f"{kind}_ratio_of_minima"] = fastest_own / fastest_std if fastest_std > 0 else math.nan
    for key, label, kind in (("k_param", "param_ratio_k", "param"), ("subnet_hyper", "hyper_ratio_subnet", "hyper")):
        for k in sorted({r[key] for r in rows}):
            sel = [r for r in rows if r[key] == k]
            _, med, _ = _quantiles([r[f"{kind}_{timer}_s"] / r[f"standard_{timer}_s"] for r in sel])
            out[f"{label}{k}"] = med
            out[f"{label}{k}_n"] = len(sel)
    return out


def build(cell, ctx: CellContext) -> Measurement:
    st = PLAN.typed_settings(cell)
    torch.set_num_threads(int(st.num_threads))
    timer = UpdateTiming(st, ctx.runtime.device)
    return Measurement(st.n_steps, timer.measure, info=dict(timer.info))
