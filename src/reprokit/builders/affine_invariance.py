"""Learned affine augmentations on image classification (partitioned paper: Figs. 3, 5-9).

Grid axes (an experiment uses the ones it needs; the rest come from `settings`):
  dataset            registry name (mnist, cifar10, tinyimagenet)
  rotated            false | true: the `rotated` variant (each image rotated once by an angle
                     ~ U[-pi, pi], fixed; RotMNIST = rotated mnist, App. I.5: all 60k examples)
  method             baseline     standard training, no augmentation
                     augerino     Augerino (safe variant by default), methods/augerino.py
                     diff_laplace Diff. Laplace (LILA, Immer et al. 2022), methods/diff_laplace.py: psi and
                                  the prior precision on a KFAC Laplace marginal likelihood (its `diff_laplace` block)
                     last_layer_ml  Last-layer ML (Schwoebel et al. 2021), methods/last_layer_gp.py: an
                                  invariant sparse GP on the CNN's last-layer features, psi on its ELBO
                                  (its `last_layer_ml` block; its own orbit sizes instead of aug_samples)
                     partitioned  partitioned network, psi = augmentation ranges (App. I.1)
                     partitioned_ens  C separate networks, methods/partitioned_ensemble.py
                     validation_opt  validation-set optimisation (Tables 2, 3), methods/validation_opt.py:
                                  chunk_proportions = [train, validation] (the same split a partitioned
                                  cell with those proportions gets); the weights train on the training
                                  part, psi on validation minibatches; then `validation_opt.finetune_epochs` epochs on
                                  all data with psi fixed. One cell gives both rows of Table 2:
                                  test_acc etc. before finetuning, finetune_test_acc etc. after
                     random       standard training, ranges fixed, drawn uniformly from
                                  `random_ranges` (Fig. 9), one draw per `sample`
                     retrain      standard training, ranges fixed to those a `partitioned` cell found
                                  (Figs. 7-9): the source cell's metrics.json is this cell's input
                     fixed        standard training, ranges fixed to `fixed_ranges`
  n_train            training subset size (the `subset`/`chunks` variant, drawn with the cell's seed)
  param_proportions  unnormalised parameter proportions of the partitions (default: chunk proportions)
  chunk_proportions  unnormalised data chunk proportions
  sample             index of a random-search draw (method `random`)
  seed               initialisation, partition masks, minibatches, augmentation draws, and the
                     training subset / chunk assignment (baseline and partitioned cells with the same
                     seed use the same examples)

psi: `augmentation` (default): the ranges above; `feature_extractor` (Table 3, methods partitioned and
validation_opt, a Wide-ResNet model): the stem and first two stages of the network are psi, no
augmentation (methods/feature_extractor.py; a partitioned cell partitions only the last stage and head).

All methods average the predictive probabilities over `aug_samples` augmentation draws in training
and `eval_aug_samples` in evaluation (paper: 20 for both); evaluation uses a fixed test subset of
`n_test` examples (null: all) and a generator re-seeded at every evaluation.

Cells that depend on another cell's result declare it in `required_cells(cell)`
({name: (experiment, coords)}); the pipeline runs that cell first and hands its metrics.json path to
this cell as `settings["_inputs"][name]` (workflow/rules/cells.smk).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np
import torch
from torch import nn

from .. import seeds
from ..augment.affine import build_augmentation
from ..data import variants
from ..data.task import TaskData
from ..methods.augerino import AugerinoTraining, augerino_parametrisation
from ..methods.augmented import SeededAugmentedModel, make_evaluator, predict_augmented, ranges_metrics
from ..methods.common import log_likelihood
from ..methods.diff_laplace import DiffLaplaceTraining
from ..methods.feature_extractor import feature_extractor_split, partition_head
from ..methods.partitioned_ensemble import PartitionedEnsembleTraining
from ..methods.standard import OptimConfig, StandardTraining
from ..methods.validation_opt import ValidationSetOptimisation
from ..models.registry import build_model
from ..partition import PartitionedHPO, partition
from ..plan.affine_invariance import CHUNKED, METHOD_TABLE, PLAN, AffineSettings
from ..plan.methods import load_builder
from ..report.store.cells import read_record
from . import CellContext, Evaluation, Run

# ----------------------------------------------------------------------------------------------
# data, model, augmentation


def load_data(st: AffineSettings, ctx: CellContext) -> tuple[TaskData, torch.Tensor | None]:
    """Training (sub)set, test (sub)set, and chunk ids for chunked methods."""
    bundle = ctx.load(str(st.dataset))
    rotated = variants.load_variant(ctx.variant("rotated")) if st.rotated else None
    key = "chunks" if st.method in CHUNKED else "subset"
    bundle = variants.apply_variants(bundle, subset=variants.load_variant(ctx.variant(key)), rotated=rotated)
    x_test, y_test = bundle.x_test, bundle.y_test
    n_test = st.n_test
    if n_test is not None and int(n_test) < x_test.shape[0]:
        idx = torch.as_tensor(variants.subset_indices(x_test.shape[0], int(n_test), int(st.data_seed)))
        x_test, y_test = x_test[idx], y_test[idx]
    data = TaskData(bundle.x_train, bundle.y_train, x_test, y_test, task="classification", n_classes=bundle.n_classes)
    chunks = bundle.meta.get("chunks")
    return data, (torch.as_tensor(chunks).long() if chunks is not None else None)


def make_model(st: AffineSettings) -> nn.Module:

    return build_model(st.model, **dict(st.model_kwargs or {}))


def make_augmentation(st: AffineSettings, kind: str | None = None):

    kind = kind or st.augmentation
    if kind == "augerino":
        return build_augmentation("augerino", init_raw=float(st.augerino.init_raw))
    return build_augmentation(kind, init=float(st.aug_init))


def random_ranges(st: AffineSettings, names) -> dict[str, float]:
    """Ranges of random-search draw `sample`: U(0, random_ranges[name]) each (`default` for the rest)."""
    limits = dict(st.random_ranges or {"rotation": math.pi, "default": 0.5})
    rng = np.random.default_rng([int(st.random_seed), int(st.sample)])
    u = rng.uniform(0.0, 1.0, len(names))
    return {n: float(u[i] * limits.get(n, limits.get("default", 0.5))) for i, n in enumerate(names)}


def found_ranges(cell, names) -> tuple[dict[str, float] | None, str]:
    """The ranges the source cell found (metrics aug_<name>); (None, reason) if it did not complete."""
    inputs = cell.settings.get("_inputs") or {}
    if "found" not in inputs:
        raise ValueError(
            f"{cell.rel_dir}: method 'retrain' needs settings._inputs.found (the source cell's "
            "metrics.json, given by the pipeline; see required_cells)"
        )
    record = read_record(inputs["found"], require=())  # the store's reader of a cell, as the report reads it
    metrics = record.get("metrics", {})
    missing = [n for n in names if f"aug_{n}" not in metrics]
    if missing:
        raise ValueError(f"{cell.rel_dir}: source {inputs['found']} has no learned ranges {missing}")
    values = {n: float(metrics[f"aug_{n}"]) for n in names}
    if record.get("status") != "completed" or not all(math.isfinite(v) for v in values.values()):
        return None, f"source cell status {record.get('status')!r}"
    return values, ""


# ----------------------------------------------------------------------------------------------
# build


class _NotRun:
    """Stands in for a cell that cannot train (its source diverged): NaN metrics, status diverged."""

    def __init__(self, keys):
        self.keys = keys

    def train_step(self, step):
        return {"loss": float("nan")}

    def evaluate(self, step):
        return {}

    def final_metrics(self):
        return {k: float("nan") for k in self.keys}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def _lml_fn(predict_k, data: TaskData, chunk_ids: torch.Tensor, n_chunks: int, n_per_chunk: int):
    """Sum over k = 2..C of the log-likelihood of (the first n_per_chunk examples of) D_k under the
    model k-1 (Eq. 2 without the k = 1 term), or {} when n_per_chunk is 0."""

    def lml() -> dict[str, float]:
        if n_per_chunk <= 0:
            return {}
        total = 0.0
        for k in range(2, n_chunks + 1):
            idx = torch.nonzero(chunk_ids == k - 1).reshape(-1)[:n_per_chunk]
            logp = predict_k(k - 1, data.x_train[idx])
            total += float(log_likelihood(logp, data.y_train[idx], data.task).sum())
        return {"lml": total}

    return lml


def _hyper_lr(st: AffineSettings, cell) -> float:
    """`hyper_lr`, which the plan's check (run for every cell before any job) requires for these methods."""
    return float(st.hyper_lr)


