"""Differentiable Laplace (LILA; Immer, van der Ouderaa et al. 2022): augmentation parameters and prior
precision learned by maximising a KFAC-GGN Laplace log marginal likelihood of the augmentation-averaged
network.

The network is an augmentation-averaged classifier (``methods/augmented.py`` :class:`SeededAugmentedModel`,
``augment/affine.py`` :class:`AugmentedModel`): ``z(x) = log (1/S) sum_s softmax(f(aug_s(x)))``. The
Kronecker-factored curvature below is written here, not taken from laplace-torch: laplace-torch (and
its curvlinops / ASDL backends) compute the curvature outside autograd, so it cannot be differentiated
w.r.t. the augmentation parameters, which is the whole point of LILA. laplace-torch's ``KronLaplace``
serves as the reference in the tests: for a fixed augmentation our value equals its
``log_marginal_likelihood(prior_precision)``.

Marginal likelihood (laplace-torch's conventions: temperature 1, prior mean 0, constants 2 pi cancel)::

    log p(D | psi, delta) ~= log p(D | theta*) - 1/2 [ log det P - log det P0 + theta*^T P0 theta* ]
    log p(D | theta*)      = (N / M) sum_{n <= M} log softmax(z(x_n))_{y_n}     (sum, not mean)
    P0 = diag(delta_l)     one prior precision per parameter tensor ("layerwise") or one ("scalar")
    P  = GGN + P0,         GGN ~= blockdiag_l [ (N / M) G_l  (x)  A_l ]           (weight of layer l)
                                          and   (N / M) G_l                        (bias of layer l)

on M examples (``marglik_batches`` minibatches) standing for the N training examples; with
``n_data=None`` N = M and the value is exactly the one of the data given.

GGN with the categorical likelihood: the output Hessian of the NLL at z is ``Lambda = diag(p) - p p^T``
with ``p = softmax(z) = mean_s softmax(f_s)``; it is factored as ``Lambda = L L^T`` with the closed form
``L[c, j] = sqrt(p_j) (delta_cj - p_c)``, so that ``GGN_n = sum_j (J_n^T L_j)(J_n^T L_j)^T``. For a layer
with input ``a`` and output gradient ``g_j = d(L_j^T z)/d(layer output)`` (one backward pass per class j,
``create_graph=True``, so every factor stays differentiable):

* **augmentation samples: KFAC-reduce.** ``J_n = sum_s g_{n,s} (x) a_{n,s}`` is a sum over the S samples,
  a weight-sharing dimension of the averaged output; it is approximated as
  ``(sum_s g_{n,s}) (x) (1/S sum_s a_{n,s})`` (Eschenhagen et al. 2023's "reduce", as Immer et al. 2022
  average over augmentations). Exact when the S copies coincide (identity or zero-width augmentation);
  "expand" would then be off by a factor S.
* **conv positions: KFAC-expand** (laplace-torch's default through curvlinops, and ASDL's conv KFAC that
  Immer et al. used): ``A = 1/(M T) sum_{n,t} abar abar^T`` over the T output positions of the unfolded
  input patches, ``G = sum_{j,n,t} gbar gbar^T``. For nn.Linear, ``A = 1/M sum_n abar abar^T``,
  ``G = sum_{j,n} gbar gbar^T`` (no weight sharing: expand = reduce).

Weight and bias are separate blocks (laplace-torch's ``separate_weight_and_bias``). The log-determinant
is the standard damped KFAC one of ``KronDecomposed.logdet``: with eigenvalues ``lambda_i`` of ``G`` and
``mu_j`` of ``A`` (``torch.linalg.eigvalsh``, whose gradient ``U diag(.) U^T`` is stable under repeated
eigenvalues), ``log det((N/M) G (x) A + delta I) = sum_ij log((N/M) lambda_i mu_j + delta)``, and
``sum_i log((N/M) lambda_i + delta)`` for a bias.

**Every other parameter: an exact diagonal GGN block.** Parameters of leaf modules that are not
nn.Linear / nn.Conv2d (the FixUp scalars :class:`reprokit.models.layers.Scale` / ``Bias`` of the FixUp
ResNets, the GroupNorm affine weights and biases of ResNet-50 GN) get the exact diagonal of their GGN
block, ``d = sum_{n,j} (J_n^T L_{n,j})^2`` (elementwise square), computed from **per-example
Jacobian-vector products**, not a Monte-Carlo or KFAC approximation: during the forward pass such a
module is re-run as ``vmap`` over the batch (``torch.func.functional_call``) with its parameters
expanded to one copy per example (``p.expand(B, ...)``, a view: no memory); the gradient w.r.t. that
expanded tensor in each class's backward pass above is the per-example gradient ``J_n^T L_{n,j}``
(of each of the S augmented copies; summed over the copies of an example before squaring, so the
augmentation average is exact here, no "reduce" approximation). A module called several times in
one forward (FixUp's ``bias1a`` feeds both the branch and the skip of a downsampling block) sums its
calls. The block enters the log-determinant as ``sum_i log((N/M) d_i + delta)``: ``log det P`` is the
sum over the KFAC blocks plus the diagonal block. Everything stays differentiable (``create_graph``).
Not supported (``TypeError``): BatchNorm (its per-example gradients are not defined: the batch
statistics couple the examples), parameters of non-leaf modules, leaf modules called with other than
one tensor argument, and Conv2d with groups or string padding.

**Several batches: two passes, memory of one batch** (:func:`log_marginal_likelihood_and_grads`). The M
examples are ``marglik_batches`` batches; each batch draws its own S augmentations (in batch order, from
the given generator). The NLL, every ``G``, ``A`` (a mean over all M: each batch adds its sum / (M T)) and
every diagonal ``d`` are sums over the batches; the log-determinants and the prior terms are nonlinear
functions of those sums only. One graph over all batches until one backward (memory growing with the
batches: the paper-scale MNIST cell, 10 x 200 examples x 31 samples, ran out of an H100's 80 GB) is replaced by

1. pass 1, without a graph (``torch.no_grad``): every batch's terms, summed;
2. the marginal likelihood of those sums made leaf tensors: its value (the one reported), its gradient
   w.r.t. the sums (``dL/dF``) and w.r.t. the prior precision (which enters only here);
3. pass 2: every batch again, with its graph (``create_graph`` through the curvature), and the
   vector-Jacobian product ``<dL/dF, F_batch>`` backpropagated to the augmentation parameters, accumulated
   batch by batch; a batch's graph is freed before the next one is built.

The gradient is that of the one-pass function exactly (up to the order of floating-point sums; tested in
float64 against plain autograd with every graph kept). Pass 2 sees pass 1's random draws: the augmentation
generator and the global CPU / device generators (a dropout layer) are set back to their state before pass 1,
and a check raises if they do not end where pass 1 left them (the streams advance as by one pass). Cost:
pass 2 is what one pass cost (forward, C backward passes with ``create_graph``, the second-order backward);
pass 1 adds a forward and C first-order backward passes: at most 2x one pass's time, 1.1x measured (MNIST
CNN, 2 and 4 batches of 200 x 31 samples, H100: 1.28 s vs 1.16 s, 2.44 s vs 2.21 s), with the graph memory
of one batch (plus the summed factors, which one pass holds too): a peak of 10.8 GiB for 1, 2, 4 or 10 such
batches, where keeping every graph took 20.4 GiB for 2 and 39.9 GiB for 4. A single batch takes one pass.

:class:`DiffLaplaceTraining` is LILA's schedule as a :class:`reprokit.methods.base.Method`: every step one
update of the weights on the MAP loss (mean NLL of the averaged prediction + ``sum_l delta_l |theta_l|^2 /
(2 N)``, the prior precision held fixed), with the given optimiser; after ``burnin`` steps, every
``marglik_every`` steps, ``marglik_steps`` Adam steps (lr ``hyper_lr``, cosine decay to ``hyper_lr *
hyper_final_factor`` over all hyper steps of the run) on the augmentation parameters and the log prior
precision, each maximising the marginal likelihood (divided by N, so the step size does not depend on N)
on ``marglik_batches`` fresh minibatches with ``n_aug_marglik`` augmentation samples (LILA's repo: 31), two
passes over them (above).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .. import seeds
from ..data.task import TaskData
from .augmented import make_evaluator, ranges_metrics
from .common import EpochSampler
from .standard import OptimConfig, make_optimizer, make_scheduler

KFAC_MODULES = (nn.Linear, nn.Conv2d)
PRIOR_STRUCTURES = ("layerwise", "scalar")


class Block(NamedTuple):
    """One block of the block-diagonal GGN: ``kind`` "kron" (a weight, ``factors = [G, A]``), "bias"
    (``[G]``) or "diag" (``[d]``, the exact GGN diagonal of ``param``, flattened)."""

    param: torch.Tensor
    kind: str
    factors: list


# ----------------------------------------------------------------------------------------- the curvature


def split_modules(model: nn.Module) -> tuple[list[nn.Module], list[nn.Module]]:
    """(KFAC layers, modules whose parameters get the exact diagonal block); ``TypeError`` for what neither
    covers (module docstring)."""
    kfac, diag = [], []
    for name, m in model.named_modules():
        if isinstance(m, KFAC_MODULES):
            if isinstance(m, nn.Conv2d) and (m.groups != 1 or m.padding_mode != "zeros" or isinstance(m.padding, str)):
                raise TypeError(f"KFAC supports Conv2d with groups=1 and numeric zero padding, got {name}: {m}")
            kfac.append(m)
        elif next(m.parameters(recurse=False), None) is not None:
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                raise TypeError(f"Laplace GGN: BatchNorm ({name}) couples the examples of a batch; not supported")
            if next(m.children(), None) is not None:
                raise TypeError(
                    f"Laplace GGN: parameters of a non-leaf module ({name}: {type(m).__name__}) are not "
                    "supported; put them in a leaf module"
                )
            diag.append(m)
    return kfac, diag


class _PerExampleParams:
    """Forward hook of the diagonal-block modules: re-runs the module as a ``vmap`` over the batch with its
    parameters expanded to one (view) copy per example, and keeps those expanded tensors; the gradient
    w.r.t. them is the per-example gradient."""

    def __init__(self):
        self.calls: dict[nn.Module, list[dict[str, torch.Tensor]]] = {}
        self._inside = False

    def __call__(self, mod: nn.Module, args: tuple, out):
        if self._inside:  # the module's own call inside functional_call below
            return None
        if len(args) != 1 or not torch.is_tensor(args[0]):
            raise TypeError(f"Laplace GGN: {type(mod).__name__} must take one tensor for its diagonal block")
        x = args[0]
        expanded = {n: p.unsqueeze(0).expand(x.shape[0], *p.shape) for n, p in mod.named_parameters(recurse=False)}

        def one(params, xi):
            return torch.func.functional_call(mod, params, (xi.unsqueeze(0),)).squeeze(0)

        self._inside = True
        try:
            new = torch.func.vmap(one)(expanded, x)
        finally:
            self._inside = False
        self.calls.setdefault(mod, []).append(expanded)
        return new


def _patches(m: nn.Module, a: torch.Tensor) -> torch.Tensor:
    """Layer input -> (batch, positions, features) whose rows multiply the flattened weight."""
    if isinstance(m, nn.Conv2d):
        cols = F.unfold(a, m.kernel_size, dilation=m.dilation, padding=m.padding, stride=m.stride)
        return cols.transpose(1, 2)
    return a.reshape(a.shape[0], -1, a.shape[-1])


def _out_grads(m: nn.Module, g: torch.Tensor) -> torch.Tensor:
    """Layer output gradient -> (batch, positions, out features)."""
    if isinstance(m, nn.Conv2d):
        return g.flatten(2).transpose(1, 2)
    return g.reshape(g.shape[0], -1, g.shape[-1])


def _sqrt_output_hessian(logp: torch.Tensor) -> torch.Tensor:
    """(M, C, C) with L L^T = diag(p) - p p^T, L[c, j] = sqrt(p_j) (delta_cj - p_c)."""
    p = logp.exp()
    eye = torch.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    return (eye - p.unsqueeze(-1)) * p.clamp_min(1e-30).sqrt().unsqueeze(-2)


def kfac_factors(
    net: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    n_samples: int | None = None,
    generator: torch.Generator | None = None,
    n_total: int | None = None,
) -> tuple[torch.Tensor, list[Block]]:
    """GGN blocks (KFAC factors and exact diagonals) of an augmentation-averaged classifier on (x, y).

    ``net`` is an :class:`AugmentedModel` (``.model``, ``.augmentation``; ``augmentation=None`` means the
    plain classifier, S = 1). Returns ``(nll_sum, blocks)``: the summed NLL of the averaged prediction
    and one :class:`Block` per parameter of ``net.model`` in ``parameters()`` order: ``[G, A]`` for
    Linear/Conv2d weights, ``[G]`` for their biases (A = mean over examples and positions, G = sum),
    ``[d]`` for every other parameter (the exact GGN diagonal, summed over examples). Differentiable
    w.r.t. the augmentation parameters (and the weights).

    ``n_total``: A's mean is over that many examples (default: x's); with x one of several batches of
    ``n_total`` examples in all, every returned quantity is that batch's term of a sum over the batches.
    """
    differentiable = torch.is_grad_enabled()  # under no_grad: the value only (the factors need autograd anyway)
    with torch.enable_grad():
        nll, blocks = _kfac_factors(net, x, y, n_samples, generator, differentiable, n_total)
    if differentiable:
        return nll, blocks
    return nll.detach(), [Block(b.param, b.kind, [f.detach() for f in b.factors]) for b in blocks]


def _kfac_factors(net, x, y, n_samples, generator, create_graph: bool, n_total: int | None):
    model, aug = net.model, net.augmentation
    layers, diag_modules = split_modules(model)
    S = 1 if aug is None else int(net.n_samples if n_samples is None else n_samples)
    M = x.shape[0]
    if aug is not None:
        xa = aug(x, S, generator=generator).reshape(S * M, *x.shape[1:])
    else:
        xa = x
    inputs, outputs = {}, {}

    def hook(mod, inp, out):
        inputs[mod], outputs[mod] = inp[0], out

    per_example = _PerExampleParams()
    handles = [m.register_forward_hook(hook) for m in layers]
    handles += [m.register_forward_hook(per_example) for m in diag_modules]
    try:
        logits = model(xa)
    finally:
        for h in handles:
            h.remove()
    logp = torch.logsumexp(F.log_softmax(logits, -1).reshape(S, M, -1), dim=0) - math.log(S)
    nll = F.nll_loss(logp, y, reduction="sum")
    sqrt_h = _sqrt_output_hessian(logp)  # (M, C, C)
    outs = [outputs[m] for m in layers]
    # the diagonal blocks: every call's expanded parameters, keyed by the parameter they expand
    expanded = [
        (getattr(m, name), t) for m in diag_modules for call in per_example.calls.get(m, []) for name, t in call.items()
    ]
    for _, t in expanded:
        if t.shape[0] != S * M:
            raise TypeError(f"Laplace GGN: a diagonal-block module saw batch {t.shape[0]}, expected {S * M}")
    G = dict.fromkeys(layers, 0.0)
    D = {id(m_p): 0.0 for m in diag_modules for m_p in m.parameters(recurse=False)}
    for j in range(sqrt_h.shape[-1]):
        grads = torch.autograd.grad(
            logp,
            outs + [t for _, t in expanded],
            grad_outputs=sqrt_h[..., j],
            retain_graph=True,
            create_graph=create_graph,
            allow_unused=True,
        )
        for m, g in zip(layers, grads[: len(layers)]):
            gs = _out_grads(m, g)
            gbar = gs.reshape(S, M, *gs.shape[1:]).sum(0)  # reduce over augmentation samples: sum
            G[m] = G[m] + torch.einsum("ntd,nte->de", gbar, gbar)
        per_param = {}
        for (p, _), g in zip(expanded, grads[len(layers) :]):
            if g is not None:  # J_n^T L_nj: summed over the S copies of example n and over the module's calls
                per_param[id(p)] = per_param.get(id(p), 0.0) + g.reshape(S, M, -1).sum(0)
        for key, jn in per_param.items():
            D[key] = D[key] + jn.pow(2).sum(0)
    factors = {}
    for m in layers:
        a = inputs[m]
        abar = a.reshape(S, M, *a.shape[1:]).mean(0)  # reduce over augmentation samples: mean
        pa = _patches(m, abar)
        n_rows = (M if n_total is None else int(n_total)) * pa.shape[1]
        A = torch.einsum("ntd,nte->de", pa, pa) / n_rows  # expand over positions
        factors[id(m.weight)] = Block(m.weight, "kron", [G[m], A])
        if m.bias is not None:
            factors[id(m.bias)] = Block(m.bias, "bias", [G[m]])
    for m in diag_modules:
        for p in m.parameters(recurse=False):
            d = D[id(p)]
            d = d if torch.is_tensor(d) else torch.zeros(p.numel(), dtype=logp.dtype, device=logp.device)
            factors[id(p)] = Block(p, "diag", [d])  # a module never called: a zero GGN block
    blocks = [factors[id(p)] for p in model.parameters()]
    return nll, blocks


def expand_prior_precision(prior_precision: torch.Tensor | float, n_params: int, device=None) -> torch.Tensor:
    """A scalar / 1-element / per-parameter-tensor precision -> one value per parameter tensor."""
    delta = torch.as_tensor(prior_precision, device=device).reshape(-1)
    if delta.numel() == 1:
        return delta.expand(n_params)
    if delta.numel() != n_params:
        raise ValueError(
            f"prior precision: expected 1 or {n_params} values (one per parameter tensor), got {delta.numel()}"
        )
    return delta


def _eigvalsh(f: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of a symmetric PSD factor; in float64 when float32 LAPACK fails to converge (a low-rank
    factor, e.g. the 2450 x 2450 input factor of a fully connected layer on a small batch, has many
    repeated zero eigenvalues) or, without raising, returns NaN (seen on a finite 500 x 500 factor of the
    MNIST CNN with one intra-op thread: the marginal likelihood became NaN)."""
    try:
        eigs = torch.linalg.eigvalsh(f)
        if f.dtype == torch.float64 or bool(torch.isfinite(eigs).all()):
            return eigs
    except torch.linalg.LinAlgError:
        if f.dtype == torch.float64:
            raise
    return torch.linalg.eigvalsh(f.double()).to(f.dtype)


