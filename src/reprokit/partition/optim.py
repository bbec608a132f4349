"""Partition-aware SGD and Adam (App. I.1, "Gradient optimization of partitioned parameters").

``opt.step(k)`` updates only the entries whose assignment == k, using a gradient computed on a
minibatch from D_1:k through subnetwork k. Off-the-shelf momentum optimisers would let the stale
momentum of other partitions keep moving them and would count steps globally; here

* momentum buffers / Adam moments change only at partition-k entries,
* each parameter keeps a step-count *vector* ``state["step"]`` of length C (index k-1), used for
  SGD's "first step copies the gradient" rule and for Adam's bias correction, and
* the learning rate lives in ``param_groups`` as usual, so any ``torch.optim.lr_scheduler`` anneals it
  on the *global* step, as the paper does.

Accepted ``params``: a `PartitionedModel` (its partitioned parameters plus its ``shared=`` ones), or
an iterable (or param-group dicts) whose items are ``(param, assignment)`` pairs, plain tensors or
``(name, tensor)`` pairs. Tensors without assignment (assignment ``None``) are *shared*: updated on
every ``step(k)`` with exactly torch's SGD/Adam semantics, their own scalar step count and an
unscaled weight decay (they are fit on all chunks).

Weight decay (L2 added to the gradient, as torch's SGD/Adam) for partition k is ``wd * f_k`` with
N = sum of chunk sizes and N_{1:k} = size of chunks 1..k (the data partition k is fit on):

* ``wd_scaling="reciprocal"`` (App. I.1): f_k = N / N_{1:k}. Weight decay on a mean-over-batch loss
  is a Gaussian prior divided by the number of examples it is weighed against; partition k only
  ever sees N_{1:k} examples, so its per-example prior strength is N/N_{1:k} times the full-data one.
  The last partition (N_{1:C} = N) gets exactly ``wd``; earlier ones get more.
* ``wd_scaling="sqrt"`` (App. I.4, CIFAR): f_k = sqrt(N / N_{1:k}).
* ``wd_scaling="none"``: f_k = 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from .wrap import PartitionedModel

__all__ = ["PartitionedSGD", "PartitionedAdam", "weight_decay_factors"]

_WD_SCALINGS = ("reciprocal", "sqrt", "none")


def weight_decay_factors(chunk_sizes: Sequence[float] | None, num_partitions: int, wd_scaling: str) -> list[float]:
    """Per-partition multipliers f_1..f_C of the base weight decay (see module docstring)."""
    if wd_scaling not in _WD_SCALINGS:
        raise ValueError(f"wd_scaling must be one of {_WD_SCALINGS}, got {wd_scaling!r}")
    if wd_scaling == "none":
        return [1.0] * num_partitions
    if chunk_sizes is None:
        raise ValueError(f"wd_scaling={wd_scaling!r} needs chunk_sizes")
    sizes = [float(s) for s in chunk_sizes]
    if len(sizes) != num_partitions or any(s < 0 for s in sizes) or sizes[0] <= 0:
        raise ValueError(f"chunk_sizes must be {num_partitions} non-negative numbers with a positive first one: {chunk_sizes!r}")
    total = sum(sizes)
    cum, out = 0.0, []
    for s in sizes:
        cum += s
        f = total / cum
        out.append(math.sqrt(f) if wd_scaling == "sqrt" else f)
    return out


class _PartitionedOptimizer(torch.optim.Optimizer):
    """Shared plumbing: parameter/assignment bookkeeping, cached masks, weight-decay factors."""

    def __init__(self, params, defaults, num_partitions, chunk_sizes, wd_scaling):
        self._assign: dict[torch.Tensor, torch.Tensor] = {}
        # per param: list indexed by k (1..C) of True (all entries are k), False (none) or a bool mask
        self._masks: dict[torch.Tensor, list] = {}
        if isinstance(params, PartitionedModel):
            if num_partitions is None:
                num_partitions = params.num_partitions
            params = self._expand_model(params)
        defaults["wd_scaling"] = wd_scaling
        super().__init__(params, defaults)
        if num_partitions is None:
            if chunk_sizes is not None:
                num_partitions = len(chunk_sizes)
            elif self._assign:
                num_partitions = max(int(a.max()) for a in self._assign.values())
            else:
                num_partitions = 1
        self.num_partitions = int(num_partitions)
        for p, a in self._assign.items():
            if a.numel() and int(a.max()) > self.num_partitions:
                raise ValueError(f"assignment ids exceed num_partitions={self.num_partitions}")
        self.chunk_sizes = None if chunk_sizes is None else [float(s) for s in chunk_sizes]
        for g in self.param_groups:  # validate early, not at the first step
            if g["weight_decay"] != 0:
                weight_decay_factors(self.chunk_sizes, self.num_partitions, g["wd_scaling"])

    @staticmethod
    def _expand_model(pm: PartitionedModel) -> list:
        return list(pm.partitioned_parameters()) + list(pm.shared_parameters())

    def add_param_group(self, param_group: dict) -> None:
        params = param_group["params"]
        if isinstance(params, PartitionedModel):
            params = self._expand_model(params)
        elif isinstance(params, torch.Tensor):
            params = [params]
        plain = []
        for item in params:
            if isinstance(item, tuple):
                if len(item) == 2 and isinstance(item[0], str):
                    item = item[1]  # (name, tensor) from named_parameters(): shared
                elif len(item) == 2 and isinstance(item[0], torch.Tensor):
                    p, a = item
                    if a is not None:
                        a = torch.as_tensor(a)
                        if a.shape != p.shape:
                            raise ValueError(f"assignment shape {tuple(a.shape)} != parameter shape {tuple(p.shape)}")
                        self._assign[p] = a
                    item = p
                else:
                    raise TypeError(f"expected (param, assignment) or (name, param), got {type(item[0])}")
            plain.append(item)
        param_group = dict(param_group, params=plain)
        super().add_param_group(param_group)

    def weight_decay_factors(self, wd_scaling: str | None = None) -> list[float]:
        """Multipliers f_1..f_C (list index k-1) of the base weight decay for each partition."""
        ws = wd_scaling if wd_scaling is not None else self.defaults["wd_scaling"]
        return weight_decay_factors(self.chunk_sizes, self.num_partitions, ws)

    def _mask(self, p: torch.Tensor, k: int):
        """True / False / bool mask of p's entries in partition k; cached because assignments are static."""
        masks = self._masks.get(p)
        if masks is None:
            masks = self._masks[p] = [None] * (self.num_partitions + 1)
        m = masks[k]
        if m is None or (isinstance(m, torch.Tensor) and m.device != p.device):
            eq = self._assign[p].to(p.device) == k
            n = int(eq.sum())
            m = masks[k] = True if n == eq.numel() else (False if n == 0 else eq)
        return m

    def _check_k(self, k) -> int:
        if k is None:
            raise TypeError("step(k) needs the partition index k (1..C) that the gradient was computed for")
        k = int(k)
        if not 1 <= k <= self.num_partitions:
            raise ValueError(f"partition index must be in 1..{self.num_partitions}, got {k}")
        return k

    def _slots(self, group, k):
        """Yield (param, grad, mask, step-index, weight decay) for params to update at partition k."""
        wd = group["weight_decay"]
        factors = weight_decay_factors(self.chunk_sizes, self.num_partitions, group["wd_scaling"]) if wd else None
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("sparse gradients are not supported")
            if p in self._assign:
                m = self._mask(p, k)
                if m is False:
                    continue
                yield p, p.grad, m, k - 1, (wd * factors[k - 1] if wd else 0.0), self.num_partitions
            else:
                yield p, p.grad, True, 0, wd, 1


