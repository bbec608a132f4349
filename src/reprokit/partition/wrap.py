"""Turn an ordinary torch model into a partitioned network (Sec. 3, App. C, I.2).

`partition(model, proportions)` registers `torch.nn.utils.parametrize` parametrizations on the
model's parameters *in place* (no model rewrite), so the model's own ``forward`` keeps working and
reads the effective value of the current subnetwork:

* nn.Linear / nn.Conv{1,2,3}d ``weight`` and ``bias`` (element-wise partitions, App. C):
  ``effective = where(assign <= k, w, w_default)`` with ``w_default`` the value at wrap time
  (``default="init"``, stored as a buffer) or 0 (``default="zero"``, no extra memory, App. D).
  Memory: a uint8 assignment per entry, plus (C-1) cached float masks (``cache_masks=False`` drops
  them and recomputes per forward) and, for ``init``, one copy of the initial values.
* Normalisation affines (nn.GroupNorm / BatchNorm* / LayerNorm / InstanceNorm*) and the FixUp
  scalars `reprokit.models.layers.Scale` / `Bias` (per-partition vectors, App. I.2): the parameter is
  replaced by a (C, *shape) tensor whose row i-1 belongs to partition i; subnetwork k uses the product
  of scale rows 1..k, or the sum of bias rows 1..k. Row 1 starts at the original value, rows 2..C at
  1 (scale) / 0 (bias), so every subnetwork equals the unwrapped model at wrap time.

Subnetwork indices: k = 1..C as in the paper; k = C is the full network; k = 0 means "every
partition at its default" (element-wise params at their default; affines at their wrap-time value
for ``default="init"`` and at the identity, scale 1 / bias 0, for ``default="zero"``).

The parameter objects survive wrapping (parametrize keeps the original Parameter and re-points its
data), but affine parameters change shape to (C, *shape).

Pickling a parametrized model is not supported by torch; use ``state_dict()`` (assignments and
``init`` defaults are persistent buffers, so a state dict restores them) or ``copy.deepcopy``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence

import torch
from torch import nn
from torch.nn.utils import parametrize

from reprokit.models.layers import Bias, Scale

from .masks import node_assignment, normalise_proportions, random_weight_assignment

__all__ = ["partition", "PartitionedModel", "ELEMENTWISE_TYPES", "NORM_TYPES"]

ELEMENTWISE_TYPES: tuple[type[nn.Module], ...] = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.GroupNorm,
    nn.LayerNorm,
    nn.modules.batchnorm._BatchNorm,
    nn.modules.instancenorm._InstanceNorm,
)


class _SubnetState:
    """Current subnetwork index shared by every parametrization of one model.

    A plain object (not a module or buffer) so that switching subnetworks is one attribute write and
    never touches the state dict; deepcopy keeps it shared within the copy via the memo.
    """

    __slots__ = ("k", "num_partitions")

    def __init__(self, num_partitions: int):
        self.num_partitions = num_partitions
        self.k = num_partitions


class ElementwisePartition(nn.Module):
    """Parametrization ``w -> where(assign <= k, w, default)`` for one weight or bias tensor.

    Implemented as ``lerp(default, w, mask_k)`` (``w * mask_k`` for zero defaults) with a cached
    0/1 *float* mask per k = 1..C-1: torch's lerp is exact for weights 0 and 1 (it switches formula
    at 0.5), its gradient w.r.t. ``w`` is exactly ``mask_k * grad``, and on CPU it is an order of
    magnitude faster than ``torch.where`` with a bool condition. Masks are non-persistent buffers
    (they follow ``.to()`` and dtype casts, stay out of the state dict). k = C returns ``w`` itself and
    k = 0 the default, so neither needs a mask. ``mask_shape`` lets node partitioning cache a
    broadcastable (rows, 1, ...) mask instead of a full one.
    """

    def __init__(
        self,
        assign: torch.Tensor,
        state: _SubnetState,
        default: str,
        init_value: torch.Tensor | None,
        dtype: torch.dtype,
        mask_shape: torch.Size | None = None,
        cache_masks: bool = True,
    ):
        super().__init__()
        self._state = state
        self.default_mode = default
        self.register_buffer("assign", assign.to(torch.uint8).contiguous())
        if default == "init":
            self.register_buffer("default", init_value.detach().clone())
        else:
            self.default = None
        self._mask_shape = mask_shape
        self._cache = cache_masks
        self._mask_names = [None] + [f"mask{k}" for k in range(1, state.num_partitions)]
        if cache_masks:
            for k in range(1, state.num_partitions):
                self.register_buffer(self._mask_names[k], self._make_mask(k, dtype), persistent=False)

    def _make_mask(self, k: int, dtype: torch.dtype) -> torch.Tensor:
        a = self.assign
        if self._mask_shape is not None:
            a = a[(slice(None),) + (slice(0, 1),) * (a.ndim - 1)].reshape(self._mask_shape)
        return (a <= k).to(dtype)

    def _load_from_state_dict(self, *args, **kwargs):
        # loading may bring different assignments; the cached masks are derived data, so rebuild them
        super()._load_from_state_dict(*args, **kwargs)
        if self._cache:
            for k in range(1, self._state.num_partitions):
                name = self._mask_names[k]
                self._buffers[name] = self._make_mask(k, self._buffers[name].dtype)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        k = self._state.k
        if k >= self._state.num_partitions:
            return w
        if k <= 0:
            return self.default if self.default is not None else torch.zeros_like(w)
        mask = self._buffers[self._mask_names[k]] if self._cache else self._make_mask(k, w.dtype)
        if self.default is not None:
            return torch.lerp(self.default, w, mask)
        return w * mask


class AffinePartition(nn.Module):
    """Parametrization for per-partition scales (product over 1..k) or biases (sum over 1..k), App. I.2.

    The stored tensor has shape (C, *shape); ``right_inverse`` builds it from the original value so
    that every subnetwork reproduces the original affine at wrap time.
    """

    def __init__(self, kind: str, state: _SubnetState, default: str, init_value: torch.Tensor):
        super().__init__()
        if kind not in ("scale", "bias"):
            raise ValueError(kind)
        self.kind = kind
        self._state = state
        if default == "init":
            k0 = init_value.detach().clone()
        else:  # identity affine: the neutral element of product / sum
            k0 = torch.ones_like(init_value) if kind == "scale" else torch.zeros_like(init_value)
        self.register_buffer("default", k0)
        self.register_buffer("assign", _affine_assignment(state.num_partitions, init_value.shape).to(init_value.device))

    def forward(self, stacked: torch.Tensor) -> torch.Tensor:
        k = min(self._state.k, stacked.shape[0])
        if k <= 0:
            return self.default
        if k == 1:
            return stacked[0]
        if self.kind == "scale":
            return stacked[:k].prod(dim=0)
        return stacked[:k].sum(dim=0)

    def right_inverse(self, value: torch.Tensor) -> torch.Tensor:
        c = self._state.num_partitions
        fill = torch.ones if self.kind == "scale" else torch.zeros
        rest = fill((c - 1,) + tuple(value.shape), dtype=value.dtype, device=value.device)
        return torch.cat([value.detach().unsqueeze(0), rest], dim=0)


def _affine_assignment(c: int, shape: torch.Size) -> torch.Tensor:
    ids = torch.arange(1, c + 1, dtype=torch.uint8)
    return ids.reshape((c,) + (1,) * len(shape)).expand((c,) + tuple(shape)).contiguous()


def _affine_kind(module: nn.Module, pname: str) -> str | None:
    if isinstance(module, NORM_TYPES) and pname in ("weight", "bias"):
        return "scale" if pname == "weight" else "bias"
    if isinstance(module, Scale) and pname == "scale":
        return "scale"
    if isinstance(module, Bias) and pname == "bias":
        return "bias"
    return None


class PartitionedModel(nn.Module):
    """A model whose parameters are split into C partitions; forward runs the current subnetwork.

    Build with `partition(...)`. Hyperparameter modules (augmentations, input masks) stay outside:
    they are not partitioned and are optimised separately.
    """

    def __init__(self, model: nn.Module, state: _SubnetState, proportions: torch.Tensor, scheme: str, default: str):
        super().__init__()
        self.model = model
        self._state = state
        self.proportions = proportions
        self.scheme = scheme
        self.default = default
        self._entries: list[tuple[str, nn.Module, str]] = []  # (original name, owning module, attr)
        self._shared: list[tuple[str, nn.Parameter]] = []

    # -- subnetwork selection -------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        return self._state.num_partitions

    @property
    def current_subnetwork(self) -> int:
        return self._state.k

    def set_subnetwork(self, k: int) -> None:
        """Select subnetwork k (0 = all defaults, C = full network) for subsequent forwards."""
        k = int(k)
        if not 0 <= k <= self.num_partitions:
            raise ValueError(f"subnetwork index must be in 0..{self.num_partitions}, got {k}")
        self._state.k = k

    @contextlib.contextmanager
    def subnetwork(self, k: int) -> Iterator[PartitionedModel]:
        """Context manager: run subnetwork k inside, restore the previous one on exit."""
        prev = self._state.k
        self.set_subnetwork(k)
        try:
            yield self
        finally:
            self._state.k = prev

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    # -- parameters and assignments -------------------------------------------------------------
    def _plist(self, module: nn.Module, attr: str):
        return module.parametrizations[attr]

    def partitioned_parameters(self) -> Iterator[tuple[nn.Parameter, torch.Tensor]]:
        """Yield (parameter, uint8 assignment of the same shape) for every partitioned parameter."""
        for _, module, attr in self._entries:
            plist = self._plist(module, attr)
            yield plist.original, plist[0].assign

    def named_partitioned_parameters(self) -> Iterator[tuple[str, nn.Parameter, torch.Tensor]]:
        """Like `partitioned_parameters`, with the parameter's name in the unwrapped model."""
        for (name, _, _), (p, a) in zip(self._entries, self.partitioned_parameters()):
            yield name, p, a

    def shared_parameters(self) -> Iterator[nn.Parameter]:
        """Parameters opted in via ``shared=``: used by every subnetwork, updated on every step."""
        for _, p in self._shared:
            yield p

    @property
    def assignments(self) -> dict[str, torch.Tensor]:
        """Name (as in the unwrapped model) -> uint8 assignment, ids 1..C."""
        return {name: a for name, _, a in self.named_partitioned_parameters()}

    def partition_sizes(self) -> torch.Tensor:
        """Number of parameter entries per partition (index k-1), over all partitioned parameters."""
        counts = torch.zeros(self.num_partitions, dtype=torch.int64)
        for _, a in self.partitioned_parameters():
            counts += torch.bincount(a.reshape(-1).to(torch.int64).cpu(), minlength=self.num_partitions + 1)[1:]
        return counts


