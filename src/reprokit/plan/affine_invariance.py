"""Plan of the affine_invariance kind (learned affine augmentations; partitioned paper Figs. 3, 5-9).

Build: experiments/affine_invariance.py. Methods: baseline, augerino, diff_laplace, last_layer_ml, partitioned,
partitioned_ens, validation_opt, random, retrain, fixed (see the build module's docstring). psi (the
hyperparameters partitioned / validation_opt learn) are the augmentation's parameters, or with
``psi: feature_extractor`` the stem and first two stages of a Wide-ResNet (Table 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import ConfigError
from ..data import variant_names as variants
from . import KindPlan, Settings, register
from .costs import EVAL_FORWARD_SHARE, IMAGE_TEST_SIZE, CellWork, Part

METHODS = ("baseline", "augerino", "diff_laplace", "last_layer_ml", "partitioned", "partitioned_ens", "validation_opt",
           "random", "retrain", "fixed")
CHUNKED = ("partitioned", "partitioned_ens", "validation_opt")  # the `chunks` variant (validation_opt: [train, val])
PSI = ("augmentation", "feature_extractor")
PSI_FEATURE_METHODS = ("partitioned", "validation_opt")  # the methods that learn a feature extractor
FIXED = ("random", "retrain", "fixed")


@dataclass(frozen=True)
class AffineSettings(Settings):
    # grid axes (an experiment uses the ones it needs; the rest come from settings)
    dataset: str
    method: str
    n_train: int
    seed: int
    chunk_proportions: list
    lr: float
    batch_size: int
    n_steps: int
    eval_every: int  # 0: no curve
    rotated: bool = False
    param_proportions: list | None = None  # default: the chunk proportions
    sample: int = 0  # index of a random-search draw (method `random`)
    # data
    n_test: int | None = None  # a fixed random test subset (data_seed); None: the whole test set
    n_eval_train: int = 0  # training examples also evaluated (fixed subset; 0: none)
    data_seed: int = 0
    rotation_seed: int = 0
    eval_seed: int = 0
    # model and optimiser
    model: str = "mnist_cnn"
    model_kwargs: dict = field(default_factory=dict)
    optimizer: str = "adam"
    momentum: float = 0.9
    weight_decay: float = 0.0
    wd_scaling: str = "reciprocal"
    lr_schedule: str = "constant"
    lr_cosine_steps: int | None = None  # cosine over the first lr_cosine_steps steps, then held (None: all)
    rotated_steps_factor: float = 1.0
    rotated_n_steps: int | None = None
    eval_batch_size: int = 1000
    # hyperparameters psi of partitioned / validation_opt: the augmentation, or a Wide-ResNet's stem and
    # first two stages (methods/feature_extractor.py; model must be a Wide-ResNet)
    psi: str = "augmentation"
    # augmentation
    augmentation: str = "schwobel"  # psi of partitioned / partitioned_ens / diff_laplace / last_layer_ml / fixed-range
    aug_init: float = 0.0
    aug_samples: int = 20
    eval_aug_samples: int | None = None  # default: aug_samples
    hyper_lr: float | None = None  # required by partitioned / partitioned_ens
    augerino_augmentation: str = "same"  # App. I.4: the partitioned runs' parametrisation; "augerino" = Benton's
    augerino_init_raw: float = 0.0
    augerino_hyper_lr: float = 0.05
    augerino_reg: float = 0.01
    augerino_reg_kind: str = "safe"
    # Diff. Laplace (LILA, Immer et al. 2022; methods/diff_laplace.py), units: training steps
    dl_burnin: int = 0  # steps before the first hyper step
    dl_marglik_every: int = 1  # hyper steps after every this many steps
    dl_marglik_steps: int = 1  # Adam steps on (psi, log prior precision) each time
    dl_marglik_batches: int = 1  # minibatches the marginal likelihood is computed on
    dl_marglik_batch_size: int | None = None  # default: batch_size
    dl_n_aug_marglik: int = 31  # augmentation samples in the marginal likelihood (LILA's repo: 31)
    dl_hyper_lr: float = 0.05  # Adam lr of the hyperparameters (cosine decay to lr * dl_hyper_final_factor)
    dl_hyper_final_factor: float = 0.1
    dl_prior_structure: str = "layerwise"  # one prior precision per parameter tensor, or "scalar"
    dl_prior_prec_init: float = 1.0
    # Last-layer ML (Schwoebel et al. 2021; methods/last_layer_gp.py): GP on the CNN's last-layer features
    llml_n_inducing: int = 1200  # inducing points (at most n_train)
    llml_orbit_size: int = 120  # augmentation samples per image in training
    llml_eval_orbit_size: int | None = None  # in evaluations (default: llml_orbit_size)
    llml_lik_samples: int = 8  # latent draws of the ELBO's expected log-likelihood
    llml_eval_lik_samples: int = 32  # latent draws of the predictive
    llml_gp_lr: float = 1e-2  # Adam lr of variational parameters, inducing points, kernel
    llml_aug_lr: float = 1e-3  # Adam lr of psi
    llml_eval_batch_size: int = 200  # images per evaluation batch (x orbit size feature passes)
    llml_curve_test_size: int | None = None  # test images of the curve rows (None: n_test); final uses all
    llml_pretrain_steps: int = 1000  # stage 1: CNN + softmax layer, cross-entropy (methods/last_layer_gp.py)
    llml_gp_warmup_steps: int = 500  # stage 2: GP alone on the pretrained features; then joint ELBO
    # validation-set optimisation (methods/validation_opt.py): chunk_proportions = [train, validation]; then
    # finetune_epochs epochs on all data with psi fixed (SGD, the search's settings but lr finetune_lr)
    finetune_epochs: int = 20
    finetune_lr: float = 0.01
    finetune_lr_schedule: str | None = None  # None: the search's lr_schedule, over the finetune steps
    # partitioning
    partition_scheme: str = "random"
    partition_default: str = "init"
    ens_update: str = "all"
    lml_eval_n: int = 0
    # fixed-range methods
    random_ranges: dict | None = None  # default {"rotation": pi, "default": 0.5}
    random_seed: int = 0
    fixed_ranges: dict | None = None
    source_experiment: str | None = None
    source_method: str = "partitioned"

    def __post_init__(self):
        if self.method not in METHODS:
            raise ConfigError(f"affine_invariance: method '{self.method}' unknown (valid: {', '.join(METHODS)})")
        if self.psi not in PSI:
            raise ConfigError(f"affine_invariance: psi '{self.psi}' unknown (valid: {', '.join(PSI)})")
        if self.psi == "feature_extractor" and self.method not in PSI_FEATURE_METHODS:
            raise ConfigError("affine_invariance: psi 'feature_extractor' is learned by "
                              f"{', '.join(PSI_FEATURE_METHODS)} only, not '{self.method}'")
        if self.method == "validation_opt" and len(self.chunk_proportions) != 2:
            raise ConfigError("affine_invariance: validation_opt needs two chunk_proportions [train, validation], got "
                              f"{list(self.chunk_proportions)}")

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
    def finetune_steps(self) -> int:
        """Steps of validation_opt's finetune phase: finetune_epochs epochs of all n_train examples."""
        if self.method != "validation_opt":
            return 0
        return int(self.finetune_epochs) * (int(self.n_train) // min(int(self.batch_size), int(self.n_train)))


HYPER_LR_METHODS = ("partitioned", "partitioned_ens", "validation_opt")  # learn psi with the `hyper_lr` optimiser


class AffineInvariancePlan(KindPlan):
    name = "affine_invariance"
    Settings = AffineSettings
    build_target = "reprokit.experiments.affine_invariance:build"

    def needs(self, st) -> tuple:
        return ("hyper_lr",) if st.method in HYPER_LR_METHODS else ()

    def n_steps(self, cell) -> int:
        st = self.settings(cell)
        return st.steps + st.finetune_steps

    def required_variants(self, cell) -> dict:
        st = self.settings(cell)
        ds, out = str(st.dataset), {}
        if st.rotated:
            out["rotated"] = (ds, variants.variant_filename("rotated", seed=int(st.rotation_seed)))
        if st.method in CHUNKED:
            out["chunks"] = (ds, variants.variant_filename("chunks", n=int(st.n_train), proportions=st.chunks,
                                                           seed=int(st.seed)))
        else:
            out["subset"] = (ds, variants.variant_filename("subset", n=int(st.n_train), seed=int(st.seed)))
        return out

    def required_cells(self, cell) -> dict:
        """{name: (experiment, coords)} of cells whose metrics.json this cell reads (method `retrain`)."""
        st = self.settings(cell)
        if st.method != "retrain":
            return {}
        if not st.source_experiment:
            raise ConfigError(f"{cell.rel_dir}: method 'retrain' needs the setting 'source_experiment'")
        return {"found": (st.source_experiment, {**cell.coord_dict, "method": st.source_method})}


    def cost_parts(self, cell) -> CellWork:
        st = self.settings(cell)
        model, method = st.model, st.method
        n, B, S = st.steps, int(st.batch_size), int(st.aug_samples)
        S_eval = st.eval_samples
        if method == "baseline":  # no augmentation: one sample
            parts = [Part(model, "standard", B, n)]
        elif method == "partitioned":
            parts = [Part(model, "partitioned", B * S, n)]
        elif method == "partitioned_ens":  # C networks step ("all"), then one hyper update
            per = len(st.chunks) if st.ens_update == "all" else 1
            parts = [Part(model, "standard", B * S, n * per), Part(model, "hyper", B * S, n)]
        elif method == "diff_laplace":  # MAP steps, then every `dl_marglik_every` steps the KFAC marginal likelihood
            rounds = sum(1 for k in range(1, n + 1) if k >= int(st.dl_burnin) and k % int(st.dl_marglik_every) == 0)
            images = int(st.dl_marglik_batches) * int(st.dl_marglik_batch_size or B) * int(st.dl_n_aug_marglik)
            parts = [Part(model, "standard", B * S, n),
                     Part(model, "lila_hyper", images, rounds * int(st.dl_marglik_steps))]
        elif method == "validation_opt":  # a weight step and a psi step, each a full forward/backward; then finetuning
            parts = [Part(model, "partitioned", B * S, n), Part(model, "standard", B * S, st.finetune_steps)]
        elif method == "last_layer_ml":  # CNN features of B x orbit images + the sparse GP; evaluated at its orbit size
            S, S_eval = int(st.llml_orbit_size), int(st.llml_eval_orbit_size or st.llml_orbit_size)
            parts = [Part(model, "llml", B * S, n)]
        else:  # augerino (psi in the same backward), random, retrain, fixed
            parts = [Part(model, "standard", B * S, n)]
        n = self.n_steps(cell)  # validation_opt: search + finetune steps
        every = int(st.eval_every or 0)
        n_evals = (n // every if every > 0 else 0) + 1
        n_test = st.n_test or IMAGE_TEST_SIZE.get(str(st.dataset), 10000)
        n_eval_train = int(st.n_eval_train or 0)
        parts.append(Part(model, "standard", B * S,
                          n_evals * EVAL_FORWARD_SHARE * (int(n_test) + n_eval_train) * S_eval / (B * S)))
        return CellWork(n, parts)


PLAN = register(AffineInvariancePlan())
