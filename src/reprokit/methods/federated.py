"""Federated training simulated in one process (partitioned-networks paper, Sec. 5 and App. J).

One training step is one communication round (so the loop's checkpoints resume mid-run like any
other cell):

1. the server samples ``clients_per_round`` of the ``n_clients`` clients (without replacement);
2. each sampled client downloads the server's weights (and psi), trains locally for ``local_epochs``
   epochs of its own data with plain SGD (minibatches of ``batch_size``; the last one smaller), and
   uploads what it changed;
3. the server averages the clients' deltas into a pseudo-gradient and takes one Adam step (FedOpt,
   Reddi et al. 2020, Alg. 2: unweighted mean of the deltas).

Methods (``FedConfig.method``):

``fedavg``       the weights only; dropout (if the model has it) at a fixed rate.
``augerino``     FedAvg + Augerino (Benton et al. 2020): the augmentation's parameters are trained
                 locally with the weights on NLL + strength * regulariser (safe variant by default) and
                 averaged like the weights; the server steps them with its second Adam group (``hyper_lr``).
``partitioned``  FedAvg + Partitioned (App. J.1): every client belongs to one chunk k (drawn once, in
                 the chunk proportions). For each j = k..C the client starts from the server's values and
                 trains partition j alone through subnetwork j (partitions > j at their defaults), Eq. 25;
                 it uploads only partitions k..C (the entries it changed, gathered into 1-D tensors: the
                 assignment is derived from the seed, so both sides know it and no indices travel), and,
                 for k >= 2, the gradient of psi of the loss of subnetwork k-1 on its local data (Eq. 26;
                 full local data, or ``hyper_batch_size`` examples). The server averages each weight entry
                 over the clients that uploaded it and psi gradients over the clients that sent one
                 (federated SGD for psi, server Adam at ``hyper_lr``). psi = concrete-dropout logits + the
                 augmentation's parameters. Normalisation layers' scales and biases (ResNet-9 GN) are C
                 vectors each, one per partition, combined by product / sum over 1..j in subnetwork j
                 (App. I.2); the network itself holds the full product / sum.

Communication is *measured*: every message is a list of tensors and its size is the sum of
``numel * element_size``. Downloads are the server's weights (and psi where the method has any) sent to
each sampled client; partitioned defaults (the initial values) and partition assignments are derived
from the cell's seed on both sides and are not sent.

Random draws: a client's local run for partition j (a *task*; FedAvg and Augerino have the one task
j = 1, the psi gradient of a partitioned client is task j = 0) draws its minibatch order, augmentation
uniforms and dropout noise from its own generators, the named streams ``minibatches``, ``augment`` and
``dropout_masks`` keyed by (round, client, task) (`reprokit.seeds`). The draws are made outside the model
and handed to it (``FedNet.forward(aug_uniforms=, dropout_noise=)``), so they do not depend on how the
clients are scheduled, and a resumed run needs no generator state but the client sampler's.

Client batching (``FedConfig.client_batching``; ``auto``: ``vmap`` on CUDA, ``loop`` on the CPU, decided
from the data's device):

``loop``  the tasks of a round one after the other, each a Python loop of SGD steps
          (``torch.func.grad`` of ``_loss``, then ``_sgd_step``'s update).
``vmap``  all tasks of a round at once: ``torch.func.vmap`` of the same ``_sgd_step`` over stacked per-task
          weights (and psi for Augerino), partition index j, minibatch and draws. Tasks differ in their
          number of local steps and in batch sizes; at local step s the batch holds the tasks that still
          have a step s (a task that ran out drops out and keeps its weights: no padded no-op steps), and
          each task's minibatch is padded to the largest of that step with zero-weight examples (the
          models here act on each example alone: no batch norm, so padding changes nothing but the
          floating-point summation order). The psi gradients of a round's partitioned clients are one more
          vmap over the clients' whole local data (or ``hyper_batch_size`` examples), padded the same way.
          Both paths give the same server weights to rounding (tests/test_federated.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vmap

from .. import seeds
from ..augment.affine import AffineAugmentation, augerino_regularizer
from ..augment.concrete_dropout import ConcreteDropout, concrete_dropout_parameters
from ..partition.masks import exact_counts, node_assignment, random_weight_assignment
from ..partition.wrap import NORM_TYPES
from .common import classification_metrics

METHODS = ("fedavg", "augerino", "partitioned")
BATCHING = ("loop", "vmap", "auto")


@functools.cache
def vmap_grid_sample_grad_needs_input_grad() -> bool:
    """Whether this torch fails a vmapped gradient through ``F.grid_sample`` whose *input* needs no gradient.

    torch 2.11 does (seen on a lent H100's image, torch 2.11.0+cu130, 2026-11-26, and reproduced with the
    same version on a CPU; torch 2.14 does not): the batching rule of grid_sampler_2d_backward receives an
    undefined input gradient and raises "Expected a proper Tensor but got None". Asking for the input's
    gradient as well avoids it, at the cost of that one gradient, which is dropped. A probe on tiny CPU
    tensors, once per process, rather than a version check."""

    def loss(grid, x):
        return F.grid_sample(x, grid, align_corners=False).sum()

    try:
        vmap(grad(loss))(torch.zeros(2, 1, 2, 2, 2), torch.ones(2, 1, 1, 2, 2))
    except RuntimeError:
        return True
    return False


def message_bytes(tensors) -> int:
    """Bytes of a message: the sum of numel x element size of the tensors actually sent."""
    return int(sum(t.numel() * t.element_size() for t in tensors))


class FixedDropout(nn.Module):
    """``nn.Dropout(p)`` whose uniforms can be given (``noise``, x's shape): keep where u >= p, scale 1/(1-p)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = float(p)
        self.noise: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        u = self.noise if self.noise is not None else torch.rand_like(x)
        return x * (u >= self.p).to(x.dtype) / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _given_draws_dropout(model: nn.Module) -> list[nn.Module]:
    """Replace the model's ``nn.Dropout`` by FixedDropout (same law) and return its dropout modules in
    order; a dropout kind that cannot take given draws is an error."""
    for name, child in list(model.named_children()):
        if type(child) is nn.Dropout:
            setattr(model, name, FixedDropout(child.p))
        else:
            _given_draws_dropout(child)
    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            raise TypeError(f"federated: dropout module '{name}' ({type(mod).__name__}) cannot take given draws")
        if isinstance(mod, (ConcreteDropout, FixedDropout)):
            out.append(mod)
    return out


class FedNet(nn.Module):
    """A classifier with an optional augmentation: ``forward`` returns the log of the predictive
    probabilities averaged over ``n_samples`` augmentations (``log_softmax`` without augmentation).

    In training, ``aug_uniforms`` (S, N, 6) and ``dropout_noise`` (one tensor (S, N, *shape) per dropout
    module, ``dropout_shapes``; S = 1 without augmentation) are the random draws, given by the caller."""

    def __init__(self, model: nn.Module, augmentation: AffineAugmentation | None, n_samples: int):
        super().__init__()
        self.model, self.augmentation, self.n_samples = model, augmentation, int(n_samples)
        self.dropouts = _given_draws_dropout(model)  # a plain list: not registered a second time
        self.dropout_shapes: list[tuple] | None = None

    def probe_dropout_shapes(self, x: torch.Tensor) -> list[tuple]:
        """The per-example input shape of each dropout module (one eval-mode pass of one example)."""
        shapes, hooks = (
            [],
            [m.register_forward_pre_hook(lambda _m, a: shapes.append(tuple(a[0].shape[1:]))) for m in self.dropouts],
        )
        was = self.training
        try:
            self.eval()
            with torch.no_grad():
                self.model(x[:1])
        finally:
            self.train(was)
            for h in hooks:
                h.remove()
        self.dropout_shapes = shapes
        return shapes

    @contextlib.contextmanager
    def _noise(self, noise):
        if noise is None:
            yield
            return
        try:
            for m, u in zip(self.dropouts, noise, strict=True):
                m.noise = u.reshape(u.shape[0] * u.shape[1], *u.shape[2:])
            yield
        finally:
            for m in self.dropouts:
                m.noise = None

    def forward(
        self,
        x: torch.Tensor,
        n_samples: int | None = None,
        generator: torch.Generator | None = None,
        reg_kind: str | None = None,
        aug_uniforms: torch.Tensor | None = None,
        dropout_noise=None,
    ):
        with self._noise(dropout_noise):
            if self.augmentation is None:
                logp = F.log_softmax(self.model(x), dim=-1)
            else:
                s = self.n_samples if n_samples is None else int(n_samples)
                xa = self.augmentation(x, s, generator=generator, uniforms=aug_uniforms)
                logits = self.model(xa.reshape(s * x.shape[0], *x.shape[1:]))
                logp = torch.logsumexp(F.log_softmax(logits, dim=-1).reshape(s, x.shape[0], -1), dim=0) - math.log(s)
        if reg_kind is None:
            return logp
        return logp, augerino_regularizer(self.augmentation, reg_kind)


@dataclass
class FedData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    client: torch.Tensor  # client id per training example
    x_val: torch.Tensor
    y_val: torch.Tensor
    n_clients: int


@dataclass
class FedConfig:
    """What the method reads; defaults live in one place, `reprokit.plan.federated.FederatedSettings`
    (:meth:`from_settings`)."""

    method: str
    clients_per_round: int
    local_lr: float
    local_epochs: int
    batch_size: int
    server_lr: float
    server_eps: float
    hyper_lr: float
    hyper_eps: float
    hyper_batch_size: int | None  # partitioned psi gradient: None = the client's whole local data
    chunk_proportions: list  # clients per chunk (and, by default, parameters per partition)
    param_proportions: list | None
    partition_scheme: str
    augerino_reg: float
    augerino_reg_kind: str
    eval_aug_samples: int
    eval_batch_size: int
    eval_seed: int
    last_k: int  # final metric: validation accuracy averaged over the last `last_k` evaluations
    client_batching: str  # loop | vmap | auto (vmap on CUDA, loop on the CPU)

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"federated method '{self.method}' unknown (valid: {', '.join(METHODS)})")
        if self.client_batching not in BATCHING:
            raise ValueError(f"client_batching '{self.client_batching}' unknown (valid: {', '.join(BATCHING)})")

    @classmethod
    def from_settings(cls, st, **overrides) -> FedConfig:
        """From a cell's FederatedSettings (its `augerino` block gives augerino_reg / augerino_reg_kind),
        `overrides` on top."""
        nested = {"augerino_reg": st.augerino.reg, "augerino_reg_kind": st.augerino.reg_kind}
        values = {f.name: nested[f.name] if f.name in nested else getattr(st, f.name) for f in dataclasses.fields(cls)}
        values.update(overrides)
        values["chunk_proportions"] = [float(v) for v in values["chunk_proportions"]]
        return cls(**values)


