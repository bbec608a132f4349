"""Small numerically careful helpers: symmetric Cholesky with a jitter fallback."""

from __future__ import annotations

import warnings

import torch


def symmetrize(a: torch.Tensor) -> torch.Tensor:
    return 0.5 * (a + a.mT)


def safe_cholesky(a: torch.Tensor, max_tries: int = 8, what: str = "matrix") -> torch.Tensor:
    """Lower Cholesky factor of a symmetric positive-definite matrix.

    Symmetrises first (round-off in a Schur complement leaves tiny asymmetries). If the factorisation
    fails, adds growing diagonal jitter (1e-10 .. 1e-3 times the mean diagonal) and warns; raises if
    that still fails.
    """
    a = symmetrize(a)
    chol, info = torch.linalg.cholesky_ex(a)
    if int(info) == 0:
        return chol
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    scale = a.diagonal().abs().mean().clamp_min(torch.finfo(a.dtype).tiny)
    jitter = 1e-10 * scale
    for _ in range(max_tries):
        chol, info = torch.linalg.cholesky_ex(a + jitter * eye)
        if int(info) == 0:
            warnings.warn(f"Cholesky of {what} needed jitter {float(jitter):.3g}", RuntimeWarning, stacklevel=2)
            return chol
        jitter = jitter * 10.0
    raise torch.linalg.LinAlgError(f"Cholesky of {what} failed even with jitter {float(jitter):.3g}")
