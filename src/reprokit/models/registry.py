"""Model registry and a structural description of a model (Table 9 is rendered from it).

``build_model(name, **kwargs)`` forwards ``kwargs`` to the builder; names are case-insensitive and
``-`` is treated as ``_``. Registered names:

=================  ============================================================================
mnist_cnn          :class:`~reprokit.models.mnist_cnn.MnistCNN` (Table 9; optional dropout)
fixup_resnet       :class:`~reprokit.models.fixup_resnet.FixupResNet` (``depth=6n+2``)
fixup_resnet8      FixupResNet(depth=8)
fixup_resnet14     FixupResNet(depth=14)
wrn                :class:`~reprokit.models.wide_resnet.WideResNet` (``depth``, ``width``, ``norm``)
wrn20_gn           WideResNet(depth=20, width=1, norm="group", gn_groups=2) (Table 3's WRN-20; width and
                   norm are our choice, the paper gives neither)
resnet50_gn        :func:`~reprokit.models.resnet_gn.resnet50_gn` (WRN-50-1, GroupNorm(2), 200 cls)
resnet9_gn         :class:`~reprokit.models.resnet_gn.ResNet9GN` (federated CIFAR10)
mlp                ``reprokit.models.mlp.MLP(in_features, hidden, out_features, activation)``
=================  ============================================================================

``mlp`` is imported lazily (the module is owned elsewhere and may not exist yet).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from reprokit.augment.concrete_dropout import ConcreteDropout
from reprokit.models.layers import Bias, Scale

__all__ = ["build_model", "model_names", "describe_architecture", "register_model"]


def _lazy(module: str, attr: str, **fixed: Any) -> Callable[..., nn.Module]:
    def build(**kwargs: Any) -> nn.Module:
        fn = getattr(importlib.import_module(module), attr)
        return fn(**{**fixed, **kwargs})

    build.__name__ = f"build_{attr}"
    build.__doc__ = f"{module}.{attr}(**{fixed or {}} | kwargs)"
    return build


_REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "mnist_cnn": _lazy("reprokit.models.mnist_cnn", "MnistCNN"),
    "fixup_resnet": _lazy("reprokit.models.fixup_resnet", "FixupResNet"),
    "fixup_resnet8": _lazy("reprokit.models.fixup_resnet", "FixupResNet", depth=8),
    "fixup_resnet14": _lazy("reprokit.models.fixup_resnet", "FixupResNet", depth=14),
    "wrn": _lazy("reprokit.models.wide_resnet", "WideResNet"),
    "wrn20_gn": _lazy("reprokit.models.wide_resnet", "WideResNet", depth=20, width=1, norm="group", gn_groups=2),
    "resnet50_gn": _lazy("reprokit.models.resnet_gn", "resnet50_gn"),
    "resnet9_gn": _lazy("reprokit.models.resnet_gn", "ResNet9GN"),
    "mlp": _lazy("reprokit.models.mlp", "MLP"),
}


def model_names() -> list[str]:
    """Sorted list of registered model names."""
    return sorted(_REGISTRY)


def register_model(name: str, builder: Callable[..., nn.Module], overwrite: bool = False) -> None:
    """Add a builder under ``name`` (lower-case)."""
    key = name.lower().replace("-", "_")
    if key in _REGISTRY and not overwrite:
        raise ValueError(f"model {key!r} already registered")
    _REGISTRY[key] = builder


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Build a registered model; unknown names raise ``KeyError`` listing the valid names."""
    key = str(name).lower().replace("-", "_")
    if key not in _REGISTRY:
        raise KeyError(f"unknown model {name!r}; valid names: {', '.join(model_names())}")
    return _REGISTRY[key](**kwargs)


# --------------------------------------------------------------------------------------------------
# describe_architecture
# --------------------------------------------------------------------------------------------------

_ACTIVATIONS: dict[type, str] = {
    nn.ReLU: "ReLU",
    nn.GELU: "GELU",
    nn.Tanh: "Tanh",
    nn.Sigmoid: "Sigmoid",
    nn.LeakyReLU: "LeakyReLU",
    nn.ELU: "ELU",
    nn.SiLU: "SiLU",
    nn.Softmax: "Softmax",
    nn.LogSoftmax: "LogSoftmax",
}
_SKIP = (nn.Flatten, nn.Identity)


def _pair(v: Any) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _scalar(v: Any) -> Any:
    t = _pair(v)
    return t[0] if all(x == t[0] for x in t) else t


