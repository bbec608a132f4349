"""The noise band of a single value is the measured seed spread of one cell (report.verdicts.noise)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from reprokit.report.verdicts import claims, noise
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


def test_the_spread_is_the_median_relative_sd_over_groups_equal_but_for_the_seed():
    df = _rows({0: [1.0, 2.0, 5.0], 1: [1.2, 2.0, 5.0]})  # lr 0: 1.0 / 1.2; lr 1 and 2: no spread
    spread = noise.own_spread({"e": df}, {"e": ["lr", "seed"]}, "test_acc")
    assert spread.groups == 3
    assert spread.rel_sd == pytest.approx(0.0)  # median of (0.129, 0, 0)
    # fewer than MIN_GROUPS groups: one pair of seeds measures no spread
    assert noise.own_spread({"e": df[df["lr"] == 0]}, {"e": ["lr", "seed"]}, "test_acc") is None
    df = _rows({0: [1.0, 2.0, 4.0], 1: [1.2, 2.2, 4.0]})
    spread = noise.own_spread({"e": df}, {"e": ["lr", "seed"]}, "test_acc")
    assert spread.rel_sd == pytest.approx(pd.Series([2.0, 2.2]).std() / 2.1)  # the median of the three
    # one seed per configuration: nothing measured
    assert noise.own_spread({"e": _rows({0: [1.0, 2.0]})}, {"e": ["lr", "seed"]}, "test_acc") is None


def test_a_measured_spread_sets_the_single_value_band_never_below_the_fixed_floor():
    assert noise.n1_fraction() == noise.REL_TOL_N1  # outside a claim: the fixed band
    wide = noise.Spread(0.05, 4, "FAKE")
    with noise.measured(wide) as used:
        assert noise.n1_fraction(pair=True) == pytest.approx(2 * 0.05 * math.sqrt(2))
        assert noise.n1_fraction(pair=False) == pytest.approx(0.1)
    assert used == [True, False]
    with noise.measured(noise.Spread(0.001, 4, "FAKE")):
        assert noise.n1_fraction() == noise.REL_TOL_N1


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
        (None, "holds"),  # 0.92 against 0.90 on one seed each: 2.2 % beyond the fixed 1 % band
        (0.005, "holds"),  # a 0.5 % seed spread: band 2 x sqrt(2) x 0.5 % = 1.4 %
        (0.02, "inconclusive"),  # a 2 % seed spread (as test LL across machines): band 5.7 %
    ],
)
def test_a_one_seed_ordering_is_inconclusive_inside_the_measured_spread(rel_sd, verdict):
    spread = noise.Spread(rel_sd, 6, "FAKE") if rel_sd is not None else None
    v = claims.verdict(_Ctx(0.92, spread), _claim())
    assert v.status == verdict, v.measured
    # the report says which band decided it and where it came from
    assert ("spread of one cell measured" in v.measured) == (rel_sd is not None)
    assert ("fixed" in v.measured) == (rel_sd is None)


def test_the_pooled_spread_is_read_from_the_committed_file(tmp_path, monkeypatch):
    path = tmp_path / "seed_spread.json"
    monkeypatch.setattr(noise, "pooled_path", lambda scale: path)
    assert noise.pooled("quick", "test_acc") is None  # no file: nothing measured
    rec = {"metrics": {"test_acc": {"rel_sd": 0.004, "groups": 12, "experiments": ["x", "y"], "date": "FAKE"}}}
    path.write_text(json.dumps(rec))
    spread = noise.pooled("quick", "test_acc")
    assert spread.rel_sd == 0.004 and spread.groups == 12 and "2 experiments" in spread.source
    assert noise.pooled("quick", "test_ll") is None


def test_the_pooled_band_is_the_larger_of_the_seed_and_the_machine_spread(tmp_path, monkeypatch):
    monkeypatch.setattr(noise, "pooled_path", lambda scale: tmp_path / "seed_spread.json")
    seeds = {"metrics": {"test_acc": {"rel_sd": 0.004, "groups": 3, "experiments": ["x"], "date": "FAKE"}}}
    (tmp_path / "seed_spread.json").write_text(json.dumps(seeds))
    machine = {
        "date": "FAKE",
        "machine_spread": {
            "a": {"test_acc": {"rel_sd": 0.01, "pairs": 4}},
            "b": {"test_acc": {"rel_sd": 0.03, "pairs": 2}},
            "c": {"test_ll": {"rel_sd": 0.5, "pairs": 3}},
        },
    }
    (tmp_path / "verdict_stability.json").write_text(json.dumps(machine))
    spread = noise.pooled("quick", "test_acc")
    assert spread.rel_sd == pytest.approx(0.02) and spread.groups == 6 and "thread count" in spread.source
    seeds["metrics"]["test_acc"]["rel_sd"] = 0.05
    (tmp_path / "seed_spread.json").write_text(json.dumps(seeds))
    assert noise.pooled("quick", "test_acc").rel_sd == 0.05  # the seeds' is larger now
    assert noise.pooled("quick", "test_ll").rel_sd == 0.5  # machines only


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
    assert noise.pooled("quick", "aug_rotation") is None  # a learned hyperparameter: never pooled across experiments
    own = noise.own_machine("quick", ["fig3a"], "aug_rotation")
    assert own.rel_sd == 0.2 and own.groups == 4 and "own cells" in own.source
    assert noise.own_machine("quick", ["table4_mnist"], "aug_rotation") is None  # not re-run: nothing measured
    machine["machine_spread"]["fig3a"]["aug_rotation"]["pairs"] = 2
    (tmp_path / "verdict_stability.json").write_text(json.dumps(machine))
    assert noise.own_machine("quick", ["fig3a"], "aug_rotation") is None  # too few pairs


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
    assert claims.scope(object(), claim) == (["fig9_retrain", "fig9_random"], "test_acc")


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
        ((0.45, 0.6, 0.5), "inconclusive"),  # mean 0.52 ± 0.044: inside 2 s.e. of 0.5
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
        ((0.978, 0.971), "inconclusive"),  # short by 0.0015 on average, within 2 s.e. of the paired seed differences
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
    rec = {
        "metrics": {
            m: {"rel_sd": 0.3, "groups": 9, "experiments": ["x"], "date": "FAKE"} for m in ("aug_rotation", "test_ll")
        }
    }
    (tmp_path / "seed_spread.json").write_text(json.dumps(rec))
    assert noise.pooled("quick", "aug_rotation") is None and noise.pooled("quick", "test_ll").rel_sd == 0.3


def test_a_difference_of_two_metrics_takes_its_band_from_both_parts_not_from_the_small_gap():
    # FAKE cells: test and train NLL of three configurations, one seed each: their gaps are small against either
    df = pd.DataFrame(
        [
            {"lr": c, "seed": 0, "status": "completed", "test_nll": t, "train_nll": r}
            for c, (t, r) in enumerate([(0.52, 0.50), (0.41, 0.40), (0.33, 0.30)])
        ]
    )
    tables, axes = {"e": df}, {"e": ["lr", "seed"]}
    parts = {"test_nll": noise.Spread(0.02, 10, "FAKE"), "train_nll": noise.Spread(0.01, 10, "FAKE")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(noise, "pooled", lambda scale, metric: parts.get(metric))
        spread = noise.difference_spread(tables, axes, "test_nll - train_nll", "quick")
        # per cell sqrt((0.02 t)^2 + (0.01 r)^2) / |t - r|: 0.56, 0.47, 0.24 -> median 0.47
        want = sorted(math.hypot(0.02 * t, 0.01 * r) / abs(t - r) for t, r in [(0.52, 0.5), (0.41, 0.4), (0.33, 0.3)])[
            1
        ]
        assert spread.rel_sd == pytest.approx(want) and spread.rel_sd > 0.2
        assert "test_nll (2.00%)" in spread.source
        parts.pop("train_nll")  # a part without a measured spread: nothing to combine
        assert noise.difference_spread(tables, axes, "test_nll - train_nll", "quick") is None
    # seeds of the claim's own cells measure the difference itself
    seeds = pd.concat([df, df.assign(seed=1, test_nll=df["test_nll"] + 0.01)], ignore_index=True)
    own = noise.difference_spread({"e": seeds}, axes, "test_nll - train_nll", "quick")
    assert own.groups == 3 and own.source == "e"


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
            return noise.Spread({"p_ratio": 0.01, "h_ratio": 0.2}[metric], 3, "FAKE")

    claim = Claim("c", "p", "t", "FAKE", "threshold", args={"artefact": "t", "rows": ["P", "H"], "columns": ["x"]})
    claim.args["at_most"] = 1.21
    v = claims.verdict(Ctx(), claim)
    assert "P / x = 1.1 (noise band 0.024)" in v.measured  # 2 sd of 1 %, of the bound 1.21
    assert "H / x = 1.1 (noise band 0.48) (inside the noise)" in v.measured  # 2 sd of 20 %
    assert v.status == "inconclusive" and "p_ratio: n = 1 band 2.0%" in v.measured