@dataclass
class _Task:
    """One client's local run for partition j (j = 0: a partitioned client's psi gradient)."""

    client: int
    j: int
    batches: list  # index tensors, one per local step
    gen_aug: torch.Generator
    gen_drop: torch.Generator


class FederatedTraining:
    """`net` (a FedNet) holds the server's values; `data` the clients' examples and the validation set."""

    def __init__(self, net: FedNet, data: FedData, cfg: FedConfig, seed: int):
        self.net, self.data, self.cfg, self.seed = net, data, cfg, int(seed)
        device = data.x_train.device
        self.batching = (
            cfg.client_batching if cfg.client_batching != "auto" else ("vmap" if device.type == "cuda" else "loop")
        )
        # vmap on a torch whose grid_sample batching rule needs the input's gradient: _loss's x (argument 3)
        # is differentiated too, and that gradient dropped (vmap_grid_sample_grad_needs_input_grad)
        self._grad_x = (
            self.batching == "vmap" and net.augmentation is not None and vmap_grid_sample_grad_needs_input_grad()
        )
        if self.batching == "vmap":
            norms = [n for n, m in net.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
            if norms:
                raise ValueError(
                    f"client_batching 'vmap' with method '{cfg.method}': batch norm ({norms[0]}) "
                    "mixes a client's padded examples; use client_batching 'loop'"
                )
        hyper = concrete_dropout_parameters(net.model) if cfg.method == "partitioned" else []
        if cfg.method != "fedavg" and net.augmentation is not None:
            hyper += list(net.augmentation.parameters())
        hyper_ids = {id(p) for p in hyper}
        for p in concrete_dropout_parameters(net.model):  # fixed-rate dropout outside partitioned
            if id(p) not in hyper_ids:
                p.requires_grad_(False)
        if net.augmentation is not None and cfg.method == "fedavg":
            net.augmentation.requires_grad_(False)
        names = {id(p): n for n, p in net.named_parameters()}
        self.hyper_names = [names[id(p)] for p in hyper]
        self.weight_names = [
            n
            for n, p in net.named_parameters()
            if id(p) not in hyper_ids and p.requires_grad and n.startswith("model.")
        ]
        params = dict(net.named_parameters())
        self.weights = {n: params[n] for n in self.weight_names}
        self.hyper = {n: params[n] for n in self.hyper_names}
        self.net_weights = dict(self.weights)  # the network's own tensors (weights may stack some, below)
        # clients
        self.client_idx = [torch.nonzero(data.client == c).reshape(-1) for c in range(int(data.n_clients))]
        self.gen_clients = seeds.generator(self.seed, "clients", device)
        self.n_aug = net.n_samples if net.augmentation is not None else 1  # S of a training forward
        net.probe_dropout_shapes(data.x_train)
        # partitioning
        self.n_chunks = len(cfg.chunk_proportions) if cfg.method == "partitioned" else 1
        if cfg.method == "partitioned":
            counts = exact_counts(int(data.n_clients), cfg.chunk_proportions)
            ids = torch.repeat_interleave(torch.arange(1, counts.numel() + 1), counts)
            g = torch.Generator().manual_seed(seeds.stream_seed(self.seed, "client_chunks"))
            self.client_chunk = ids[torch.randperm(ids.numel(), generator=g)].tolist()  # chunk of client c
            pprops = cfg.param_proportions or cfg.chunk_proportions
            if len(pprops) != self.n_chunks:
                raise ValueError(f"{len(pprops)} parameter proportions for {self.n_chunks} chunks")
            g = torch.Generator().manual_seed(seeds.stream_seed(self.seed, "partition_masks"))
            assign_fn = {"random": random_weight_assignment, "node": node_assignment}[cfg.partition_scheme]
            # App. I.2: a normalisation layer's scale / bias is C vectors, one per partition (row i-1 of a
            # (C, *shape) server tensor belongs to partition i); subnetwork k uses their product / sum over
            # 1..k. Stacked at (init, 1, ..., 1) / (init, 0, ..., 0): every subnetwork starts at the init affine.
            norm = {
                f"model.{m}.{p}": ("scale" if p == "weight" else "bias")
                for m, mod in net.model.named_modules()
                if isinstance(mod, NORM_TYPES)
                for p in ("weight", "bias")
            }
            self.stacked = {n: norm[n] for n in self.weight_names if n in norm}
            C, self.assign = self.n_chunks, {}
            for n, p in self.net_weights.items():
                if n in self.stacked:
                    fill = torch.ones if self.stacked[n] == "scale" else torch.zeros
                    rest = fill((C - 1, *p.shape), dtype=p.dtype, device=device)
                    self.weights[n] = nn.Parameter(torch.cat([p.detach().unsqueeze(0), rest]))
                    ids = torch.arange(1, C + 1, dtype=torch.uint8, device=device).reshape(C, *[1] * p.dim())
                    self.assign[n] = ids.expand(C, *p.shape).contiguous()
                else:
                    self.assign[n] = assign_fn(p.shape, pprops, generator=g).to(device)
            self.default = {n: p.detach().clone() for n, p in self.weights.items()}  # "init" defaults
        else:
            self.client_chunk = [1] * int(data.n_clients)
            self.stacked = {}
        groups = [{"params": list(self.weights.values()), "lr": cfg.server_lr, "eps": cfg.server_eps}]
        if self.hyper:
            groups.append({"params": list(self.hyper.values()), "lr": cfg.hyper_lr, "eps": cfg.hyper_eps})
        self.server_opt = torch.optim.Adam(groups)
        self.comm = {"upload_bytes": 0, "download_bytes": 0, "full_upload_bytes": 0, "clients": 0}
        self.history: list[float] = []  # validation accuracy of every evaluation (step >= 0)

    # ------------------------------------------------------------------------------------------
    # pieces

    def weight_bytes(self) -> int:
        """Bytes of the network's weights (FedAvg's upload; App. I.2's stacked affines count once)."""
        return message_bytes([p.detach() for p in self.net_weights.values()])

    def _task(self, step: int, c: int, j: int, idx: torch.Tensor, epochs: int, batch: int | None) -> _Task:
        """Task j of client c in round `step`: its minibatches (`epochs` shuffles of `idx` in batches of
        `batch`, the last smaller; None: one batch of all) and its generators, all keyed (step, c, j)."""
        keys, dev = (int(step), int(c), int(j)), idx.device
        gen = seeds.generator(self.seed, "minibatches", dev, keys)
        batches = []
        for _ in range(epochs):
            perm = idx[torch.randperm(idx.numel(), generator=gen, device=dev)]
            bs = perm.numel() if batch is None else int(batch)
            batches += [perm[i : i + bs] for i in range(0, perm.numel(), bs)]
        return _Task(
            c,
            j,
            batches,
            seeds.generator(self.seed, "augment", dev, keys),
            seeds.generator(self.seed, "dropout_masks", dev, keys),
        )

    def _tasks(self, step: int, c: int) -> tuple[list[_Task], _Task | None]:
        """Client c's local-SGD tasks (partitions k..C, or the one task of FedAvg / Augerino) and, for a
        partitioned client of chunk k >= 2, its psi-gradient task (subnetwork k-1; one batch)."""
        idx, k = self.client_idx[c], self.client_chunk[c]
        if idx.numel() == 0:
            return [], None
        e, b = int(self.cfg.local_epochs), int(self.cfg.batch_size)
        tasks = [self._task(step, c, j, idx, e, b) for j in range(k, self.n_chunks + 1)]
        psi = None
        if self.cfg.method == "partitioned" and k >= 2 and self.hyper:
            hb = self.cfg.hyper_batch_size
            psi = self._task(step, c, 0, idx, 1, None)
            if hb is not None:
                psi.batches = [psi.batches[0][: int(hb)]]
        return tasks, psi

    def _draws(self, task: _Task, n: int) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
        """A task's draws for one forward pass of n examples: augmentation uniforms (S, n, 6) and one
        dropout-noise tensor (S, n, *shape) per dropout module."""
        dt, dev, S = self.data.x_train.dtype, self.data.x_train.device, self.n_aug
        aug = None
        if self.net.augmentation is not None:
            aug = torch.rand((S, n, len(self.net.augmentation.names)), generator=task.gen_aug, dtype=dt, device=dev)
        noise = [
            torch.rand((S, n, *shape), generator=task.gen_drop, dtype=dt, device=dev)
            for shape in self.net.dropout_shapes
        ]
        return aug, noise

    def _effective(self, w: dict, j) -> dict:
        """Subnetwork j's parameters: entries of partitions <= j from `w`, the rest at their defaults
        (j an int, or a 0-dim tensor inside vmap); stacked affines reduced (product / sum of their rows)."""
        if self.cfg.method != "partitioned":
            return dict(w)
        full = isinstance(j, int) and j >= self.n_chunks
        out = {n: w[n] if full else torch.where(self.assign[n] <= j, w[n], self.default[n]) for n in w}
        for n, kind in self.stacked.items():
            if n in out:
                out[n] = out[n].prod(0) if kind == "scale" else out[n].sum(0)
        return out

    @torch.no_grad()
    def _sync_net(self) -> None:
        """The network's normalisation affines := the server's stacked ones reduced over all partitions."""
        if self.stacked:
            full = self._effective({n: self.weights[n].detach() for n in self.stacked}, self.n_chunks)
            for n in self.stacked:
                self.net_weights[n].copy_(full[n])

    def _loss(self, w: dict, psi: dict, j, x, y, wts, aug_u, noise, reg: bool):
        """Weighted NLL (weights `wts`: 1/n for a batch of n, 0 for padding) of subnetwork j, plus the
        Augerino regulariser when `reg`."""
        out = functional_call(
            self.net,
            {**self._effective(w, j), **psi},
            (x,),
            {"reg_kind": self.cfg.augerino_reg_kind if reg else None, "aug_uniforms": aug_u, "dropout_noise": noise},
        )
        logp, r = out if reg else (out, None)
        loss = -(logp.gather(-1, y.unsqueeze(-1)).squeeze(-1) * wts).sum()
        return loss + self.cfg.augerino_reg * r if reg else loss

    def _sgd_step(self, w: dict, psi: dict, j, x, y, wts, aug_u, noise):
        """One local SGD step of a task: (new weights, new psi (Augerino; else {}), loss). Partitioned:
        only the entries of partition j move (subnetwork j's gradient is already 0 above j)."""
        augerino = self.cfg.method == "augerino"
        g, loss = grad_and_value(self._loss, argnums=self._argnums((0, 1) if augerino else (0,)))(
            w, psi, j, x, y, wts, aug_u, noise, augerino
        )
        gw, gp = g[0], g[1] if augerino else {}
        lr = float(self.cfg.local_lr)
        if self.cfg.method == "partitioned":
            gw = {n: torch.where(self.assign[n] == j, gw[n], torch.zeros_like(gw[n])) for n in gw}
        return {n: w[n] - lr * gw[n] for n in w}, {n: psi[n] - lr * gp[n] for n in gp}, loss

    def _psi_grad(self, psi: dict, w: dict, j, x, y, wts, aug_u, noise) -> dict:
        """Eq. 26: the gradient of psi of subnetwork j's NLL (j = k - 1) at the server's weights."""
        return grad(self._loss, argnums=self._argnums((1,)))(w, psi, j, x, y, wts, aug_u, noise, False)[0]

    def _argnums(self, wanted: tuple) -> tuple:
        """_loss's arguments to differentiate: `wanted`, plus x (3) where this torch's vmap needs it (a gradient
        through the augmentation's grid, i.e. of psi (1), with no gradient of grid_sample's input)."""
        return (*wanted, 3) if self._grad_x and 1 in wanted else wanted

    def _run_task_loop(self, task: _Task, server_w: dict, server_h: dict) -> tuple[dict, dict, list]:
        """A task's local SGD, step after step: (weights, psi, losses)."""
        w, psi, losses = dict(server_w), dict(server_h), []
        for b in task.batches:
            aug_u, noise = self._draws(task, b.numel())
            wts = torch.full((b.numel(),), 1.0 / b.numel(), dtype=self.data.x_train.dtype, device=b.device)
            new_w, new_psi, loss = self._sgd_step(
                w, psi, task.j, self.data.x_train[b], self.data.y_train[b], wts, aug_u, noise
            )
            w, psi = new_w, {**psi, **new_psi}
            losses.append(float(loss))
        return w, psi, losses

    def client_update(self, c: int, step: int = 0) -> dict:
        """One client's round, one task after the other (client_batching 'loop'): returns {"upload":
        [(name, entries mask or None, tensor)], "psi_grad": {name: grad} or None, "upload_bytes",
        "download_bytes", "loss", "chunk"}; the server's values are not modified."""
        server_w = {n: p.detach() for n, p in self.weights.items()}
        server_h = {n: p.detach() for n, p in self.hyper.items()}
        download = message_bytes(list(server_w.values()) + list(server_h.values()))
        k = self.client_chunk[c]
        tasks, psi_task = self._tasks(step, c)
        upload, psi_grad, losses = [], None, []
        if not tasks:
            return {
                "upload": [],
                "psi_grad": None,
                "upload_bytes": 0,
                "download_bytes": download,
                "loss": float("nan"),
                "chunk": k,
            }
        for task in tasks:
            new_w, new_h, ls = self._run_task_loop(task, server_w, server_h)
            losses += ls
            if self.cfg.method == "partitioned":
                for n in self.weight_names:
                    mask = self.assign[n] == task.j
                    upload.append((n, mask, new_w[n][mask]))  # only partition j's entries travel
            else:
                upload += [(n, None, new_w[n]) for n in self.weight_names]
                if self.cfg.method == "augerino":
                    upload += [(n, None, new_h[n]) for n in self.hyper_names]
        if psi_task is not None:
            b = psi_task.batches[0]
            aug_u, noise = self._draws(psi_task, b.numel())
            wts = torch.full((b.numel(),), 1.0 / b.numel(), dtype=self.data.x_train.dtype, device=b.device)
            psi_grad = self._psi_grad(
                server_h, server_w, k - 1, self.data.x_train[b], self.data.y_train[b], wts, aug_u, noise
            )
        sent = [t for _, _, t in upload] + (list(psi_grad.values()) if psi_grad else [])
        return {
            "upload": upload,
            "psi_grad": psi_grad,
            "upload_bytes": message_bytes(sent),
            "download_bytes": download,
            "loss": sum(losses) / len(losses),
            "chunk": k,
        }

    def _padded(self, tasks: list[_Task], s: int):
        """Step s of `tasks` stacked: x, y, weights (0 on padding), augmentation uniforms, dropout noise,
        padded to the largest batch; the draws are each task's own (`_draws` of its real batch size)."""
        sizes = [t.batches[s].numel() for t in tasks]
        n, R, dev, dt = max(sizes), len(tasks), self.data.x_train.device, self.data.x_train.dtype
        idx = torch.zeros(R, n, dtype=torch.long, device=dev)
        wts = torch.zeros(R, n, dtype=dt, device=dev)
        aug = (
            None
            if self.net.augmentation is None
            else torch.zeros(R, self.n_aug, n, len(self.net.augmentation.names), dtype=dt, device=dev)
        )
        noise = [torch.zeros(R, self.n_aug, n, *shape, dtype=dt, device=dev) for shape in self.net.dropout_shapes]
        for r, (t, m) in enumerate(zip(tasks, sizes)):
            idx[r, :m], wts[r, :m] = t.batches[s], 1.0 / m
            a, z = self._draws(t, m)
            if aug is not None:
                aug[r, :, :m] = a
            for buf, v in zip(noise, z):
                buf[r, :, :m] = v
        return self.data.x_train[idx], self.data.y_train[idx], wts, aug, noise

    def _round_vmap(self, step: int, clients: list, server_w: dict, server_h: dict):
        """The local runs of a round's clients batched by vmap: (summed deltas, counts, summed psi
        gradients, number of psi gradients, per-client mean losses, uploaded bytes)."""
        tasks, psi_tasks = [], []
        for c in clients:
            t, p = self._tasks(step, c)
            tasks += t
            psi_tasks += [p] if p is not None else []
        augerino = self.cfg.method == "augerino"
        dev = self.data.x_train.device
        R = len(tasks)
        W = {n: v.unsqueeze(0).expand(R, *v.shape).clone() for n, v in server_w.items()}
        P = {n: v.unsqueeze(0).expand(R, *v.shape).clone() for n, v in server_h.items()} if augerino else server_h
        J = torch.tensor([t.j for t in tasks], dtype=torch.long, device=dev)
        aug_dim = None if self.net.augmentation is None else 0
        step_fn = vmap(self._sgd_step, in_dims=(0, 0 if augerino else None, 0, 0, 0, 0, aug_dim, 0))
        n_steps = [len(t.batches) for t in tasks]
        losses = torch.full((R, max(n_steps, default=0)), float("nan"), device=dev)
        for s in range(max(n_steps, default=0)):
            act = [r for r in range(R) if n_steps[r] > s]
            x, y, wts, aug, noise = self._padded([tasks[r] for r in act], s)
            if len(act) == R:
                W, new_p, losses[:, s] = step_fn(W, P, J, x, y, wts, aug, noise)
                P = {**P, **new_p}
            else:
                a = torch.tensor(act, device=dev)
                sub_p = {n: v[a] for n, v in P.items()} if augerino else P
                new_w, new_p, losses[a, s] = step_fn(
                    {n: v[a] for n, v in W.items()}, sub_p, J[a], x, y, wts, aug, noise
                )
                for n in W:
                    W[n][a] = new_w[n]
                for n in new_p:
                    P[n][a] = new_p[n]
        # aggregation (as train_step's for the loop's messages)
        params = {**server_w, **server_h}
        delta = {n: torch.zeros_like(p) for n, p in params.items()}
        count = {n: torch.zeros_like(p) for n, p in params.items()}
        up = 0
        for j in sorted(set(J.tolist())):
            rows = torch.nonzero(J == j).reshape(-1)
            for n in self.weight_names:
                d = (server_w[n].unsqueeze(0) - W[n][rows]).sum(0)
                if self.cfg.method == "partitioned":
                    mask = self.assign[n] == j
                    delta[n] += torch.where(mask, d, torch.zeros_like(d))
                    count[n] += mask.to(count[n].dtype) * rows.numel()
                    up += int(mask.sum()) * d.element_size() * rows.numel()
                else:
                    delta[n] += d
                    count[n] += rows.numel()
                    up += d.numel() * d.element_size() * rows.numel()
            if augerino:
                for n in self.hyper_names:
                    d = (server_h[n].unsqueeze(0) - P[n][rows]).sum(0)
                    delta[n] += d
                    count[n] += rows.numel()
                    up += d.numel() * d.element_size() * rows.numel()
        psi_sum = {n: torch.zeros_like(p) for n, p in server_h.items()}
        if psi_tasks:
            x, y, wts, aug, noise = self._padded(psi_tasks, 0)
            jk = torch.tensor([self.client_chunk[t.client] - 1 for t in psi_tasks], dtype=torch.long, device=dev)
            g = vmap(self._psi_grad, in_dims=(None, None, 0, 0, 0, 0, aug_dim, 0))(
                server_h, server_w, jk, x, y, wts, aug, noise
            )
            for n in psi_sum:
                psi_sum[n] += g[n].sum(0)
                up += server_h[n].numel() * server_h[n].element_size() * len(psi_tasks)
        client_losses = []
        rows_of = {}
        for r, t in enumerate(tasks):
            rows_of.setdefault(t.client, []).append(r)
        for c in clients:
            if c in rows_of:
                ls = losses[rows_of[c]]
                client_losses.append(float(ls[~torch.isnan(ls)].mean()))
        return delta, count, psi_sum, len(psi_tasks), client_losses, up

    # ------------------------------------------------------------------------------------------
    # the method protocol

    def train_step(self, step: int) -> dict[str, float]:
        self.net.train()
        n, m = int(self.data.n_clients), min(int(self.cfg.clients_per_round), int(self.data.n_clients))
        clients = torch.randperm(n, generator=self.gen_clients, device=self.gen_clients.device)[:m].tolist()
        params = {**self.weights, **self.hyper}
        server_w = {nm: p.detach() for nm, p in self.weights.items()}
        server_h = {nm: p.detach() for nm, p in self.hyper.items()}
        down = m * message_bytes(list(server_w.values()) + list(server_h.values()))
        if self.batching == "vmap":
            delta, count, psi_sum, n_psi, losses, up = self._round_vmap(step, clients, server_w, server_h)
        else:
            delta = {nm: torch.zeros_like(p) for nm, p in params.items()}
            count = {nm: torch.zeros_like(p) for nm, p in params.items()}
            psi_sum = {nm: torch.zeros_like(p) for nm, p in self.hyper.items()}
            n_psi, losses, up = 0, [], 0
            for c in clients:
                msg = self.client_update(c, step)
                up += msg["upload_bytes"]
                if not math.isnan(msg["loss"]):
                    losses.append(msg["loss"])
                for nm, mask, values in msg["upload"]:
                    server = params[nm].detach()
                    if mask is None:
                        delta[nm] += server - values
                        count[nm] += 1
                    else:  # by flat index: the same one add per entry as delta[nm][mask] += ..., 6x faster on a CPU
                        at = mask.reshape(-1).nonzero().squeeze(1)
                        delta[nm].view(-1).index_add_(0, at, server.reshape(-1).index_select(0, at) - values)
                        count[nm].view(-1).index_add_(0, at, torch.ones_like(values))
                if msg["psi_grad"] is not None:
                    n_psi += 1
                    for nm, g in msg["psi_grad"].items():
                        psi_sum[nm] += g
        self.server_opt.zero_grad(set_to_none=True)
        for nm, p in params.items():
            if nm in self.hyper and self.cfg.method == "partitioned":
                if n_psi:
                    p.grad = psi_sum[nm] / n_psi
            elif bool((count[nm] > 0).any()):
                p.grad = delta[nm] / count[nm].clamp(min=1)
        self.server_opt.step()
        self._sync_net()
        self.comm["upload_bytes"] += up
        self.comm["download_bytes"] += down
        self.comm["full_upload_bytes"] += m * self.weight_bytes()
        self.comm["clients"] += m
        loss = sum(losses) / len(losses) if losses else float("nan")
        return {"loss": loss, "round_upload_bytes": up, "round_download_bytes": down}

    @torch.no_grad()
    def _val_metrics(self) -> dict[str, float]:
        was = self.net.training
        self.net.eval()
        try:
            gen = seeds.generator(int(self.cfg.eval_seed), "eval", self.data.x_val.device)
            bs = int(self.cfg.eval_batch_size)
            logp = torch.cat(
                [
                    self.net(self.data.x_val[i : i + bs], n_samples=self.cfg.eval_aug_samples, generator=gen)
                    for i in range(0, self.data.x_val.shape[0], bs)
                ]
            )
        finally:
            self.net.train(was)
        return {f"val_{k}": v for k, v in classification_metrics(logp, self.data.y_val).items()}

    def psi_metrics(self) -> dict[str, float]:
        out = {}
        if self.net.augmentation is not None and self.cfg.method != "fedavg":
            out.update({f"aug_{k}": float(v) for k, v in self.net.augmentation.ranges().items()})
        for i, p in enumerate(concrete_dropout_parameters(self.net.model)):
            out[f"dropout_p{i + 1}"] = float(torch.sigmoid(p.detach()).reshape(-1)[0])
        return out

    def comm_metrics(self) -> dict[str, float]:
        full = self.comm["full_upload_bytes"]
        return {
            "upload_bytes": float(self.comm["upload_bytes"]),
            "download_bytes": float(self.comm["download_bytes"]),
            "comm_bytes": float(self.comm["upload_bytes"] + self.comm["download_bytes"]),
            "full_upload_bytes": float(full),
            "upload_pct": 100.0 * self.comm["upload_bytes"] / full if full else float("nan"),
        }

    def evaluate(self, step: int) -> dict[str, float]:
        out = {**self._val_metrics(), **self.psi_metrics(), **self.comm_metrics()}
        if step >= 0:
            self.history.append(out["val_acc"])
        return out

    def final_metrics(self) -> dict[str, float]:
        out = {**self._val_metrics(), **self.psi_metrics(), **self.comm_metrics()}
        last = self.history[-int(self.cfg.last_k) :]
        out["val_acc_last"] = sum(last) / len(last) if last else out["val_acc"]
        out["n_evaluations_last"] = float(len(last))
        return out

    def state_dict(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "server_opt": self.server_opt.state_dict(),
            "gen_clients": self.gen_clients.get_state(),
            "comm": dict(self.comm),
            "history": list(self.history),
            "stacked": {n: self.weights[n].detach().clone() for n in self.stacked},
        }

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.server_opt.load_state_dict(state["server_opt"])
        self.gen_clients.set_state(state["gen_clients"])  # the clients' draws are keyed by round: no state
        with torch.no_grad():
            for n, v in state.get("stacked", {}).items():
                self.weights[n].copy_(v)
        self.comm = dict(state["comm"])
        self.history = list(state["history"])
