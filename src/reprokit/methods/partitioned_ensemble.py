"""Partitioned (Ens.): C separate networks instead of one partitioned network (Fig. 3a).

Sec. 5 of the paper: "instead of partitioning a single network, we train C different networks where
network k is fit on data D_1:k. This serves as an upper bound on the performance of the partitioned
networks." The hyperparameters psi (shared by all networks, e.g. one augmentation module) are learned
with the same LML objective (Eq. 2 / 4) as partitioned networks, with network k-1 in the role of
subnetwork k-1.

One iteration:
* parameter step(s), networks updated with their own optimisers on minibatches drawn with
  replacement from D_1:k:
  - ``update="all"`` (default): every network k = 1..C takes one step on its own minibatch, so every
    network is trained for the full number of iterations (the "upper bound" reading);
  - ``update="sample"``: k ~ Cat(u) and only network k steps (the compute of a partitioned network;
    network k then gets a fraction u_k of the iterations).
* hyper step (when there are hyperparameters): k ~ Cat(u_2..u_C) renormalised, a minibatch from
  D_k, the loss of network k-1, one Adam step on psi. The networks' weights do not change here.

Reported metrics are those of network C (trained on all of D), as the paper's comparison is to the
full subnetwork C of a partitioned network; the out-of-chunk LML terms use networks 1..C-1.
Sampling follows ``reprokit.partition.PartitionSchedule`` (u = normalised chunk sizes); chunk ids are
0-based (chunk id j is D_{j+1}).
"""

from __future__ import annotations

import torch
from torch import nn

from .. import seeds
from ..data.task import TaskData
from ..partition import PartitionSchedule
from .common import log_likelihood
from .standard import OptimConfig, evaluate_classifier, make_optimizer, make_scheduler

UPDATES = ("all", "sample")


