"""Partition assignment masks: exact per-tensor proportions, uint8 storage, 1-based ids, node rows."""

import pytest
import torch

from reprokit.partition import exact_counts, node_assignment, random_weight_assignment


@pytest.mark.parametrize(
    "n, props, expected",
    [(10, [0.8, 0.1, 0.1], [8, 1, 1]), (7, [1, 1, 1], [3, 2, 2]), (5, [1, 8], [1, 4]), (3, [0.5, 0.5], [2, 1])],
)
def test_exact_counts_largest_remainder(n, props, expected):
    assert exact_counts(n, props).tolist() == expected


def test_exact_counts_within_one_of_ideal():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        c = int(torch.randint(1, 6, (1,), generator=g))
        props = torch.rand(c, generator=g).tolist()
        n = int(torch.randint(0, 1000, (1,), generator=g))
        counts = exact_counts(n, props)
        ideal = torch.tensor(props, dtype=torch.float64) / sum(props) * n
        assert counts.sum() == n
        assert ((counts - ideal).abs() < 1).all()


def test_random_assignment_exact_proportions_and_dtype():
    shape = (50, 3, 5, 5)
    a = random_weight_assignment(shape, [0.8, 0.1, 0.1], torch.Generator().manual_seed(1))
    assert a.dtype == torch.uint8 and a.shape == shape
    assert int(a.min()) == 1 and int(a.max()) == 3
    counts = torch.bincount(a.reshape(-1).long(), minlength=4)[1:]
    assert counts.tolist() == exact_counts(a.numel(), [0.8, 0.1, 0.1]).tolist() == [3000, 375, 375]


def test_random_assignment_deterministic_and_shuffled():
    a = random_weight_assignment((30, 20), [0.5, 0.5], torch.Generator().manual_seed(3))
    b = random_weight_assignment((30, 20), [0.5, 0.5], torch.Generator().manual_seed(3))
    c = random_weight_assignment((30, 20), [0.5, 0.5], torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # not simply sorted: both partitions appear in the first row
    assert set(a[:10].reshape(-1).tolist()) == {1, 2}


def test_node_assignment_rows_constant_and_exact():
    shape = (10, 4, 3, 3)
    a = node_assignment(shape, [0.6, 0.2, 0.2], torch.Generator().manual_seed(0))
    assert a.dtype == torch.uint8 and a.shape == shape
    rows = a.reshape(10, -1)
    assert (rows == rows[:, :1]).all()
    assert torch.bincount(rows[:, 0].long(), minlength=4)[1:].tolist() == [6, 2, 2]
