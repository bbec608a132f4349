"""Rounds per second of a federated round with the clients run one after the other (``client_batching:
loop``) and batched by ``torch.func.vmap`` (``vmap``), side by side in one process (2026-11-23, commit 9a9e6d2).

Both are ``FederatedTraining.train_step``, the pipeline's round function, on random MNIST-shaped data split
over 100 clients of equal-ish size (n_train / 100 examples each, the sizes of Table 4: 1.25k -> 12-13,
5k -> 50, 50k -> 500), the MNIST CNN with dropout 0.1 between layers (learned for partitioned), the
paper's settings otherwise (batch 64, local SGD 0.05, server Adam 1e-3; augmentation samples:
--aug-samples, the paper's 10 by default; FedAvg has none). Before timing, one round of each from the
same state is compared (max |w_loop - w_vmap| over the server's values: the same draws, so only
rounding differs).

    python benchmarks/bench_federated_clients.py --device cpu --threads 1 --n-train 1250 5000 --rounds 3

Measured (this repo's 2-core CPU box, shared, 1 thread, torch 2.14.1 CPU, --rounds 2 --aug-samples 2, the
quick scale's augmentation samples; rounds/s):

    method       n_train  loop   vmap   vmap/loop  max |dw| after 1 round (float32)
    fedavg          1250  1.557  0.891  0.57x      1.8e-05
    fedavg          5000  1.234  0.675  0.55x      1.8e-05
    augerino        1250  1.033  0.958  0.93x      1.2e-05
    augerino        5000  0.378  0.257  0.68x      3.1e-04
    partitioned     1250  0.191  0.237  1.25x      1.1e-03
    partitioned     5000  0.102  0.087  0.86x      1.6e-03

On one CPU thread batching buys nothing (the convolutions are already compute-bound; vmap adds padding and
stacking), hence ``auto`` = loop on the CPU. The float32 differences are Adam's first step: an entry whose
averaged delta is at rounding level gets +-lr from the sign of that rounding (partitioned: one conv1 entry
of 500 at 1e-3 = server lr, every other entry < 2e-5); in float64 loop and vmap agree to 1e-10
(tests/test_federated.py). No GPU was lent to this task: the CUDA side (``auto`` = vmap) is not measured.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from reprokit.augment.affine import build_augmentation
from reprokit.methods.federated import FedConfig, FedData, FederatedTraining, FedNet
from reprokit.models.registry import build_model
from reprokit.plan.federated import FederatedSettings


def make(method: str, n_train: int, cpr: int, aug_samples: int, batching: str, device) -> FederatedTraining:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n_train, 1, 28, 28, generator=g).to(device)
    y = torch.randint(0, 10, (n_train,), generator=g).to(device)
    data = FedData(x, y, (torch.arange(n_train) % 100).to(device), x[:100], y[:100], 100)
    st = FederatedSettings(
        dataset="mnist",
        method=method,
        n_train=n_train,
        seed=0,
        rounds=1,
        eval_every=1,
        clients_per_round=cpr,
        aug_samples=aug_samples,
        client_batching=batching,
    )
    torch.manual_seed(0)
    model = build_model("mnist_cnn", dropout=st.dropout, learnable_dropout=method == "partitioned")
    aug = None if method == "fedavg" else build_augmentation(st.augmentation, init=st.aug_init)
    net = FedNet(model, aug, st.aug_samples).to(device)
    return FederatedTraining(net, data, FedConfig.from_settings(st), 0)


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rounds_per_second(m: FederatedTraining, rounds: int, device) -> float:
    m.train_step(0)  # warm-up
    sync(device)
    t = time.perf_counter()
    for s in range(rounds):
        m.train_step(s + 1)
    sync(device)
    return rounds / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", nargs="+", default=["fedavg", "augerino", "partitioned"])
    ap.add_argument("--n-train", type=int, nargs="+", default=[1250, 5000])
    ap.add_argument("--clients-per-round", type=int, default=10)
    ap.add_argument("--aug-samples", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or platform.machine())
    print(
        f"device {device} ({name}), torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"{args.clients_per_round} clients per round, {args.aug_samples} augmentation samples, {args.rounds} rounds"
    )
    print(f"{'method':>12} {'n_train':>8} {'loop r/s':>9} {'vmap r/s':>9} {'speed-up':>9} {'max |dw|':>9}")
    for method in args.methods:
        for n_train in args.n_train:
            a, b = (
                make(method, n_train, args.clients_per_round, args.aug_samples, k, device) for k in ("loop", "vmap")
            )
            a.train_step(0)
            b.train_step(0)
            diff = max(
                float((p - q).abs().max()) for p, q in zip(a.net.state_dict().values(), b.net.state_dict().values())
            )
            rates = {
                k: rounds_per_second(
                    make(method, n_train, args.clients_per_round, args.aug_samples, k, device), args.rounds, device
                )
                for k in ("loop", "vmap")
            }
            print(
                f"{method:>12} {n_train:>8} {rates['loop']:>9.3f} {rates['vmap']:>9.3f} "
                f"{rates['vmap'] / rates['loop']:>8.2f}x {diff:>9.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
