"""Partitioned networks as a method (Mlodozeniec et al. 2023, Sec. 3 and App. I.1): `PartitionedHPO`.

Each iteration: a parameter step (k ~ Cat(u), batch from D_1:k with replacement, update only
partition k with the partition-aware optimiser) followed, when there are hyperparameters psi, by a
hyper step (k ~ Cat(u_2..u_C), batch from D_k, loss of subnetwork k-1, Adam on psi). The LML
objective (Eq. 2, sum of out-of-chunk log-likelihoods) is evaluated on every evaluation and used for
early stopping / model selection when `early_stopping` is set; train/test metrics are those of the
full subnetwork C.

`PartitionedHPO` is both the library's front end (``fit`` / ``lml`` / ``predict``) and the pipeline's
method (``setup`` then the loop's ``train_step`` / ``evaluate``; builders/ construct it), so both run
one code path. Every argument is checked when it is given, naming it (docs/library.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from .. import seeds
from ..data.task import TaskData
from ..methods.common import log_likelihood, predict_batched
from ..methods.standard import OptimConfig, evaluate_classifier, make_scheduler
from ..typed import number, numbers_of
from .objective import lml_estimate
from .optim import _WD_SCALINGS, PartitionedAdam, PartitionedSGD
from .schedule import PartitionSchedule, chunk_assignment
from .wrap import PartitionedModel, partition

__all__ = ["PartitionedConfig", "PartitionedHPO", "hyper_update", "optimised_params", "param_update"]


def optimised_params(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The tensors an optimiser updates (what its update should differentiate, nothing more)."""
    return [p for g in opt.param_groups for p in g["params"] if p.requires_grad]


