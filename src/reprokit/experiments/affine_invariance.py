"""Learned affine augmentations on image classification (partitioned paper: Figs. 3, 5-9).

Grid axes (an experiment uses the ones it needs; the rest come from `settings`):
  dataset            registry name (mnist, cifar10, tinyimagenet)
  rotated            false | true: the `rotated` variant (each image rotated once by an angle
                     ~ U[-pi, pi], fixed; RotMNIST = rotated mnist, App. I.5: all 60k examples)
  method             baseline     standard training, no augmentation
                     augerino     Augerino (safe variant by default), methods/augerino.py
                     partitioned  partitioned network, psi = augmentation ranges (App. I.1)
                     partitioned_ens  C separate networks, methods/partitioned_ensemble.py
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

All methods average the predictive probabilities over `aug_samples` augmentation draws in training
and `eval_aug_samples` in evaluation (paper: 20 for both); evaluation uses a fixed test subset of
`n_test` examples (null: all) and a generator re-seeded at every evaluation.

Cells that depend on another cell's result declare it in `required_cells(cell)`
({name: (experiment, coords)}); the pipeline runs that cell first and hands its metrics.json path to
this cell as `settings["_inputs"][name]` (workflow/rules/cells.smk).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import numpy as np

from ..data import registry, variants
from .. import seeds
from .._lazy import lazy_import
from . import CellContext, Run

if TYPE_CHECKING:  # annotations only; the modules load when a cell runs
    from torch import nn

    from ..methods.common import TaskData

torch = lazy_import("torch")  # executed on first use: the DAG imports this module but runs no tensor code

METHODS = ("baseline", "augerino", "partitioned", "partitioned_ens", "random", "retrain", "fixed")
CHUNKED = ("partitioned", "partitioned_ens")
FIXED = ("random", "retrain", "fixed")


# ----------------------------------------------------------------------------------------------
# cell -> values


def _value(cell, key, default=None):
    """An axis value if the experiment has that axis, else the setting, else `default`."""
    c = cell.coord_dict
    if key in c:
        return c[key]
    return cell.settings.get(key, default)


def _method(cell) -> str:
    m = _value(cell, "method")
    if m not in METHODS:
        raise ValueError(f"affine_invariance: method '{m}' unknown (valid: {', '.join(METHODS)})")
    return m


def _dataset(cell) -> str:
    return str(_value(cell, "dataset"))


def _rotated(cell) -> bool:
    return bool(_value(cell, "rotated", False))


def _chunk_props(cell) -> list[float]:
    return [float(v) for v in _value(cell, "chunk_proportions")]


def _param_props(cell) -> list[float]:
    p = _value(cell, "param_proportions")
    return [float(v) for v in (p if p is not None else _chunk_props(cell))]


def n_steps_of(cell) -> int:
    """`n_steps`; for rotated data `rotated_n_steps` if set, else `n_steps * rotated_steps_factor`."""
    s = cell.settings
    if _rotated(cell) and s.get("rotated_n_steps") is not None:
        return int(s["rotated_n_steps"])
    factor = float(s.get("rotated_steps_factor", 1)) if _rotated(cell) else 1.0
    return int(round(int(s["n_steps"]) * factor))


def required_variants(cell) -> dict:
    ds, seed, n = _dataset(cell), int(_value(cell, "seed")), int(_value(cell, "n_train"))
    out = {}
    if _rotated(cell):
        out["rotated"] = (ds, variants.variant_filename("rotated", seed=int(cell.settings.get("rotation_seed", 0))))
    if _method(cell) in CHUNKED:
        out["chunks"] = (ds, variants.variant_filename("chunks", n=n, proportions=_chunk_props(cell), seed=seed))
    else:
        out["subset"] = (ds, variants.variant_filename("subset", n=n, seed=seed))
    return out


def required_cells(cell) -> dict:
    """{name: (experiment, coords)} of cells whose metrics.json this cell reads (method `retrain`)."""
    if _method(cell) != "retrain":
        return {}
    source = cell.settings.get("source_experiment")
    if not source:
        raise ValueError(f"{cell.rel_dir}: method 'retrain' needs the setting 'source_experiment'")
    coords = dict(cell.coord_dict)
    coords["method"] = cell.settings.get("source_method", "partitioned")
    return {"found": (source, coords)}


# ----------------------------------------------------------------------------------------------
# data, model, augmentation


def load_data(cell, ctx: CellContext) -> tuple[TaskData, torch.Tensor | None]:
    """Training (sub)set, test (sub)set, and chunk ids for chunked methods."""
    from ..methods.common import TaskData
    s = cell.settings
    bundle = registry.load(_dataset(cell), ctx.mirrors, cache_dir=ctx.cache_dir, download=ctx.download)
    rotated = variants.load_variant(ctx.variant("rotated")) if _rotated(cell) else None
    key = "chunks" if _method(cell) in CHUNKED else "subset"
    bundle = variants.apply_variants(bundle, subset=variants.load_variant(ctx.variant(key)), rotated=rotated)
    x_test, y_test = bundle.x_test, bundle.y_test
    n_test = s.get("n_test")
    if n_test is not None and int(n_test) < x_test.shape[0]:
        idx = torch.as_tensor(variants.subset_indices(x_test.shape[0], int(n_test), int(s.get("data_seed", 0))))
        x_test, y_test = x_test[idx], y_test[idx]
    data = TaskData(bundle.x_train, bundle.y_train, x_test, y_test, task="classification", n_classes=bundle.n_classes)
    chunks = bundle.meta.get("chunks")
    return data, (torch.as_tensor(chunks).long() if chunks is not None else None)


def make_model(cell, data: TaskData) -> nn.Module:
    from ..models.registry import build_model
    s = cell.settings
    kw = dict(s.get("model_kwargs") or {})
    return build_model(s.get("model", "mnist_cnn"), **kw)


def make_augmentation(cell, kind: str | None = None):
    from ..augment.affine import build_augmentation
    s = cell.settings
    kind = kind or s.get("augmentation", "schwobel")
    if kind == "augerino":
        return build_augmentation("augerino", init_raw=float(s.get("augerino_init_raw", 0.0)))
    return build_augmentation(kind, init=float(s.get("aug_init", 0.0)))


def random_ranges(cell, names) -> dict[str, float]:
    """Ranges of random-search draw `sample`: U(0, random_ranges[name]) each (`default` for the rest)."""
    s = cell.settings
    limits = dict(s.get("random_ranges") or {"rotation": math.pi, "default": 0.5})
    rng = np.random.default_rng([int(s.get("random_seed", 0)), int(_value(cell, "sample", 0))])
    u = rng.uniform(0.0, 1.0, len(names))
    return {n: float(u[i] * limits.get(n, limits.get("default", 0.5))) for i, n in enumerate(names)}


def found_ranges(cell, names) -> tuple[dict[str, float] | None, str]:
    """The ranges the source cell found (metrics aug_<name>); (None, reason) if it did not complete."""
    inputs = cell.settings.get("_inputs") or {}
    if "found" not in inputs:
        raise ValueError(f"{cell.rel_dir}: method 'retrain' needs settings._inputs.found (the source cell's "
                         "metrics.json, given by the pipeline; see required_cells)")
    with open(inputs["found"]) as f:
        record = json.load(f)
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
    from ..methods.common import log_likelihood

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


def build(cell, ctx: CellContext) -> Run:
    from ..methods.augerino import AugerinoTraining
    from ..methods.augmented import SeededAugmentedModel, make_evaluator, predict_augmented, ranges_metrics
    from ..methods.partitioned import PartitionedConfig, PartitionedTraining
    from ..methods.partitioned_ensemble import PartitionedEnsembleTraining
    from ..methods.standard import OptimConfig, StandardTraining
    from ..partition import partition
    s = cell.settings
    rt = ctx.runtime
    method, seed = _method(cell), int(_value(cell, "seed"))
    data, chunk_ids = load_data(cell, ctx)
    data = rt.to(data)  # once: the whole (sub)set lives on the device
    chunk_ids = chunk_ids.to(rt.device) if chunk_ids is not None else None
    n_steps, eval_every = n_steps_of(cell), int(s["eval_every"])
    optim = OptimConfig(optimizer=s.get("optimizer", "adam"), lr=float(s["lr"]), momentum=float(s.get("momentum", 0.9)),
                        weight_decay=float(s.get("weight_decay", 0.0)), batch_size=int(s["batch_size"]),
                        lr_schedule=s.get("lr_schedule", "constant"))
    S, S_eval = int(s.get("aug_samples", 20)), int(s.get("eval_aug_samples", s.get("aug_samples", 20)))
    eval_seed = int(s.get("eval_seed", 0))
    n_eval_train = int(s.get("n_eval_train", 0))
    train_eval = None
    if n_eval_train > 0:
        k = min(n_eval_train, data.n_train)
        idx = torch.as_tensor(variants.subset_indices(data.n_train, k, seeds.stream_seed(eval_seed, "train_eval_subset")))
        idx = idx.to(rt.device)
        train_eval = (data.x_train[idx], data.y_train[idx])
    info = {"n_train": data.n_train, "n_test": int(data.x_test.shape[0]), "n_steps": n_steps, "aug_samples": S,
            "eval_aug_samples": S_eval}
    torch.manual_seed(seeds.stream_seed(seed, "init"))
    gen = seeds.generator(seed, "augment", rt.device)  # augmentation draws in training

    def evaluator(net, aug, extra=None):
        def more():
            out = ranges_metrics(aug)
            if extra is not None:
                out.update(extra())
            return out

        return make_evaluator(net, data.x_test, data.y_test, S_eval, eval_seed, train_eval,
                              int(s.get("eval_batch_size", 1000)), more)

    if method == "partitioned_ens":
        aug = make_augmentation(cell)
        c = len(_chunk_props(cell))
        nets = [rt.model(SeededAugmentedModel(make_model(cell, data), aug, S, gen)) for _ in range(c)]
        def predict_k(k, x):
            return predict_augmented(nets[k - 1], x, S_eval, seeds.generator(eval_seed, "eval_lml", rt.device))

        lml = _lml_fn(predict_k, data, chunk_ids, c, int(s.get("lml_eval_n", 0)))
        m = PartitionedEnsembleTraining(nets, list(aug.parameters()), data, chunk_ids, optim, n_steps, seed,
                                        hyper_lr=float(s["hyper_lr"]), update=s.get("ens_update", "all"),
                                        evaluate_fn=evaluator(nets[-1], aug, lml))
        info.update(chunk_sizes=m.chunk_sizes, ens_update=m.update)
        return Run(m, n_steps, eval_every, info)

    if method == "partitioned":
        aug = make_augmentation(cell)
        cnn = make_model(cell, data)
        pprops = _param_props(cell)
        if len(pprops) != len(_chunk_props(cell)):
            raise ValueError(f"{cell.rel_dir}: {len(pprops)} parameter proportions for {len(_chunk_props(cell))} chunks")
        pmodel = partition(cnn, pprops, scheme=s.get("partition_scheme", "random"),
                           default=s.get("partition_default", "init"), seed=seeds.stream_seed(seed, "partition_masks"))
        net = rt.model(SeededAugmentedModel(pmodel, aug, S, gen))
        c = pmodel.num_partitions
        def predict_k(k, x):
            with pmodel.subnetwork(k):
                return predict_augmented(net, x, S_eval, seeds.generator(eval_seed, "eval_lml", rt.device))

        lml = _lml_fn(predict_k, data, chunk_ids, c, int(s.get("lml_eval_n", 0)))
        cfg = PartitionedConfig(chunk_proportions=_chunk_props(cell), optim=optim,
                                wd_scaling=s.get("wd_scaling", "reciprocal"), hyper_lr=float(s["hyper_lr"]))
        m = PartitionedTraining(net, pmodel, list(aug.parameters()), data, chunk_ids, cfg, n_steps, seed,
                                evaluate_fn=evaluator(net, aug, lml))
        info.update(chunk_sizes=m.chunk_sizes, param_proportions=pprops,
                    partition_sizes=[int(v) for v in pmodel.partition_sizes()])
        return Run(m, n_steps, eval_every, info)

    if method == "augerino":
        aug = make_augmentation(cell, s.get("augerino_augmentation", "augerino"))
        net = rt.model(SeededAugmentedModel(make_model(cell, data), aug, S, gen))
        m = AugerinoTraining(net, aug, data, optim, n_steps, seed, hyper_lr=float(s.get("augerino_hyper_lr", 0.05)),
                             reg_strength=float(s.get("augerino_reg", 0.01)), reg_kind=s.get("augerino_reg_kind", "safe"),
                             evaluate_fn=evaluator(net, aug))
        return Run(m, n_steps, eval_every, info)

    if method == "baseline":
        net = rt.model(SeededAugmentedModel(make_model(cell, data), None, 1, gen))
        m = StandardTraining(net, data, optim, n_steps, seed, evaluate_fn=evaluator(net, None))
        return Run(m, n_steps, eval_every, info)

    # standard training with fixed ranges: random / retrain / fixed
    aug = make_augmentation(cell)
    if method == "random":
        ranges = random_ranges(cell, aug.names)
    elif method == "retrain":
        ranges, reason = found_ranges(cell, aug.names)
        if ranges is None:
            info["not_run"] = reason
            keys = ["test_acc", "test_ll"] + [f"aug_{n}" for n in aug.names]
            return Run(_NotRun(keys), 0, 0, info)
        info["source"] = (s.get("_inputs") or {}).get("found")
    else:
        fixed = s.get("fixed_ranges")
        if fixed is None:
            raise ValueError(f"{cell.rel_dir}: method 'fixed' needs the setting 'fixed_ranges'")
        ranges = {n: float(fixed.get(n, fixed.get("default", 0.0))) for n in aug.names}
    aug.set_fixed(ranges)
    net = rt.model(SeededAugmentedModel(make_model(cell, data), aug, S, gen))
    m = StandardTraining(net, data, optim, n_steps, seed, evaluate_fn=evaluator(net, aug))
    info["fixed_ranges"] = ranges
    return Run(m, n_steps, eval_every, info)
