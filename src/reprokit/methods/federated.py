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
                 augmentation's parameters.

Communication is *measured*: every message is a list of tensors and its size is the sum of
``numel * element_size``. Downloads are the server's weights (and psi where the method has any) sent to
each sampled client; partitioned defaults (the initial values) and partition assignments are derived
from the cell's seed on both sides and are not sent. The clients of a round run one after the other
(a Python loop; ``torch.func.functional_call`` already evaluates the model on explicit parameter
dicts, the step a vmap over clients would batch).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from .. import seeds
from ..augment.affine import AffineAugmentation, augerino_regularizer
from ..augment.concrete_dropout import concrete_dropout_parameters
from ..partition.masks import exact_counts, node_assignment, random_weight_assignment
from .common import classification_metrics

METHODS = ("fedavg", "augerino", "partitioned")


def message_bytes(tensors) -> int:
    """Bytes of a message: the sum of numel x element size of the tensors actually sent."""
    return int(sum(t.numel() * t.element_size() for t in tensors))


class FedNet(nn.Module):
    """A classifier with an optional augmentation: ``forward`` returns the log of the predictive
    probabilities averaged over ``n_samples`` augmentations (``log_softmax`` without augmentation)."""

    def __init__(self, model: nn.Module, augmentation: AffineAugmentation | None, n_samples: int):
        super().__init__()
        self.model, self.augmentation, self.n_samples = model, augmentation, int(n_samples)

    def forward(self, x: torch.Tensor, n_samples: int | None = None, generator: torch.Generator | None = None,
                reg_kind: str | None = None):
        if self.augmentation is None:
            logp = F.log_softmax(self.model(x), dim=-1)
        else:
            s = self.n_samples if n_samples is None else int(n_samples)
            xa = self.augmentation(x, s, generator=generator)
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

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"federated method '{self.method}' unknown (valid: {', '.join(METHODS)})")

    @classmethod
    def from_settings(cls, st, **overrides) -> FedConfig:
        """From a cell's FederatedSettings (or any object with these attributes), `overrides` on top."""
        values = {f.name: getattr(st, f.name) for f in dataclasses.fields(cls)}
        values.update(overrides)
        values["chunk_proportions"] = [float(v) for v in values["chunk_proportions"]]
        return cls(**values)


