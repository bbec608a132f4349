"""Plan of the affine_invariance kind (learned affine augmentations; partitioned paper Figs. 3, 5-9).

Build: builders/affine_invariance.py. Methods: baseline, augerino, diff_laplace, last_layer_ml, partitioned,
partitioned_ens, validation_opt, random, retrain, fixed (see the build module's docstring). psi (the
hyperparameters partitioned / validation_opt learn) are the augmentation's parameters, or with
``psi: feature_extractor`` the stem and first two stages of a Wide-ResNet (Table 3).
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from ..data import variant_names as variants
from ..errors import ConfigError
from .base import KindPlan, Settings, register
from .costs import EVAL_FORWARD_SHARE, IMAGE_TEST_SIZE, CellWork, Part
from .methods import MethodEntry, register_methods, table

_BUILD = "reprokit.builders.affine_invariance:"


def _entry(name, label, builder, cost_step, colour="", marker="", blocks=(), needs=()) -> MethodEntry:
    return MethodEntry(
        name,
        label=label,
        colour=colour,
        line={"marker": marker} if marker else {},
        blocks=blocks,
        needs=needs,
        builder=_BUILD + builder,
        cost_step=cost_step,
    )


_HYPER_LR = ("hyper_lr",)  # learn psi with the `hyper_lr` optimiser
# The kind's methods (plan/methods.py). `blocks`: a method's own settings block, named as the method (a cell keeps
# its own method's block); `needs`: optional settings it requires; `cost_step`: its main step (`cost_parts` still
# adds the methods' other updates: Diff. Laplace's marginal likelihood, the ensemble's psi step, finetuning).
# Colours and markers: Fig. 3's (report/render/invariance.py, METHOD_STYLE, lists them in the paper's order).
METHOD_TABLE = register_methods(
    "affine_invariance",
    table(
        _entry("baseline", "Baseline", "build_baseline", "standard", "tab:gray", "o"),
        _entry("augerino", "Augerino", "build_augerino", "standard", "tab:green", "s", blocks=("augerino",)),
        _entry("diff_laplace", "Diff. Laplace", "build_diff_laplace", "standard", "tab:blue", "P", ("diff_laplace",)),
        _entry("last_layer_ml", "Last-layer ML", "build_last_layer_ml", "llml", "tab:orange", "v", ("last_layer_ml",)),
        _entry("partitioned", "Partitioned", "build_partitioned", "partitioned", "tab:red", "D", needs=_HYPER_LR),
        _entry(
            "partitioned_ens",
            "Partitioned (Ens.)",
            "build_partitioned_ens",
            "standard",
            "tab:purple",
            "^",
            needs=_HYPER_LR,
        ),
        _entry(
            "validation_opt",
            "Validation set optim.",
            "build_validation_opt",
            "partitioned",
            blocks=("validation_opt",),
            needs=_HYPER_LR,
        ),
        _entry("random", "Random ranges", "build_fixed_ranges", "standard"),
        _entry("retrain", "Retrained on found ranges", "build_fixed_ranges", "standard"),
        _entry("fixed", "Fixed ranges", "build_fixed_ranges", "standard"),
    ),
)
Method = Literal[tuple(METHOD_TABLE)]
METHODS = get_args(Method)
CHUNKED = ("partitioned", "partitioned_ens", "validation_opt")  # the `chunks` variant (validation_opt: [train, val])
PSI_FEATURE_METHODS = ("partitioned", "validation_opt")  # the methods that learn a feature extractor
FIXED = ("random", "retrain", "fixed")
Proportion = Annotated[float, Field(gt=0)]


class AugerinoBlock(Settings):
    """Augerino (Benton et al. 2020; methods/augerino.py): psi in the same backward as the weights."""

    augmentation: Literal["same", "schwobel", "immer", "augerino"] = Field(
        "same",
        description="Augerino's parametrisation: same (as `augmentation`, App. I.4), or schwobel, immer, augerino "
        "(Benton et al.)",
    )
    init_raw: float = Field(0.0, description="initial raw width (Benton's parametrisation: softplus(raw))")
    hyper_lr: float = Field(0.05, gt=0, description="Adam learning rate of psi")
    reg: float = Field(0.01, ge=0, description="strength of the width regulariser")
    reg_kind: Literal["safe", "standard"] = Field(
        "safe", description="the regulariser: safe (bounded below, App. E) or standard (-||psi||, unbounded)"
    )
    reg_threshold: float = Field(
        10.0, gt=0, description="safe: the width norm past which the regulariser stops rewarding wider ranges (App. E)"
    )


class DiffLaplaceBlock(Settings):
    """Diff. Laplace (LILA, Immer et al. 2022; methods/diff_laplace.py): a KFAC Laplace marginal likelihood."""

    burnin: int = Field(0, ge=0, description="training steps before the first hyperparameter step")
    marglik_every: int = Field(1, ge=1, description="hyperparameter steps after every this many training steps")
    marglik_steps: int = Field(1, ge=0, description="Adam steps on (psi, log prior precision) each time (0 = none)")
    marglik_batches: int = Field(1, ge=1, description="minibatches the marginal likelihood is computed on")
    marglik_batch_size: int | None = Field(None, ge=1, description="size of those minibatches (null = batch_size)")
    n_aug_marglik: int = Field(31, ge=1, description="augmentation samples in the marginal likelihood (LILA 31)")
    hyper_lr: float = Field(0.05, gt=0, description="Adam learning rate of the hyperparameters (cosine decay)")
    hyper_final_factor: float = Field(0.1, gt=0, description="final hyper learning rate / hyper_lr")
    prior_structure: Literal["layerwise", "scalar"] = "layerwise"
    prior_prec_init: float = Field(1.0, gt=0)


class LastLayerMLBlock(Settings):
    """Last-layer ML (Schwöbel et al. 2021; methods/last_layer_gp.py): a sparse GP on the CNN's features."""

    n_inducing: int = Field(1200, ge=1, description="inducing points (at most n_train)")
    orbit_size: int = Field(120, ge=1, description="augmentation samples per image in training")
    eval_orbit_size: int | None = Field(
        None, ge=1, description="augmentation samples per image in evaluations (null = orbit_size)"
    )
    lik_samples: int = Field(8, ge=1, description="latent draws of the ELBO's expected log-likelihood")
    eval_lik_samples: int = Field(32, ge=1, description="latent draws of the predictive")
    gp_lr: float = Field(
        0.01, gt=0, description="Adam learning rate of variational parameters, inducing points and kernel"
    )
    aug_lr: float = Field(0.001, gt=0, description="Adam learning rate of psi")
    eval_batch_size: int = Field(200, ge=1)
    curve_test_size: int | None = Field(
        None, ge=1, description="test images of the curve rows (null = all); the final metrics use all"
    )
    pretrain_steps: int = Field(
        1000, ge=0, description="stage 1 steps, the CNN with its softmax layer by cross-entropy (0 = none)"
    )
    gp_warmup_steps: int = Field(
        500, ge=0, description="stage 2 steps, the GP alone on the pretrained features; the rest is joint"
    )
    jitter: float | None = Field(None, gt=0, description="K_uu jitter (null = gpytorch's default for the dtype)")
    lengthscale_init: float | None = Field(
        None, gt=0, description="initial RBF lengthscale (null = the median distance of the inducing features)"
    )