def build(cell, ctx: CellContext) -> Run:
    """The cell's data, optimiser settings and evaluation, then its method's builder (plan/affine_invariance.py,
    METHOD_TABLE; random, retrain and fixed share standard training with fixed ranges)."""
    st = PLAN.typed_settings(cell)
    rt = ctx.runtime
    method, seed = st.method, int(st.seed)
    data, chunk_ids = load_data(st, ctx)
    data = rt.to(data)  # once: the whole (sub)set lives on the device
    chunk_ids = chunk_ids.to(rt.device) if chunk_ids is not None else None
    n_steps, eval_every = st.steps, int(st.eval_every)
    optim = OptimConfig(
        optimizer=st.optimizer,
        lr=float(st.lr),
        momentum=float(st.momentum),
        weight_decay=float(st.weight_decay),
        batch_size=int(st.batch_size),
        lr_schedule=st.lr_schedule,
        cosine_steps=st.lr_cosine_steps,
        cosine_final_factor=float(st.lr_cosine_final_factor),
    )
    S, S_eval = int(st.aug_samples), st.eval_samples
    eval_seed = int(st.eval_seed)
    n_eval_train = int(st.n_eval_train)
    train_eval = None
    if n_eval_train > 0:
        k = min(n_eval_train, data.n_train)
        idx = torch.as_tensor(
            variants.subset_indices(data.n_train, k, seeds.stream_seed(eval_seed, "train_eval_subset"))
        )
        idx = idx.to(rt.device)
        train_eval = (data.x_train[idx], data.y_train[idx])
    info = {
        "n_train": data.n_train,
        "n_test": int(data.x_test.shape[0]),
        "n_steps": n_steps,
        "aug_samples": S,
        "eval_aug_samples": S_eval,
    }
    if st.lr_cosine_steps is not None:
        info["lr_cosine_steps"] = int(st.lr_cosine_steps)
    torch.manual_seed(seeds.stream_seed(seed, "init"))
    gen = seeds.generator(seed, "augment", rt.device)  # augmentation draws in training

    def evaluation(net, aug, extra=None, full_network=contextlib.nullcontext) -> Evaluation:
        """Augmentation-averaged test (and train-subset) metrics of `net` with the learned ranges and
        `extra()` (the out-of-chunk LML), evaluated inside `full_network()` (a partitioned model's
        subnetwork C); the same function gives the curve rows and the final metrics."""

        def more():
            out = ranges_metrics(aug)
            if extra is not None:
                out.update(extra())
            return out

        fn = make_evaluator(net, data.x_test, data.y_test, S_eval, eval_seed, train_eval, int(st.eval_batch_size), more)

        def curve(step: int) -> dict:
            with full_network():
                return fn()

        return Evaluation(curve, lambda: curve(-1))

    shared = Shared(
        st, cell, rt, data, chunk_ids, optim, n_steps, eval_every, seed, S, S_eval, eval_seed, gen, info, evaluation
    )
    return load_builder(METHOD_TABLE[method])(shared)


