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
        return bali_step(self.model, x, y, generator=self.generator)
