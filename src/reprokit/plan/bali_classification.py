"""Plan of the bali_classification kind (BALI Table 2, Figs. 2, 3, 7). Build: builders/bali_classification.py."""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from pydantic import Field, model_validator

from .bali_blocks import BaliKindSettings, BaliPriors
from .base import KindPlan, Settings, register
from .costs import CellWork, bali_step, mlp_cell
from .methods import MethodEntry, method_keys, register_methods, table

_BUILD = "reprokit.builders.bali_classification:"
# The kind's methods, in the order tables and figures list them: label, colour, line, the settings blocks each
# alone reads, its builder and its cost model step (plan/methods.py). Adding a method starts here.
METHOD_TABLE = register_methods(
    "bali_classification",
    table(
        MethodEntry(
            "bali",
            label="BALI",
            colour="tab:blue",
            line={"lw": 1.5, "zorder": 4, "marker": "o"},
            blocks=("bali",),
            builder=_BUILD + "build_bali",
            cost_step=lambda st: bali_step(st.need("bali").reparam),
        ),
        MethodEntry(
            "dropout",
            label="DO",
            colour="tab:orange",
            line={"lw": 3.2, "alpha": 0.45, "zorder": 2, "marker": "s"},
            blocks=("optim", "dropout_p"),
            builder=_BUILD + "build_dropout",
            cost_step="dropout",
        ),
        MethodEntry(
            "map",
            label="MAP",
            colour="tab:green",
            line={"lw": 1.0, "zorder": 5, "marker": "^"},
            blocks=("optim",),
            builder=_BUILD + "build_map",
            cost_step="map",
        ),
    ),
)
Method = Literal[tuple(METHOD_TABLE)]
Uci = Literal["spambase", "magic", "cdc_diabetes"]
Image = Literal["mnist", "fashion_mnist"]
METHODS, UCI, IMAGES = get_args(Method), get_args(Uci), get_args(Image)
# Settings only one method reads (the table's `blocks`); `resolved_settings` drops the other methods' keys.
METHOD_KEYS = method_keys(METHOD_TABLE)


class ClassificationBaliBlock(BaliPriors):
    """Method `bali` (Table 5)."""

    reparam: Literal["weight", "local"]


class OptimBlock(Settings):
    """Adam of methods `dropout` and `map` (Table 6)."""

    lr: float = Field(gt=0)
    weight_decay: float = Field(ge=0)


class ClassificationSettings(BaliKindSettings):
    """UCI sets: `seed` is also the seed of the random 80/20 split."""

    KIND = "bali_classification"
    method: Method
    dataset: Uci | Image

    batch_size: int = Field(ge=1)
    n_steps: int = Field(ge=1)
    standardize: bool | Literal["global"] = Field(
        False,
        description="input scaling from training-set statistics: true a z-score per feature, 'global' one mean "
        "and sd over all features (image pixels), false none; the OOD set is scaled alike",
    )
    eval_every: int | None = Field(
        None, ge=1, description="curve evaluation period in iterations; overrides eval_every_epochs"
    )
    eval_every_epochs: float | None = Field(
        None, gt=0, description="curve evaluation period in epochs (round(epochs * N_train / batch_size) iterations)"
    )
    eval_doubling_until: int = Field(
        0,
        ge=0,
        description="also a curve evaluation at steps 1, 2, 4, 8, ... below this step (the curve's start); 0 none",
    )
    evals_per_doubling: int = Field(
        1,
        ge=1,
        description="curve evaluations per doubling of the step below eval_doubling_until: steps round(2 ** (k / n)), "
        "k = 0, 1, ..; 1: 1, 2, 4, 8, ..; 4: 1, 2, .., 8, 10, 11, 13, 16, ..",
    )
    stop_at: int | None = Field(
        None,
        ge=1,
        description="stop after this many of the n_steps iterations (every schedule still follows n_steps, so the "
        "run is the first stop_at iterations of the n_steps run: its early curve); None: all n_steps",
    )
    train_eval_size: int | None = Field(
        None,
        ge=1,
        description="random training points on which the curve's "
        "training NLL is evaluated (None: the whole training set)",
    )
    test_eval_size: int | None = Field(
        None, ge=1, description="fixed random test subset for curve evaluations (final metrics use the whole test set)"
    )
    train_subset: int | None = Field(
        None, ge=1, description="train on a random subset of this size (tiny test scale only)"
    )
    test_subset: int | None = Field(
        None, ge=1, description="evaluate on a random test subset of this size (tiny test scale only; also the OOD set)"
    )
    ood_dataset: Image | None = Field(
        None, description="dataset whose test split is the OOD set of Fig. 3 (image experiments)"
    )
    # per method (METHOD_KEYS)
    dropout_p: float | None = Field(None, ge=0, lt=1)
    optim: OptimBlock | None = None
    bali: ClassificationBaliBlock | None = None

    # added after cells were archived, each default the behaviour before it: recorded only where set (Settings)
    RECORDED_WHEN_SET: ClassVar[tuple[str, ...]] = ("evals_per_doubling", "stop_at")

    @model_validator(mode="after")
    def _stop_within_run(self):
        if self.stop_at is not None and self.stop_at > self.n_steps:
            raise ValueError(f"stop_at {self.stop_at} is beyond n_steps {self.n_steps}")
        return self

    @property
    def steps_run(self) -> int:
        """The iterations the cell trains: stop_at where set, else n_steps."""
        return int(self.stop_at if self.stop_at is not None else self.n_steps)

    def eval_every_steps(self, n_train: int) -> int:
        """Curve period in iterations: `eval_every`, else `eval_every_epochs` epochs of `n_train` points."""
        if self.eval_every is not None:
            return int(self.eval_every)
        return max(1, int(round(float(self.need("eval_every_epochs")) * n_train / int(self.batch_size))))


class BaliClassificationPlan(KindPlan):
    name = "bali_classification"
    title = "bali_classification experiments (BALI paper, Sec. 5.3-5.5, Table 2, Figs. 2 and 3)"
    Settings = ClassificationSettings
    axes = ("method", "dataset", "seed", "bali.wishart_n", "bali.u0")  # sweeps: bali_cls_image_wishart, _u0
    build_target = "reprokit.builders.bali_classification:build"

    def needs(self, st) -> tuple:
        return (*METHOD_TABLE[st.method].blocks, *(() if st.eval_every is not None else ("eval_every_epochs",)))

    def cost_parts(self, cell) -> CellWork:
        st = self.typed_settings(cell)
        step = METHOD_TABLE[st.method].step(st)
        return mlp_cell(st.steps_run, st.hidden, st.dataset, step, int(st.batch_size))

    def n_steps(self, cell) -> int:
        return self.typed_settings(cell).steps_run


PLAN = register(BaliClassificationPlan())
