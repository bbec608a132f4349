"""Validation-set optimisation (+Finetune), the baseline of Tables 2 and 3 of the partitioned paper.

The training data are split into a training part (chunk id 0) and a validation part (chunk id 1), of
given proportions: the same two-chunk assignment a partitioned run gets (``chunk_ids``), or one drawn
here from the ``validation_split`` stream. Two phases, one step counter:

* search (``n_steps`` steps): the network weights train on the training part with the usual optimiser
  (``optim``, minibatches without replacement, as ``StandardTraining``), and after every weight step
  the hyperparameters psi take one Adam step (``hyper_lr``) on the loss of a validation minibatch, as
  partitioned training alternates a parameter step with a hyper step. The weight step differentiates
  the weights only, the psi step psi only. psi are the augmentation's parameters of an
  augmentation-averaged network (Table 2; the validation loss is that network's, so it averages over
  augmentations too), or any other parameters of ``net``, e.g. a feature extractor (Table 3,
  ``methods/feature_extractor.py``).
* finetune (``finetune_epochs`` epochs of ``len(data) // batch_size`` steps): psi fixed, the weights
  continue on *all* data (training + validation part) with a fresh optimiser, by default SGD with the
  search optimiser's settings and lr 0.01 (App. I.4: "SGD with same settings, overriding only the
  learning rate to 0.01").

``total_steps`` is the loop's step count (search + finetune). The switch happens at the first finetune
step; the test metrics before it are kept, so ``final_metrics`` reports both rows of Table 2:
``test_acc`` etc. (validation-set optimisation) and ``finetune_test_acc`` etc. (+Finetune); without
finetune epochs only the former. A run whose loss turns non-finite ends through the loop's divergence
handling (status 'diverged', every metric NaN, the finetune ones included: they are NaN placeholders
until finetuning ran). ``state_dict`` holds the phase, the pre-finetune metrics and the finetune
optimiser / sampler, so a run resumes bit-identically on either side of the switch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .. import seeds
from ..data.task import TaskData
from ..data.variants import chunk_assignment
from .common import EpochSampler
from .standard import OptimConfig, StandardTraining, evaluate_classifier, make_optimizer, make_scheduler

SEARCH, FINETUNE = "search", "finetune"
FINETUNE_PREFIX = "finetune_"


def validation_split_ids(n: int, proportions: Sequence[float], seed: int) -> torch.Tensor:
    """Chunk id 0 (training part) or 1 (validation part) per example, exact counts, from the cell seed's
    ``validation_split`` stream."""
    if len(proportions) != 2:
        raise ValueError(
            f"validation-set optimisation needs two proportions [train, validation], got {list(proportions)}"
        )
    return torch.as_tensor(chunk_assignment(n, proportions, seeds.stream_seed(seed, "validation_split"))).long()


def _subset(data: TaskData, idx: torch.Tensor) -> TaskData:
    return TaskData(data.x_train[idx], data.y_train[idx], data.x_test, data.y_test, data.task, data.n_classes)


class ValidationSetOptimisation(StandardTraining):
    """``net`` maps inputs to outputs and contains psi (``hyper_params``); the other trainable parameters of
    ``net`` are the weights. ``data`` is all the training data (training + validation part)."""

    def __init__(
        self,
        net: nn.Module,
        hyper_params: list[nn.Parameter],
        data: TaskData,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        hyper_lr: float = 1e-3,
        chunk_ids: torch.Tensor | None = None,
        split: Sequence[float] = (0.9, 0.1),
        finetune_epochs: int = 20,
        finetune_optim: OptimConfig | None = None,
        evaluate_fn: Callable[[], dict[str, float]] | None = None,
    ):
        if not hyper_params:
            raise ValueError("validation-set optimisation needs hyperparameters psi to optimise")
        if chunk_ids is None:
            chunk_ids = validation_split_ids(data.n_train, split, seed)
        ids = torch.as_tensor(chunk_ids).long().reshape(-1).cpu()
        if ids.numel() != data.n_train or not bool(((ids == 0) | (ids == 1)).all()):
            raise ValueError(f"chunk_ids must hold 0 (train) or 1 (validation) for each of the {data.n_train} examples")
        train_idx, val_idx = (torch.nonzero(ids == c).reshape(-1).to(data.device) for c in (0, 1))
        if train_idx.numel() == 0 or val_idx.numel() == 0:
            raise ValueError(f"empty part: {train_idx.numel()} training and {val_idx.numel()} validation examples")
        self.split_sizes = [int(train_idx.numel()), int(val_idx.numel())]
        self.all_data, self.val_data = data, _subset(data, val_idx)
        # the weights' optimiser, scheduler and minibatches over the training part, psi's Adam: StandardTraining's
        super().__init__(
            net, _subset(data, train_idx), optim, n_steps, seed, hyper_params=hyper_params, hyper_lr=hyper_lr
        )
        # what is measured before and after finetuning (e.g. the kind's seeded, augmentation-averaged
        # test metrics); default: plain train/test metrics of `net`
        self.evaluate_fn = evaluate_fn
        hyper_ids = {id(p) for p in self.hyper_params}
        self.weight_params = [p for p in net.parameters() if p.requires_grad and id(p) not in hyper_ids]
        self.val_sampler = EpochSampler(
            self.val_data.n_train, optim.batch_size, seeds.generator(seed, "validation_minibatches", data.device)
        )
        self.seed, self.n_search_steps = int(seed), int(n_steps)
        self.finetune_epochs = int(finetune_epochs)
        self.finetune_cfg = finetune_optim or dataclasses.replace(optim, optimizer="sgd", lr=0.01)
        per_epoch = data.n_train // min(self.finetune_cfg.batch_size, data.n_train)
        self.finetune_steps = self.finetune_epochs * per_epoch
        self.total_steps = self.n_search_steps + self.finetune_steps
        self.phase = SEARCH
        self.pre_finetune: dict[str, float] | None = None
        self.ft_opt = self.ft_sched = self.ft_sampler = None

    # -- steps ----------------------------------------------------------------------------------
    def _step(self, data: TaskData, idx: torch.Tensor, params: list[torch.Tensor], opt) -> torch.Tensor:
        """One optimiser step on the loss of data[idx], differentiating `params` only."""
        self.net.train()
        loss = self.data_nll(self.net(data.x_train[idx]), data.y_train[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward(inputs=params)
        opt.step()
        return loss.detach()

    def weight_step(self) -> float:
        """Search phase: one step of the weights on a minibatch of the training part."""
        loss = self._step(self.data, self.sampler.next(), self.weight_params, self.opt)
        if self.sched is not None:
            self.sched.step()
        return loss.item()

    def psi_step(self) -> float:
        """Search phase: one Adam step of psi on a minibatch of the validation part."""
        return self._step(self.val_data, self.val_sampler.next(), self.hyper_params, self.hyper_opt).item()

    def finetune_step(self) -> float:
        """Finetune phase: one step of the weights on a minibatch of all data, psi fixed."""
        loss = self._step(self.all_data, self.ft_sampler.next(), self.weight_params, self.ft_opt)
        if self.ft_sched is not None:
            self.ft_sched.step()
        return loss.item()

    def train_step(self, step: int) -> dict[str, float]:
        if step >= self.n_search_steps and self.finetune_epochs > 0:
            if self.phase == SEARCH:
                self.start_finetune()
            return {"loss": self.finetune_step()}
        loss = self.weight_step()
        val_loss = self.psi_step()
        # a non-finite validation loss is a divergence too (psi would poison the next weight step)
        return {"loss": loss if math.isfinite(val_loss) else val_loss, "val_loss": val_loss}

    def start_finetune(self, record: bool = True) -> None:
        """Switch to the finetune phase: keep the current metrics (``record``), fix psi, and build the
        finetune optimiser and its sampler over all data."""
        if record:
            self.pre_finetune = dict(self.evaluate(-1))
        for p in self.hyper_params:
            p.requires_grad_(False)
        cfg = self.finetune_cfg
        self.ft_opt = make_optimizer(self.weight_params, cfg)
        self.ft_sched = make_scheduler(self.ft_opt, cfg, self.finetune_steps)
        self.ft_sampler = EpochSampler(
            self.all_data.n_train,
            cfg.batch_size,
            seeds.generator(self.seed, "finetune_minibatches", self.all_data.device),
        )
        self.phase = FINETUNE

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate(self, step: int) -> dict[str, float]:
        if self.evaluate_fn is not None:
            return self.evaluate_fn()
        return evaluate_classifier(self.net, self.all_data)

    def final_metrics(self) -> dict[str, float]:
        """Before finetuning: the metrics as they are (plus NaN ``finetune_*`` placeholders when finetune
        epochs were asked for, i.e. the run ended before them); after: the pre-finetune metrics and the
        current ones prefixed ``finetune_``."""
        now = self.evaluate(-1)
        if self.phase == FINETUNE:
            return {**self.pre_finetune, **{FINETUNE_PREFIX + k: v for k, v in now.items()}}
        if self.finetune_epochs > 0:
            return {**now, **{FINETUNE_PREFIX + k: math.nan for k in now}}
        return now

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {
            **super().state_dict(),
            "val_sampler": self.val_sampler.state_dict(),
            "phase": self.phase,
            "pre_finetune": self.pre_finetune,
        }
        if self.phase == FINETUNE:
            state["finetune"] = {
                "opt": self.ft_opt.state_dict(),
                "sampler": self.ft_sampler.state_dict(),
                "sched": self.ft_sched.state_dict() if self.ft_sched is not None else None,
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.val_sampler.load_state_dict(state["val_sampler"])
        if state["phase"] == FINETUNE:
            if self.phase == SEARCH:
                self.start_finetune(record=False)
            ft = state["finetune"]
            self.ft_opt.load_state_dict(ft["opt"])
            self.ft_sampler.load_state_dict(ft["sampler"])
            if self.ft_sched is not None:
                self.ft_sched.load_state_dict(ft["sched"])
        elif self.phase == FINETUNE:
            raise ValueError("cannot load a search-phase state into a method that is already finetuning")
        self.pre_finetune = state["pre_finetune"]