@dataclasses.dataclass(frozen=True)
class Shared:
    """What each method's builder gets from `build`: the cell's settings, runtime, data (on the device) and
    each example's chunk, the optimiser settings, steps, seeds, the augmentation generator, the cell's info and
    `evaluation` (augmentation-averaged metrics of a network)."""

    st: AffineSettings
    cell: object
    rt: object
    data: TaskData
    chunk_ids: torch.Tensor | None
    optim: object
    n_steps: int
    eval_every: int
    seed: int
    S: int
    S_eval: int | None
    eval_seed: int
    gen: torch.Generator
    info: dict
    evaluation: object


def build_partitioned_ens(b: Shared) -> Run:
    """C separate networks, one per chunk (methods/partitioned_ensemble.py)."""
    aug = make_augmentation(b.st)
    c = len(b.st.chunks)
    nets = [b.rt.model(SeededAugmentedModel(make_model(b.st), aug, b.S, b.gen)) for _ in range(c)]

    def predict_k(k, x):
        return predict_augmented(nets[k - 1], x, b.S_eval, seeds.generator(b.eval_seed, "eval_lml", b.rt.device))

    lml = _lml_fn(predict_k, b.data, b.chunk_ids, c, int(b.st.lml_eval_n))
    m = PartitionedEnsembleTraining(
        nets,
        list(aug.parameters()),
        b.data,
        b.chunk_ids,
        b.optim,
        b.n_steps,
        b.seed,
        hyper_lr=_hyper_lr(b.st, b.cell),
        update=b.st.ens_update,
    )
    b.info.update(chunk_sizes=m.chunk_sizes, ens_update=m.update)
    return Run(m, b.n_steps, b.eval_every, b.info, b.evaluation(nets[-1], aug, lml))


