"""Plan of the input_selection kind (partitioned paper Fig. 2). Build: builders/input_selection.py.

Methods: partitioned and laplace (fixed input masks keeping the first `n_inputs` inputs, Fig. 2a) and
partitioned_mask (a learned concrete-Bernoulli input mask, Fig. 2b).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from ..data import variant_names as variants
from .base import KindPlan, Settings, register
from .costs import CellWork, mlp_cell
from .methods import MethodEntry, register_methods, table

_PARTITIONED = (
    "chunk_proportions",
    "partition_scheme",
    "partition_default",
    "wd_scaling",
    "hyper_lr",
    "early_stopping",
)
_BUILD = "reprokit.builders.input_selection:"
# The kind's methods (plan/methods.py). `blocks`: a setting only that method's cells resolve (laplace_select: the
# other methods' resolved settings, and so their archived lines, stay as they were before it existed); `needs`:
# the optional settings each method requires. The settings are flat (no block per method), so most of what a
# method reads is shared and stays in every cell.
METHOD_TABLE = register_methods(
    "input_selection",
    table(
        MethodEntry(
            "partitioned",
            label="Partitioned",
            needs=("n_inputs", *_PARTITIONED),
            builder=_BUILD + "build_partitioned",
            cost_step="param",
        ),
        MethodEntry(
            "laplace",
            label="Diag. Laplace",
            blocks=("laplace_select",),
            needs=("n_inputs", "laplace_prior_steps"),
            builder=_BUILD + "build_laplace",
            cost_step="standard",
        ),
        MethodEntry(
            "partitioned_mask",
            label="Partitioned, learned mask",
            needs=(*_PARTITIONED, "mask_init_keep", "mask_temperature"),
            builder=_BUILD + "build_partitioned_mask",
            cost_step="partitioned",
        ),
    ),
)
Method = Literal[tuple(METHOD_TABLE)]
METHODS = get_args(Method)
CHUNKED = ("partitioned", "partitioned_mask")


class InputSelectionSettings(Settings):
    # grid axes
    method: Method
    seed: int = Field(description="initialisation, chunk assignment, minibatches")
    n_inputs: int | None = Field(None, description="fixed mask keeping the first K inputs (partitioned, laplace)")
    # data: the synthetic task of Lyle et al. (2020), drawn with data_seed
    n_train: int = Field(ge=1)
    n_test: int = Field(ge=1)
    data_seed: int = Field(ge=0)
    dataset: str = "input_selection"
    # model and optimiser (Adam)
    hidden: list[int] = Field(min_length=1)
    activation: Literal["gelu", "relu", "tanh", "leaky_tanh"]
    lr: float = Field(gt=0)
    batch_size: int = Field(ge=1)
    weight_decay: float = Field(ge=0)
    n_steps: int = Field(ge=1)
    eval_every: int = Field(ge=0)
    # partitioned, partitioned_mask
    chunk_proportions: list[float] | None = Field(None, min_length=2)
    partition_scheme: Literal["random", "node"] | None = None
    partition_default: Literal["init", "zero"] | None = None
    wd_scaling: Literal["reciprocal", "sqrt", "none"] | None = None
    hyper_lr: float | None = Field(None, gt=0)
    early_stopping: bool | None = None
    # laplace
    laplace_prior_steps: int | None = Field(None, ge=1)
    laplace_select: Literal["last", "best_lml"] | None = Field(
        None,
        description="which evaluation the Laplace baseline reports: last (the end of training) or best_lml (the "
        "largest Laplace log marginal likelihood over the evaluations: early stopping on it, App. I.4); "
        "methods/laplace_posthoc.py",
    )
    # partitioned_mask
    mask_init_keep: float | None = Field(None, gt=0, lt=1)
    mask_temperature: float | None = Field(None, gt=0)
    signal: Literal["signed", "label"] = Field(
        "label",
        description="how the label enters the informative features: label (y in {0, 1}, x = y + e as the paper "
        "writes it; the default) or signed (2y - 1, +-1: a variant of ours that doubles the class separation); "
        "data/synthetic.py _input_selection",
    )


class InputSelectionPlan(KindPlan):
    name = "input_selection"
    title = "input_selection experiments (Fig. 2 of the partitioned-networks paper)"
    Settings = InputSelectionSettings
    axes = ("method", "n_inputs", "seed", "mask_init_keep")  # mask_init_keep: fig2b_mask_init's sweep

    def needs(self, st) -> tuple:
        e = METHOD_TABLE[st.method]
        return (*e.needs, *e.blocks)

    build_target = "reprokit.builders.input_selection:build"

    def required_variants(self, cell) -> dict:
        st = self.typed_settings(cell)
        if st.method not in CHUNKED:
            return {}
        name = variants.variant_filename("chunks", n=st.n_train, proportions=st.chunk_proportions, seed=st.seed)
        return {"chunks": (st.dataset, name)}

    def cost_parts(self, cell) -> CellWork:
        st = self.typed_settings(cell)
        step = METHOD_TABLE[st.method].step(st)
        return mlp_cell(int(st.n_steps), st.hidden, st.dataset, step, int(st.batch_size))


PLAN = register(InputSelectionPlan())
