"""Rounds per second of a FedAvg round: the method's Python loop over the sampled clients next to the same
round with the clients batched by ``torch.func.vmap`` (issue 13).

One process, random MNIST-shaped data split over 100 clients of equal-ish size (n_train / 100 examples
each, the sizes of Table 4: 1.25k -> 12-13, 5k -> 50, 50k -> 500), the MNIST CNN without dropout and
without augmentation (FedAvg), batch 64, local SGD 0.05, server Adam 1e-3:

  loop   ``FederatedTraining.train_step`` (what the pipeline runs: one client after the other)
  vmap   the same round written with ``torch.func``: the clients' data padded to the largest client
         (padding rows weigh 0, a client with fewer batches takes zero-weight steps that change nothing),
         ``vmap(grad(loss))`` over the clients for each local step, the deltas averaged, the same server Adam

Before timing, one round of each from the same state is compared (the vmap round's weights must match
the loop's to float tolerance: same batches, same order). The vmap path is a benchmark only; it does
not support augmentation draws from a generator or dropout, so the pipeline keeps the loop.

    python benchmarks/bench_federated_clients.py --device cpu --threads 1 --n-train 1250 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from reprokit.methods.federated import FedConfig, FedData, FederatedTraining, FedNet
from reprokit.models.registry import build_model
from reprokit.plan.federated import FederatedSettings


def make(n_train: int, cpr: int, device) -> FederatedTraining:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n_train, 1, 28, 28, generator=g).to(device)
    y = torch.randint(0, 10, (n_train,), generator=g).to(device)
    data = FedData(x, y, (torch.arange(n_train) % 100).to(device), x[:100], y[:100], 100)
    st = FederatedSettings(dataset="mnist", method="fedavg", n_train=n_train, seed=0, rounds=1, eval_every=1,
                           clients_per_round=cpr)
    torch.manual_seed(0)
    net = FedNet(build_model("mnist_cnn").to(device), None, 1)
    return FederatedTraining(net, data, FedConfig.from_settings(st), 0)


def vmap_round(m: FederatedTraining) -> None:
    """One FedAvg round with the sampled clients' local SGD batched by vmap (same draws as the loop)."""
    n = int(m.data.n_clients)
    clients = torch.randperm(n, generator=m.gen_clients, device=m.gen_clients.device)[: m.cfg.clients_per_round].tolist()
    batches = [m._minibatches(m.client_idx[c]) for c in clients]  # the loop's batch order
    n_steps, bs = max(len(b) for b in batches), int(m.cfg.batch_size)
    idx = torch.zeros(len(clients), n_steps, bs, dtype=torch.long, device=m.data.x_train.device)
    wts = torch.zeros(len(clients), n_steps, bs, device=m.data.x_train.device)
    for i, bl in enumerate(batches):
        for s, b in enumerate(bl):
            idx[i, s, : b.numel()], wts[i, s, : b.numel()] = b, 1.0 / b.numel()
    model = m.net.model
    server = {n_: p.detach() for n_, p in model.named_parameters()}

    def loss(params, x, y, w):
        out = functional_call(model, params, (x,))
        return (F.cross_entropy(out, y, reduction="none") * w).sum()

    params = {k: v.unsqueeze(0).expand(len(clients), *v.shape).clone() for k, v in server.items()}
    g_fn = vmap(grad(loss))
    for s in range(n_steps):
        x, y = m.data.x_train[idx[:, s]], m.data.y_train[idx[:, s]]
        grads = g_fn(params, x, y, wts[:, s])
        params = {k: params[k] - m.cfg.local_lr * grads[k] for k in params}
    m.server_opt.zero_grad(set_to_none=True)
    for (k, p) in model.named_parameters():
        p.grad = (server[k].unsqueeze(0) - params[k]).mean(0)
    m.server_opt.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-train", type=int, nargs="+", default=[1250, 5000])
    ap.add_argument("--clients-per-round", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"device {device}, threads {args.threads}, {args.clients_per_round} clients per round")
    print(f"{'n_train':>8} {'loop r/s':>9} {'vmap r/s':>9} {'speed-up':>9} {'max |dw|':>9}")
    for n_train in args.n_train:
        a = make(n_train, args.clients_per_round, device)
        b = copy.deepcopy(a)
        a.train_step(0)
        vmap_round(b)
        diff = max(float((p.detach() - q.detach()).abs().max()) for p, q in zip(a.net.parameters(), b.net.parameters()))
        rates = {}
        for name, step in (("loop", lambda m, s: m.train_step(s)), ("vmap", lambda m, s: vmap_round(m))):
            m = make(n_train, args.clients_per_round, device)
            step(m, 0)  # warm-up
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            for s in range(args.rounds):
                step(m, s + 1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            rates[name] = args.rounds / (time.perf_counter() - t)
        print(f"{n_train:>8} {rates['loop']:>9.2f} {rates['vmap']:>9.2f} {rates['vmap'] / rates['loop']:>8.2f}x "
              f"{diff:>9.2e}")


if __name__ == "__main__":
    main()