def partition(
    model: nn.Module,
    proportions: Sequence[float],
    scheme: str = "random",
    default: str = "init",
    seed: int | torch.Generator = 0,
    shared: Iterable[str] = (),
    assignments: Mapping[str, torch.Tensor] | None = None,
    cache_masks: bool = True,
    exclude: Iterable[nn.Parameter] = (),
) -> PartitionedModel:
    """Partition ``model`` in place into C = len(proportions) partitions and wrap it.

    Args:
        proportions: parameter proportions per partition (unnormalised is fine). Each element-wise
            tensor gets exactly these proportions (largest remainder).
        scheme: "random" (random weight partitioning, the paper's default) or "node" (whole output
            rows of Linear/Conv, with the bias entry following its row).
        default: value of inactive entries: "init" (wrap-time value) or "zero".
        seed: int seed or a torch.Generator, so assignments are reproducible.
        shared: names (or module-name prefixes) of parameters that belong to *every* partition:
            not masked, used by all subnetworks, updated by the partitioned optimisers on every step.
            Without this opt-in an unsupported trainable parameter raises, because silently sharing
            it would leak information from later chunks into earlier subnetworks.
        assignments: optional explicit uint8 assignments (ids 1..C) for element-wise parameters,
            keyed by name in the unwrapped model; overrides the scheme for those tensors.
        cache_masks: cache one float 0/1 mask per k < C and tensor (C-1 floats per entry, fewer for
            node partitioning) instead of recomputing ``assign <= k`` on every forward.
        exclude: parameters left out entirely (hyperparameters inside ``model``, such as an input mask's
            logits): not partitioned and not updated by the partitioned optimisers.

    Parameters with ``requires_grad=False`` are constants and are left untouched.
    """
    if isinstance(model, PartitionedModel):
        raise TypeError("model is already partitioned")
    if scheme not in ("random", "node"):
        raise ValueError(f"scheme must be 'random' or 'node', got {scheme!r}")
    if default not in ("init", "zero"):
        raise ValueError(f"default must be 'init' or 'zero', got {default!r}")
    props = normalise_proportions(proportions)
    c = props.numel()
    gen = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(int(seed))
    shared = list(shared)
    used_shared: set[str] = set()
    excluded = {id(p) for p in exclude}
    assignments = dict(assignments or {})
    state = _SubnetState(c)
    pm = PartitionedModel(model, state, props, scheme, default)

    def is_shared(name: str) -> bool:
        for s in shared:
            if name == s or name.startswith(s + "."):
                used_shared.add(s)
                return True
        return False

    plan: list[tuple[str, nn.Module, str, str]] = []  # (name, module, attr, kind)
    for mname, module in model.named_modules():
        if parametrize.is_parametrized(module):
            raise ValueError(f"module {mname!r} already has parametrizations; partition() needs a plain model")
        for pname, p in module.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            if id(p) in excluded:
                continue
            if is_shared(full):
                pm._shared.append((full, p))
                continue
            if isinstance(module, ELEMENTWISE_TYPES) and pname in ("weight", "bias"):
                plan.append((full, module, pname, "elementwise"))
            elif (kind := _affine_kind(module, pname)) is not None:
                plan.append((full, module, pname, kind))
            elif not p.requires_grad:
                continue
            else:
                raise ValueError(
                    f"don't know how to partition parameter {full!r} of {type(module).__name__}; "
                    "pass shared=[...] to make it common to all partitions, or freeze it"
                )
    unused = set(shared) - used_shared
    if unused:
        raise ValueError(f"shared= names match no parameter: {sorted(unused)}")
    unknown = set(assignments) - {name for name, _, _, kind in plan if kind == "elementwise"}
    if unknown:
        raise ValueError(f"assignments= given for parameters that are not element-wise partitioned: {sorted(unknown)}")

    row_ids: dict[int, torch.Tensor] = {}  # id(module) -> node ids of its weight rows
    for full, module, pname, kind in plan:
        p = getattr(module, pname)
        if kind == "elementwise":
            mask_shape = None
            if full in assignments:
                a = torch.as_tensor(assignments[full]).to(torch.uint8)
                if a.shape != p.shape or int(a.min()) < 1 or int(a.max()) > c:
                    raise ValueError(f"assignment for {full!r} must have shape {tuple(p.shape)} and ids in 1..{c}")
            elif scheme == "node":
                if pname == "weight" or id(module) not in row_ids:
                    rows_shape = (p.shape[0],) if pname == "bias" else p.shape
                    a = node_assignment(rows_shape, props.tolist(), gen)
                    row_ids[id(module)] = a.reshape(p.shape[0], -1)[:, 0].clone()
                a = row_ids[id(module)]
                a = a.reshape((p.shape[0],) + (1,) * (p.ndim - 1)).expand(p.shape).contiguous()
                mask_shape = torch.Size((p.shape[0],) + (1,) * (p.ndim - 1))
            else:
                a = random_weight_assignment(p.shape, props.tolist(), gen)
            par = ElementwisePartition(
                a.to(p.device),
                state,
                default,
                p if default == "init" else None,
                dtype=p.dtype,
                mask_shape=mask_shape,
                cache_masks=cache_masks,
            )
            parametrize.register_parametrization(module, pname, par)
        else:
            par = AffinePartition(kind, state, default, p)
            parametrize.register_parametrization(module, pname, par, unsafe=True)
        pm._entries.append((full, module, pname))
    return pm