class FederatedTraining:
    """`net` (a FedNet) holds the server's values; `data` the clients' examples and the validation set."""

    def __init__(self, net: FedNet, data: FedData, cfg: FedConfig, seed: int):
        self.net, self.data, self.cfg, self.seed = net, data, cfg, int(seed)
        device = data.x_train.device
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
        self.weight_names = [n for n, p in net.named_parameters()
                             if id(p) not in hyper_ids and p.requires_grad and n.startswith("model.")]
        params = dict(net.named_parameters())
        self.weights = {n: params[n] for n in self.weight_names}
        self.hyper = {n: params[n] for n in self.hyper_names}
        groups = [{"params": list(self.weights.values()), "lr": cfg.server_lr, "eps": cfg.server_eps}]
        if self.hyper:
            groups.append({"params": list(self.hyper.values()), "lr": cfg.hyper_lr, "eps": cfg.hyper_eps})
        self.server_opt = torch.optim.Adam(groups)
        # clients
        self.client_idx = [torch.nonzero(data.client == c).reshape(-1) for c in range(int(data.n_clients))]
        self.gen_clients = seeds.generator(self.seed, "clients", device)
        self.gen_batches = seeds.generator(self.seed, "minibatches", device)
        self.gen_aug = seeds.generator(self.seed, "augment", device)
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
            self.assign = {n: assign_fn(p.shape, pprops, generator=g).to(device) for n, p in self.weights.items()}
            self.default = {n: p.detach().clone() for n, p in self.weights.items()}  # "init" defaults
        else:
            self.client_chunk = [1] * int(data.n_clients)
        self.comm = {"upload_bytes": 0, "download_bytes": 0, "full_upload_bytes": 0, "clients": 0}
        self.history: list[float] = []  # validation accuracy of every evaluation (step >= 0)

    # ------------------------------------------------------------------------------------------
    # pieces

    def weight_bytes(self) -> int:
        return message_bytes([p.detach() for p in self.weights.values()])

    def _minibatches(self, idx: torch.Tensor):
        """One epoch of a client's examples in a random order, in batches of batch_size (last smaller)."""
        perm = idx[torch.randperm(idx.numel(), generator=self.gen_batches, device=idx.device)]
        bs = int(self.cfg.batch_size)
        return [perm[i:i + bs] for i in range(0, perm.numel(), bs)]

    def _effective(self, w: dict, j: int) -> dict:
        """Subnetwork j's parameters: entries of partitions <= j from `w`, the rest at their defaults."""
        if self.cfg.method != "partitioned" or j >= self.n_chunks:
            return dict(w)
        return {n: torch.where(self.assign[n] <= j, w[n], self.default[n]) for n in w}

    def _nll(self, params: dict, idx: torch.Tensor, reg: bool = False):
        x, y = self.data.x_train[idx], self.data.y_train[idx]
        out = functional_call(self.net, params, (x,),
                              {"generator": self.gen_aug, "reg_kind": self.cfg.augerino_reg_kind if reg else None})
        if reg:
            logp, r = out
            return F.nll_loss(logp, y) + self.cfg.augerino_reg * r
        return F.nll_loss(out, y)

    def _local_sgd(self, start: dict, idx: torch.Tensor, hyper: dict, j: int | None = None) -> tuple[dict, list]:
        """Local epochs of SGD from `start` (cloned). Partitioned (j given): subnetwork j, only the
        entries of partition j move. Augerino: `hyper` (psi) moves with the weights."""
        trainable = {n: t.detach().clone().requires_grad_(True) for n, t in start.items()}
        psi = {n: t.detach().clone().requires_grad_(self.cfg.method == "augerino") for n, t in hyper.items()}
        lr, losses = float(self.cfg.local_lr), []
        for _ in range(int(self.cfg.local_epochs)):
            for b in self._minibatches(idx):
                w = trainable if j is None else self._effective(trainable, j)
                loss = self._nll({**w, **psi}, b, reg=self.cfg.method == "augerino")
                tensors = {**trainable, **psi} if self.cfg.method == "augerino" else trainable
                grads = torch.autograd.grad(loss, list(tensors.values()))
                with torch.no_grad():
                    for (n, t), g in zip(tensors.items(), grads):
                        if j is not None:
                            g = g * (self.assign[n] == j)  # subnetwork j's gradient is already 0 above j
                        t.sub_(lr * g)
                losses.append(float(loss.detach()))
        return ({n: t.detach() for n, t in trainable.items()}, {n: t.detach() for n, t in psi.items()}), losses

    def client_update(self, c: int) -> dict:
        """One client's round: returns {"upload": [(name, entries mask or None, tensor)], "psi_grad":
        {name: grad} or None, "upload_bytes", "download_bytes", "loss", "chunk"}; the server's values are
        not modified."""
        server_w = {n: p.detach() for n, p in self.weights.items()}
        server_h = {n: p.detach() for n, p in self.hyper.items()}
        download = message_bytes(list(server_w.values()) + list(server_h.values()))
        idx = self.client_idx[c]
        k = self.client_chunk[c]
        upload, psi_grad, losses = [], None, []
        if idx.numel() == 0:
            return {"upload": [], "psi_grad": None, "upload_bytes": 0, "download_bytes": download, "loss": float("nan"),
                    "chunk": k}
        if self.cfg.method == "partitioned":
            for j in range(k, self.n_chunks + 1):
                (new_w, _), ls = self._local_sgd(server_w, idx, server_h, j=j)
                losses += ls
                for n in self.weight_names:
                    mask = self.assign[n] == j
                    upload.append((n, mask, new_w[n][mask]))  # only partition j's entries travel
            if k >= 2 and self.hyper:
                hidx = idx if self.cfg.hyper_batch_size is None else \
                    idx[torch.randperm(idx.numel(), generator=self.gen_batches, device=idx.device)[:int(self.cfg.hyper_batch_size)]]
                psi = {n: t.detach().clone().requires_grad_(True) for n, t in server_h.items()}
                loss = self._nll({**self._effective(server_w, k - 1), **psi}, hidx)
                grads = torch.autograd.grad(loss, list(psi.values()), allow_unused=True)
                psi_grad = {n: (g if g is not None else torch.zeros_like(psi[n])) for n, g in zip(psi, grads)}
            sent = [t for _, _, t in upload] + (list(psi_grad.values()) if psi_grad else [])
        else:
            (new_w, new_h), losses = self._local_sgd(server_w, idx, server_h)
            upload = [(n, None, new_w[n]) for n in self.weight_names]
            if self.cfg.method == "augerino":
                upload += [(n, None, new_h[n]) for n in self.hyper_names]
            sent = [t for _, _, t in upload]
        return {"upload": upload, "psi_grad": psi_grad, "upload_bytes": message_bytes(sent), "download_bytes": download,
                "loss": sum(losses) / len(losses), "chunk": k}

    # ------------------------------------------------------------------------------------------
    # the method protocol

    def train_step(self, step: int) -> dict[str, float]:
        self.net.train()
        n, m = int(self.data.n_clients), min(int(self.cfg.clients_per_round), int(self.data.n_clients))
        clients = torch.randperm(n, generator=self.gen_clients, device=self.gen_clients.device)[:m].tolist()
        params = {**self.weights, **self.hyper}
        delta = {nm: torch.zeros_like(p) for nm, p in params.items()}
        count = {nm: torch.zeros_like(p) for nm, p in params.items()}
        psi_sum = {nm: torch.zeros_like(p) for nm, p in self.hyper.items()}
        n_psi, losses, up, down = 0, [], 0, 0
        for c in clients:
            msg = self.client_update(c)
            up, down = up + msg["upload_bytes"], down + msg["download_bytes"]
            if not math.isnan(msg["loss"]):
                losses.append(msg["loss"])
            for nm, mask, values in msg["upload"]:
                server = params[nm].detach()
                if mask is None:
                    delta[nm] += server - values
                    count[nm] += 1
                else:
                    delta[nm][mask] += server[mask] - values
                    count[nm][mask] += 1
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
            logp = torch.cat([self.net(self.data.x_val[i:i + bs], n_samples=self.cfg.eval_aug_samples, generator=gen)
                              for i in range(0, self.data.x_val.shape[0], bs)])
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
        return {"upload_bytes": float(self.comm["upload_bytes"]), "download_bytes": float(self.comm["download_bytes"]),
                "comm_bytes": float(self.comm["upload_bytes"] + self.comm["download_bytes"]),
                "full_upload_bytes": float(full),
                "upload_pct": 100.0 * self.comm["upload_bytes"] / full if full else float("nan")}

    def evaluate(self, step: int) -> dict[str, float]:
        out = {**self._val_metrics(), **self.psi_metrics(), **self.comm_metrics()}
        if step >= 0:
            self.history.append(out["val_acc"])
        return out

    def final_metrics(self) -> dict[str, float]:
        out = {**self._val_metrics(), **self.psi_metrics(), **self.comm_metrics()}
        last = self.history[-int(self.cfg.last_k):]
        out["val_acc_last"] = sum(last) / len(last) if last else out["val_acc"]
        out["n_evaluations_last"] = float(len(last))
        return out

    def state_dict(self) -> dict:
        return {"net": self.net.state_dict(), "server_opt": self.server_opt.state_dict(),
                "gen_clients": self.gen_clients.get_state(), "gen_batches": self.gen_batches.get_state(),
                "gen_aug": self.gen_aug.get_state(), "comm": dict(self.comm), "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.net.load_state_dict(state["net"])
        self.server_opt.load_state_dict(state["server_opt"])
        self.gen_clients.set_state(state["gen_clients"])
        self.gen_batches.set_state(state["gen_batches"])
        self.gen_aug.set_state(state["gen_aug"])
        self.comm = dict(state["comm"])
        self.history = list(state["history"])
