"""Per-cell start-up: keep `torch._dynamo` out of processes that never compile.

A quick cell spends most of its wall time starting. torch 2.x imports `torch._dynamo` the first time any
optimiser is built, although nothing in a cell calls `torch.compile`. Measured with torch 2.14.1 on this
project's 2-core CPU (2026-11-26, `python benchmarks/bench_startup.py --repeats 3`, medians): a test-scale
cell run takes 4.1 s with `prepare()` and 6.5 s without it (`import torch` alone 2.9 s), so it still saves
~2.4 s per job, ~11 CPU-minutes over the ~280 jobs of a quick build; that is why it stays despite
reaching into torch's wrappers (and why those are checked, below). The wrappers:

* `Optimizer.add_param_group` (run by every optimiser's `__init__`), `zero_grad`, `state_dict` and
  `load_state_dict` are decorated with `torch._disable_dynamo`, whose wrapper imports `torch._dynamo`
  on its first call to build `torch._dynamo.disable(fn)`;
* the built-in optimisers' `step` (Adam, SGD, ...) is wrapped by `_use_grad_for_differentiable`, which
  runs `import torch._dynamo` and `torch._dynamo.graph_break()` on every call.

Both only matter while dynamo traces the call. Dynamo cannot be tracing anything before
`torch._dynamo` is imported, so until then `disable(fn)` is `fn` and `graph_break()` does nothing.
`prepare()` rewires exactly these wrappers to check `sys.modules` first: without dynamo they call the
function directly; once anything imports dynamo (laplace-torch does, as does `torch.compile`) they
behave as torch's own wrappers from then on. Numerics are untouched (same functions, same grad mode);
`benchmarks/bench_startup.py` and tests/test_startup.py check bit-identical parameters after training.

Everything is checked against the installed torch's own wrappers (by code object); a torch whose
internals differ is left as it is. `REPROKIT_KEEP_DYNAMO_IMPORT=1` switches this off.
"""

from __future__ import annotations

import functools
import os
import sys

_DYNAMO = "torch._dynamo"
_done = False


def _lazy_disable(fn, recursive: bool):
    """What `torch._disable_dynamo` caches as `fn.__dynamo_disable`: `fn` itself while dynamo is not
    imported (nothing can be tracing), `torch._dynamo.disable(fn)` once it is."""
    real = None

    def call(*args, **kwargs):
        nonlocal real
        dynamo = sys.modules.get(_DYNAMO)
        if dynamo is None or not hasattr(dynamo, "disable"):
            return fn(*args, **kwargs)
        if real is None:
            real = dynamo.disable(fn, recursive, wrapping=False)
        return real(*args, **kwargs)

    return call


def _use_grad(func):
    """`torch.optim.optimizer._use_grad_for_differentiable` without its unconditional
    `import torch._dynamo`: same grad mode, the same graph breaks whenever dynamo is loaded."""
    import torch

    def _use_grad(*args, **kwargs):
        self = args[0]
        prev_grad = torch.is_grad_enabled()
        dynamo = sys.modules.get(_DYNAMO)
        if dynamo is not None and not hasattr(dynamo, "graph_break"):
            dynamo = None
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            if dynamo is not None:
                dynamo.graph_break()
            ret = func(*args, **kwargs)
        finally:
            if dynamo is not None:
                dynamo.graph_break()
            torch.set_grad_enabled(prev_grad)
        return ret

    functools.update_wrapper(_use_grad, func)
    return _use_grad


def _optimizer_classes(torch):
    seen = []
    for value in vars(torch.optim).values():
        if isinstance(value, type) and issubclass(value, torch.optim.Optimizer) and value not in seen:
            seen.append(value)
    return seen


def defer_dynamo_import() -> list[str]:
    """Rewire torch.optim's dynamo wrappers (see the module docstring); returns what was rewired."""
    import torch
    from torch._compile import _disable_dynamo
    from torch.optim import optimizer as optimizer_mod

    if _DYNAMO in sys.modules:  # already paid for; nothing to save
        return []
    disable_code = _disable_dynamo(lambda: None).__code__
    use_grad_code = optimizer_mod._use_grad_for_differentiable(lambda *a, **k: None).__code__
    changed = []
    for cls in _optimizer_classes(torch):
        for name, attr in list(vars(cls).items()):
            code = getattr(attr, "__code__", None)
            if code is disable_code and getattr(attr, "__closure__", None):
                cells = dict(zip(code.co_freevars, (c.cell_contents for c in attr.__closure__)))
                fn = cells.get("fn")
                if fn is not None and getattr(fn, "__dynamo_disable", None) is None:
                    setattr(fn, "__dynamo_disable", _lazy_disable(fn, bool(cells.get("recursive", True))))
                    changed.append(f"{cls.__name__}.{name}")
            elif code is use_grad_code and name == "step" and not getattr(attr, "hooked", False):
                inner = getattr(attr, "__wrapped__", None)
                if inner is not None:
                    setattr(cls, name, _use_grad(inner))
                    changed.append(f"{cls.__name__}.{name}")
    return changed


def prepare() -> None:
    """Call once at the start of a cell process, before any optimiser is built."""
    global _done
    if _done:
        return
    _done = True
    if os.environ.get("REPROKIT_KEEP_DYNAMO_IMPORT", "") not in ("", "0"):
        return
    defer_dynamo_import()
