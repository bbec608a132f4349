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

State layout (for speed): a parameter whose entries span several partitions keeps its state
tensors (``momentum_buffer``, ``exp_avg``, ``exp_avg_sq``) *flat and sorted by partition* (partition 1
first, memory order within a partition), so partition k's state is one contiguous slice and a step
costs one gather of the gradient, in-place math on that slice and one ``index_add_`` into the
parameter, i.e. work proportional to the partition's size. Use ``state_in_param_layout(p, key)`` to
see a state tensor in the parameter's shape. A parameter that lies in one partition only (always the
case for C = 1) and shared parameters keep torch's layout and torch's exact op sequence.

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
from collections.abc import Sequence

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
        raise ValueError(
            f"chunk_sizes must be {num_partitions} non-negative numbers with a positive first one: {chunk_sizes!r}"
        )
    total = sum(sizes)
    cum, out = 0.0, []
    for s in sizes:
        cum += s
        f = total / cum
        out.append(math.sqrt(f) if wd_scaling == "sqrt" else f)
    return out


class _Layout:
    """How one parameter's entries map to partitions; static, so computed once and cached.

    ``slots[k]`` is None (no entry in partition k) or (off0, off1, idx) with idx either a
    ``(start, stop)`` range of flat positions (contiguous block, e.g. per-partition affine rows) or a
    long tensor of flat positions. Flat positions follow the parameter's memory order (``dims``
    permutation), so channels_last weights work without copies.
    """

    __slots__ = ("dense", "dims", "perm", "slots", "device", "version", "shape")


def _memory_order(p: torch.Tensor) -> tuple[int, ...]:
    dims = tuple(sorted(range(p.ndim), key=lambda d: (-p.stride(d), d)))
    if not p.permute(dims).is_contiguous():
        raise ValueError(f"partitioned optimisers need a dense parameter, got strides {p.stride()}")
    return dims