def build_partitioned(b: Shared) -> Run:
    """A partitioned network; psi = the augmentation ranges, or the Wide-ResNet's stem (Table 3)."""
    pprops = b.st.params
    if len(pprops) != len(b.st.chunks):
        raise ValueError(f"{b.cell.rel_dir}: {len(pprops)} parameter proportions for {len(b.st.chunks)} chunks")
    masks = {
        "scheme": b.st.partition_scheme,
        "default": b.st.partition_default,
        "seed": seeds.stream_seed(b.seed, "partition_masks"),
    }
    if b.st.psi == "feature_extractor":  # Table 3: the head is partitioned, psi = stem + stages 1-2
        wrn = make_model(b.st)
        pmodel = partition_head(wrn, pprops, **masks)
        aug, net = None, b.rt.model(SeededAugmentedModel(wrn, None, 1, b.gen))
        psi = feature_extractor_split(wrn)[0]
    else:
        aug = make_augmentation(b.st)
        pmodel = partition(make_model(b.st), pprops, **masks)
        net = b.rt.model(SeededAugmentedModel(pmodel, aug, b.S, b.gen))
        psi = list(aug.parameters())
    c = pmodel.num_partitions

    def predict_k(k, x):
        with pmodel.subnetwork(k):
            return predict_augmented(net, x, b.S_eval, seeds.generator(b.eval_seed, "eval_lml", b.rt.device))

    lml = _lml_fn(predict_k, b.data, b.chunk_ids, c, int(b.st.lml_eval_n))
    m = PartitionedHPO(
        net,
        b.st.chunks,
        hyper_params=psi,
        optim=b.optim,
        wd_scaling=b.st.wd_scaling,
        hyper_lr=_hyper_lr(b.st, b.cell),
        pmodel=pmodel,
        seed=b.seed,
    ).setup(b.data, b.n_steps, b.chunk_ids)
    b.info.update(
        chunk_sizes=m.chunk_sizes,
        param_proportions=pprops,
        partition_sizes=[int(v) for v in pmodel.partition_sizes()],
    )
    full = lambda: pmodel.subnetwork(pmodel.num_partitions)  # noqa: E731
    return Run(m, b.n_steps, b.eval_every, b.info, b.evaluation(net, aug, lml, full))