def _describe_leaf(m: nn.Module) -> tuple[str, str] | None:
    """(layer, spec) for a leaf module, or None if it is not a known layer type."""

    if isinstance(m, nn.Conv2d):
        k = _pair(m.kernel_size)
        spec = f"channels={m.out_channels}, kernel size=({k[0]}, {k[1]})"
        if _scalar(m.stride) != 1:
            spec += f", stride={_scalar(m.stride)}"
        spec += f", padding={_scalar(m.padding)}"
        return "2D convolution", spec
    if isinstance(m, nn.Linear):
        return "Fully connected", f"units={m.out_features}"
    if isinstance(m, nn.MaxPool2d):
        k = _pair(m.kernel_size)
        return "Max pooling", f"pool size=({k[0]}, {k[1]}), stride={_scalar(m.stride)}"
    if isinstance(m, nn.AvgPool2d):
        k = _pair(m.kernel_size)
        return "Average pooling", f"pool size=({k[0]}, {k[1]}), stride={_scalar(m.stride)}"
    if isinstance(m, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
        kind = "average" if isinstance(m, nn.AdaptiveAvgPool2d) else "max"
        prefix = "Global" if _scalar(m.output_size) == 1 else "Adaptive"
        return f"{prefix} {kind} pooling", f"output size={m.output_size}"
    if isinstance(m, nn.GroupNorm):
        return "Group normalization", f"groups={m.num_groups}, channels={m.num_channels}"
    if isinstance(m, nn.BatchNorm2d):
        return "Batch normalization", f"channels={m.num_features}"
    if isinstance(m, ConcreteDropout):
        return "Concrete dropout", f"p={float(m.p.detach()):.3g}, learnable={m.learnable}, temperature={m.temperature}"
    if isinstance(m, nn.Dropout):
        return "Dropout", f"p={m.p}"
    if isinstance(m, Scale):
        return "FixUp scale", "scalar"
    if isinstance(m, Bias):
        return "FixUp bias", "scalar"
    return None


def describe_architecture(
    model: nn.Module,
    input_shape: tuple[int, ...] | None = None,
    output_activation: str | None = "Softmax",
) -> list[dict]:
    """Layer-by-layer description of ``model`` (leaf modules in registration order).

    Each row is a dict with keys

    * ``name``  - the module's qualified name (e.g. ``"conv1"``),
    * ``layer`` - human layer kind as in Table 9 (``"2D convolution"``, ``"Max pooling"``,
      ``"Fully connected"``, ...; unknown leaves get their class name),
    * ``spec``  - Table-9-style specification, e.g. ``"channels=20, kernel size=(5, 5), padding=2,
      activation=ReLU"``,
    * ``type``  - the module class name,
    * ``params`` - number of parameters owned by the module,
    * ``output_shape`` - output shape without the batch dimension (only if ``input_shape``, without
      batch dimension, is given; obtained from one forward pass in eval mode under ``no_grad``).

    Activation modules are folded into the preceding layer's ``spec`` (``", activation=ReLU"``);
    ``Flatten``/``Identity`` produce no row. The last row gets ``activation=<output_activation>``
    when it has none (the softmax of a classifier lives in the loss; Table 9 lists it on the last
    layer); pass ``None`` to disable. Registration order equals execution order for sequential
    models such as the MNIST CNN; for ResNets the rows are a per-module inventory.
    """
    leaves = [(n, m) for n, m in model.named_modules() if len(list(m.children())) == 0]
    shapes: dict[int, tuple[int, ...]] = {}
    if input_shape is not None:
        hooks = []

        def hook(mod, _inp, out):
            if id(mod) not in shapes and isinstance(out, torch.Tensor):
                shapes[id(mod)] = tuple(out.shape[1:])

        for _, m in leaves:
            hooks.append(m.register_forward_hook(hook))
        was_training = model.training
        model.eval()
        try:
            p = next(model.parameters(), None)
            dev = p.device if p is not None else torch.device("cpu")
            dtype = p.dtype if p is not None else torch.float32
            with torch.no_grad():
                model(torch.zeros((1, *input_shape), device=dev, dtype=dtype))
        finally:
            for h in hooks:
                h.remove()
            model.train(was_training)

    rows: list[dict] = []
    for name, m in leaves:
        if isinstance(m, _SKIP):
            continue
        act = next((v for k, v in _ACTIVATIONS.items() if type(m) is k), None)
        if act is not None:
            if rows and "activation=" not in rows[-1]["spec"]:
                rows[-1]["spec"] += f", activation={act}"
                if id(m) in shapes:
                    rows[-1]["output_shape"] = shapes[id(m)]
                continue
            layer, spec = "Activation", act
        else:
            d = _describe_leaf(m)
            layer, spec = d if d is not None else (type(m).__name__, "")
        row = {
            "name": name,
            "layer": layer,
            "spec": spec,
            "type": type(m).__name__,
            "params": sum(p.numel() for p in m.parameters(recurse=False)),
        }
        if input_shape is not None:
            row["output_shape"] = shapes.get(id(m))
        rows.append(row)
    if output_activation and rows and rows[-1]["layer"] == "Fully connected" and "activation=" not in rows[-1]["spec"]:
        rows[-1]["spec"] += f", activation={output_activation}"
    return rows
