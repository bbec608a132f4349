"""Named random streams (reprokit.seeds): independent per (seed, name), reproducible, declared."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from reprokit import seeds


def test_streams_differ_across_names_and_seeds_and_repeat_exactly():
    values = {(s, n): seeds.stream_seed(s, n) for s in range(4) for n in seeds.STREAMS}
    assert len(set(values.values())) == len(values)  # no two (seed, stream) pairs share a seed
    assert seeds.stream_seed(3, "minibatches") == values[3, "minibatches"]
    assert all(0 <= v < 2**63 for v in values.values())


def test_seed_offsets_no_longer_collide():
    """The old scheme's bug: seed 0's sampler stream (seed + 1) was seed 1's initialisation stream."""
    a = seeds.generator(0, "minibatches")
    b = seeds.generator(1, "init")
    assert not torch.equal(torch.rand(8, generator=a), torch.rand(8, generator=b))


def test_generators_draw_the_stream_and_numpy_agrees_on_the_seed():
    g1, g2 = seeds.generator(5, "eval"), seeds.generator(5, "eval")
    assert torch.equal(torch.randn(4, generator=g1), torch.randn(4, generator=g2))
    assert g1.initial_seed() == seeds.stream_seed(5, "eval")
    r1, r2 = seeds.numpy_rng(5, "eval"), np.random.default_rng(seeds.stream_seed(5, "eval"))
    assert r1.integers(0, 10**9) == r2.integers(0, 10**9)


def test_an_undeclared_stream_is_an_error_naming_it():
    with pytest.raises(KeyError, match="'minibatch'"):
        seeds.stream_seed(0, "minibatch")
    with pytest.raises(ValueError, match="seed must be >= 0"):
        seeds.stream_seed(-1, "init")


def test_no_seed_offsets_left_in_the_package():
    """Every random draw in methods/ and experiments/ goes through a named stream."""
    import re
    from pathlib import Path

    root = Path(seeds.__file__).parent
    offset = re.compile(r"seed\)?\s*\+\s*\d+|\d+\s*\+\s*\(?seed|manual_seed\((?:int\()?(?:self\.)?seed\b")
    hits = [
        f"{p.relative_to(root)}:{i}: {line.strip()}"
        for folder in ("methods", "experiments")
        for p in sorted((root / folder).glob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if offset.search(line)
    ]
    assert hits == []


def test_no_seed_offsets_in_the_benchmarks():
    """The diagnostics draw replicates from a named stream too, not from `split + offset` seeds."""
    import re
    from pathlib import Path

    offset = re.compile(r"seed[_-]offset|(?:seed|split)\)?\s*\+\s*(?:\d+|args\.)")
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    hits = [
        f"{p.name}:{i}: {line.strip()}"
        for p in sorted(bench.glob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if offset.search(line)
    ]
    assert hits == []


def test_importing_seeds_does_not_import_torch():
    code = "import sys, reprokit.seeds; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