def build_validation_opt(b: Shared) -> Run:
    """Validation-set optimisation, then finetuning on all data with psi fixed (Tables 2, 3)."""

    if b.st.psi == "feature_extractor":  # Table 3: psi = the Wide-ResNet's stem + stages 1-2
        wrn = make_model(b.st)
        aug, net = None, b.rt.model(SeededAugmentedModel(wrn, None, 1, b.gen))
        psi = feature_extractor_split(wrn)[0]
    else:
        aug = make_augmentation(b.st)
        net = b.rt.model(SeededAugmentedModel(make_model(b.st), aug, b.S, b.gen))
        psi = list(aug.parameters())
    ev = b.evaluation(net, aug)
    # App. I.4: "SGD with same settings, overriding only the learning rate to 0.01"; the cosine decay runs
    # over the finetune steps (the search's hold point does not apply)
    vo = b.st.validation_opt
    finetune = dataclasses.replace(
        b.optim,
        optimizer="sgd",
        lr=float(vo.finetune_lr),
        cosine_steps=None,
        lr_schedule=vo.finetune_lr_schedule or b.optim.lr_schedule,
    )
    m = ValidationSetOptimisation(
        net,
        psi,
        b.data,
        b.optim,
        b.n_steps,
        b.seed,
        hyper_lr=_hyper_lr(b.st, b.cell),
        chunk_ids=b.chunk_ids,
        finetune_epochs=int(vo.finetune_epochs),
        finetune_optim=finetune,
        evaluate_fn=ev.final,
    )
    b.info.update(split_sizes=m.split_sizes, finetune_steps=m.finetune_steps)  # b.n_steps: the search
    # the final metrics hold both rows: before finetuning (test_acc, ...) and after (finetune_test_acc, ...)
    return Run(m, m.total_steps, b.eval_every, b.info, Evaluation(ev.curve, m.final_metrics))


def build_augerino(b: Shared) -> Run:
    """Augerino (safe variant by default)."""

    ag = b.st.augerino
    aug = make_augmentation(b.st, augerino_parametrisation(ag.augmentation, b.st.augmentation))
    net = b.rt.model(SeededAugmentedModel(make_model(b.st), aug, b.S, b.gen))
    m = AugerinoTraining(
        net,
        aug,
        b.data,
        b.optim,
        b.n_steps,
        b.seed,
        hyper_lr=float(ag.hyper_lr),
        reg_strength=float(ag.reg),
        reg_kind=ag.reg_kind,
        reg_threshold=float(ag.reg_threshold),
    )
    return Run(m, b.n_steps, b.eval_every, b.info, b.evaluation(net, aug))


def build_diff_laplace(b: Shared) -> Run:
    """Diff. Laplace (LILA): psi and the prior precision on a KFAC Laplace marginal likelihood."""

    aug = make_augmentation(b.st)
    net = b.rt.model(SeededAugmentedModel(make_model(b.st), aug, b.S, b.gen))
    dl = b.st.diff_laplace
    m = DiffLaplaceTraining(
        net,
        b.data,
        b.optim,
        b.n_steps,
        b.seed,
        burnin=dl.burnin,
        marglik_every=dl.marglik_every,
        marglik_steps=dl.marglik_steps,
        marglik_batches=dl.marglik_batches,
        marglik_batch_size=dl.marglik_batch_size,
        n_aug_marglik=dl.n_aug_marglik,
        hyper_lr=dl.hyper_lr,
        hyper_final_factor=dl.hyper_final_factor,
        prior_structure=dl.prior_structure,
        prior_prec_init=dl.prior_prec_init,
        evaluate_fn=dict,
    )  # evaluated by the Run's Evaluation below
    b.info.update(n_aug_marglik=dl.n_aug_marglik, prior_structure=dl.prior_structure)
    return Run(m, b.n_steps, b.eval_every, b.info, b.evaluation(net, aug, m.hyper_metrics))


