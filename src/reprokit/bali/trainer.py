"""One iteration of BALI (Alg. 1) for a `BaliMLP`."""

from __future__ import annotations

import torch

from .model import BaliMLP


def bali_step(model: BaliMLP, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator | None = None) -> dict:
    """One iteration of Alg. 1 on the minibatch (x, y); returns {'loss', 'beta', 'b'}.

    1. forward with weights from the previous posterior q_{t-1} (or the initial weights at t = 1);
    2. loss = mean negative log-likelihood of the batch; g_l = dloss/dz_l for every layer;
    3. Psi_gg EMA (Eq. 19) and pseudo-targets y_l = z_l - alpha * g_l / sqrt(Psi_gg / b_t) (Eq. 20). The
       paper's Alg. 1 takes g = grad of the *log-likelihood* and adds it; we differentiate the loss
       (= -log-likelihood), hence the minus: pseudo-targets move the outputs downhill in the loss.
       Regression: the last layer's targets are the true y (Sec. 5.2);
    4. EMAs of X^T X, X^T Y, Y^T Y scaled by N_eff / B (Eq. 17) and the posterior of Eq. 16 / Eq. 21.

    The loss reported is the batch NLL under the sampled weights, before the update.
    """
    cfg = model.config
    t = int(model.step_count) + 1
    beta = cfg.beta_at(t)
    if cfg.bias_correction:
        model.ema_decay_prod.mul_(1.0 - beta)
        b = float(1.0 - model.ema_decay_prod)
    else:
        b = 1.0

    with torch.enable_grad():
        out, xs, zs = model.forward_trace(x, track=True, generator=generator)
        loss = model.nll(out, y).mean()
        grads = torch.autograd.grad(loss, zs)

    n_layers = len(model.layers)
    for l, layer in enumerate(model.layers):
        g_norm = layer.normalised_grad(grads[l], beta, b)
        if model.task == "regression" and l == n_layers - 1:
            target = model.targets(y)
        else:
            target = zs[l].detach().to(g_norm.dtype) - cfg.alpha * g_norm
        layer.update(xs[l], target, beta, b)
    model.step_count.add_(1)
    return {"loss": float(loss.detach()), "beta": beta, "b": b}


class BaliTrainer:
    """Thin stateful wrapper: all state lives in the model's buffers, so `model.state_dict()` resumes it."""

    def __init__(self, model: BaliMLP, generator: torch.Generator | None = None):
        self.model = model
        self.generator = generator

    @property
    def config(self):
        return self.model.config

    def step(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        """One BALI iteration on the minibatch ``x`` [B, in_features] (floats), ``y`` [B] integer classes
        (classification) or [B, out_features] float targets (regression); returns {'loss', 'beta', 'b'}."""
        _check_batch(self.model, x, y)
        return bali_step(self.model, x, y, generator=self.generator)

    def fit(self, x: torch.Tensor, y: torch.Tensor, steps: int | None = None, batch_size: int = 256) -> list[dict]:
        """``steps`` iterations (default ``config.n_iterations``, which the beta schedule is set for) on
        minibatches of ``batch_size`` examples drawn with replacement from (x, y), from the trainer's
        generator (on x's device; None: torch's global one). Returns each step's {'loss', 'beta', 'b'}."""
        _check_batch(self.model, x, y)
        steps = self.config.n_iterations if steps is None else int(steps)
        out = []
        for _ in range(steps):
            idx = torch.randint(0, x.shape[0], (int(batch_size),), generator=self.generator, device=x.device)
            out.append(bali_step(self.model, x[idx], y[idx], generator=self.generator))
        return out


def _check_batch(model: BaliMLP, x: torch.Tensor, y: torch.Tensor) -> None:
    """Shapes and dtypes of one batch, each mistake named by its argument (shapes only: no device sync)."""
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x has {x.shape[0]} examples but y has {y.shape[0]}")
    width = x[0].numel() if x.shape[0] else x.shape[1:].numel()
    if width != model.in_features:
        raise ValueError(f"x: each example has {width} features but the model's in_features is {model.in_features}")
    if model.task == "classification":
        if y.ndim != 1 or y.is_floating_point():
            raise ValueError(
                f"y: classification labels must be integer class ids of shape [B], got {list(y.shape)} {y.dtype}"
            )
    elif y.shape[0] and y[0].numel() != model.out_features:
        raise ValueError(f"y: regression targets must have shape [B, {model.out_features}], got {list(y.shape)}")
