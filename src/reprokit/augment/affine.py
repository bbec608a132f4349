"""Learnable affine data augmentation (the hyperparameters psi of the invariance experiments).

Three parametrisations, each an ``nn.Module`` whose parameters are psi:

* :class:`SchwobelAffine` (``"schwobel"``, MNIST; Schwöbel et al. 2021): six maxima, parameter
  ``maxima`` in the order ``rotation, shear, translate_x, translate_y, scale_x, scale_y``; each
  coefficient is drawn as ``eps * max`` with ``eps ~ U[-1, 1]``; the matrix is composed as
  ``A = T(tx, ty) @ R(rotation) @ Sh(shear) @ S(sx, sy)`` with ``Sh = [[1, shear], [0, 1]]`` and
  ``S = diag(exp(sx), exp(sy))`` (``scale_mode="exp"``, default: always a valid scale) or
  ``diag(1 + sx, 1 + sy)`` (``scale_mode="linear"``).
* :class:`ImmerAffine` (``"immer"``, CIFAR; Immer et al. 2022): ``A = matrix_exp(sum_i eps_i theta_i
  G_i)``, ``eps ~ U[-1, 1]``, generators (parameter ``theta`` in this order) x-translation,
  y-translation, rotation, x-scale, y-scale, shear (symmetric ``[[0, 1], [1, 0]]``); theta are
  half-widths, initialised to 0; the rotation half-width is clamped to [-pi, pi].
* :class:`AugerinoAffine` (``"augerino"``, Benton et al. 2020): parameter ``raw_width``;
  ``width = softplus(raw_width)``, ``eps_i ~ U[-w_i / 2, w_i / 2]``, ``A = matrix_exp(sum_i eps_i G_i)``
  with generators x-translation (x 0.1), y-translation (x 0.1), rotation, isotropic scale, stretch
  ``diag(1, -1)``, shear (symmetric). ``raw_width`` initialises to 0 (width log 2), as in Augerino.

Conventions (shared by all three):

* A sampled matrix ``A`` (3x3 homogeneous, last row ``[0, 0, 1]``) is used as the ``theta`` of
  ``F.affine_grid``: it maps *output* pixel coordinates to the *input* sampling location,
  ``[x_in, y_in] = A[:2] @ [x_out, y_out, 1]``, in normalised coordinates (x to the right, y
  downwards, both in [-1, 1] across the image, ``align_corners=False``). Sampling is bilinear with
  zeros padding. The image *content* therefore moves by ``A^{-1}``: a translation coefficient ``+t``
  moves the content by ``-t`` (``t = 1`` is half the image width); a rotation coefficient
  ``+angle`` (radians) rotates the content counter-clockwise as displayed (row 0 at the top), so
  ``angle = pi/2`` equals ``torch.rot90(x, k=1, dims=(-2, -1))`` (tested).
* ``forward(x, n_samples)`` maps ``(N, C, H, W)`` to ``(S, N, C, H, W)``: sample-major, so
  ``out.reshape(S * N, C, H, W)`` is S consecutive copies of the batch, and an independent
  transformation for every (sample, image) pair. Differentiable in the parameters (reparametrised).
* ``ranges()`` returns the current half-widths ``r_i`` (the coefficient of generator/transformation
  i lies in ``[-r_i, r_i]``) as python floats in readable units: rotation in radians, translation in
  normalised units (1 = half the image), scale/stretch/shear as the coefficient (log-scale for exp
  parametrisations). ``set_ranges(values)`` is its inverse; ``set_fixed(values)`` additionally
  freezes the parameters (``requires_grad=False``), e.g. for random-search baselines (Fig. 9).

:class:`AugmentedModel` wraps a classifier and averages *predictive probabilities* over S samples,
at train and at test time (paper: S = 20 centralised, 10 federated); it returns
``log(mean_s softmax(f(x_s)))``, so ``F.nll_loss`` (or ``F.cross_entropy``) on its output is the
negative log of the averaged prediction.

:func:`augerino_regularizer` is Augerino's width regulariser including the "safe" variant
(App. E of the partitioned-networks paper).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "apply_affine",
    "rotation_matrix",
    "AffineAugmentation",
    "SchwobelAffine",
    "ImmerAffine",
    "AugerinoAffine",
    "AugmentedModel",
    "augerino_regularizer",
    "build_augmentation",
    "augmentation_kinds",
]


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def apply_affine(x: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
    """Warp images ``x`` (M, C, H, W) with one matrix each, ``matrices`` (M, 2, 3) or (M, 3, 3).

    ``affine_grid`` convention (output -> input coordinates), bilinear, zeros padding,
    ``align_corners=False``.
    """
    theta = matrices[..., :2, :].to(dtype=x.dtype, device=x.device)
    return F.grid_sample(
        x, affine_grid(theta, x.shape[-2], x.shape[-1]), mode="bilinear", padding_mode="zeros", align_corners=False
    )


def affine_grid(theta: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``F.affine_grid(theta, (M, C, height, width), align_corners=False)`` as one batched matmul.

    Written by hand because torch has no vmap batching rule for ``affine_grid`` (federated clients run under
    ``torch.func.vmap``, where it falls back to a slow per-sample loop and warns); tests/test_augment.py checks
    it equals ``F.affine_grid``. ``theta`` (M, 2, 3) -> sampling grid (M, height, width, 2).
    """
    xs = (2 * torch.arange(width, dtype=theta.dtype, device=theta.device) + 1) / width - 1
    ys = (2 * torch.arange(height, dtype=theta.dtype, device=theta.device) + 1) / height - 1
    base = torch.stack(
        [
            xs.expand(height, width),
            ys[:, None].expand(height, width),
            torch.ones(height, width, dtype=theta.dtype, device=theta.device),
        ],
        dim=-1,
    )
    return (base.reshape(1, height * width, 3) @ theta.transpose(-1, -2)).reshape(-1, height, width, 2)


