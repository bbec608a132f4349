"""The noise band of a single value is the measured seed spread of one cell of the claim's family
(report.verdicts.noise): a Student-t band at noise.LEVEL with the spread's degrees of freedom, never a fixed floor,
never the machine spread, never another family's."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from reprokit.report.verdicts import claims, coverage, noise
from reprokit.report.verdicts.papers import Claim


def _rows(values_by_seed: dict[int, list[float]], metric: str = "test_acc") -> pd.DataFrame:
    # FAKE cells: configuration c (axis `lr`) at each seed
    return pd.DataFrame(
        [
            {"lr": c, "seed": s, "status": "completed", metric: v}
            for s, values in values_by_seed.items()
            for c, v in enumerate(values)
        ]
    )


def test_the_spread_is_the_pooled_relative_variance_over_groups_of_at_least_three_seeds():
    # lr 0: 1.0 / 1.2 / 1.1 (3 seeds); lr 1: 2.0 / 2.4 / 2.2 (3 seeds); lr 2: 5.0 / 5.0 (2 seeds: left out)
    df = _rows({0: [1.0, 2.0, 5.0], 1: [1.2, 2.4, 5.0], 2: [1.1, 2.2]})
    spread = noise.own_spread({"e": df}, {"e": ["lr", "seed"]}, "test_acc")
    r0 = pd.Series([1.0, 1.2, 1.1]).std() / 1.1
    r1 = pd.Series([2.0, 2.4, 2.2]).std() / 2.2
    assert spread.groups == 2 and spread.df == 4 and spread.seeds == 6
    assert spread.rel_sd == pytest.approx(math.sqrt((2 * r0**2 + 2 * r1**2) / 4))
    # groups of different sizes weigh by their degrees of freedom, not one each
    df4 = pd.concat([df, _rows({3: [1.3, 2.2]})], ignore_index=True)  # lr 0 and 1 now 4 seeds
    spread = noise.own_spread({"e": df4}, {"e": ["lr", "seed"]}, "test_acc")
    r0 = pd.Series([1.0, 1.2, 1.1, 1.3]).std() / 1.15
    r1 = pd.Series([2.0, 2.4, 2.2, 2.2]).std() / 2.2
    assert spread.df == 6 and spread.rel_sd == pytest.approx(math.sqrt((3 * r0**2 + 3 * r1**2) / 6))
    # two seeds per configuration (fewer than MIN_SEEDS), or one: nothing measured
    assert noise.MIN_SEEDS == 3
    assert noise.own_spread({"e": _rows({0: [1.0, 2.0], 1: [1.2, 2.2]})}, {"e": ["lr", "seed"]}, "test_acc") is None
    assert noise.own_spread({"e": _rows({0: [1.0, 2.0]})}, {"e": ["lr", "seed"]}, "test_acc") is None


def test_a_measured_spread_sets_the_single_value_band_with_no_fixed_floor():
    assert noise.n1_fraction() == math.inf  # outside a claim: no spread, a single value orders nothing
    with noise.measured(None):
        assert noise.n1_fraction() == math.inf
    assert noise.t_quantile(2) == pytest.approx(4.303, abs=1e-3) and noise.t_quantile(30) == pytest.approx(
        2.042, abs=1e-3
    )
    assert noise.t_quantile(math.inf) == pytest.approx(1.960, abs=1e-3) and noise.t_quantile(0) == math.inf
    wide = noise.Spread(0.05, 4, "FAKE", df=8, seeds=12)
    with noise.measured(wide) as used:
        assert noise.n1_fraction(pair=True) == pytest.approx(noise.t_quantile(8) * 0.05 * math.sqrt(2))
        assert noise.n1_fraction(pair=False) == pytest.approx(noise.t_quantile(8) * 0.05)
    assert used == [True, False]
    # a tiny spread gives a tiny band: the old 1 % floor is gone
    with noise.measured(noise.Spread(0.001, 4, "FAKE", df=30)):
        assert noise.n1_fraction() == pytest.approx(2.0423 * math.sqrt(2) * 0.001, rel=1e-4)
        assert noise.n1_fraction() < 0.01
    assert not hasattr(noise, "REL_TOL_N1") and not hasattr(noise, "Z_NOISE")


class _Ctx:
    """FAKE results: one seed of a baseline and ours on `e`, and `spread` as measured."""

    scale, arts, artefacts = "quick", {}, {}

    def __init__(self, ours: float, spread):
        self._rows = pd.DataFrame(
            [
                {"method": "a", "seed": 0, "test_acc": ours},
                {"method": "b", "seed": 0, "test_acc": 0.90},
            ]
        )
        self._spread = spread

    def cells(self, experiment, where):
        df = self._rows
        for k, v in where.items():
            df = df[df[k] == v]
        return df

    def spread(self, experiments, metric):
        return self._spread


def _claim() -> Claim:
    return Claim(
        id="fake",
        paper="fake",
        artefact="fake",
        words="FAKE: a beats b",
        check="compare",
        args={"experiments": ["e"], "metric": "test_acc", "a": {"method": "a"}, "b": {"method": "b"}},
    )


@pytest.mark.parametrize(
    "rel_sd, verdict",
    [
        (None, "not testable"),  # 0.92 against 0.90 on one seed each, no seed spread in the family: nothing ordered
        (0.005, "holds"),  # a 0.5 % seed spread at 30 df: band 2.04 x sqrt(2) x 0.5 % = 1.4 % of 0.92 = 0.013
        (0.02, "inconclusive"),  # a 2 % seed spread: band 5.8 %
    ],
)
def test_a_one_seed_ordering_is_inconclusive_inside_the_measured_spread(rel_sd, verdict):
    spread = noise.Spread(rel_sd, 6, "FAKE", df=30, seeds=20) if rel_sd is not None else None
    v = claims.verdict(_Ctx(0.92, spread), _claim())
    assert v.status == verdict, v.measured
    # the report says which band decided it and where it came from
    assert ("n = 1 band" in v.measured and "t 2.04 at 30 df" in v.measured) == (rel_sd is not None)
    assert v.measured.startswith("a single cell decides it and its family has no seed spread") == (rel_sd is None)
    assert "fixed" not in v.measured


def _family(rel_sd: float, df: float = 12.0, experiments=("x", "y")) -> dict:
    return {"rel_sd": rel_sd, "df": df, "groups": 6, "cells": 18, "experiments": list(experiments), "date": "FAKE"}


def test_the_family_spread_is_read_from_the_committed_file(tmp_path, monkeypatch):
    path = tmp_path / "seed_spread.json"
    monkeypatch.setattr(noise, "pooled_path", lambda scale: path)
    assert noise.family("quick", ["federated"], "test_acc") is None  # no file: nothing measured
    rec = {"families": {"federated": {"test_acc": _family(0.004)}, "bali_classification": {"test_acc": _family(0.2)}}}
    path.write_text(json.dumps(rec))
    spread = noise.family("quick", ["federated"], "test_acc")
    assert (spread.rel_sd, spread.df, spread.groups, spread.seeds) == (0.004, 12.0, 6, 18)
    assert "the federated family (x, y" in spread.source
    assert noise.family("quick", ["federated"], "test_ll") is None  # not measured in this family
    # another family's spread never stands in, however it was measured
    assert noise.family("quick", ["input_selection"], "test_acc") is None
    # a claim over two families takes the wider of theirs
    assert noise.family("quick", ["federated", "bali_classification"], "test_acc").rel_sd == 0.2
    assert noise.family("quick", [], "test_acc") is None


def test_the_machine_spread_is_never_a_band(tmp_path, monkeypatch):
    monkeypatch.setattr(noise, "pooled_path", lambda scale: tmp_path / "seed_spread.json")
    seeds = {"families": {"federated": {"test_acc": _family(0.004)}}}
    (tmp_path / "seed_spread.json").write_text(json.dumps(seeds))
    machine = {
        "date": "FAKE",
        "machine_spread": {
            "a": {"test_acc": {"rel_sd": 0.03, "pairs": 4}},
            "c": {"test_ll": {"rel_sd": 0.5, "pairs": 3}},
        },
    }
    (tmp_path / "verdict_stability.json").write_text(json.dumps(machine))
    # the family's seed spread, not the larger machine spread
    assert noise.family("quick", ["federated"], "test_acc").rel_sd == 0.004
    # a metric only the machines measured has no band at all
    assert noise.family("quick", ["federated"], "test_ll") is None
    assert not hasattr(noise, "pooled") and not hasattr(noise, "_machine")
    # the machine spread of the claim's own experiments is still measured, to be reported beside the band
    assert noise.own_machine("quick", ["a"], "test_acc").rel_sd == 0.03


def _machine_spread(tmp_path, monkeypatch, metric: str, spreads: dict) -> dict:
    """FAKE figures/<scale>/verdict_stability.json: {experiment: (rel_sd, pairs)} of `metric`."""
    monkeypatch.setattr(noise, "pooled_path", lambda scale: tmp_path / "seed_spread.json")
    machine = {
        "date": "FAKE",
        "machine_spread": {e: {metric: {"rel_sd": r, "pairs": n}} for e, (r, n) in spreads.items()},
    }
    (tmp_path / "verdict_stability.json").write_text(json.dumps(machine))
    return machine


def test_a_claims_own_cells_re_run_measure_any_metric_of_theirs(tmp_path, monkeypatch):
    machine = _machine_spread(tmp_path, monkeypatch, "aug_rotation", {"fig3a": (0.2, 4), "other": (0.9, 9)})
    # a learned hyperparameter: never a family's spread
    assert noise.family("quick", ["affine_invariance"], "aug_rotation") is None
    own = noise.own_machine("quick", ["fig3a"], "aug_rotation")
    assert own.rel_sd == 0.2 and own.groups == 4 and "own cells" in own.source
    assert noise.own_machine("quick", ["table4_mnist"], "aug_rotation") is None  # not re-run: nothing measured
    machine["machine_spread"]["fig3a"]["aug_rotation"]["pairs"] = 2
    (tmp_path / "verdict_stability.json").write_text(json.dumps(machine))
    # reported beside a band, never one: any re-run pair is worth reporting
    assert noise.own_machine("quick", ["fig3a"], "aug_rotation").groups == 2


def test_a_claims_machine_spread_counts_each_re_run_pair_once(tmp_path, monkeypatch):
    # FAKE: four re-run pairs of the reference draws at 0.7 %, one of the retrained cell at 0.15 %: the claim's
    # band follows the four (an unweighted median of the two experiments would give 0.43 %)
    _machine_spread(tmp_path, monkeypatch, "test_acc", {"fig9_random": (0.007, 4), "fig9_retrain": (0.0015, 1)})
    own = noise.own_machine("quick", ["fig9_retrain", "fig9_random"], "test_acc")
    assert own.rel_sd == 0.007 and own.groups == 5


def test_a_best_of_k_claim_reads_its_reference_experiments_noise_too():
    claim = Claim(
        "c",
        "partitioned",
        "fig9",
        "FAKE",
        "vs_best_of",
        args={"experiment": "fig9_retrain", "metric": "test_acc", "reference": {"experiment": "fig9_random"}},
    )
    assert coverage.scope(object(), claim) == (["fig9_retrain", "fig9_random"], "test_acc")


class _Cells:
    """FAKE cells of one experiment."""

    scale, arts, artefacts = "quick", {}, {}

    def __init__(self, rows):
        self._rows = pd.DataFrame(rows)

    def cells(self, experiment, where):
        df = self._rows
        for k, v in where.items():
            df = df[df[k] == v]
        return df


@pytest.mark.parametrize(
    "p16, verdict",
    [
        ((0.2, 0.3, 0.25), "holds"),  # clearly pruned on every seed
        ((0.45, 0.6, 0.5), "inconclusive"),  # mean 0.52 ± 0.044: inside t(2) s.e. (0.19) of 0.5
        ((0.9, 0.95, 0.92), "does not hold"),  # clearly kept
    ],
)
def test_an_input_inside_the_noise_of_the_threshold_is_neither_kept_nor_pruned(p16, verdict):
    # FAKE masks of 16 inputs over 3 seeds: inputs 1-15 at 0.99, input 16 as given
    rows = [{"seed": s, **{f"p_keep_{i:02d}": 0.99 for i in range(15)}, "p_keep_15": p16[s]} for s in range(3)]
    v = claims.check(_Cells(rows), "inputs_kept", {"experiment": "e", "prefix": "p_keep_", "expected_first": 15})
    assert v.status == verdict, v.measured


@pytest.mark.parametrize(
    "above, verdict",
    [
        ((0.980, 0.982), "holds"),  # K = 16 reaches K = 15's 0.976
        ((0.978, 0.971), "inconclusive"),  # short by 0.0015 on average, within t(1) s.e. of the paired seed differences
        ((0.90, 0.91), "does not hold"),  # clearly below: K = 15 stands out
    ],
)
def test_a_peak_matched_from_above_has_a_noise_band(above, verdict):
    rows = [{"k": 15, "seed": s, "train_acc": v} for s, v in enumerate((0.975, 0.977))]
    rows += [{"k": 16, "seed": s, "train_acc": v} for s, v in enumerate(above)]
    args = {"experiment": "e", "axis": "k", "metric": "train_acc", "at": 15, "among": "above"}
    v = claims.check(_Cells(rows), "peak", args)
    assert v.status == verdict, v.measured


def test_a_learned_hyperparameter_takes_no_other_experiments_spread(tmp_path, monkeypatch):
    monkeypatch.setattr(noise, "pooled_path", lambda scale: tmp_path / "seed_spread.json")
    rec = {"families": {"affine_invariance": {m: _family(0.3) for m in ("aug_rotation", "test_ll")}}}
    (tmp_path / "seed_spread.json").write_text(json.dumps(rec))
    assert noise.family("quick", ["affine_invariance"], "aug_rotation") is None
    assert noise.family("quick", ["affine_invariance"], "test_ll").rel_sd == 0.3


def test_a_difference_of_two_metrics_takes_its_band_from_both_parts_not_from_the_small_gap():
    # FAKE cells: test and train NLL of three configurations, one seed each: their gaps are small against either
    df = pd.DataFrame(
        [
            {"lr": c, "seed": 0, "status": "completed", "test_nll": t, "train_nll": r}
            for c, (t, r) in enumerate([(0.52, 0.50), (0.41, 0.40), (0.33, 0.30)])
        ]
    )
    tables, axes = {"e": df}, {"e": ["lr", "seed"]}
    parts = {"test_nll": noise.Spread(0.02, 10, "FAKE", 20, 30), "train_nll": noise.Spread(0.01, 8, "FAKE", 16, 24)}
    seen = []

    def family(scale, kinds, metric):
        seen.append(kinds)
        return parts.get(metric)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(noise, "family", family)
        spread = noise.difference_spread(tables, axes, "test_nll - train_nll", "quick", ["bali_classification"])
        assert seen and all(k == ["bali_classification"] for k in seen)  # the claim's own family, no other
        # per cell sqrt((0.02 t)^2 + (0.01 r)^2) / |t - r|: 0.56, 0.47, 0.24 -> median 0.47
        want = sorted(math.hypot(0.02 * t, 0.01 * r) / abs(t - r) for t, r in [(0.52, 0.5), (0.41, 0.4), (0.33, 0.3)])[
            1
        ]
        assert spread.rel_sd == pytest.approx(want) and spread.rel_sd > 0.2
        assert "test_nll (2.00%)" in spread.source
        assert spread.df == 16 and spread.groups == 8  # the weaker part's degrees of freedom
        parts.pop("train_nll")  # a part without a measured spread: nothing to combine
        assert noise.difference_spread(tables, axes, "test_nll - train_nll", "quick", ["bali_classification"]) is None
    # three seeds of the claim's own cells measure the difference itself
    seeds = pd.concat(
        [df, df.assign(seed=1, test_nll=df["test_nll"] + 0.01), df.assign(seed=2, test_nll=df["test_nll"] - 0.01)],
        ignore_index=True,
    )
    own = noise.difference_spread({"e": seeds}, axes, "test_nll - train_nll", "quick", [])
    assert own.groups == 3 and own.df == 6 and own.source == "e"


def test_the_stability_benchmark_finds_the_experiments_of_every_claim():
    # benchmarks/verdict_stability.py re-runs the experiments a claim reads: a claim it finds none for would never
    # be re-checked (paired_gap's pairs, compare's sides, table entries through their artefact)
    import importlib.util
    from pathlib import Path

    from reprokit.report.verdicts import papers

    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("verdict_stability", repo / "benchmarks" / "verdict_stability.py")
    vs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vs)
    for path in sorted((repo / "config" / "papers").glob("*.yaml")):
        doc = papers.load(path)
        for claim in papers.claims(doc):
            assert vs.claim_experiments(claim, doc), claim.id
    doc = papers.load(repo / "config" / "papers" / "partitioned.yaml")
    fig7 = next(c for c in papers.claims(doc) if c.id == "fig7_mnist_retrained_good")
    assert {"retrain_mnist_c2", "sens_mnist_c4"} <= vs.claim_experiments(fig7, doc)
    doc = papers.load(repo / "config" / "papers" / "bali.yaml")
    local = next(c for c in papers.claims(doc) if c.id == "bali_fig7_local_faster")  # converges_faster's fast side
    assert vs.claim_experiments(local, doc) == {"bali_fig7_local", "bali_cls_uci"}


def test_each_table_row_reads_the_noise_of_its_own_metric():
    """Table 8's rows are different timing ratios: a threshold over them bands each entry with its own metric's
    measured spread (FAKE: parameter updates 1 %, hyperparameter updates 20 %), not the widest for all."""
    from reprokit.report.verdicts.results import Ours

    class Ctx:
        arts = {"t": {"rows": {"P": {"metric": "p_ratio"}, "H": {"metric": "h_ratio"}}}}
        artefacts = {"t": {"experiments": ["e"]}}

        def ours(self, artefact, row, column):
            return Ours(mean=1.1, n=1)

        def spread(self, experiments, metric):
            assert experiments == ["e"]
            return noise.Spread({"p_ratio": 0.01, "h_ratio": 0.2}[metric], 3, "FAKE", df=10, seeds=9)

    claim = Claim("c", "p", "t", "FAKE", "threshold", args={"artefact": "t", "rows": ["P", "H"], "columns": ["x"]})
    claim.args["at_most"] = 1.21
    v = claims.verdict(Ctx(), claim)
    assert "P / x = 1.1 (noise band 0.027)" in v.measured  # t(10) = 2.23 x 1 %, of the bound 1.21
    assert "H / x = 1.1 (noise band 0.54) (inside the noise)" in v.measured  # t(10) x 20 %
    assert v.status == "inconclusive" and "p_ratio: n = 1 band 2.2%" in v.measured
    assert v.lean == "leans with the paper" and v.label == "inconclusive (leans with the paper)"
