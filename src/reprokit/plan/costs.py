"""What a cell's work is made of, for the cost model (`reprokit.budget` prices it). Torch-free.

Each kind's plan says which *parts* its cells run (`KindPlan.cost_parts`): (model, step kind, images per
step, how many such steps), read from the cell's typed settings as the kind's `build` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

EVAL_FORWARD_SHARE = 1.0 / 3  # a forward pass is ~1/3 of a training step (forward + backward + update)
IMAGE_TEST_SIZE = {"mnist": 10000, "cifar10": 10000, "tinyimagenet": 10000}


@dataclass(frozen=True)
class Part:
    model: str
    step: str  # plain | standard | partitioned | param | hyper | lila_hyper | llml | bali_w | bali_l | dropout
    #                    | map | bbb | pbp (an epoch) | vadam | nng | startup
    images: int | None  # per step (batch x augmentation samples); None: as measured (full-batch MLP sets)
    count: float  # how many such steps the cell runs


@dataclass
class CellWork:
    n_steps: int
    parts: list[Part]


def mlp_key(hidden, dataset) -> str:
    """The model key of an MLP kind's cell: hidden widths and dataset (input/output sizes follow it)."""
    return f"mlp{'x'.join(str(int(h)) for h in hidden)}/{dataset}"


def bali_step(reparam: str | None) -> str:
    """The step kind of a BALI cell: BALI-L (local reparametrisation) or BALI-W."""
    return "bali_l" if reparam == "local" else "bali_w"


def mlp_cell(n: int, hidden, dataset, step: str, images: int | None) -> CellWork:
    """The work of an MLP kind's cell: `n` steps of one kind (evaluations not modelled)."""
    return CellWork(n, [Part(mlp_key(hidden, dataset), step, images, n)])
