"""Plan of the input_selection kind (partitioned paper Fig. 2). Build: experiments/input_selection.py.

Methods: partitioned and laplace (fixed input masks keeping the first `n_inputs` inputs, Fig. 2a) and
partitioned_mask (a learned concrete-Bernoulli input mask, Fig. 2b).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ConfigError
from ..data import variant_names as variants
from . import KindPlan, Settings, register
from .costs import CellWork, mlp_cell

METHODS = ("partitioned", "laplace", "partitioned_mask")
CHUNKED = ("partitioned", "partitioned_mask")
_PARTITIONED = ("chunk_proportions", "partition_scheme", "partition_default", "wd_scaling", "hyper_lr",
                "early_stopping")
NEEDS = {  # the optional settings each method requires
    "partitioned": ("n_inputs", *_PARTITIONED),
    "laplace": ("n_inputs", "laplace_prior_steps"),
    "partitioned_mask": (*_PARTITIONED, "mask_init_keep", "mask_temperature"),
}


@dataclass(frozen=True, kw_only=True)  # keyword-only: fields grouped by topic, defaults anywhere
class InputSelectionSettings(Settings):
    # grid axes
    method: str
    seed: int  # initialisation, chunk assignment, minibatches
    n_inputs: int | None = None  # fixed mask keeping the first K inputs (partitioned, laplace)
    # data: the synthetic task of Lyle et al. (2020), drawn with data_seed
    n_train: int
    n_test: int
    data_seed: int
    dataset: str = "input_selection"
    # model and optimiser (Adam)
    hidden: list
    activation: str
    lr: float
    batch_size: int
    weight_decay: float
    n_steps: int
    eval_every: int
    # partitioned, partitioned_mask
    chunk_proportions: list | None = None
    partition_scheme: str | None = None
    partition_default: str | None = None
    wd_scaling: str | None = None
    hyper_lr: float | None = None
    early_stopping: bool | None = None
    # laplace
    laplace_prior_steps: int | None = None
    # partitioned_mask
    mask_init_keep: float | None = None
    mask_temperature: float | None = None
    # how the label enters the informative features: "signed" (2y - 1, +-1; the default here) or "label" (y in
    # {0, 1}, x = y + e as the paper writes it); data/synthetic.py _input_selection
    signal: str = "signed"

    def __post_init__(self):
        if self.method not in METHODS:
            raise ConfigError(f"input_selection: method '{self.method}' unknown (valid: {', '.join(METHODS)})")
        missing = [k for k in NEEDS[self.method] if getattr(self, k) is None]
        if missing:
            raise ConfigError(f"input_selection: method '{self.method}' needs the setting(s) {', '.join(missing)}")


class InputSelectionPlan(KindPlan):
    name = "input_selection"
    Settings = InputSelectionSettings
    build_target = "reprokit.experiments.input_selection:build"

    def required_variants(self, cell) -> dict:
        st = self.settings(cell)
        if st.method not in CHUNKED:
            return {}
        name = variants.variant_filename("chunks", n=st.n_train, proportions=st.chunk_proportions, seed=st.seed)
        return {"chunks": (st.dataset, name)}


    def cost_parts(self, cell) -> CellWork:
        st = self.settings(cell)
        step = {"laplace": "standard", "partitioned": "param", "partitioned_mask": "partitioned"}[st.method]
        return mlp_cell(int(st.n_steps), st.hidden, st.dataset, step, int(st.batch_size))


PLAN = register(InputSelectionPlan())