class PartitionedSGD(_PartitionedOptimizer):
    """SGD (momentum, dampening, Nesterov, L2 weight decay) updating one partition per step.

    Matches ``torch.optim.SGD`` exactly when every entry is in the partition being stepped (C = 1).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        num_partitions: int | None = None,
        chunk_sizes: Sequence[float] | None = None,
        wd_scaling: str = "reciprocal",
    ):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError("lr, momentum and weight_decay must be non-negative")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults, num_partitions, chunk_sizes, wd_scaling)

    @torch.no_grad()
    def step(self, k: int | None = None, closure=None):
        """Update partition k (1..C) of every partitioned parameter, and all shared parameters."""
        k = self._check_k(k)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mom, damp, nest = group["lr"], group["momentum"], group["dampening"], group["nesterov"]
            for p, g, m, si, wd, nsteps in self._slots(group, k):
                state = self.state[p]
                if "step" not in state:
                    state["step"] = torch.zeros(nsteps, dtype=torch.float32)
                first = bool(state["step"][si] == 0)
                state["step"][si] += 1
                if wd:
                    g = g.add(p, alpha=wd)
                if mom:
                    buf = state.get("momentum_buffer")
                    if m is True:
                        if buf is None or first:
                            buf = state["momentum_buffer"] = g.detach().clone()
                        else:
                            buf.mul_(mom).add_(g, alpha=1 - damp)
                    else:
                        if buf is None:
                            buf = torch.zeros_like(p, memory_format=torch.preserve_format)
                        new = g if first else torch.add(buf * mom, g, alpha=1 - damp)
                        buf = state["momentum_buffer"] = torch.where(m, new, buf)
                    g = g.add(buf, alpha=mom) if nest else buf
                if m is True:
                    p.add_(g, alpha=-lr)
                else:
                    p.add_(torch.where(m, g, 0.0), alpha=-lr)
        return loss


class PartitionedAdam(_PartitionedOptimizer):
    """Adam (L2 weight decay as ``torch.optim.Adam``) updating one partition per step.

    Bias correction uses the per-partition step count, so a partition that is rarely sampled is not
    under-corrected. Matches ``torch.optim.Adam`` exactly when C = 1.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        num_partitions: int | None = None,
        chunk_sizes: Sequence[float] | None = None,
        wd_scaling: str = "reciprocal",
    ):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"invalid Adam hyperparameters lr={lr} betas={betas} eps={eps} wd={weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults, num_partitions, chunk_sizes, wd_scaling)

    @torch.no_grad()
    def step(self, k: int | None = None, closure=None):
        """Update partition k (1..C) of every partitioned parameter, and all shared parameters."""
        k = self._check_k(k)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
            for p, g, m, si, wd, nsteps in self._slots(group, k):
                state = self.state[p]
                if "step" not in state:
                    state["step"] = torch.zeros(nsteps, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"][si] += 1
                step = float(state["step"][si])
                if wd:
                    g = g.add(p, alpha=wd)
                bc1 = 1 - b1**step
                bc2_sqrt = (1 - b2**step) ** 0.5
                step_size = lr / bc1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                if m is True:  # same op sequence as torch's single-tensor Adam
                    exp_avg.lerp_(g, 1 - b1)
                    exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
                    denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
                    p.addcdiv_(exp_avg, denom, value=-step_size)
                else:
                    new_avg = torch.lerp(exp_avg, g, 1 - b1)
                    new_sq = (exp_avg_sq * b2).addcmul_(g, g, value=1 - b2)
                    state["exp_avg"] = torch.where(m, new_avg, exp_avg)
                    state["exp_avg_sq"] = torch.where(m, new_sq, exp_avg_sq)
                    denom = (new_sq.sqrt() / bc2_sqrt).add_(eps)
                    p.add_(torch.where(m, new_avg / denom, 0.0), alpha=-step_size)
        return loss
