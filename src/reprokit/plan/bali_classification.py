"""Plan of the bali_classification kind (BALI Table 2, Figs. 2, 3, 7). Build: experiments/bali_classification.py."""

from __future__ import annotations

from dataclasses import dataclass

from . import KindPlan, Settings, register
from .bali_blocks import BaliKindSettings, BaliPriors
from .costs import CellWork, bali_step, mlp_cell

METHODS = ("bali", "dropout", "map")
UCI = ("spambase", "magic", "cdc_diabetes")
IMAGES = ("mnist", "fashion_mnist")
# Settings only one method reads; `cell_settings` drops the other methods' keys from a cell's parameters.
METHOD_KEYS = {"bali": ("bali",), "dropout": ("optim", "dropout_p"), "map": ("optim",)}


@dataclass(frozen=True)
class ClassificationBaliBlock(BaliPriors):
    """Method `bali` (Table 5)."""
    reparam: str


@dataclass(frozen=True)
class OptimBlock(Settings):
    """Adam of methods `dropout` and `map` (Table 6)."""
    lr: float
    weight_decay: float


@dataclass(frozen=True)
class ClassificationSettings(BaliKindSettings):
    """UCI sets: `seed` is also the seed of the random 80/20 split."""

    KIND = "bali_classification"
    VALID = {"method": METHODS, "dataset": UCI + IMAGES}

    batch_size: int
    n_steps: int
    standardize: bool = False  # z-score the features with training statistics
    eval_every: int | None = None  # overrides eval_every_epochs
    eval_every_epochs: float | None = None  # round(epochs N_train / batch_size) iterations
    eval_doubling_until: int = 0  # also a curve row at steps 1, 2, 4, .. below it (the curve's start)
    train_eval_size: int | None = None  # None: the whole training set
    test_eval_size: int | None = None
    train_subset: int | None = None  # tiny test scale only
    test_subset: int | None = None  # ... also the OOD set
    ood_dataset: str | None = None  # Fig. 3
    # per method (METHOD_KEYS)
    dropout_p: float | None = None
    optim: OptimBlock | None = None
    bali: ClassificationBaliBlock | None = None

    def eval_every_steps(self, n_train: int) -> int:
        """Curve period in iterations: `eval_every`, else `eval_every_epochs` epochs of `n_train` points."""
        if self.eval_every is not None:
            return int(self.eval_every)
        return max(1, int(round(float(self.need("eval_every_epochs")) * n_train / int(self.batch_size))))


class BaliClassificationPlan(KindPlan):
    name = "bali_classification"
    Settings = ClassificationSettings
    build_target = "reprokit.experiments.bali_classification:build"

    def needs(self, st) -> tuple:
        return (*METHOD_KEYS[st.method], *(() if st.eval_every is not None else ("eval_every_epochs",)))

    def cell_settings(self, cell) -> dict:
        """The settings this cell runs with: the shared ones and its own method's keys (BALI: `bali`; DO:
        `optim`, `dropout_p`; MAP: `optim`), so editing one method's settings leaves the others' cells untouched."""
        own = set(METHOD_KEYS[cell.coord_dict["method"]])
        other = {k for keys in METHOD_KEYS.values() for k in keys} - own
        return {k: v for k, v in cell.settings.items() if k not in other}


    def cost_parts(self, cell) -> CellWork:
        st = self.settings(cell)
        step = bali_step(st.need("bali").reparam) if st.method == "bali" else st.method
        return mlp_cell(int(st.n_steps), st.hidden, st.dataset, step, int(st.batch_size))


PLAN = register(BaliClassificationPlan())