def param_update(pmodel, opt, k: int, loss_fn: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> torch.Tensor:
    """Partitioned parameter update (App. I.1): loss of subnetwork k, gradients for `params` only (the
    network weights: psi gets none, so a parameter update costs no more than a standard one), then the
    partition-aware step on partition k."""
    with pmodel.subnetwork(k):
        loss = loss_fn()
    opt.zero_grad(set_to_none=True)
    loss.backward(inputs=params)
    opt.step(k)
    return loss.detach()


def hyper_update(
    pmodel, hyper_opt, k: int, loss_fn: Callable[[], torch.Tensor], hyper_params: list[torch.Tensor]
) -> torch.Tensor:
    """Partitioned hyperparameter update (App. I.1): k >= 2 is the chunk the batch came from; the loss is
    that of subnetwork k-1 and only psi is differentiated (no weight gradients are computed)."""
    with pmodel.subnetwork(k - 1):
        loss = loss_fn()
    hyper_opt.zero_grad(set_to_none=True)
    loss.backward(inputs=hyper_params)
    hyper_opt.step()
    return loss.detach()


@dataclass
class PartitionedConfig:
    """Settings of partitioned training. ``chunk_proportions``: the data chunks' relative sizes (one per
    partition); the chunks actually used are those of the chunk ids, which must agree with them."""

    chunk_proportions: list[float]
    optim: OptimConfig = field(default_factory=OptimConfig)
    wd_scaling: str = "reciprocal"  # "reciprocal" | "sqrt" | "none" (App. I.1 / I.4)
    hyper_lr: float = 1e-3
    early_stopping: bool = False
    eval_batch_size: int = 4096

    def __post_init__(self):
        numbers_of(self, floats=("hyper_lr",), ints=("eval_batch_size",))
        if isinstance(self.chunk_proportions, (str, bytes)) or not isinstance(self.chunk_proportions, Iterable):
            raise TypeError(f"chunk_proportions must be a list of numbers, got {self.chunk_proportions!r}")
        self.chunk_proportions = [
            number("", f"chunk_proportions[{i}]", p) for i, p in enumerate(self.chunk_proportions)
        ]
        if len(self.chunk_proportions) < 2 or any(not p > 0 for p in self.chunk_proportions):
            raise ValueError(f"chunk_proportions must be at least 2 positive numbers, got {self.chunk_proportions}")
        if not isinstance(self.optim, OptimConfig):
            raise TypeError(f"optim must be an OptimConfig, got {type(self.optim).__name__}")
        if self.wd_scaling not in _WD_SCALINGS:
            raise ValueError(f"wd_scaling must be one of {_WD_SCALINGS}, got {self.wd_scaling!r}")


def _hyper_list(hyper_modules, hyper_params) -> tuple[list[nn.Parameter], list[str]]:
    """psi: the parameters of ``hyper_modules`` then ``hyper_params``, each once, and the argument naming each."""
    if isinstance(hyper_modules, nn.Module):
        hyper_modules = [hyper_modules]
    if isinstance(hyper_params, torch.Tensor):
        hyper_params = [hyper_params]
    out, names, seen = [], [], set()
    for i, m in enumerate(hyper_modules):
        if not isinstance(m, nn.Module):
            raise TypeError(f"hyper_modules[{i}] must be an nn.Module, got {type(m).__name__}")
        for name, p in m.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
                names.append(f"hyper_modules[{i}].{name}")
    for i, p in enumerate(hyper_params):
        if not isinstance(p, torch.Tensor) or not p.requires_grad:
            raise TypeError(f"hyper_params[{i}] must be a tensor that requires grad (an nn.Parameter)")
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
            names.append(f"hyper_params[{i}]")
    return out, names


def _from_loader(loader) -> tuple[torch.Tensor, torch.Tensor]:
    """All (x, y) batches of a DataLoader (any iterable of pairs), concatenated: the schedule samples the
    chunks itself, so the data are read once into memory."""
    xs, ys = [], []
    for i, batch in enumerate(loader):
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError(f"x: a DataLoader must yield (x, y) pairs; batch {i} is {type(batch).__name__}")
        xs.append(torch.as_tensor(batch[0]))
        ys.append(torch.as_tensor(batch[1]))
    if not xs:
        raise ValueError("x: the DataLoader yielded no batch")
    return torch.cat(xs), torch.cat(ys)


class PartitionedHPO:
    """Learn hyperparameters psi of ``model`` with partitioned networks (the out-of-chunk LML, Eq. 2).

    Args:
        model: the network, inputs -> outputs (logits for classification, means for regression). Either
            a plain module, which is partitioned here in place (``param_proportions``, ``scheme``,
            ``default``), or one that contains a `partition(...)`-ed model (the pipeline's builders).
            Hyperparameter modules (an input mask, an augmentation) sit inside it, on the forward path.
        chunk_proportions: the relative sizes of the C data chunks, one per partition (C >= 2).
        hyper_modules, hyper_params: psi, as modules whose parameters are hyperparameters and/or single
            parameters (a learned noise scale in ``loss_fn``, a prior precision in ``penalty``). Every one
            must reach the objective: after the first hyperparameter step one without a gradient is an error.
        optim: the weights' optimiser (`OptimConfig`); hyper_lr: Adam's learning rate for psi.
        wd_scaling: how the weight decay of partition k grows as it sees less data (App. I.1).
        task: "classification" (integer labels [N]) or "regression" (float targets [N, D]).
        n_classes: classification: the number of classes, checked against the model's output width.
        loss_fn: (output, y) -> per-example negative log-likelihood [B]; default: cross-entropy on logits,
            or a Gaussian of unit variance for regression.
        penalty: () -> scalar added to the mean loss of both steps (e.g. a negative log prior over the
            number of examples whose precision is a hyperparameter); a hyperparameter in it follows the
            gradient of that term plus the out-of-chunk log-likelihood.
        pmodel: the partitioned model, only when it is not a submodule of ``model`` (a head over shared
            weights); found inside ``model`` otherwise.
        param_proportions: partition proportions for a plain ``model`` (default ``chunk_proportions``).
        seed: an int (the pipeline's named random streams) or a torch.Generator (CPU) from which the
            partition assignment, the chunk assignment and the minibatches are drawn.
    """

    def __init__(
        self,
        model: nn.Module,
        chunk_proportions: Sequence[float],
        *,
        hyper_modules: Iterable[nn.Module] = (),
        hyper_params: Iterable[torch.Tensor] = (),
        optim: OptimConfig | None = None,
        hyper_lr: float = 1e-3,
        wd_scaling: str = "reciprocal",
        task: str = "classification",
        n_classes: int | None = None,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        penalty: Callable[[], torch.Tensor] | None = None,
        pmodel: PartitionedModel | None = None,
        param_proportions: Sequence[float] | None = None,
        scheme: str = "random",
        default: str = "init",
        seed: int | torch.Generator = 0,
        early_stopping: bool = False,
        eval_batch_size: int = 4096,
    ):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        self.cfg = PartitionedConfig(
            chunk_proportions, optim or OptimConfig(), wd_scaling, hyper_lr, early_stopping, eval_batch_size
        )
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
        self.task = task
        self.n_classes = None if n_classes is None else number("", "n_classes", n_classes, int)
        if isinstance(seed, torch.Generator):
            if seed.device.type != "cpu":
                raise ValueError("seed: pass a CPU torch.Generator (the data's device is followed by itself)")
        elif isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int or a torch.Generator, got {type(seed).__name__}")
        self.seed = seed
        self.hyper_params, self._hyper_names = _hyper_list(hyper_modules, hyper_params)
        self.loss_fn, self.penalty = loss_fn, penalty
        self.net = model
        n_chunks = len(self.cfg.chunk_proportions)
        found = [m for m in model.modules() if isinstance(m, PartitionedModel)]
        if pmodel is None and len(found) > 1:
            raise ValueError(f"model holds {len(found)} partitioned models; pass the one to train as pmodel")
        if pmodel is None and not found:
            props = self.cfg.chunk_proportions if param_proportions is None else list(param_proportions)
            if len(props) != n_chunks:
                raise ValueError(
                    f"param_proportions has {len(props)} partitions for {n_chunks} chunk_proportions: give one each"
                )
            pseed = seed if isinstance(seed, torch.Generator) else seeds.stream_seed(seed, "partition_masks")
            pmodel = partition(model, props, scheme=scheme, default=default, seed=pseed, exclude=self.hyper_params)
        elif pmodel is None:
            pmodel = found[0]
        elif param_proportions is not None:
            raise ValueError("param_proportions: the model is already partitioned (give them to partition())")
        if pmodel.num_partitions != n_chunks:
            raise ValueError(
                f"chunk_proportions has {n_chunks} chunks but the model has {pmodel.num_partitions} partitions: "
                "partition k is trained on chunks 1..k, so give one chunk per partition"
            )
        self.pmodel = pmodel
        self.data: TaskData | None = None
        self.best: dict | None = None
        self.history: list[dict[str, float]] = []
        self._checked_width = self._checked_hyper = False

    # -- data ----------------------------------------------------------------------------------
    def _check_data(self, data: TaskData) -> None:
        x, y = data.x_train, data.y_train
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            raise TypeError("x and y must be tensors (or x a DataLoader of (x, y) pairs)")
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"x has {x.shape[0]} examples but y has {y.shape[0]}")
        if data.task == "classification":
            if y.ndim != 1:
                raise ValueError(
                    f"y: classification labels must have shape [N], got {list(y.shape)} (use y.reshape(-1))"
                )
            if y.dtype.is_floating_point or y.dtype == torch.bool:
                raise TypeError(f"y: classification labels must be integer class ids (torch.long), got {y.dtype}")
            if y.numel() and int(y.min()) < 0:
                raise ValueError("y: class ids must be >= 0")
            if self.n_classes is not None and y.numel() and int(y.max()) >= self.n_classes:
                raise ValueError(f"y holds class {int(y.max())} but n_classes={self.n_classes}")
        elif y.ndim != 2 or not y.dtype.is_floating_point:
            raise ValueError(f"y: regression targets must be floats of shape [N, D], got {list(y.shape)} {y.dtype}")

    def _check_chunks(self, chunk_ids: torch.Tensor, n: int) -> list[int]:
        c = len(self.cfg.chunk_proportions)
        if chunk_ids.ndim != 1 or chunk_ids.shape[0] != n:
            raise ValueError(
                f"chunk_ids must have shape [{n}] (one id per training example), got {list(chunk_ids.shape)}"
            )
        if int(chunk_ids.min()) < 0 or int(chunk_ids.max()) >= c:
            raise ValueError(
                f"chunk_ids must lie in 0..{c - 1} for {c} chunk_proportions, got max {int(chunk_ids.max())}"
            )
        sizes = [int((chunk_ids == j).sum()) for j in range(c)]
        if min(sizes) == 0:
            raise ValueError(f"chunk_ids leave a chunk empty: chunk sizes {sizes}")
        total = sum(self.cfg.chunk_proportions)
        for j, (size, p) in enumerate(zip(sizes, self.cfg.chunk_proportions)):
            if abs(size - p / total * n) > 1 + 0.01 * n:
                raise ValueError(
                    f"chunk_ids give chunk sizes {sizes}, which disagree with chunk_proportions "
                    f"{self.cfg.chunk_proportions} (chunk {j}): give ids drawn with these proportions"
                )
        return sizes

    def setup(self, data: TaskData, n_steps: int, chunk_ids: torch.Tensor | None = None) -> PartitionedHPO:
        """Attach the training data and build the optimisers and the schedule for ``n_steps`` steps.

        ``chunk_ids``: a chunk id 0..C-1 per training example (on any device); None draws them with exact
        counts from ``chunk_proportions``. Returns self, ready for ``train_step``."""
        self._check_data(data)
        if data.task != self.task:
            raise ValueError(f"task={self.task!r} but the data's task is {data.task!r}")
        if chunk_ids is None:
            gen = self.seed if isinstance(self.seed, torch.Generator) else seeds.stream_seed(self.seed, "chunk_ids")
            chunk_ids = torch.as_tensor(chunk_assignment(data.n_train, self.cfg.chunk_proportions, gen))
        self.data = data
        self.chunk_ids = torch.as_tensor(chunk_ids).to(torch.long)
        self.chunk_sizes = self._check_chunks(self.chunk_ids, data.n_train)
        self.proportions = [s / sum(self.chunk_sizes) for s in self.chunk_sizes]
        cfg = self.cfg
        opt_kw = dict(
            lr=cfg.optim.lr,
            weight_decay=cfg.optim.weight_decay,
            chunk_sizes=self.chunk_sizes,
            wd_scaling=cfg.wd_scaling,
        )
        if cfg.optim.optimizer == "adam":
            self.opt = PartitionedAdam(self.pmodel, **opt_kw)
        elif cfg.optim.optimizer == "sgd":
            self.opt = PartitionedSGD(self.pmodel, momentum=cfg.optim.momentum, **opt_kw)
        else:
            raise ValueError(f"optimizer '{cfg.optim.optimizer}' unknown (valid: adam, sgd)")
        self.sched = make_scheduler(self.opt, cfg.optim, n_steps)  # annealed on the global step (App. I.1)
        hyper_ids = {id(p) for p in self.hyper_params}
        self.weight_params = [p for p in optimised_params(self.opt) if id(p) not in hyper_ids]
        self.hyper_opt = torch.optim.Adam(self.hyper_params, lr=cfg.hyper_lr) if self.hyper_params else None
        gen = self.seed if isinstance(self.seed, torch.Generator) else seeds.generator(self.seed, "minibatches")
        self.schedule = PartitionSchedule(self.chunk_ids.to(torch.uint8), self.proportions, gen, device=data.device)
        return self

    def fit(self, x, y: torch.Tensor | None = None, steps: int = 1000, chunk_ids=None) -> PartitionedHPO:
        """Train for ``steps`` iterations (a parameter step and a hyperparameter step each) on inputs ``x``
        [N, ...] and labels ``y`` ([N] integer classes, or [N, D] float targets), or on a DataLoader of
        (x, y) batches given as ``x``. Returns self; ``history`` holds each step's losses."""
        if y is None:
            x, y = _from_loader(x)
        steps = number("", "steps", steps, int)
        empty = x[:0]
        self.setup(TaskData(x, y, empty, y[:0], self.task, self.n_classes), steps, chunk_ids)
        for step in range(steps):
            self.history.append(self.train_step(step))
        return self

    # -- training ------------------------------------------------------------------------------
    def _batch_loss(self, idx: torch.Tensor) -> Callable[[], torch.Tensor]:
        def loss_fn():
            out = self.net(self.data.x_train[idx])
            y = self.data.y_train[idx]
            if not self._checked_width:
                self._check_width(out)
            if self.loss_fn is None:
                loss = -log_likelihood(out, y, self.data.task).mean()
            else:
                loss = self.loss_fn(out, y).mean()
            return loss if self.penalty is None else loss + self.penalty()

        return loss_fn

    def _check_width(self, out: torch.Tensor) -> None:
        self._checked_width = True
        if self.data.task != "classification":
            if out.shape[-1] != self.data.y_train.shape[-1]:
                raise ValueError(f"model gives {out.shape[-1]} outputs but y has {self.data.y_train.shape[-1]} targets")
            return
        n_classes = self.n_classes if self.n_classes is not None else self.data.n_classes
        if n_classes is not None and out.shape[-1] != n_classes:
            raise ValueError(f"n_classes={n_classes} but the model gives {out.shape[-1]} outputs")
        if out.shape[-1] <= int(self.data.y_train.max()):
            raise ValueError(
                f"y holds class {int(self.data.y_train.max())} but the model gives {out.shape[-1]} outputs"
            )

    def _check_hyper_gradients(self) -> None:
        self._checked_hyper = True
        missing = [name for p, name in zip(self.hyper_params, self._hyper_names) if p.grad is None]
        if missing:
            raise ValueError(
                f"hyperparameters {missing} got no gradient from the objective: put their module in model's "
                "forward (hyper_modules), or use them in loss_fn / penalty (hyper_params)"
            )

    def train_step(self, step: int) -> dict[str, float]:
        """One parameter step and, with hyperparameters, one hyperparameter step (``step`` is not used)."""
        self.net.train()
        bs = self.cfg.optim.batch_size
        k, idx = self.schedule.param_step(bs)
        loss = param_update(self.pmodel, self.opt, k, self._batch_loss(idx), self.weight_params)
        if self.sched is not None:
            self.sched.step()
        out = {"loss": loss.item(), "k": k}
        if self.hyper_opt is not None:
            kh, idx_h = self.schedule.hyper_step(bs)
            hyper_loss = hyper_update(self.pmodel, self.hyper_opt, kh, self._batch_loss(idx_h), self.hyper_params)
            if not self._checked_hyper:
                self._check_hyper_gradients()
            out["hyper_loss"] = hyper_loss.item()
        return out

    # -- results -------------------------------------------------------------------------------
    def lml(self) -> float:
        """The out-of-chunk log marginal-likelihood estimate (Eq. 2) on the training data: sum over k >= 2 of
        log p(D_k | subnetwork k-1)."""
        if self.data is None:
            raise RuntimeError("lml() needs data: call fit() (or setup()) first")
        self.net.eval()
        chunks = range(len(self.chunk_sizes))
        xs = [self.data.x_train[self.chunk_ids == c] for c in chunks]
        ys = [self.data.y_train[self.chunk_ids == c] for c in chunks]
        if self.loss_fn is None:
            fn = lambda out, y: log_likelihood(out, y, self.data.task)  # noqa: E731
        else:
            fn = lambda out, y: -self.loss_fn(out, y)  # noqa: E731
        value = lml_estimate(self.pmodel, xs, ys, fn, self.cfg.eval_batch_size, predict_fn=lambda _pm, x: self.net(x))
        self.net.train()
        return float(value)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs of the full network (subnetwork C) in evaluation mode: logits [N, classes] or means [N, D]."""
        was_training = self.net.training
        with self.pmodel.subnetwork(self.pmodel.num_partitions):
            self.net.eval()
            out = predict_batched(self.net, x, self.cfg.eval_batch_size)
        self.net.train(was_training)
        return out

    def evaluate(self, step: int) -> dict[str, float]:
        metrics = {"lml": self.lml()}
        with self.pmodel.subnetwork(self.pmodel.num_partitions):
            metrics.update(evaluate_classifier(self.net, self.data))
        if self.cfg.early_stopping and step >= 0:
            if self.best is None or metrics["lml"] > self.best["lml"]:
                self.best = {**metrics, "best_step": step}
        return metrics

    def final_metrics(self) -> dict[str, float]:
        last = self.evaluate(-1)
        if self.cfg.early_stopping and self.best is not None:
            return {**self.best, **{f"last_{k}": v for k, v in last.items()}}
        return last

    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "opt": self.opt.state_dict(),
            "hyper_opt": self.hyper_opt.state_dict() if self.hyper_opt else None,
            "sched": self.sched.state_dict() if self.sched else None,
            "schedule": self.schedule.state_dict(),
            "best": self.best,
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        if self.hyper_opt is not None:
            self.hyper_opt.load_state_dict(state["hyper_opt"])
        if self.sched is not None:
            self.sched.load_state_dict(state["sched"])
        self.schedule.load_state_dict(state["schedule"])
        self.best = state["best"]
