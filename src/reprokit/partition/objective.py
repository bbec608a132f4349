"""The partitioned marginal-likelihood objective (Eq. 2 / Eq. 4).

LML ~= sum_{k=2..C} sum_{(x,y) in D_k} log p(y | x, subnetwork k-1).

The k = 1 term, log p(D_1 | subnetwork 0), is dropped as in the paper: subnetwork 0 is the
untrained default network, so the term is a constant w.r.t. the training run that only adds noise
to comparisons between hyperparameters (Sec. 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .wrap import PartitionedModel

__all__ = ["lml_estimate"]


@torch.no_grad()
def lml_estimate(
    pmodel: PartitionedModel,
    x_by_chunk: Sequence[torch.Tensor],
    y_by_chunk: Sequence[torch.Tensor],
    log_lik_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batch_size: int = 1024,
    predict_fn: Callable[[PartitionedModel, torch.Tensor], torch.Tensor] | None = None,
    return_terms: bool = False,
):
    """Sum of out-of-chunk log-likelihoods, evaluated in eval mode without gradients.

    Args:
        x_by_chunk, y_by_chunk: C tensors each; index j holds chunk D_{j+1}.
        log_lik_fn: (model output, y) -> per-example log-likelihoods (or their sum).
        predict_fn: (pmodel, x) -> output; default ``pmodel(x)``. Use it to average predictions over
            augmentation samples or to apply an input mask that lives outside the partitioned model.
        return_terms: also return the list of per-chunk terms for k = 2..C.

    The model's training mode and current subnetwork are restored afterwards.
    """
    c = pmodel.num_partitions
    if len(x_by_chunk) != c or len(y_by_chunk) != c:
        raise ValueError(f"need {c} chunks of inputs and targets, got {len(x_by_chunk)} and {len(y_by_chunk)}")
    predict = predict_fn or (lambda m, x: m(x))
    try:
        device = next(pmodel.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    was_training = pmodel.training
    pmodel.eval()
    terms = []
    try:
        for k in range(2, c + 1):
            x_all, y_all = x_by_chunk[k - 1], y_by_chunk[k - 1]
            total = torch.zeros((), dtype=torch.float64, device="cpu")  # summed on the host
            with pmodel.subnetwork(k - 1):
                for i in range(0, len(x_all), batch_size):
                    x = x_all[i : i + batch_size].to(device)
                    y = y_all[i : i + batch_size].to(device)
                    total += log_lik_fn(predict(pmodel, x), y).sum().double().cpu()
            terms.append(float(total))
    finally:
        pmodel.train(was_training)
    value = float(sum(terms))
    return (value, terms) if return_terms else value