class ValidationOptBlock(Settings):
    """Validation-set optimisation (methods/validation_opt.py): its finetune phase after the search."""

    finetune_epochs: int = Field(20, ge=0, description="epochs on all data with psi fixed (0 = no finetuning)")
    finetune_lr: float = Field(
        0.01, gt=0, description="SGD learning rate of the finetune phase (the search's other optimiser settings)"
    )
    finetune_lr_schedule: Literal["constant", "cosine"] | None = Field(
        None, description="schedule of the finetune phase (null = the search's lr_schedule)"
    )


class AffineSettings(Settings):
    """Grid axes (an experiment uses the ones it needs; the rest come from settings), data, model and optimiser,
    psi (the augmentation, or a Wide-ResNet's stem and first two stages: methods/feature_extractor.py), and a
    block of settings for each method that has its own (its entry's `blocks`; a cell keeps its own method's block)."""

    dataset: Literal["mnist", "fashion_mnist", "cifar10", "tinyimagenet"]
    method: Method
    n_train: int = Field(ge=1)
    seed: int
    chunk_proportions: list[Proportion] = Field(min_length=2)
    lr: float = Field(gt=0)
    batch_size: int = Field(ge=1)
    n_steps: int = Field(ge=1)
    eval_every: int = Field(ge=0)
    rotated: bool = False
    param_proportions: list[Proportion] | None = Field(None, min_length=2)
    sample: int = Field(0, description="index of a random-search draw (method `random`)")
    n_test: int | None = Field(
        None, ge=1, description="test examples evaluated (a fixed random subset, data_seed); null = the whole test set"
    )
    n_eval_train: int = Field(0, ge=0, description="training examples also evaluated (fixed subset; 0 = none)")
    data_seed: int = Field(0, ge=0)
    rotation_seed: int = Field(0, ge=0, description="seed of the rotated variant (one fixed rotation per image)")
    eval_seed: int = Field(0, ge=0)
    model: Literal["mnist_cnn", "fixup_resnet8", "fixup_resnet14", "resnet50_gn", "wrn", "wrn20_gn"] = "mnist_cnn"
    model_kwargs: dict = Field(default_factory=dict)
    optimizer: Literal["adam", "sgd"] = "adam"
    momentum: float = Field(0.9, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    wd_scaling: Literal["reciprocal", "sqrt", "none"] = "reciprocal"
    lr_schedule: Literal["constant", "cosine"] = "constant"
    lr_cosine_final_factor: float = Field(
        0.01, gt=0, le=1, description="cosine: the final learning rate as a fraction of lr (100x decay, App. I.4)"
    )
    lr_cosine_steps: int | None = Field(
        None,
        ge=1,
        description="cosine decay over the first this many steps, then the final learning rate held (null = all steps)",
    )
    rotated_steps_factor: float = Field(1.0, gt=0, description="n_steps is multiplied by this for rotated data")
    rotated_n_steps: int | None = Field(
        None, ge=1, description="iterations for rotated data (overrides n_steps and rotated_steps_factor)"
    )
    eval_batch_size: int = Field(1000, ge=1)
    psi: Literal["augmentation", "feature_extractor"] = Field(
        "augmentation",
        description="hyperparameters of partitioned / validation_opt: the augmentation's parameters, or the stem and "
        "first two stages of a Wide-ResNet (Table 3)",
    )
    augmentation: Literal["schwobel", "immer", "augerino"] = Field(
        "schwobel",
        description="parametrisation of psi for partitioned / partitioned_ens / diff_laplace / last_layer_ml / random"
        " / retrain / fixed",
    )
    aug_init: float = Field(0.0, ge=0, description="initial half-width of every transformation (schwobel / immer)")
    aug_samples: int = Field(20, ge=1, description="augmentation samples averaged over in training")
    eval_aug_samples: int | None = Field(None, ge=1)
    hyper_lr: float | None = Field(
        None, gt=0, description="Adam learning rate of psi (partitioned, partitioned_ens, validation_opt)"
    )
    augerino: AugerinoBlock = Field(
        default_factory=AugerinoBlock,
        description="method augerino's settings (the other methods' cells drop this block)",
    )
    diff_laplace: DiffLaplaceBlock = Field(
        default_factory=DiffLaplaceBlock,
        description="method diff_laplace's settings (the other methods' cells drop this block)",
    )
    last_layer_ml: LastLayerMLBlock = Field(
        default_factory=LastLayerMLBlock,
        description="method last_layer_ml's settings (the other methods' cells drop this block)",
    )
    validation_opt: ValidationOptBlock = Field(
        default_factory=ValidationOptBlock,
        description="method validation_opt's settings (the other methods' cells drop this block)",
    )
    partition_scheme: Literal["random", "node"] = "random"
    partition_default: Literal["init", "zero"] = "init"
    ens_update: Literal["all", "sample"] = Field(
        "all", description="Partitioned (Ens.): all networks step every iteration (all) or one sampled network (sample)"
    )
    lml_eval_n: int = Field(
        0, ge=0, description="examples per chunk for the LML estimate in evaluations (0 = not computed)"
    )
    random_ranges: dict | None = Field(
        None, description="upper limits of the random-search ranges, by transformation name; 'default' for the rest"
    )
    random_seed: int = Field(0, ge=0)
    fixed_ranges: dict | None = None
    source_experiment: str | None = Field(
        None,
        description="method retrain: the experiment whose cell (same coordinates, method source_method) found the "
        "ranges",
    )
    source_method: str = "partitioned"

    @model_validator(mode="after")
    def _psi_and_chunks(self):
        if self.psi == "feature_extractor" and self.method not in PSI_FEATURE_METHODS:
            raise ValueError(
                "affine_invariance: psi 'feature_extractor' is learned by "
                f"{', '.join(PSI_FEATURE_METHODS)} only, not '{self.method}'"
            )
        if self.method == "validation_opt" and len(self.chunk_proportions) != 2:
            raise ValueError(
                "affine_invariance: validation_opt needs two chunk_proportions [train, validation], "
                f"got {list(self.chunk_proportions)}"
            )
        return self

    @property
    def params(self) -> list[float]:
        """Parameter proportions of the partitions (default: the chunk proportions)."""
        p = self.param_proportions if self.param_proportions is not None else self.chunk_proportions
        return [float(v) for v in p]

    @property
    def chunks(self) -> list[float]:
        return [float(v) for v in self.chunk_proportions]

    @property
    def eval_samples(self) -> int:
        return int(self.eval_aug_samples if self.eval_aug_samples is not None else self.aug_samples)

    @property
    def steps(self) -> int:
        """`n_steps`; for rotated data `rotated_n_steps` if set, else `n_steps * rotated_steps_factor`."""
        if self.rotated and self.rotated_n_steps is not None:
            return int(self.rotated_n_steps)
        factor = float(self.rotated_steps_factor) if self.rotated else 1.0
        return int(round(int(self.n_steps) * factor))

    @property
    def partition_updates(self) -> int:
        """Expected parameter updates of the least-updated partition: each step updates partition k with
        probability u_k, the normalised chunk size (App. I.1), so min_k u_k x steps; every step for a method that
        does not partition its network."""
        if self.method not in CHUNKED:
            return self.steps
        chunks = self.chunks
        return int(round(self.steps * min(chunks) / sum(chunks)))

    @property
    def finetune_steps(self) -> int:
        """Steps of validation_opt's finetune phase: finetune_epochs epochs of all n_train examples."""
        if self.method != "validation_opt":
            return 0
        epochs = int(self.validation_opt.finetune_epochs)
        return epochs * (int(self.n_train) // min(int(self.batch_size), int(self.n_train)))


class AffineInvariancePlan(KindPlan):
    name = "affine_invariance"
    title = "affine_invariance experiments (learned affine augmentations: Figs. 3, 5-9, Tables 1-3)"
    Settings = AffineSettings
    axes = ("dataset", "rotated", "method", "n_train", "param_proportions", "chunk_proportions", "sample", "seed")
    build_target = "reprokit.builders.affine_invariance:build"

    def needs(self, st) -> tuple:
        return METHOD_TABLE[st.method].needs

    def n_steps(self, cell) -> int:
        st = self.typed_settings(cell)
        return st.steps + st.finetune_steps

    def derived(self, cell) -> dict:
        st = self.typed_settings(cell)
        return {"steps": st.steps, "partition_updates": st.partition_updates}

    def required_variants(self, cell) -> dict:
        st = self.typed_settings(cell)
        ds, out = str(st.dataset), {}
        if st.rotated:
            out["rotated"] = (ds, variants.variant_filename("rotated", seed=int(st.rotation_seed)))
        if st.method in CHUNKED:
            out["chunks"] = (
                ds,
                variants.variant_filename("chunks", n=int(st.n_train), proportions=st.chunks, seed=int(st.seed)),
            )
        else:
            out["subset"] = (ds, variants.variant_filename("subset", n=int(st.n_train), seed=int(st.seed)))
        return out

    def required_cells(self, cell) -> dict:
        """{name: (experiment, coords)} of cells whose metrics.json this cell reads (method `retrain`)."""
        st = self.typed_settings(cell)
        if st.method != "retrain":
            return {}
        if not st.source_experiment:
            raise ConfigError(f"{cell.rel_dir}: method 'retrain' needs the setting 'source_experiment'")
        return {"found": (st.source_experiment, {**cell.coord_dict, "method": st.source_method})}

    def cost_parts(self, cell) -> CellWork:
        st = self.typed_settings(cell)
        model, method = st.model, st.method
        n, B, S = st.steps, int(st.batch_size), int(st.aug_samples)
        S_eval = st.eval_samples
        step = METHOD_TABLE[method].step(st)
        if method == "baseline":  # no augmentation: one sample
            parts = [Part(model, step, B, n)]
        elif method == "partitioned_ens":  # C networks step ("all"), then one hyper update
            per = len(st.chunks) if st.ens_update == "all" else 1
            parts = [Part(model, step, B * S, n * per), Part(model, "hyper", B * S, n)]
        elif method == "diff_laplace":  # MAP steps, then every `marglik_every` steps the KFAC marginal likelihood
            dl = st.diff_laplace
            rounds = sum(1 for k in range(1, n + 1) if k >= dl.burnin and k % dl.marglik_every == 0)
            images = dl.marglik_batches * (dl.marglik_batch_size or B) * dl.n_aug_marglik
            parts = [Part(model, step, B * S, n), Part(model, "lila_hyper", images, rounds * dl.marglik_steps)]
        elif method == "validation_opt":  # a weight step and a psi step, each a full forward/backward; then finetuning
            parts = [Part(model, step, B * S, n), Part(model, "standard", B * S, st.finetune_steps)]
        elif method == "last_layer_ml":  # CNN features of B x orbit images + the sparse GP; evaluated at its orbit size
            S, S_eval = st.last_layer_ml.orbit_size, st.last_layer_ml.eval_orbit_size or st.last_layer_ml.orbit_size
            parts = [Part(model, step, B * S, n)]
        else:  # partitioned, augerino (psi in the same backward), random, retrain, fixed
            parts = [Part(model, step, B * S, n)]
        n = self.n_steps(cell)  # validation_opt: search + finetune steps
        every = int(st.eval_every or 0)
        n_evals = (n // every if every > 0 else 0) + 1
        n_test = st.n_test or IMAGE_TEST_SIZE.get(str(st.dataset), 10000)
        n_eval_train = int(st.n_eval_train or 0)
        parts.append(
            Part(
                model, "standard", B * S, n_evals * EVAL_FORWARD_SHARE * (int(n_test) + n_eval_train) * S_eval / (B * S)
            )
        )
        return CellWork(n, parts)


PLAN = register(AffineInvariancePlan())
