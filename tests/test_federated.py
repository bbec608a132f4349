"""Federated training (methods/federated.py, 2026-11-23, commit 94ce2ad): FedAvg = SGD + server Adam,
partitioned clients touch and upload only partitions k..C with the bytes counted, bit-identical resume, and the clients
batched by torch.func.vmap giving the loop's server weights (same draws) for every method."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from reprokit import seeds
from reprokit.augment.affine import build_augmentation
from reprokit.methods import federated as fed
from reprokit.methods.federated import FedConfig, FedData, FederatedTraining, FedNet, message_bytes
from reprokit.models.registry import build_model
from reprokit.plan.federated import FederatedSettings


def _settings(method: str, **kw) -> FederatedSettings:
    return FederatedSettings(
        dataset="mnist",
        method=method,
        n_train=40,
        seed=0,
        rounds=4,
        eval_every=1,
        **{"clients_per_round": 2, "batch_size": 8, "aug_samples": 2, "eval_aug_samples": 2, "n_clients": 4, **kw},
    )


def _data(n: int = 40, n_clients: int = 4) -> FedData:
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)
    return FedData(x, y, torch.arange(n) % n_clients, x[:16], y[:16], n_clients)


def _method(method: str, data: FedData | None = None, dropout: float | None = 0.1, **kw) -> FederatedTraining:
    st = _settings(method, **kw)
    torch.manual_seed(0)
    model = build_model("mnist_cnn", dropout=dropout, learnable_dropout=method == "partitioned")
    aug = None if method == "fedavg" else build_augmentation("schwobel", init=0.05)
    return FederatedTraining(FedNet(model, aug, st.aug_samples), data or _data(), FedConfig.from_settings(st), 0)


def test_fedavg_one_client_one_step_is_sgd_then_server_adam():
    data = _data(n=8, n_clients=1)
    m = _method("fedavg", data, dropout=None, clients_per_round=1, batch_size=8, local_lr=0.1, server_lr=1e-3)
    ref = copy.deepcopy(m.net.model)
    perm = torch.randperm(8, generator=seeds.generator(0, "minibatches", keys=(0, 0, 1)))  # round 0, client 0, j 1
    loss = F.nll_loss(F.log_softmax(ref(data.x_train[perm]), dim=-1), data.y_train[perm])
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    params = list(ref.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, eps=1e-8)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.grad = p - (p - 0.1 * g)  # the client's SGD step, then the server's pseudo-gradient w - w_client
    opt.step()
    m.train_step(0)
    for (name, p), q in zip(m.net.model.named_parameters(), params):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-6, msg=name)
    assert m.comm["upload_bytes"] == m.comm["download_bytes"] == m.weight_bytes()


@pytest.mark.parametrize("k", [2, 3])
def test_partitioned_client_changes_and_uploads_only_partitions_k_to_c(k):
    m = _method("partitioned")
    m.client_chunk = [k] * 4
    server = {n: p.detach().clone() for n, p in m.weights.items()}
    hyper = {n: p.detach() for n, p in m.hyper.items()}
    tasks, _ = m._tasks(0, 0)
    assert [t.j for t in tasks] == list(range(k, m.n_chunks + 1))
    for task in tasks:  # Eq. 25: partition j alone moves
        j = task.j
        new, _, _ = m._run_task_loop(task, server, hyper)
        for n in server:
            same = m.assign[n] != j
            assert torch.equal(new[n][same], server[n][same]), n
            assert not torch.equal(new[n][~same], server[n][~same]), n
    msg = m.client_update(0)
    for n in m.weight_names:  # uploaded entries: exactly partitions k..C, each once
        masks = [mask for name, mask, _ in msg["upload"] if name == n]
        assert len(masks) == m.n_chunks - k + 1
        covered = torch.stack(masks).sum(0)
        assert torch.equal(covered, (m.assign[n] >= k).to(covered.dtype)), n
    n_up = sum(int((a >= k).sum()) for a in m.assign.values())
    n_psi = sum(p.numel() for p in m.hyper.values())
    assert (
        msg["upload_bytes"]
        == 4 * (n_up + n_psi)
        == message_bytes([v for _, _, v in msg["upload"]] + list(msg["psi_grad"].values()))
    )
    assert msg["upload_bytes"] < m.weight_bytes()
    # a round whose clients are all of chunk k leaves partitions < k of the server bit-identical
    m.train_step(0)
    for n, p in m.weights.items():
        keep = m.assign[n] < k
        assert torch.equal(p.detach()[keep], server[n][keep]), n


def test_partitioned_upload_fraction_is_the_expected_one_for_all_chunks():
    m = _method("partitioned", clients_per_round=4)
    m.client_chunk = [1, 2, 3, 1]
    m.train_step(0)
    sizes = [sum(int((a == j).sum()) for a in m.assign.values()) for j in (1, 2, 3)]
    total = sum(sizes)
    n_psi = sum(p.numel() for p in m.hyper.values())
    expected = 4 * (total + (total - sizes[0]) + sizes[2] + total) + 4 * 2 * n_psi  # chunks 2, 3 send psi grads
    assert m.comm["upload_bytes"] == expected
    assert m.comm["full_upload_bytes"] == 4 * 4 * total


def test_partitioned_server_averages_each_entry_over_the_clients_that_sent_it():
    """The server's gradient of a weight entry is the mean of (server - client value) over the clients that
    uploaded that entry (a client uploads only its partitions' entries), 0 where none did: bit-identical to
    the boolean-mask sums written out by hand from the same messages."""
    m = _method("partitioned", clients_per_round=4)
    m.client_chunk = [1, 2, 3, 1]
    server = {n: p.detach().clone() for n, p in m.weights.items()}
    sent, update = [], m.client_update
    m.client_update = lambda c, step=0: sent.append(update(c, step)) or sent[-1]
    m.server_opt.step = lambda: None  # keep the gradients the server computed; the weights stay put
    m.train_step(0)
    assert len(sent) == 4 and any(mask is not None and not mask.all() for msg in sent for _, mask, _ in msg["upload"])
    for n, p in m.weights.items():
        delta, count = torch.zeros_like(p), torch.zeros_like(p)
        for msg in sent:
            for name, mask, values in msg["upload"]:
                if name == n:
                    delta[mask] = delta[mask] + (server[n][mask] - values)
                    count[mask] = count[mask] + 1
        assert torch.equal(p.grad, delta / count.clamp(min=1)), n


@pytest.mark.parametrize("batching", ["loop", "vmap"])
@pytest.mark.parametrize("method", ["fedavg", "augerino", "partitioned"])
def test_resume_is_bit_identical(method, batching):
    a = _method(method, client_batching=batching)
    for s in range(4):
        a.train_step(s)
        a.evaluate(s + 1)
    b = _method(method, client_batching=batching)
    for s in range(2):
        b.train_step(s)
        b.evaluate(s + 1)
    state, rng = copy.deepcopy(b.state_dict()), torch.get_rng_state()
    c = _method(method, client_batching=batching)
    c.load_state_dict(state)
    torch.set_rng_state(rng)
    for s in range(2, 4):
        c.train_step(s)
        c.evaluate(s + 1)
    for (n, p), q in zip(a.net.state_dict().items(), c.net.state_dict().values()):
        assert torch.equal(p, q), n
    assert a.comm == c.comm and a.history == c.history
    assert a.final_metrics() == c.final_metrics()


@pytest.mark.parametrize("grad_x", [False, True], ids=["plain", "input-grad-workaround"])
@pytest.mark.parametrize("method", ["fedavg", "augerino", "partitioned"])
def test_vmap_clients_give_the_loops_server_weights(method, grad_x, monkeypatch):
    """client_batching vmap = loop to rounding (float64), two rounds with the same draws: clients of 3, 9, 17
    and 11 examples (1, 2, 3 and 2 local steps at batch 8: padded batches, tasks dropping out), all three
    chunks, learned dropout, augmentation, Augerino's local psi and the partitioned psi gradients. With
    `grad_x` the vmap path also differentiates the inputs, as on a torch whose grid_sample batching rule needs
    it (2.11; fed.vmap_grid_sample_grad_needs_input_grad), and must give the same weights."""
    if not grad_x and fed.vmap_grid_sample_grad_needs_input_grad():
        pytest.skip(f"torch {torch.__version__} fails a vmapped grid_sample gradient without the workaround")
    monkeypatch.setattr(fed, "vmap_grid_sample_grad_needs_input_grad", lambda: grad_x)
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        g = torch.Generator().manual_seed(1)
        x, y = torch.rand(40, 1, 28, 28, generator=g), torch.randint(0, 10, (40,), generator=g)
        client = torch.tensor([0] * 3 + [1] * 9 + [2] * 17 + [3] * 11)
        runs = {}
        for batching in ("loop", "vmap"):
            m = _method(method, FedData(x, y, client, x[:16], y[:16], 4), client_batching=batching, clients_per_round=4)
            if method == "partitioned":
                m.client_chunk = [2, 1, 3, 2]
            outs = [m.train_step(s) for s in range(2)]
            runs[batching] = m, outs
        (a, out_a), (b, out_b) = runs["loop"], runs["vmap"]
        assert a.batching == "loop" and b.batching == "vmap"
        assert b._grad_x == (grad_x and b.net.augmentation is not None)
        for (n, p), q in zip(a.net.state_dict().items(), b.net.state_dict().values()):
            assert p.dtype == torch.float64 or not p.is_floating_point()
            torch.testing.assert_close(p, q, rtol=0, atol=1e-10, msg=n)
        moved = [
            n
            for n, p in a.net.state_dict().items()
            if p.is_floating_point()
            and not torch.equal(p, _method(method, FedData(x, y, client, x[:16], y[:16], 4)).net.state_dict()[n])
        ]
        assert len(moved) >= 10  # the weights (and psi) did move
        assert a.comm == b.comm
        for oa, ob in zip(out_a, out_b):
            assert oa["round_upload_bytes"] == ob["round_upload_bytes"]
            assert oa["loss"] == pytest.approx(ob["loss"], rel=1e-10)
    finally:
        torch.set_default_dtype(dtype)


def test_client_batching_auto_is_the_loop_on_the_cpu_and_unknown_values_fail():
    assert _method("fedavg").batching == "loop"  # the default, auto, on CPU data
    with pytest.raises(ValueError, match=r"client_batching\s+Input should be 'loop', 'vmap' or 'auto'"):
        _method("fedavg", client_batching="batched")


def test_partitioned_group_norm_affines_are_per_partition_vectors():
    """App. I.2: a GroupNorm's scale / bias is C vectors, subnetwork j uses their product / sum over 1..j, a
    chunk-k client changes only the vectors of partitions k..C, the network holds the full product / sum."""
    st = _settings("partitioned", batch_size=4, n_clients=2, clients_per_round=2)
    torch.manual_seed(0)
    model = build_model("resnet9_gn", dropout=0.1, learnable_dropout=True)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(8, 3, 32, 32, generator=g), torch.randint(0, 10, (8,), generator=g)
    m = FederatedTraining(
        FedNet(model, None, 1), FedData(x, y, torch.arange(8) % 2, x[:4], y[:4], 2), FedConfig.from_settings(st), 0
    )
    norms = [n for n in m.weight_names if ".norm." in n]
    assert norms and set(norms) == set(m.stacked)
    for n in norms:
        assert m.weights[n].shape == (3, *m.net_weights[n].shape)
    w = {n: torch.rand(m.weights[n].shape, generator=g) + 0.5 for n in norms}
    for j in (1, 2, 3):
        eff = m._effective(w, j)
        for n in norms:
            want = w[n][:j].prod(0) if n.endswith("weight") else w[n][:j].sum(0)
            torch.testing.assert_close(eff[n], want, msg=f"{n} j={j}")
    start = {n: m.weights[n].detach().clone() for n in norms}
    torch.testing.assert_close(m._effective(start, 3)[norms[0]], m.net_weights[norms[0]].detach())
    m.client_chunk = [2, 3]
    m.train_step(0)
    full = m._effective({n: m.weights[n].detach() for n in norms}, 3)
    for n in norms:
        assert torch.equal(m.weights[n].detach()[0], start[n][0]), n  # partition 1: no client of chunk 1
        assert not torch.equal(m.weights[n].detach()[1:], start[n][1:]), n
        torch.testing.assert_close(m.net_weights[n].detach(), full[n], msg=n)
    assert m.weight_bytes() == 4 * sum(p.numel() for p in m.net_weights.values())  # FedAvg's: each affine once