def kron_logdet(blocks: list[Block], deltas: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """sum over blocks of log det(scale * G (x) A + delta I), log det(scale * G + delta I) (a bias) and
    sum_i log(scale * d_i + delta) (a diagonal block); the KFAC ones via eigenvalues."""
    total = 0.0
    for block, delta in zip(blocks, deltas):
        if block.kind == "diag":
            total = total + torch.log(scale * block.factors[0].clamp_min(0) + delta).sum()
            continue
        eigs = [_eigvalsh(f).clamp_min(0) for f in block.factors]
        if block.kind == "kron":
            total = total + torch.log(scale * torch.outer(eigs[0], eigs[1]) + delta).sum()
        else:
            total = total + torch.log(scale * eigs[0] + delta).sum()
    return total


def log_marginal_likelihood_from_factors(
    nll: torch.Tensor, blocks: list[Block], prior_precision: torch.Tensor | float, scale: float = 1.0
) -> torch.Tensor:
    """The marginal likelihood (module docstring) from the summed NLL and the GGN blocks of
    :func:`kfac_factors` (summed over batches); ``scale`` = N / M."""
    params = [b.param for b in blocks]
    deltas = expand_prior_precision(prior_precision, len(params), nll.device).to(nll.dtype)
    logdet_post = kron_logdet(blocks, deltas, scale)
    logdet_prior = sum(p.numel() * torch.log(d) for p, d in zip(params, deltas))
    scatter = sum(d * p.detach().pow(2).sum() for p, d in zip(params, deltas))
    return -scale * nll - 0.5 * (logdet_post - logdet_prior + scatter)


def laplace_log_marginal_likelihood(
    net: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    prior_precision: torch.Tensor,
    n_samples: int | None = None,
    generator: torch.Generator | None = None,
    n_data: int | None = None,
) -> torch.Tensor:
    """KFAC(+ diagonal)-GGN Laplace log marginal likelihood of ``net`` (module docstring) at its current weights.

    ``prior_precision``: scalar or one value per parameter tensor of ``net.model``; ``n_data``: the number
    of examples (x, y) stand for (default: their number). Differentiable w.r.t. the augmentation
    parameters and ``prior_precision``. One batch, one graph: :func:`log_marginal_likelihood_and_grads`
    is the memory-bounded gradient over several batches.
    """
    nll, blocks = kfac_factors(net, x, y, n_samples, generator)
    scale = 1.0 if n_data is None else float(n_data) / x.shape[0]
    return log_marginal_likelihood_from_factors(nll, blocks, prior_precision, scale)


def _random_streams(generator: torch.Generator | None, device: torch.device) -> list[torch.Generator]:
    """The generators a pass may draw from: ``generator`` (the augmentations) and the global ones of the
    CPU and of ``device`` (e.g. a dropout layer of the model)."""
    gens = [torch.default_generator]
    if device.type == "cuda":
        gens.append(
            torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
        )
    if generator is not None and all(generator is not g for g in gens):
        gens.append(generator)
    return gens


def _flat(nll: torch.Tensor, blocks: list[Block]) -> list[torch.Tensor]:
    """The summands of the marginal likelihood's inputs, one per (block, factor) position; a factor shared
    by two blocks (a layer's G, in its weight and its bias block) appears at both positions."""
    return [nll] + [f for b in blocks for f in b.factors]


def log_marginal_likelihood_and_grads(
    net: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    prior_precision: torch.Tensor,
    wrt: list[torch.Tensor],
    n_samples: int | None = None,
    generator: torch.Generator | None = None,
    n_data: int | None = None,
    batch_size: int | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """(:func:`laplace_log_marginal_likelihood` on all of (x, y), detached; its gradient w.r.t. ``wrt``
    (None where it does not depend on one)), with the factors summed over the batches of ``batch_size``
    consecutive examples of (x, y) (default: one batch), each with its own augmentation draws.

    Memory of one batch (module docstring, "Several batches"): one batch takes one pass, several take two.
    ``wrt`` may hold parameters of ``net`` (the augmentation's; the factors depend on those) and tensors
    that ``prior_precision`` is computed from (the log prior precision).
    """
    batches = (
        [(x, y)]
        if batch_size is None or batch_size >= x.shape[0]
        else list(zip(x.split(int(batch_size)), y.split(int(batch_size))))
    )
    if len(batches) == 1:
        lml = laplace_log_marginal_likelihood(net, x, y, prior_precision, n_samples, generator, n_data)
        return lml.detach(), list(torch.autograd.grad(lml, wrt, allow_unused=True))
    n_total = x.shape[0]
    scale = 1.0 if n_data is None else float(n_data) / n_total
    streams = _random_streams(generator, x.device)
    start = [g.get_state() for g in streams]

    # pass 1: every batch's terms without a graph, summed
    total = None
    with torch.no_grad():
        for xb, yb in batches:
            nll_b, blocks_b = kfac_factors(net, xb, yb, n_samples, generator, n_total=n_total)
            terms = _flat(nll_b, blocks_b)
            total = terms if total is None else [t + u for t, u in zip(total, terms)]
    end = [g.get_state() for g in streams]

    # the marginal likelihood of the sums as leaves: its value, d/d(sums), and the gradient of the rest of wrt
    leaves = [t.detach().requires_grad_() for t in total]
    it = iter(leaves[1:])
    leaf_blocks = [Block(b.param, b.kind, [next(it) for _ in b.factors]) for b in blocks_b]
    with torch.enable_grad():
        lml = log_marginal_likelihood_from_factors(leaves[0], leaf_blocks, prior_precision, scale)
    outer = torch.autograd.grad(lml, leaves + list(wrt), allow_unused=True)
    cotangents, grads = outer[: len(leaves)], list(outer[len(leaves) :])

    # pass 2: each batch again, the same draws, with a graph: <d lml / d sums, batch terms> backpropagated to
    # the parameters of net in wrt (the vector-Jacobian product), one batch's graph alive at a time
    net_params = {id(p) for p in net.parameters()}
    inner = [i for i, w in enumerate(wrt) if id(w) in net_params and w.requires_grad]
    if inner:
        for g, state in zip(streams, start):
            g.set_state(state)
        for xb, yb in batches:
            with torch.enable_grad():
                nll_b, blocks_b = kfac_factors(net, xb, yb, n_samples, generator, n_total=n_total)
                vjp = sum((c * t).sum() for c, t in zip(cotangents, _flat(nll_b, blocks_b)) if c is not None)
            parts = [None] * len(inner)
            if torch.is_tensor(vjp) and vjp.requires_grad:
                parts = torch.autograd.grad(vjp, [wrt[i] for i in inner], allow_unused=True)
            del nll_b, blocks_b, vjp  # this batch's graph, before the next batch builds its own
            for i, part in zip(inner, parts):
                if part is not None:
                    grads[i] = part if grads[i] is None else grads[i] + part
        if any(not torch.equal(g.get_state(), state) for g, state in zip(streams, end)):
            raise RuntimeError("Diff. Laplace: the second pass drew other random numbers than the first")
    return lml.detach(), grads


# ----------------------------------------------------------------------------------------- the method


def map_loss(
    net: nn.Module, x: torch.Tensor, y: torch.Tensor, prior_precision: torch.Tensor, n_data: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """LILA's weight loss: (mean NLL of the averaged prediction, that + sum_l delta_l |theta_l|^2 / (2 N))."""
    nll = F.nll_loss(net(x), y)
    params = list(net.model.parameters())
    deltas = expand_prior_precision(prior_precision, len(params), nll.device)
    prior = 0.5 * sum(d * p.pow(2).sum() for p, d in zip(params, deltas)) / n_data
    return nll, nll + prior


def hyper_update(
    net: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    log_prior_prec: torch.Tensor,
    hyper_opt: torch.optim.Optimizer,
    n_samples: int,
    generator: torch.Generator | None,
    n_data: int,
    batch_size: int | None = None,
) -> torch.Tensor:
    """LILA's hyperparameter update: the gradient of -(marginal likelihood / N) on (x, y) standing for
    ``n_data`` examples, with ``n_samples`` augmentation samples, w.r.t. the parameters of ``hyper_opt``
    (the augmentation parameters and ``log_prior_prec``; the weights get none), and one step of it.
    ``batch_size``: the factors are summed over batches of that many consecutive examples of (x, y),
    memory of one batch (:func:`log_marginal_likelihood_and_grads`); default one batch.
    Returns the marginal likelihood / N (detached)."""
    hyper = hyper_opt.param_groups[0]["params"]
    lml, grads = log_marginal_likelihood_and_grads(
        net, x, y, log_prior_prec.exp(), hyper, n_samples, generator, n_data, batch_size
    )
    for p, g in zip(hyper, grads):  # the weights only move on the MAP loss
        p.grad = None if g is None else torch.nan_to_num(-g / n_data)  # as LILA: a NaN gradient entry does not step
    hyper_opt.step()
    return lml / n_data


def count_hyper_rounds(n_steps: int, burnin: int, every: int) -> int:
    """How many steps k = 1..n_steps end with hyper steps (k >= burnin and k % every == 0)."""
    return sum(1 for k in range(1, n_steps + 1) if k >= burnin and k % every == 0)


class DiffLaplaceTraining:
    """LILA: MAP training of the weights, hyper steps on the Laplace marginal likelihood (module docstring).

    ``net`` is a :class:`SeededAugmentedModel` (its ``n_samples`` is the training S); its augmentation
    parameters and the log prior precision (``prior_structure``: "layerwise" = one per parameter tensor
    of ``net.model``, as in LILA, or "scalar"; initial value ``prior_prec_init``) are the hyperparameters.
    """

    def __init__(
        self,
        net: nn.Module,
        data: TaskData,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        burnin: int = 0,
        marglik_every: int = 1,
        marglik_steps: int = 1,
        marglik_batches: int = 1,
        marglik_batch_size: int | None = None,
        n_aug_marglik: int = 31,
        hyper_lr: float = 0.05,
        hyper_final_factor: float = 0.1,
        prior_structure: str = "layerwise",
        prior_prec_init: float = 1.0,
        eval_samples: int | None = None,
        evaluate_fn: Callable[[], dict[str, float]] | None = None,
    ):
        if prior_structure not in PRIOR_STRUCTURES:
            raise ValueError(f"prior_structure must be one of {PRIOR_STRUCTURES}, got {prior_structure!r}")
        if marglik_every < 1 or marglik_steps < 0 or marglik_batches < 1:
            raise ValueError("marglik_every and marglik_batches must be >= 1, marglik_steps >= 0")
        self.net, self.data, self.cfg = net, data, optim
        self.burnin, self.every, self.hsteps = int(burnin), int(marglik_every), int(marglik_steps)
        self.n_batches, self.n_aug = int(marglik_batches), int(n_aug_marglik)
        split_modules(net.model)  # a TypeError now, not at the first hyper step
        dev = data.device
        n_prior = len(list(net.model.parameters())) if prior_structure == "layerwise" else 1
        self.log_prior_prec = nn.Parameter(torch.full((n_prior,), math.log(prior_prec_init), device=dev))
        aug = net.augmentation
        aug_params = [p for p in aug.parameters() if p.requires_grad] if aug is not None else []
        aug_ids = {id(p) for p in aug.parameters()} if aug is not None else set()
        weights = [p for p in net.parameters() if p.requires_grad and id(p) not in aug_ids]
        self.opt = make_optimizer(weights, optim)
        self.sched = make_scheduler(self.opt, optim, n_steps)
        self.hyper_opt = torch.optim.Adam([*aug_params, self.log_prior_prec], lr=hyper_lr)
        t_max = max(1, count_hyper_rounds(n_steps, self.burnin, self.every) * self.hsteps)
        self.hyper_sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            self.hyper_opt, T_max=t_max, eta_min=hyper_lr * hyper_final_factor
        )
        self.sampler = EpochSampler(data.n_train, optim.batch_size, seeds.generator(seed, "minibatches", dev))
        self.marglik_sampler = EpochSampler(
            data.n_train, marglik_batch_size or optim.batch_size, seeds.generator(seed, "marglik_batches", dev)
        )
        self.marglik_gen = seeds.generator(seed, "marglik_augment", dev)
        self.last_marglik = float("nan")
        if evaluate_fn is None:
            evaluate_fn = make_evaluator(
                net,
                data.x_test,
                data.y_test,
                eval_samples or net.n_samples,
                seed,
                train=(data.x_train, data.y_train),
                extra=self.hyper_metrics,
            )
        self.evaluate_fn = evaluate_fn

    def prior_precision(self) -> torch.Tensor:
        return self.log_prior_prec.exp()

    def map_loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean NLL of the averaged prediction, that + the Gaussian prior term / N)."""
        return map_loss(self.net, x, y, self.prior_precision().detach(), self.data.n_train)

    def hyper_step(self) -> float:
        """One Adam step on (augmentation, log prior precision); returns the marginal likelihood / N."""
        idx = torch.cat([self.marglik_sampler.next() for _ in range(self.n_batches)])
        lml = hyper_update(
            self.net,
            self.data.x_train[idx],
            self.data.y_train[idx],
            self.log_prior_prec,
            self.hyper_opt,
            self.n_aug,
            self.marglik_gen,
            self.data.n_train,
            batch_size=self.marglik_sampler.batch_size,
        )
        self.hyper_sched.step()
        return float(lml)

    def train_step(self, step: int) -> dict[str, float]:
        idx = self.sampler.next()
        self.net.train()
        nll, loss = self.map_loss(self.data.x_train[idx], self.data.y_train[idx])
        self.opt.zero_grad(set_to_none=True)
        self.hyper_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if self.sched is not None:
            self.sched.step()
        out = {"loss": loss.item(), "nll": nll.item()}
        k = step + 1
        if self.hsteps > 0 and k >= self.burnin and k % self.every == 0:
            for _ in range(self.hsteps):
                self.last_marglik = self.hyper_step()
            out["marglik"] = self.last_marglik
        return out

    def hyper_metrics(self) -> dict[str, float]:
        pp = self.prior_precision().detach()
        return {
            **ranges_metrics(self.net.augmentation),
            "marglik": self.last_marglik,
            "prior_prec_mean": float(pp.mean()),
        }

    def evaluate(self, step: int) -> dict[str, float]:
        return self.evaluate_fn()

    def final_metrics(self) -> dict[str, float]:
        return self.evaluate(-1)

    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),  # weights, augmentation parameters, the training augmentation stream
            "log_prior_prec": self.log_prior_prec.detach().clone(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict() if self.sched is not None else None,
            "hyper_opt": self.hyper_opt.state_dict(),
            "hyper_sched": self.hyper_sched.state_dict(),
            "sampler": self.sampler.state_dict(),
            "marglik_sampler": self.marglik_sampler.state_dict(),
            "marglik_gen": self.marglik_gen.get_state(),
            "last_marglik": self.last_marglik,
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        with torch.no_grad():
            self.log_prior_prec.copy_(state["log_prior_prec"])
        self.opt.load_state_dict(state["opt"])
        if self.sched is not None:
            self.sched.load_state_dict(state["sched"])
        self.hyper_opt.load_state_dict(state["hyper_opt"])
        self.hyper_sched.load_state_dict(state["hyper_sched"])
        self.sampler.load_state_dict(state["sampler"])
        self.marglik_sampler.load_state_dict(state["marglik_sampler"])
        self.marglik_gen.set_state(state["marglik_gen"])
        self.last_marglik = float(state["last_marglik"])
