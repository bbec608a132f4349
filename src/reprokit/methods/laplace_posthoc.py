"""Post-hoc diagonal Laplace (Immer et al. 2021) on a standard-trained network, via laplace-torch.

Training is `StandardTraining`; at the end the diagonal GGN Laplace approximation is fitted on the
training data, the prior precision is tuned by maximising the Laplace log marginal likelihood, and
that log marginal likelihood is reported next to train/test accuracy and log-likelihood (Fig. 2a,
right panel).
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.task import TaskData
from .standard import OptimConfig, StandardTraining


class PosthocDiagLaplace(StandardTraining):
    def __init__(
        self,
        net: nn.Module,
        data: TaskData,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        marglik_batch_size: int = 512,
        marglik_steps: int = 100,
    ):
        super().__init__(net, data, optim, n_steps, seed)
        self.marglik_batch_size = marglik_batch_size
        self.marglik_steps = marglik_steps

    def laplace_log_marginal_likelihood(self) -> float:
        # Imported here: laplace-torch configures the root logger at import time.
        from laplace import Laplace  # laplace-torch

        from .curvature import LinearDiagGGN  # laplace-torch too

        self.net.eval()
        likelihood = "classification" if self.data.task == "classification" else "regression"
        try:  # exact diagonal GGN either way; the hand-written backend is ~100x faster for Linear-only nets
            backend = LinearDiagGGN
            backend(self.net, likelihood)._linear_layers()
        except TypeError:
            backend = None
        kw = {"backend": backend} if backend is not None else {}
        la = Laplace(self.net, likelihood, subset_of_weights="all", hessian_structure="diag", **kw)
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(self.data.x_train, self.data.y_train),
            batch_size=self.marglik_batch_size,
            shuffle=False,
        )
        la.fit(loader)
        la.optimize_prior_precision(
            method="marglik", pred_type="glm", prior_structure="scalar", n_steps=self.marglik_steps
        )
        return float(la.log_marginal_likelihood())

    def final_metrics(self) -> dict[str, float]:
        metrics = self.evaluate(-1)
        metrics["laplace_lml"] = self.laplace_log_marginal_likelihood()
        return metrics