def rotation_matrix(angle: torch.Tensor | float) -> torch.Tensor:
    """3x3 homogeneous rotation matrices ``[[cos, -sin, 0], [sin, cos, 0], [0, 0, 1]]`` (batched)."""
    a = torch.as_tensor(angle, dtype=torch.get_default_dtype())
    c, s = torch.cos(a), torch.sin(a)
    z, o = torch.zeros_like(a), torch.ones_like(a)
    return torch.stack([torch.stack([c, -s, z], -1), torch.stack([s, c, z], -1), torch.stack([z, z, o], -1)], -2)


def _inv_softplus(w: torch.Tensor) -> torch.Tensor:
    w = w.clamp_min(1e-12)
    return w + torch.log(-torch.expm1(-w))


def _generator(entries: dict[tuple[int, int], float]) -> torch.Tensor:
    g = torch.zeros(3, 3)
    for (i, j), v in entries.items():
        g[i, j] = v
    return g


# --------------------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------------------


class AffineAugmentation(nn.Module):
    """Common interface; subclasses define ``names``, ``sample_coefficients``, ``matrices_from_coefficients``,
    ``half_widths`` and ``set_ranges``."""

    names: tuple[str, ...] = ()
    kind: str = ""

    # --- to implement -----------------------------------------------------------------------------
    def sample_coefficients(
        self, n: int, n_samples: int = 1, generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Random coefficients (S, n, 6), one per transformation in ``names`` order (differentiable);
        ``uniforms`` (S, n, 6) in [0, 1), drawn by the caller, replace the draw from ``generator``."""
        raise NotImplementedError

    def matrices_from_coefficients(self, coeffs: torch.Tensor) -> torch.Tensor:
        """Deterministic map from coefficients (..., 6) to 3x3 matrices (..., 3, 3)."""
        raise NotImplementedError

    def half_widths(self) -> torch.Tensor:
        """Differentiable half-widths (6,) in ``names`` order; ``ranges()`` is their float view."""
        raise NotImplementedError

    def set_ranges(self, values: Mapping[str, float] | Sequence[float] | torch.Tensor) -> None:
        raise NotImplementedError

    def regularizer_widths(self) -> torch.Tensor:
        """The vector Augerino's regulariser takes the norm of (default: the half-widths)."""
        return self.half_widths()

    # --- shared -----------------------------------------------------------------------------------
    def _values_vector(self, values: Mapping[str, float] | Sequence[float] | torch.Tensor) -> torch.Tensor:
        ref = next(self.parameters())
        if isinstance(values, Mapping):
            unknown = set(values) - set(self.names)
            if unknown:
                raise KeyError(f"unknown {self.kind} ranges {sorted(unknown)}; valid: {list(self.names)}")
            current = self.half_widths().detach().abs()
            vec = [float(values.get(n, current[i])) for i, n in enumerate(self.names)]
            vec = torch.tensor(vec, dtype=ref.dtype, device=ref.device)
        else:
            vec = torch.as_tensor(values, dtype=ref.dtype).to(ref.device).flatten()
            if vec.numel() == 1:
                vec = vec.expand(len(self.names)).clone()
            if vec.numel() != len(self.names):
                raise ValueError(f"expected {len(self.names)} values ({', '.join(self.names)}), got {vec.numel()}")
        if (vec < 0).any():
            raise ValueError("ranges (half-widths) must be non-negative")
        return vec

    def ranges(self) -> dict[str, float]:
        """Current half-widths as ``{name: float}`` (radians for rotation; see module docstring)."""
        hw = self.half_widths().detach().abs().cpu().tolist()
        return dict(zip(self.names, hw))

    def set_fixed(self, values: Mapping[str, float] | Sequence[float] | torch.Tensor) -> None:
        """``set_ranges(values)`` and freeze the parameters (``requires_grad=False``)."""
        self.set_ranges(values)
        for p in self.parameters():
            p.requires_grad_(False)

    def sample_matrices(
        self, n: int, n_samples: int = 1, generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Random matrices (S, n, 3, 3)."""
        return self.matrices_from_coefficients(self.sample_coefficients(n, n_samples, generator, uniforms))

    def _uniform(
        self, n: int, n_samples: int, generator: torch.Generator | None, uniforms: torch.Tensor | None = None
    ) -> torch.Tensor:
        if uniforms is not None:  # drawn by the caller (e.g. per federated client, outside torch.func.vmap)
            return uniforms
        ref = next(self.parameters())
        device = generator.device if generator is not None else ref.device
        u = torch.rand((n_samples, n, len(self.names)), generator=generator, dtype=ref.dtype, device=device)
        return u.to(ref.device)

    def forward(
        self,
        x: torch.Tensor,
        n_samples: int = 1,
        generator: torch.Generator | None = None,
        uniforms: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(N, C, H, W) -> (S, N, C, H, W) independently augmented copies; ``uniforms`` (S, N, 6): the
        draws, given instead of taken from ``generator``."""
        if x.dim() != 4:
            raise ValueError(f"expected images (N, C, H, W), got shape {tuple(x.shape)}")
        n = x.shape[0]
        A = self.sample_matrices(n, n_samples, generator, uniforms).to(x.dtype)
        xs = x.unsqueeze(0).expand(n_samples, *x.shape).reshape(n_samples * n, *x.shape[1:])
        out = apply_affine(xs, A.reshape(n_samples * n, 3, 3))
        return out.reshape(n_samples, *x.shape)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v:.4g}" for k, v in self.ranges().items())


# --------------------------------------------------------------------------------------------------
# (a) Schwöbel et al. 2021
# --------------------------------------------------------------------------------------------------


class SchwobelAffine(AffineAugmentation):
    """Six learnable maxima; ``A = T @ R @ Sh @ S`` (see module docstring)."""

    names = ("rotation", "shear", "translate_x", "translate_y", "scale_x", "scale_y")
    kind = "schwobel"

    def __init__(self, init: float | Sequence[float] | Mapping[str, float] = 0.0, scale_mode: str = "exp"):
        super().__init__()
        if scale_mode not in ("exp", "linear"):
            raise ValueError(f"scale_mode must be 'exp' or 'linear', got {scale_mode!r}")
        self.scale_mode = scale_mode
        self.maxima = nn.Parameter(torch.zeros(6))
        self.set_ranges(init)

    def half_widths(self) -> torch.Tensor:
        # no abs() here: the distribution is symmetric, and abs would have zero gradient at 0 (the init)
        return self.maxima

    def set_ranges(self, values) -> None:
        with torch.no_grad():
            self.maxima.copy_(self._values_vector(values))

    def sample_coefficients(self, n, n_samples=1, generator=None, uniforms=None):
        eps = self._uniform(n, n_samples, generator, uniforms) * 2 - 1
        return eps * self.maxima

    def matrices_from_coefficients(self, coeffs: torch.Tensor) -> torch.Tensor:
        rot, shear, tx, ty, sx, sy = coeffs.unbind(-1)
        c, s = torch.cos(rot), torch.sin(rot)
        if self.scale_mode == "exp":
            ax, ay = torch.exp(sx), torch.exp(sy)
        else:
            ax, ay = 1 + sx, 1 + sy
        # R @ Sh @ S = [[c, -s], [s, c]] @ [[1, shear], [0, 1]] @ diag(ax, ay)
        m00 = c * ax
        m01 = (c * shear - s) * ay
        m10 = s * ax
        m11 = (s * shear + c) * ay
        z, o = torch.zeros_like(rot), torch.ones_like(rot)
        return torch.stack(
            [torch.stack([m00, m01, tx], -1), torch.stack([m10, m11, ty], -1), torch.stack([z, z, o], -1)], -2
        )


# --------------------------------------------------------------------------------------------------
# generator (Lie-algebra) parametrisations
# --------------------------------------------------------------------------------------------------


class _ExpMapAffine(AffineAugmentation):
    def _register_generators(self, gens: list[torch.Tensor]) -> None:
        self.register_buffer("generators", torch.stack(gens), persistent=False)

    def matrices_from_coefficients(self, coeffs: torch.Tensor) -> torch.Tensor:
        G = self.generators.to(dtype=coeffs.dtype, device=coeffs.device)
        M = torch.einsum("...k,kij->...ij", coeffs, G)
        return torch.linalg.matrix_exp(M)


class ImmerAffine(_ExpMapAffine):
    """Immer et al. (2022) generator parametrisation with half-widths ``theta`` (init 0)."""

    names = ("translate_x", "translate_y", "rotation", "scale_x", "scale_y", "shear")
    kind = "immer"
    ROTATION = 2

    def __init__(self, init: float | Sequence[float] | Mapping[str, float] = 0.0):
        super().__init__()
        self._register_generators(
            [
                _generator({(0, 2): 1.0}),  # x-translation
                _generator({(1, 2): 1.0}),  # y-translation
                _generator({(0, 1): -1.0, (1, 0): 1.0}),  # rotation
                _generator({(0, 0): 1.0}),  # x-scale
                _generator({(1, 1): 1.0}),  # y-scale
                _generator({(0, 1): 1.0, (1, 0): 1.0}),  # shear
            ]
        )
        self.theta = nn.Parameter(torch.zeros(6))
        self.set_ranges(init)

    def half_widths(self) -> torch.Tensor:
        r = self.ROTATION
        return torch.cat([self.theta[:r], self.theta[r : r + 1].clamp(-math.pi, math.pi), self.theta[r + 1 :]])

    def set_ranges(self, values) -> None:
        with torch.no_grad():
            self.theta.copy_(self._values_vector(values))

    def sample_coefficients(self, n, n_samples=1, generator=None, uniforms=None):
        eps = self._uniform(n, n_samples, generator, uniforms) * 2 - 1
        return eps * self.half_widths()


class AugerinoAffine(_ExpMapAffine):
    """Benton et al. (2020) Augerino: ``width = softplus(raw_width)``, ``eps ~ U[-w/2, w/2]``."""

    names = ("translate_x", "translate_y", "rotation", "scale", "stretch", "shear")
    kind = "augerino"

    def __init__(self, init_raw: float | Sequence[float] = 0.0, trans_scale: float = 0.1):
        super().__init__()
        self.trans_scale = float(trans_scale)
        # Generators are stored with unit translation; the 0.1 translation scale of Augerino's
        # generators is folded into the coefficients (``_unit``), so coefficients are readable units.
        self._register_generators(
            [
                _generator({(0, 2): 1.0}),  # x-translation (x trans_scale via _unit)
                _generator({(1, 2): 1.0}),  # y-translation (x trans_scale via _unit)
                _generator({(0, 1): -1.0, (1, 0): 1.0}),  # rotation
                _generator({(0, 0): 1.0, (1, 1): 1.0}),  # isotropic scale
                _generator({(0, 0): 1.0, (1, 1): -1.0}),  # stretch
                _generator({(0, 1): 1.0, (1, 0): 1.0}),  # shear
            ]
        )
        raw = torch.as_tensor(init_raw, dtype=torch.get_default_dtype()).flatten()
        if raw.numel() not in (1, 6):
            raise ValueError(f"init_raw needs 1 or 6 values, got {raw.numel()}")
        self.raw_width = nn.Parameter(raw.expand(6).clone() if raw.numel() == 1 else raw.clone())
        unit = torch.ones(6)
        unit[:2] = self.trans_scale
        self.register_buffer("_unit", unit, persistent=False)

    def widths(self) -> torch.Tensor:
        """Full widths ``softplus(raw_width)`` (coefficient ranges before the 0.1 translation scale)."""
        return F.softplus(self.raw_width)

    def regularizer_widths(self) -> torch.Tensor:
        return self.widths()

    def half_widths(self) -> torch.Tensor:
        return self.widths() / 2 * self._unit

    def set_ranges(self, values) -> None:
        vec = self._values_vector(values)
        with torch.no_grad():
            self.raw_width.copy_(_inv_softplus(2 * vec / self._unit))

    def sample_coefficients(self, n, n_samples=1, generator=None, uniforms=None):
        u = self._uniform(n, n_samples, generator, uniforms)
        w = self.widths()
        # eps_i ~ U[-w_i/2, w_i/2], times the generator scale (0.1 for translations)
        return (u * w - w / 2) * self._unit


# --------------------------------------------------------------------------------------------------
# model wrapper, regulariser, factory
# --------------------------------------------------------------------------------------------------


class AugmentedModel(nn.Module):
    """Average a classifier's predictive probabilities over ``n_samples`` augmentations.

    ``forward(x)`` returns ``log( (1/S) sum_s softmax(model(aug_s(x))) )`` with shape (N, classes),
    computed stably as ``logsumexp_s(log_softmax(.)) - log S``, in training *and* evaluation mode
    (the paper averages predictions at train and test time). With ``augmentation=None`` it returns
    ``log_softmax(model(x))``. The S*N augmented images go through ``model`` in one batch.
    """

    def __init__(
        self,
        model: nn.Module,
        augmentation: AffineAugmentation | None,
        n_samples: int = 20,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if n_samples < 1:
            raise ValueError("n_samples must be >= 1")
        self.model = model
        self.augmentation = augmentation
        self.n_samples = int(n_samples)
        self.generator = generator  # the augmentations' draws (None: torch's global generator)

    def forward(self, x: torch.Tensor, n_samples: int | None = None) -> torch.Tensor:
        if self.augmentation is None:
            return F.log_softmax(self.model(x), dim=-1)
        S = self.n_samples if n_samples is None else int(n_samples)
        xa = self.augmentation(x, S, generator=self.generator)  # (S, N, C, H, W)
        logits = self.model(xa.reshape(S * x.shape[0], *x.shape[1:]))
        logp = F.log_softmax(logits, dim=-1).reshape(S, x.shape[0], -1)
        return torch.logsumexp(logp, dim=0) - math.log(S)


def augerino_regularizer(aug: AffineAugmentation, kind: str = "safe", threshold: float = 10.0) -> torch.Tensor:
    """Augerino's regulariser term, to be *added* to the loss times the strength (0.01 in the paper).

    ``standard``: ``-||w||_2`` (Benton et al. 2020, Eq. 5), with ``w = aug.regularizer_widths()``
    (``softplus(raw_width)`` for Augerino). Unbounded below, which is why training diverges (App. E).

    ``safe``: ``-||w||_2 * 1[all |w_i| < threshold]``: the term (value and gradient) is switched off as
    soon as any width reaches ``threshold`` in absolute value (10, as in the Augerino code base's
    ``torch.all(width < 10)``), i.e. clipped without pass-through of the gradient. App. E of the
    partitioned-networks paper phrases it as the l1-norm of any one hyperparameter, i.e. its absolute
    value: Augerino's widths are positive, but Schwöbel's maxima and Immer's theta are signed (the
    distribution is symmetric, so ``-max`` is the same augmentation as ``max``), and a width growing
    towards ``-inf`` must switch the term off too.
    """
    w = aug.regularizer_widths()
    term = -torch.linalg.vector_norm(w)
    if kind == "standard":
        return term
    if kind == "safe":
        return term * (w.detach().abs() < threshold).all().to(term.dtype)
    raise ValueError(f"kind must be 'safe' or 'standard', got {kind!r}")


_KINDS = {"schwobel": SchwobelAffine, "immer": ImmerAffine, "augerino": AugerinoAffine}


def augmentation_kinds() -> list[str]:
    return sorted(_KINDS) + ["none"]


def build_augmentation(kind: str, **kwargs) -> AffineAugmentation | None:
    """``"schwobel"``, ``"immer"``, ``"augerino"`` -> the module (kwargs to its constructor);
    ``"none"`` -> ``None`` (baseline without augmentation)."""
    key = str(kind).lower()
    if key == "none":
        return None
    if key not in _KINDS:
        raise KeyError(f"unknown augmentation {kind!r}; valid: {', '.join(augmentation_kinds())}")
    return _KINDS[key](**kwargs)