class PartitionedEnsembleTraining:
    """`nets[k-1]` maps inputs to outputs for network k; `hyper_params` may be shared by all of them."""

    def __init__(
        self,
        nets: list[nn.Module],
        hyper_params: list[nn.Parameter],
        data: TaskData,
        chunk_ids: torch.Tensor,
        optim: OptimConfig,
        n_steps: int,
        seed: int,
        hyper_lr: float = 1e-3,
        update: str = "all",
    ):
        if update not in UPDATES:
            raise ValueError(f"partitioned_ens update must be one of {UPDATES}, got {update!r}")
        self.nets, self.data, self.cfg, self.update = list(nets), data, optim, update
        self.chunk_ids = torch.as_tensor(chunk_ids, dtype=torch.long)
        c = len(self.nets)
        if c < 2:
            raise ValueError("Partitioned (Ens.) needs at least 2 networks/chunks")
        sizes = [int((self.chunk_ids == j).sum()) for j in range(c)]
        if min(sizes) == 0 or int(self.chunk_ids.max()) >= c:
            raise ValueError(f"chunk ids must cover 0..{c - 1} with non-empty chunks; sizes {sizes}")
        self.chunk_sizes = sizes
        self.hyper_params = list(hyper_params)
        hyper_ids = {id(p) for p in self.hyper_params}
        self.opts, self.scheds = [], []
        for net in self.nets:
            params = [p for p in net.parameters() if p.requires_grad and id(p) not in hyper_ids]
            opt = make_optimizer(params, optim)
            self.opts.append(opt)
            self.scheds.append(make_scheduler(opt, optim, n_steps))
        self.hyper_opt = torch.optim.Adam(self.hyper_params, lr=hyper_lr) if self.hyper_params else None
        self.schedule = PartitionSchedule(
            self.chunk_ids.to(torch.uint8), None, seeds.generator(seed, "minibatches"), device=data.device
        )
        self.gen = seeds.generator(seed, "minibatches_all", data.device)  # minibatches of update="all"
        # D_1:k as example indices (k = 1..C)
        self.prefix = [torch.cat([self.schedule.chunk_indices(j) for j in range(1, k + 1)]) for k in range(1, c + 1)]

    @property
    def num_networks(self) -> int:
        return len(self.nets)

    def _nll(self, k: int, idx: torch.Tensor) -> torch.Tensor:
        out = self.nets[k - 1](self.data.x_train[idx])
        return -log_likelihood(out, self.data.y_train[idx], self.data.task).mean()

    def _param_step(self, k: int, idx: torch.Tensor) -> float:
        net, opt = self.nets[k - 1], self.opts[k - 1]
        net.train()
        loss = self._nll(k, idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if self.scheds[k - 1] is not None:
            self.scheds[k - 1].step()
        return loss.item()

    def param_batches(self) -> list[tuple[int, torch.Tensor]]:
        """The (network k, example indices) pairs of one iteration's parameter updates."""
        bs = self.cfg.batch_size
        if self.update == "sample":
            return [self.schedule.param_step(bs)]
        out = []
        for k in range(1, self.num_networks + 1):
            pos = torch.randint(0, len(self.prefix[k - 1]), (bs,), generator=self.gen, device=self.gen.device)
            out.append((k, self.prefix[k - 1][pos]))
        return out

    def hyper_step(self) -> float:
        """One Adam step on psi with the loss of network k-1 on D_k; network weights are untouched."""
        kh, idx = self.schedule.hyper_step(self.cfg.batch_size)
        net = self.nets[kh - 2]
        net.train()
        loss = self._nll(kh - 1, idx)
        self.hyper_opt.zero_grad(set_to_none=True)
        grads = torch.autograd.grad(loss, self.hyper_params, allow_unused=True)
        for p, g in zip(self.hyper_params, grads):
            p.grad = torch.zeros_like(p) if g is None else g
        self.hyper_opt.step()
        return loss.item()

    def train_step(self, step: int) -> dict[str, float]:
        losses = {k: self._param_step(k, idx) for k, idx in self.param_batches()}
        out = {"loss": losses[max(losses)]}  # the loss of the largest network updated
        out.update({f"loss_net{k}": v for k, v in losses.items()})
        if self.hyper_opt is not None:
            out["hyper_loss"] = self.hyper_step()
        return out

    @torch.no_grad()
    def lml(self, batch_size: int = 1000) -> float:
        """Sum over k = 2..C of the log-likelihood of D_k under network k-1 (Eq. 2, without the k = 1 term)."""
        total = 0.0
        for k in range(2, self.num_networks + 1):
            net = self.nets[k - 2]
            was = net.training
            net.eval()
            idx = self.schedule.chunk_indices(k)
            for i in range(0, len(idx), batch_size):
                b = idx[i : i + batch_size]
                total += float(log_likelihood(net(self.data.x_train[b]), self.data.y_train[b], self.data.task).sum())
            net.train(was)
        return total

    def evaluate(self, step: int) -> dict[str, float]:
        return {"lml": self.lml(), **evaluate_classifier(self.nets[-1], self.data)}

    def final_metrics(self) -> dict[str, float]:
        return self.evaluate(-1)

    def state_dict(self) -> dict:
        return {
            "nets": [n.state_dict() for n in self.nets],
            "opts": [o.state_dict() for o in self.opts],
            "scheds": [s.state_dict() if s is not None else None for s in self.scheds],
            "hyper_opt": self.hyper_opt.state_dict() if self.hyper_opt is not None else None,
            "schedule": self.schedule.state_dict(),
            "gen": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        for net, s in zip(self.nets, state["nets"]):
            net.load_state_dict(s)
        for opt, s in zip(self.opts, state["opts"]):
            opt.load_state_dict(s)
        for sched, s in zip(self.scheds, state["scheds"]):
            if sched is not None:
                sched.load_state_dict(s)
        if self.hyper_opt is not None:
            self.hyper_opt.load_state_dict(state["hyper_opt"])
        self.schedule.load_state_dict(state["schedule"])
        self.gen.set_state(state["gen"])