def build_last_layer_ml(b: Shared) -> Run:
    """Last-layer ML: an invariant sparse GP on the CNN's last-layer features."""
    # gpytorch, which this module pulls in, loads only in the cells that use it
    from ..methods.last_layer_gp import LastLayerGPConfig, LastLayerGPTraining, mnist_cnn_features

    if b.st.model != "mnist_cnn":
        raise ValueError(f"{b.cell.rel_dir}: method 'last_layer_ml' has a feature extractor for mnist_cnn only")
    aug = b.rt.model(make_augmentation(b.st))
    cnn = b.rt.model(make_model(b.st))
    features = mnist_cnn_features(cnn)
    ll = b.st.last_layer_ml
    cfg = LastLayerGPConfig(
        n_inducing=ll.n_inducing,
        orbit_size=ll.orbit_size,
        eval_orbit_size=ll.eval_orbit_size,
        likelihood_samples=ll.lik_samples,
        eval_likelihood_samples=ll.eval_lik_samples,
        gp_lr=ll.gp_lr,
        aug_lr=ll.aug_lr,
        eval_batch_size=ll.eval_batch_size,
        curve_test_size=ll.curve_test_size,
        pretrain_steps=min(ll.pretrain_steps, b.n_steps),
        gp_warmup_steps=ll.gp_warmup_steps,
        jitter=ll.jitter,
        lengthscale_init=ll.lengthscale_init,
    )
    m = LastLayerGPTraining(features, aug, b.data, b.optim, cfg, b.seed, head=list(cnn.children())[-1])
    b.info.update(
        aug_samples=cfg.orbit_size,
        eval_aug_samples=int(cfg.eval_orbit_size or cfg.orbit_size),
        n_inducing=min(cfg.n_inducing, b.data.n_train),
    )
    # the GP's own predictive (invariant kernel, its orbit sizes) gives test_acc / test_ll and aug_<name>
    return Run(m, b.n_steps, b.eval_every, b.info, Evaluation.of(m))


def build_baseline(b: Shared) -> Run:
    """Standard training, no augmentation."""
    net = b.rt.model(SeededAugmentedModel(make_model(b.st), None, 1, b.gen))
    m = StandardTraining(net, b.data, b.optim, b.n_steps, b.seed)
    return Run(m, b.n_steps, b.eval_every, b.info, b.evaluation(net, None))


def build_fixed_ranges(b: Shared) -> Run:
    """Standard training with fixed ranges: drawn (`random`), a partitioned cell's (`retrain`), `fixed`."""
    # standard training with fixed ranges: random / retrain / fixed
    aug = make_augmentation(b.st)
    if b.st.method == "random":
        ranges = random_ranges(b.st, aug.names)
    elif b.st.method == "retrain":
        ranges, reason = found_ranges(b.cell, aug.names)
        if ranges is None:
            b.info["not_run"] = reason
            keys = ["test_acc", "test_ll"] + [f"aug_{n}" for n in aug.names]
            return Run(_NotRun(keys), 0, 0, b.info)
        b.info["source"] = (b.cell.settings.get("_inputs") or {}).get("found")
    else:
        fixed = b.st.fixed_ranges
        if fixed is None:
            raise ValueError(f"{b.cell.rel_dir}: method 'fixed' needs the setting 'fixed_ranges'")
        ranges = {n: float(fixed.get(n, fixed.get("default", 0.0))) for n in aug.names}
    aug.set_fixed(ranges)
    net = b.rt.model(SeededAugmentedModel(make_model(b.st), aug, b.S, b.gen))
    m = StandardTraining(net, b.data, b.optim, b.n_steps, b.seed)
    b.info["fixed_ranges"] = ranges
    return Run(m, b.n_steps, b.eval_every, b.info, b.evaluation(net, aug))
