"""The one small protocol every method implements, so one training loop serves them all.

A method owns its model(s), optimisers, data samplers and random generators. The loop calls
`train_step` once per iteration, `evaluate` every `eval_every` steps (a row of the per-step curve),
and `final_metrics` at the end. `state_dict`/`load_state_dict` must capture everything that
influences later steps (weights, optimiser state, generator states, early-stopping bests) so that a
resumed run is bit-identical to an uninterrupted one.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Method(Protocol):
    def train_step(self, step: int) -> dict[str, float]:
        """One iteration; returns at least {'loss': float} (non-finite loss => run diverged)."""

    def evaluate(self, step: int) -> dict[str, float]:
        """Metrics for the per-step curve; must not consume the training generators."""

    def final_metrics(self) -> dict[str, float]:
        """The cell's metrics after training (e.g. at the early-stopping best)."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
