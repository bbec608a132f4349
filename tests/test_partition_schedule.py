"""App. I.1 sampling: parameter steps draw from D_1:k, hyperparameter steps from D_k only."""

import numpy as np
import pytest
import torch

from reprokit.partition import PartitionSchedule, chunk_assignment


def chunk_ids():
    return chunk_assignment(1000, [0.6, 0.3, 0.1], torch.Generator().manual_seed(0))


def test_chunk_assignment_exact_sizes():
    ids = chunk_ids()
    assert ids.dtype == np.uint8
    assert np.bincount(ids).tolist() == [600, 300, 100]


def test_param_step_samples_from_first_k_chunks_with_k_frequencies():
    ids = chunk_ids()
    s = PartitionSchedule(ids, generator=0)
    ks = []
    seen = {1: set(), 2: set(), 3: set()}
    for _ in range(1500):
        k, idx = s.param_step(32)
        ks.append(k)
        assert idx.shape == (32,) and idx.dtype == torch.int64
        assert (ids[idx.numpy()] <= k - 1).all()  # chunk ids are 0-based: D_1:k has ids < k
        seen[k].update(ids[idx.numpy()].tolist())
    freq = np.bincount(ks, minlength=4)[1:] / len(ks)
    assert np.allclose(freq, [0.6, 0.3, 0.1], atol=0.04)
    assert seen == {1: {0}, 2: {0, 1}, 3: {0, 1, 2}}


def test_hyper_step_samples_only_chunk_k_and_renormalises():
    ids = chunk_ids()
    s = PartitionSchedule(ids, proportions=[0.2, 0.2, 0.6], generator=1)
    ks = []
    for _ in range(1000):
        k, idx = s.hyper_step(16)
        ks.append(k)
        assert k >= 2
        assert (ids[idx.numpy()] == k - 1).all()
    freq = np.bincount(ks, minlength=4)[2:] / len(ks)
    assert np.allclose(freq, [0.25, 0.75], atol=0.04)


def test_sampling_is_with_replacement_and_uniform_within_pool():
    ids = np.array([0] * 3 + [1] * 5, dtype=np.uint8)
    s = PartitionSchedule(ids, proportions=[1.0, 0.0], generator=0)
    k, idx = s.param_step(3000)
    assert k == 1
    counts = np.bincount(idx.numpy(), minlength=8)
    assert counts[3:].sum() == 0 and (counts[:3] > 900).all()  # batch > |D_1| only works with replacement


def test_deterministic_and_checkpointable():
    ids = chunk_ids()
    a = PartitionSchedule(ids, generator=torch.Generator().manual_seed(5))
    b = PartitionSchedule(ids, generator=torch.Generator().manual_seed(5))
    for _ in range(5):
        ka, ia = a.param_step(8)
        kb, ib = b.param_step(8)
        assert ka == kb and torch.equal(ia, ib)
    c = PartitionSchedule(torch.as_tensor(ids), generator=torch.Generator().manual_seed(5))  # torch ids too
    d = PartitionSchedule(ids, generator=torch.Generator().manual_seed(5))
    kc, ic = c.param_step(8)
    kd, i_d = d.param_step(8)
    assert kc == kd and torch.equal(ic, i_d)
    state = a.state_dict()
    run1 = [a.param_step(8) for _ in range(3)] + [a.hyper_step(8)]
    a.load_state_dict(state)
    run2 = [a.param_step(8) for _ in range(3)] + [a.hyper_step(8)]
    for (k1, i1), (k2, i2) in zip(run1, run2):
        assert k1 == k2 and torch.equal(i1, i2)


def test_validation():
    with pytest.raises(ValueError):
        PartitionSchedule(np.array([0, 0, 2]), proportions=[1, 1, 1])  # chunk id 1 is empty but sampled
    with pytest.raises(ValueError):
        PartitionSchedule(np.zeros(5, dtype=np.uint8)).hyper_step(4)
