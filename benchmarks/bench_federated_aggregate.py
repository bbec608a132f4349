"""The server's sum of a partitioned round's uploads, by boolean mask (``delta[mask] += server[mask] - values``,
what `FederatedTraining.train_step` did before) against by flat index (``index_add_``, what it does now), side
by side in one process on the messages of real clients of the paper's MNIST CNN (1.28M weights; Table 4's
1.25k rows: 12-13 examples per client, 10 augmentation samples). Both sums are checked bit-identical first.

    python benchmarks/bench_federated_aggregate.py --clients 10 --repeats 20

Prints the process CPU milliseconds per client message for each and their ratio, with the device named.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_federated_clients import make


def by_mask(delta: dict, count: dict, server: dict, upload: list) -> None:
    for nm, mask, values in upload:
        delta[nm][mask] += server[nm][mask] - values
        count[nm][mask] += 1


def by_index(delta: dict, count: dict, server: dict, upload: list) -> None:
    for nm, mask, values in upload:
        at = mask.reshape(-1).nonzero().squeeze(1)
        delta[nm].view(-1).index_add_(0, at, server[nm].reshape(-1).index_select(0, at) - values)
        count[nm].view(-1).index_add_(0, at, torch.ones_like(values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    m = make("partitioned", 1250, args.clients, 10, "loop", torch.device("cpu"))
    messages = [m.client_update(c, 0) for c in range(args.clients)]
    server = {n: p.detach() for n, p in m.weights.items()}
    sums = {}
    for name, fn in (("mask", by_mask), ("index", by_index)):
        delta = {n: torch.zeros_like(p) for n, p in server.items()}
        count = {n: torch.zeros_like(p) for n, p in server.items()}
        for msg in messages:
            fn(delta, count, server, msg["upload"])
        sums[name] = (delta, count)
    for n in server:
        assert torch.equal(sums["mask"][0][n], sums["index"][0][n]) and torch.equal(
            sums["mask"][1][n], sums["index"][1][n]
        ), n
    ms = {}
    for name, fn in (("mask", by_mask), ("index", by_index)):
        delta = {n: torch.zeros_like(p) for n, p in server.items()}
        count = {n: torch.zeros_like(p) for n, p in server.items()}
        t0 = time.process_time()
        for _ in range(args.repeats):
            for msg in messages:
                fn(delta, count, server, msg["upload"])
        ms[name] = (time.process_time() - t0) * 1e3 / (args.repeats * len(messages))
    print(f"device: cpu ({platform.processor() or platform.machine()}), 1 thread, torch {torch.__version__}")
    print(
        f"ms per client message: mask {ms['mask']:.1f}, index {ms['index']:.1f}; mask / index {ms['mask'] / ms['index']:.1f}x"
    )


if __name__ == "__main__":
    main()