class _PartitionedOptimizer(torch.optim.Optimizer):
    """Shared plumbing: parameter/assignment bookkeeping, cached layouts, weight-decay factors."""

    def __init__(self, params, defaults, num_partitions, chunk_sizes, wd_scaling):
        self._assign: dict[torch.Tensor, torch.Tensor] = {}
        self._layouts: dict[torch.Tensor, _Layout] = {}
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
        for a in self._assign.values():
            if a.numel() and (int(a.max()) > self.num_partitions or int(a.min()) < 1):
                raise ValueError(f"assignment ids must lie in 1..num_partitions={self.num_partitions}")
        self.chunk_sizes = None if chunk_sizes is None else [float(s) for s in chunk_sizes]
        self._wd_cache: dict[str, list[float]] = {}
        for g in self.param_groups:  # validate early, not at the first step
            if g["weight_decay"] != 0:
                self.weight_decay_factors(g["wd_scaling"])

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
        if ws not in self._wd_cache:
            self._wd_cache[ws] = weight_decay_factors(self.chunk_sizes, self.num_partitions, ws)
        return self._wd_cache[ws]

    # -- layout -----------------------------------------------------------------------------------
    def _layout(self, p: torch.Tensor) -> _Layout:
        a = self._assign[p]
        lay = self._layouts.get(p)
        if lay is not None and lay.version == a._version and lay.device == p.device and lay.shape == p.shape:
            return lay
        lay = _Layout()
        lay.version, lay.device, lay.shape = a._version, p.device, p.shape
        flat = a.reshape(-1)
        counts = torch.bincount(flat.to(torch.int64).cpu(), minlength=self.num_partitions + 1).tolist()
        lay.slots = [None] * (self.num_partitions + 1)
        present = [k for k in range(1, self.num_partitions + 1) if counts[k]]
        lay.dense = len(present) == 1
        if lay.dense:
            lay.slots[present[0]] = True
            lay.dims = lay.perm = None
        else:
            lay.dims = _memory_order(p)
            flat = a.to(p.device).permute(lay.dims).reshape(-1)
            lay.perm = torch.sort(flat.to(torch.int16), stable=True).indices
            off = 0
            for k in range(1, self.num_partitions + 1):
                n = counts[k]
                if n:
                    idx = lay.perm[off : off + n]
                    first, last = int(idx[0]), int(idx[-1])
                    lay.slots[k] = (off, off + n, (first, last + 1) if last - first + 1 == n else idx)
                off += n
        self._layouts[p] = lay
        return lay

    def state_in_param_layout(self, p: torch.Tensor, key: str) -> torch.Tensor:
        """State tensor ``key`` of ``p`` rearranged into ``p``'s shape (for inspection and tests)."""
        value = self.state[p][key]
        if key == "step" or p not in self._assign or self._layout(p).dense:
            return value
        lay = self._layout(p)
        out = torch.empty_like(value)
        out[lay.perm] = value
        permuted_shape = [p.shape[d] for d in lay.dims]
        inverse = [lay.dims.index(d) for d in range(p.ndim)]
        return out.reshape(permuted_shape).permute(inverse)

    def _check_k(self, k) -> int:
        if k is None:
            raise TypeError("step(k) needs the partition index k (1..C) that the gradient was computed for")
        k = int(k)
        if not 1 <= k <= self.num_partitions:
            raise ValueError(f"partition index must be in 1..{self.num_partitions}, got {k}")
        return k

    def _params_for(self, group, k):
        """Yield (param, slot, step index, n_steps, weight decay) for params to update at partition k.

        slot is True for the dense path (torch layout), else (off0, off1, idx).
        """
        wd = group["weight_decay"]
        factors = self.weight_decay_factors(group["wd_scaling"]) if wd else None
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("sparse gradients are not supported")
            if p in self._assign:
                slot = self._layout(p).slots[k]
                if slot is None:
                    continue
                yield p, slot, k - 1, self.num_partitions, (wd * factors[k - 1] if wd else 0.0)
            else:
                yield p, True, 0, 1, wd

    def _flat(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat (memory-order) views of the parameter and its gradient."""
        dims = self._layouts[p].dims
        return p.permute(dims).view(-1), p.grad.permute(dims).reshape(-1)

    @staticmethod
    def _gather(flat: torch.Tensor, idx) -> torch.Tensor:
        return flat[idx[0] : idx[1]] if isinstance(idx, tuple) else flat.index_select(0, idx)

    @staticmethod
    def _apply(pflat: torch.Tensor, idx, update: torch.Tensor, alpha: float) -> None:
        if isinstance(idx, tuple):
            pflat[idx[0] : idx[1]].add_(update, alpha=alpha)
        else:
            pflat.index_add_(0, idx, update, alpha=alpha)


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
            for p, slot, si, nsteps, wd in self._params_for(group, k):
                state = self.state[p]
                if "step" not in state:
                    state["step"] = torch.zeros(nsteps, dtype=torch.float32, device="cpu")  # host-side counters
                    if mom and slot is not True:
                        state["momentum_buffer"] = torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
                first = bool(state["step"][si] == 0)
                state["step"][si] += 1
                if slot is True:  # torch's single-tensor SGD
                    g = p.grad if not wd else p.grad.add(p, alpha=wd)
                    if mom:
                        buf = state.get("momentum_buffer")
                        if buf is None or first:
                            buf = state["momentum_buffer"] = g.detach().clone()
                        else:
                            buf.mul_(mom).add_(g, alpha=1 - damp)
                        g = g.add(buf, alpha=mom) if nest else buf
                    p.add_(g, alpha=-lr)
                    continue
                off0, off1, idx = slot
                pflat, gflat = self._flat(p)
                g = self._gather(gflat, idx)
                if wd:
                    g = g.add(self._gather(pflat, idx), alpha=wd)
                if mom:
                    buf = state["momentum_buffer"][off0:off1]
                    if first:
                        buf.copy_(g)
                    else:
                        buf.mul_(mom).add_(g, alpha=1 - damp)
                    g = g.add(buf, alpha=mom) if nest else buf
                self._apply(pflat, idx, g, -lr)
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
            for p, slot, si, nsteps, wd in self._params_for(group, k):
                state = self.state[p]
                if "step" not in state:
                    state["step"] = torch.zeros(nsteps, dtype=torch.float32, device="cpu")  # host-side counters
                    if slot is True:
                        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    else:
                        state["exp_avg"] = torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
                        state["exp_avg_sq"] = torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
                state["step"][si] += 1
                step = float(state["step"][si])
                bc1 = 1 - b1**step
                bc2_sqrt = (1 - b2**step) ** 0.5
                step_size = lr / bc1
                if slot is True:  # same op sequence as torch's single-tensor Adam
                    g = p.grad if not wd else p.grad.add(p, alpha=wd)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(g, 1 - b1)
                    exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
                    denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
                    p.addcdiv_(exp_avg, denom, value=-step_size)
                    continue
                off0, off1, idx = slot
                pflat, gflat = self._flat(p)
                g = self._gather(gflat, idx)
                if wd:
                    g = g.add(self._gather(pflat, idx), alpha=wd)
                exp_avg = state["exp_avg"][off0:off1]
                exp_avg_sq = state["exp_avg_sq"][off0:off1]
                exp_avg.lerp_(g, 1 - b1)
                exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
                self._apply(pflat, idx, exp_avg / denom, -step_size)
        return loss
