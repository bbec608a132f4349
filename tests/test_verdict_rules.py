"""The verdict rules of report/verdicts/ (decide.py, the checks claims.py dispatches to, noise.py), on FAKE cells.

Every number here is SYNTHETIC: one two-sided Student-t band at noise.LEVEL for every check (paired, Welch's or a
mean against a bound; a single value's from its family's measured seed spread, never a fixed floor, never the
machine spread, never another family's), similarities as orderings of their margin, the coverage a claim needs
before it counts as tested (its grid, its `subset`, its `requires`), `by_construction`, the lean of an inconclusive
verdict, and the method / baseline counts of the glance.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from reprokit.report.verdicts import claims, comparisons, convergence, coverage, decide, noise, papers, reproduction
from reprokit.report.verdicts.papers import Claim

REPO = Path(__file__).resolve().parents[1]
PAPERS = sorted((REPO / "config" / "papers").glob("*.yaml"))
T2, T4, T30 = 4.302653, 2.776445, 2.042272  # two-sided 95 % Student-t quantiles with 2, 4 and 30 df


def fam(rel_sd: float = 0.003, df: float = 30.0) -> noise.Spread:
    """A FAKE family seed spread."""
    return noise.Spread(rel_sd, 10, "FAKE family", df, 40)


class Cells:
    """FAKE results: {experiment: rows} at quick scale, `spread` as the family's measured seed spread; `grid`
    ({experiment: coordinates of every cell}) and `settings` ({experiment: settings of every cell}) as the scale's
    grid where given (else the grid is unknown, as for results read on their own)."""

    scale = "quick"
    arts: dict = {}
    artefacts: dict = {}

    def __init__(self, rows: dict, spread=None, grid=None, settings=None, machine=None):
        self._rows = {e: pd.DataFrame([{"status": "completed", **r} for r in rs]) for e, rs in rows.items()}
        self._spread, self._grid, self._settings, self._machine = spread, grid, settings or {}, machine

    def cells(self, experiment, where):
        return self._select(self._rows.get(experiment, pd.DataFrame()), where)

    @staticmethod
    def _select(df: pd.DataFrame, where: dict) -> pd.DataFrame:
        for key, value in where.items():
            if key not in df:
                return df.iloc[0:0]
            df = df[df[key] == value]
        return df

    def table(self, experiment):
        return self._rows.get(experiment)

    def spread(self, experiments, metric):
        return self._spread

    def machine(self, experiments, metric):
        return self._machine

    def grid(self, experiment):
        return list((self._grid or {}).get(experiment) or [])

    def cell_values(self, experiment):
        return [(c, {**self._settings.get(experiment, {}), **c}) for c in self.grid(experiment)]


def compare_claim(**args) -> Claim:
    base = {"experiments": ["e"], "metric": "test_acc", "a": {"method": "a"}, "b": {"method": "b"}}
    return Claim("fake_claim", "fake", "fake_art", "FAKE: a beats b", "compare", args={**base, **args})


def one_seed(a: float, b: float, **extra) -> dict:
    return {
        "e": [{"method": "a", "seed": 0, "test_acc": a, **extra}, {"method": "b", "seed": 0, "test_acc": b, **extra}]
    }


# -- (1) t, not 2 s.e. ---------------------------------------------------------------------------------------------


def test_a_paired_gap_that_held_at_two_se_is_inconclusive_under_t_with_two_df():
    # FAKE LML at K = 15 over three seeds, K = 16 below it by 0.1, 0.2, 0.3: mean 0.2 ± 0.0577. 2 s.e. = 0.115
    # (the old rule: holds); t(2) x s.e. = 0.248 (inconclusive)
    rows = [{"k": 15, "seed": s, "lml": 0.0} for s in range(3)]
    rows += [{"k": 16, "seed": s, "lml": -d} for s, d in enumerate((0.1, 0.2, 0.3))]
    rows += [{"k": 14, "seed": s, "lml": -1.0} for s in range(3)]
    v = claims.check(Cells({"e": rows}), "peak", {"experiment": "e", "axis": "k", "metric": "lml", "at": 15})
    se = pd.Series([0.1, 0.2, 0.3]).std() / math.sqrt(3)
    assert 2 * se < 0.2 < T2 * se
    assert v.status == "inconclusive", v.measured
    assert f"noise band {T2 * se:.3g}" in v.measured and "3 paired seed differences (2 df)" in v.measured
    assert decide.paired_band(se, 3) == pytest.approx(T2 * se, rel=1e-5)
    # the same differences over six seeds: t(5) x s.e. is below the gap, it holds
    rows6 = [{"k": 15, "seed": s, "lml": 0.0} for s in range(6)]
    rows6 += [{"k": 16, "seed": s, "lml": -d} for s, d in enumerate((0.1, 0.2, 0.3, 0.1, 0.2, 0.3))]
    v = claims.check(Cells({"e": rows6}), "peak", {"experiment": "e", "axis": "k", "metric": "lml", "at": 15})
    assert v.status == "holds", v.measured


def test_two_means_use_welch_and_a_mean_against_a_bound_uses_t_of_n_minus_one():
    # FAKE: a = 1.00 ± 0.0115, b = 0.96 ± 0.0115 over 3 seeds each: gap 0.04 beyond 2 combined s.e. (0.033) but
    # inside t(4 Welch df) x combined s.e. (0.045)
    rows = [{"method": "a", "seed": s, "test_acc": x} for s, x in enumerate((0.98, 1.0, 1.02))]
    rows += [{"method": "b", "seed": s, "test_acc": x} for s, x in enumerate((0.94, 0.96, 0.98))]
    se = 0.02 / math.sqrt(3)
    assert decide.noise_band(1.0, se, 3, 0.96, se, 3) == pytest.approx(T4 * math.hypot(se, se), rel=1e-5)
    assert 2 * math.hypot(se, se) < 0.04 < T4 * math.hypot(se, se)
    v = claims.verdict(Cells({"e": rows}, spread=fam()), compare_claim())
    assert v.status == "inconclusive" and v.n == 3, v.measured
    # a mean of 3 against a fixed bound: t(2) x its s.e.
    assert decide.bound_band(1.0, se, 3, 0.95) == pytest.approx(T2 * se, rel=1e-5)
    th = Claim("th", "fake", "fake_art", "FAKE: a is at least 0.97", "threshold", args={})
    th = replace(th, args={"experiment": "e", "where": {"method": "a"}, "metric": "test_acc", "at_least": 0.97})
    # 1.00 - 0.97 = 0.03 beyond 2 s.e. (0.023), inside t(2) x s.e. (0.050)
    assert claims.verdict(Cells({"e": rows}, spread=fam()), th).status == "inconclusive"
    th = replace(th, args={**th.args, "at_least": 0.94})
    assert claims.verdict(Cells({"e": rows}, spread=fam()), th).status == "holds"


# -- (2) similarity as an ordering of its margin -----------------------------------------------------------------


@pytest.mark.parametrize(
    "b, status, lean",
    [
        (0.901, "holds", ""),  # 0.009 inside the tolerance, band 0.0078
        (0.906, "inconclusive", decide.LEANS_WITH),  # 0.004 inside: within the band
        (0.914, "inconclusive", decide.LEANS_AGAINST),  # 0.004 outside: within the band
        (0.95, "does not hold", ""),  # 0.04 outside: far beyond the band
    ],
)
def test_a_similarity_holds_only_inside_its_tolerance_by_more_than_the_band(b, status, lean):
    # FAKE: one seed a side, tol 0.01; the n = 1 band t(30) x sqrt 2 x 0.3 % x the larger value ~ 0.0078
    claim = compare_claim(relation="similar", tol=0.01, z=1)
    v = claims.verdict(Cells(one_seed(0.90, b), spread=fam()), claim)
    assert v.status == status and v.lean == lean, v.measured
    band = T30 * math.sqrt(2) * 0.003 * max(0.90, b)
    with noise.measured(fam()):
        outcome, got = comparisons._similar(0.90, 0.0, 1, b, 0.0, 1, 0.01, 1)
    assert outcome == {"holds": True, "does not hold": False}.get(status, decide.INCONCLUSIVE)
    assert got == pytest.approx(band, rel=1e-4)


def test_a_similarity_of_table_entries_names_its_band():
    from reprokit.report.verdicts.results import Ours

    class Entries(Cells):
        def ours(self, artefact, row, column):
            return {"A": Ours(50.0, 0.0, 1), "B": Ours(50.9, 0.0, 1)}[column]

        def paper_number(self, *_):
            return None

        def paired(self, *_):
            return []

    args = {"artefact": "t", "a": "A", "b": "B", "over": ["r"], "tol": 1.0, "relation": "similar"}
    with noise.measured(fam(0.002)):
        v = claims.check(Entries({}), "compare_entries", args)
    band = T30 * math.sqrt(2) * 0.002 * 50.9  # 0.29 > the margin 0.1
    assert v.status == "inconclusive" and f"(noise band {band:.2g})" in v.measured, v.measured


def test_an_entry_the_paper_prints_as_a_dash_is_absent_not_pending():
    from reprokit.report.verdicts.papers import PaperNumber
    from reprokit.report.verdicts.results import Ours

    # FAKE: BALI against DO and VADAM on two rows; the paper prints "-" for VADAM on row "p" (no such entry) and
    # nothing on row "q" (not run by us: the comparison is pending)
    ran = {("r", "BALI"): Ours(1.0, 0.01, 5), ("r", "DO"): Ours(1.5, 0.01, 5), ("r", "VADAM"): Ours(1.6, 0.01, 5)}
    ran |= {
        ("p", "BALI"): Ours(1.0, 0.01, 5),
        ("p", "DO"): Ours(1.4, 0.01, 5),
        ("p", "VADAM"): Ours(math.nan, math.nan, 0),
    }

    class Entries(Cells):
        def ours(self, artefact, row, column):
            return ran[(row, column)]

        def paper_number(self, artefact, row, column):
            return PaperNumber(artefact, row, column, None, None, "-") if (row, column) == ("p", "VADAM") else None

        def paired(self, *_):
            return []

    args = {"artefact": "t", "a": "BALI", "b": ["DO", "VADAM"], "over": ["r", "p"], "lower_is_better": True}
    with noise.measured(fam(0.002)):
        v = claims.check(Entries({}), "compare_entries", args)
    assert v.status == "holds" and "p: no VADAM (the paper prints '-')" in v.measured, v.measured
    ran[("q", "BALI")], ran[("q", "DO")] = Ours(1.0, 0.01, 5), Ours(1.4, 0.01, 5)
    ran[("q", "VADAM")] = Ours(math.nan, math.nan, 0)
    with noise.measured(fam(0.002)):
        v = claims.check(Entries({}), "compare_entries", {**args, "over": ["r", "p", "q"]})
    assert v.status == "not run" and "q: VADAM or BALI not run" in v.measured, v.measured


# -- (3) a single value needs its family's seed spread -------------------------------------------------------------


def test_a_one_cell_claim_without_a_family_spread_is_not_testable():
    claim = compare_claim()
    v = claims.verdict(Cells(one_seed(0.95, 0.90), spread=None), claim)
    assert v.status == "not testable"
    assert v.measured.startswith("a single cell decides it and its family has no seed spread"), v.measured
    assert "0.95 vs 0.9" in v.measured  # what ran is still shown
    # the same cells with a measured family spread: the 5-point gap is far outside its 0.8-point band
    v = claims.verdict(Cells(one_seed(0.95, 0.90), spread=fam()), claim)
    assert v.status == "holds" and "n = 1 band" in v.measured and "FAKE family" in v.measured
    v = claims.verdict(Cells(one_seed(0.85, 0.90), spread=fam()), claim)
    assert v.status == "does not hold"
    # three seeds a side need no family: their own s.e. decides
    rows = [{"method": m, "seed": s, "test_acc": x + 0.001 * s} for m, x in (("a", 0.95), ("b", 0.9)) for s in range(3)]
    assert claims.verdict(Cells({"e": rows}, spread=None), claim).status == "holds"


# -- (4) the lean of an inconclusive verdict ---------------------------------------------------------------------


@pytest.mark.parametrize("a, lean", [(0.902, decide.LEANS_WITH), (0.898, decide.LEANS_AGAINST)])
def test_an_inconclusive_verdict_states_its_lean(a, lean):
    claim = compare_claim()
    v = claims.verdict(Cells(one_seed(a, 0.90), spread=fam()), claim)
    assert v.status == "inconclusive" and v.lean == lean
    assert v.label == f"inconclusive ({lean})"
    ctx = type("Ctx", (), {"scale": "quick"})()
    assert reproduction.why_not_here(ctx, claim, v) == f"The effect is inside the noise (see measured); it {lean}."
    # a verdict that is not inconclusive has no lean, and its label is its status
    v = claims.verdict(Cells(one_seed(0.95, 0.90), spread=fam()), claim)
    assert v.lean == "" and v.label == "holds"


def test_a_claim_inconclusive_on_two_comparisons_that_lean_apart_leans_both_ways():
    rows = [{"method": "a", "dataset": d, "seed": 0, "test_acc": x} for d, x in (("p", 0.902), ("q", 0.898))] + [
        {"method": "b", "dataset": d, "seed": 0, "test_acc": 0.90} for d in ("p", "q")
    ]
    v = claims.verdict(Cells({"e": rows}, spread=fam()), compare_claim(by="dataset"))
    assert v.status == "inconclusive" and v.lean == "leans both ways"


# -- (5) by construction -----------------------------------------------------------------------------------------


def test_a_claim_true_by_construction_is_shown_and_not_counted():
    claim = replace(compare_claim(), by_construction="FAKE: a is b plus a constant we chose")
    v = claims.verdict(Cells(one_seed(0.95, 0.90), spread=fam()), claim)
    assert v.status == decide.BY_CONSTRUCTION == "by construction"
    assert v.measured.startswith("FAKE: a is b plus a constant we chose; measured:") and v.measured.endswith("(holds)")
    assert decide.BY_CONSTRUCTION in decide.STATUSES and decide.BY_CONSTRUCTION not in decide.TESTED
    ctx = type("Ctx", (), {"scale": "quick"})()
    assert reproduction.why_not_here(ctx, claim, v) == (
        "Holds by construction, so it is no evidence: FAKE: a is b plus a constant we chose"
    )
    # nothing ran: not run, not "by construction"
    assert claims.verdict(Cells({"e": []}, spread=fam()), claim).status == "not run"
    other = replace(compare_claim(), id="other")
    g = reproduction.glance(ctx, {"paper": "fake", "artefacts": {}}, [(claim, v), (other, replace(v, status="holds"))])
    assert g["claims"] == 2 and g["counts"]["by construction"] == 1 and g["counts"]["holds"] == 1
    line = reproduction.bottom_line(g)
    assert "1 of its 2 claims about" in line and "1 more holds by construction, no evidence" in line


# -- (6) coverage: the whole grid, or the subset the words allow ------------------------------------------------------

GRID = {"e": [{"method": m, "dataset": d, "seed": 0} for m in ("a", "b") for d in ("p", "q", "r")]}


def test_a_claim_on_a_partial_grid_is_not_testable_and_a_subset_claim_is_decided_on_what_ran():
    rows = [
        {"method": m, "dataset": d, "seed": 0, "test_acc": x} for d in ("p", "q") for m, x in (("a", 0.95), ("b", 0.9))
    ]
    claim = compare_claim(by="dataset")
    # the grid unknown (results read on their own): decided on the cells
    assert claims.verdict(Cells({"e": rows}, spread=fam()), claim).status == "holds"
    v = claims.verdict(Cells({"e": rows}, spread=fam(), grid=GRID), claim)
    assert v.status == "not testable" and v.measured.startswith("partial grid: 4 of 6 configurations of e ran")
    assert "missing e.g. method=a, dataset=r" in v.measured and "(holds by the check's reading)" in v.measured
    assert reproduction.why_not_here(type("C", (), {"scale": "quick"})(), claim, v).startswith(
        "Not testable at quick scale: partial grid"
    )
    sub = replace(claim, subset="FAKE: per dataset, the datasets that ran")
    v = claims.verdict(Cells({"e": rows}, spread=fam(), grid=GRID), sub)
    assert v.status == "holds" and v.subset.startswith("FAKE: per dataset, the datasets that ran: 4 of 6")
    # a subset is no licence to ignore a failure on what ran
    bad = [{**r, "test_acc": 0.8} if (r["method"], r["dataset"]) == ("a", "q") else r for r in rows]
    assert claims.verdict(Cells({"e": bad}, spread=fam(), grid=GRID), sub).status == "does not hold"
    # another seed missing is no gap in the grid: the seeds are the rule's business
    seeds = {"e": GRID["e"] + [{**c, "seed": 1} for c in GRID["e"]]}
    full = [
        {"method": m, "dataset": d, "seed": 0, "test_acc": x}
        for d in ("p", "q", "r")
        for m, x in (("a", 0.95), ("b", 0.9))
    ]
    assert claims.verdict(Cells({"e": full}, spread=fam(), grid=seeds), claim).status == "holds"


def test_a_subset_claim_drops_the_entries_that_did_not_run_only_where_something_ran():
    claim = replace(compare_claim(by="dataset", at="either"), subset="FAKE: the datasets that ran")
    rows = [
        {"method": "a", "dataset": "p", "seed": 0, "test_acc": 0.95},
        {"method": "b", "dataset": "p", "seed": 0, "test_acc": 0.9},
    ]
    rows += [{"method": "a", "dataset": "q", "seed": 0, "test_acc": 0.95}]  # b has not run on q
    assert claims.verdict(Cells({"e": rows}, spread=fam()), replace(claim, subset="")).status == "not run"
    assert claims.verdict(Cells({"e": rows}, spread=fam()), claim).status == "holds"


def _write_csv(root: Path, experiment: str, rows: list[dict], scale: str = "quick") -> None:
    (root / scale).mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(
        [{"scale": scale, "experiment": experiment, "note": "FAKE synthetic test data", **r} for r in rows]
    )
    df.to_csv(root / scale / f"{experiment}.csv", index=False)


def _claim(paper: str, claim_id: str) -> tuple[dict, Claim]:
    doc = papers.load(REPO / "config" / "papers" / f"{paper}.yaml")
    return doc, next(c for c in papers.claims(doc) if c.id == claim_id)


def test_a_report_context_reads_the_grid_of_the_experiments_it_was_told(tmp_path):
    # FAKE Table 8 timings of one model of three (the quick grid times mnist_cnn, fixup_resnet8, fixup_resnet14)
    rows = [
        {"model": "mnist_cnn", "seed": s, "status": "completed", "param_ratio": 1.05, "hyper_ratio": 1.05}
        for s in range(3)
    ]
    _write_csv(tmp_path, "table8_timing", rows)
    doc, claim = _claim("partitioned", "table8_partitioned_overhead")
    assert claim.subset  # "per model: the models whose timing cells ran"
    # told the experiment's cells, and the pipeline's artefacts as the CLI passes them (a table claim finds its
    # experiments through its artefact)
    _, artefacts = reproduction.pipeline_config(REPO, "quick")
    told = reproduction.Context(tmp_path, "quick", [doc], {"table8_timing": 5}, artefacts)
    v = claims.verdict(told, claim)
    assert v.status == "holds" and "1 of 3 configurations of table8_timing ran" in v.subset, (v, v.subset)
    assert v.subset.startswith(claim.subset)
    # without its subset the entries that have not run leave it not run
    assert claims.verdict(told, replace(claim, subset="")).status == "not run"


def test_a_report_claim_on_part_of_its_grid_is_not_testable(tmp_path):
    # FAKE Table 2 accuracies on spambase and MNIST only (the quick grid also has magic, cdc_diabetes, and
    # FashionMNIST): "similar accuracy" on every dataset cannot be decided on two of them
    for exp, dataset in (("bali_cls_uci", "spambase"), ("bali_cls_image", "mnist")):
        rows = [
            {"dataset": dataset, "method": m, "seed": 0, "status": "completed", "test_acc": 0.9}
            for m in ("bali", "dropout")
        ]
        _write_csv(tmp_path, exp, rows)
    doc, claim = _claim("bali", "bali_table2_similar_accuracy")
    assert not claim.subset
    told = reproduction.Context(tmp_path, "quick", [doc], {"bali_cls_uci": 9, "bali_cls_image": 10})
    v = claims.verdict(told, claim)
    assert v.status == "not testable" and v.measured.startswith("partial grid: "), v.measured
    assert "of bali_cls_uci ran (missing e.g. method=bali, dataset=" in v.measured
    assert "(holds by the check's reading)" in v.measured
    assert reproduction.not_run_reason(told, claim, v) == "not testable at quick scale: part of its grid has not run"
    # results read on their own (no grid at hand): decided on what ran
    assert claims.verdict(reproduction.Context(tmp_path, "quick", [doc]), claim).status == "holds"


# -- (7) requires ----------------------------------------------------------------------------------------------------


def test_a_claim_whose_cells_run_shorter_than_its_words_need_is_not_testable():
    rows = [
        {"method": m, "dataset": d, "seed": 0, "test_acc": x}
        for d in ("p", "q", "r")
        for m, x in (("a", 0.95), ("b", 0.9))
    ]
    claim = replace(compare_claim(by="dataset"), requires={"rounds": 2000})
    short = Cells({"e": rows}, spread=fam(), grid=GRID, settings={"e": {"rounds": 40}})
    v = claims.verdict(short, claim)
    assert v.status == "not testable"
    assert v.measured.startswith("its cells run rounds = 40, its words need at least 2000"), v.measured
    assert "(holds by the check's reading)" in v.measured
    long = Cells({"e": rows}, spread=fam(), grid=GRID, settings={"e": {"rounds": 2000}})
    assert claims.verdict(long, claim).status == "holds"
    # only the cells the claim reads count: a short cell of another method does not
    mixed = Cells({"e": rows}, spread=fam(), grid={"e": GRID["e"] + [{"method": "c", "dataset": "p", "seed": 0}]})
    mixed._settings = {"e": {"rounds": 2000}}
    mixed.cell_values = lambda e: [(c, {"rounds": 10 if c["method"] == "c" else 2000, **c}) for c in mixed.grid(e)]
    assert claims.verdict(mixed, claim).status == "holds"


def test_the_paper_files_requires_read_the_configs_settings(tmp_path):
    # fig10_low_data_not_converged needs 2000 rounds; the quick grid's federated cells run 40
    doc, claim = _claim("partitioned", "fig10_low_data_not_converged")
    assert claim.requires == {"rounds": 2000}
    ctx = reproduction.Context(tmp_path, "quick", [doc], {"table4_mnist": 20})
    read = [
        s["rounds"] for c, s in ctx.cell_values("table4_mnist") if c["method"] == "partitioned" and not c["rotated"]
    ]
    assert read and max(read) < 2000
    assert coverage.short_of(ctx, claim, ["table4_mnist"]) == (
        f"its cells run rounds = {min(read)}, its words need at least 2000"
    )
    assert coverage.short_of(ctx, replace(claim, requires={"rounds": min(read)}), ["table4_mnist"]) == ""


def test_a_paper_minimum_compares_each_cell_with_its_own_paper_configuration():
    # FAKE: partition_updates of two configurations, each seed; at paper scale p = 3000, q = 1200
    rows = [
        {"method": m, "dataset": d, "seed": 0, "test_acc": x}
        for d in ("p", "q", "r")
        for m, x in (("a", 0.95), ("b", 0.9))
    ]
    claim = replace(compare_claim(by="dataset"), requires={"partition_updates": "paper"})
    updates = {"paper": {"p": 3000, "q": 1200, "r": 1200}, "quick": {"p": 3000, "q": 1199, "r": 5000}}

    def ctx_at(scale):
        c = Cells({"e": rows}, spread=fam(), grid=GRID)
        c.scale = scale
        c.cell_values = lambda e: [(g, {**g, "partition_updates": updates[scale][g["dataset"]]}) for g in GRID[e]]
        c.at_scale = lambda other: ctx_at(other)
        return c

    v = claims.verdict(ctx_at("quick"), claim)
    # q's 1199 falls short of its own paper configuration's 1200, though it exceeds p's: each against its own
    assert v.status == "not testable", v.measured
    assert (
        "as few as 1199 updates of their least-updated partition" in v.measured
        and "gives the same configuration 1200" in v.measured
    )
    updates["quick"]["q"] = 1200
    assert claims.verdict(ctx_at("quick"), claim).status == "holds"
    # at paper scale the cells are the reference: nothing to fall short of
    assert claims.verdict(ctx_at("paper"), claim).status == "holds"


def test_the_sensitivity_claims_need_the_papers_partition_updates(tmp_path):
    # Figs. 5-8: the quick cells update their least-updated partition a few hundred times, the paper's thousands
    doc, claim = _claim("partitioned", "fig6_rotmnist_imbalance_worse")
    assert claim.requires == {"partition_updates": "paper"}
    ctx = reproduction.Context(tmp_path, "quick", [doc], {"sens_rotmnist_c2": 4})
    quick = {tuple(c["chunk_proportions"]): s["partition_updates"] for c, s in ctx.cell_values("sens_rotmnist_c2")}
    paper = {
        tuple(c["chunk_proportions"]): s["partition_updates"]
        for c, s in ctx.at_scale("paper").cell_values("sens_rotmnist_c2")
    }
    # App. I.1: a step updates partition k with probability u_k; [1, 8] updates the first with 1/9 of the steps
    steps = {tuple(c["chunk_proportions"]): s["steps"] for c, s in ctx.cell_values("sens_rotmnist_c2")}
    assert quick[(1, 8)] == round(steps[(1, 8)] / 9)
    assert all(quick[k] < paper[k] for k in quick)
    assert coverage.short_of(ctx, claim, ["sens_rotmnist_c2"]).startswith("its cells run as few as")


# -- (8) method and baseline counted apart ---------------------------------------------------------------------------


def _uci_cells(root: Path, bali: list[float], do: list[float]) -> None:
    for seed, (b, d) in enumerate(zip(bali, do)):
        for method, value in (("bali", b), ("dropout", d)):
            folder = root / "paper" / "bali_uci" / f"dataset~uci_yacht/method~{method}/seed~{seed}"
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(
                json.dumps(
                    {
                        "coords": {"dataset": "uci_yacht", "method": method, "seed": seed},
                        "scale": "paper",
                        "status": "completed",
                        "metrics": {"test_rmse": value},
                        "experiment": "bali_uci",
                        "info": {"note": "FAKE"},
                    }
                )
            )


def test_glance_counts_method_claims_and_numbers_apart_from_baselines(tmp_path):
    doc = papers.load(REPO / "config" / "papers" / "bali.yaml")
    nums = {(n.row, n.column): n for n in papers.numbers(doc, "bali_table1")}
    assert papers.role(doc, nums[("uci_yacht", "BALI")]) == "method"
    assert papers.role(doc, nums[("uci_yacht", "DO")]) == "baseline"
    # FAKE yacht RMSEs: BALI 0.64 (paper 0.642 ± 0.042: within 2 paper s.e.), DO 0.90 (paper 0.666 ± 0.049: not)
    _uci_cells(tmp_path, [0.64, 0.65, 0.63], [0.90, 0.91, 0.89])
    ctx = reproduction.Context(tmp_path, "paper", [doc])
    m = replace(compare_claim(), id="m1", paper="bali")
    m2 = replace(m, id="m2")
    m3 = replace(m, id="m3", by_construction="FAKE")
    b = replace(m, id="b1", about="baseline")
    verdicts = [
        (m, decide.Verdict("holds", "FAKE", 3)),
        (m2, decide.Verdict("inconclusive", "FAKE", 3, lean=decide.LEANS_AGAINST)),
        (m3, decide.Verdict("by construction", "FAKE", 3)),
        (b, decide.Verdict("does not hold", "FAKE", 3)),
    ]
    g = reproduction.glance(ctx, doc, verdicts)
    assert g["method"] == "BALI"
    assert g["claims"] == 3 and g["baseline_claims"] == 1
    assert g["counts"]["holds"] == 1 and g["counts"]["inconclusive"] == 1 and g["counts"]["does not hold"] == 0
    assert g["counts"]["by construction"] == 1
    assert g["baseline_counts"]["does not hold"] == 1 and g["baseline_counts"]["holds"] == 0
    assert (g["within"], g["compared"], g["baseline_within"], g["baseline_compared"]) == (1, 1, 0, 1)
    line = reproduction.bottom_line(g)
    assert "2 of its 3 claims about BALI were tested" in line  # by construction is not tested
    assert (
        "its 1 claim about the baselines it compares against is counted apart (1 tested: 0 hold, 0 inconclusive, "
        "1 does not hold)" in line
    )
    assert "for 1 of 1 of BALI's and 0 of 1 of its baselines'" in line
    # the report's summary table keeps them apart too
    text = reproduction.summary_lines(ctx, doc, verdicts)
    assert text[0].startswith("| artefact | BALI: numbers within 2 paper s.e. / compared | baselines:")
    row = next(ln for ln in text if ln.startswith("| bali_table1 |"))
    assert row.startswith("| bali_table1 | 1 / 1 | 0 / 1 |")


# -- (9) an accuracy's band is never below its test set's binomial s.e. --------------------------------------------------


@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
@pytest.mark.parametrize("n_test", [100, 2000, 100000])
@pytest.mark.parametrize("rel_sd", [0.0, 0.001, 0.05])
def test_the_binomial_floor_of_an_accuracy(p, n_test, rel_sd):
    floor = math.sqrt(p * (1 - p) / n_test) / p
    got = noise.binomial_floor(fam(rel_sd), p, n_test)
    assert got.rel_sd == pytest.approx(max(rel_sd, floor))
    assert got.df == 30 and got.groups == 10  # the seeds' degrees of freedom stand
    assert bool(got.floor) == (floor > rel_sd)
    assert noise.binomial_floor(None, p, n_test) is None  # no spread: nothing to floor


def test_the_context_floors_an_accuracy_at_its_test_sets_binomial_se(tmp_path):
    # FAKE Fig. 9 cells at one seed each, with n_test recorded: the affine_invariance family's 0.3 % (conftest)
    # is below the binomial s.e. of 100 test examples, not of 10^6
    def write(n_test):
        root = tmp_path / str(n_test)
        _write_csv(
            root,
            "fig9_retrain",
            [{"method": "retrain", "seed": 0, "status": "completed", "test_acc": 0.95, "n_test": n_test}],
        )
        _write_csv(
            root,
            "fig9_random",
            [
                {"method": "random", "sample": i, "seed": 0, "status": "completed", "test_acc": a, "n_test": n_test}
                for i, a in enumerate((0.85, 0.93, 0.87, 0.90))
            ],
        )
        return reproduction.Context(root, "quick", [])

    doc, claim = _claim("partitioned", "fig9_retrained_beat_random")
    small, big = write(100), write(1_000_000)
    p = 0.90  # the median accuracy of the claim's cells
    sp = small.spread(["fig9_retrain", "fig9_random"], "test_acc")
    assert sp.rel_sd == pytest.approx(math.sqrt(p * (1 - p) / 100) / p) and "binomial" in sp.floor
    assert big.spread(["fig9_retrain", "fig9_random"], "test_acc").rel_sd == pytest.approx(0.003)
    # not an accuracy: no floor
    assert (
        not small.spread(["fig9_retrain"], "test_nll")
        or "binomial" not in small.spread(["fig9_retrain"], "test_nll").floor
    )
    # the 2-point gap over the best draw: outside the 0.3 % family band, inside the binomial one
    assert claims.verdict(big, claim).status == "holds"
    v = claims.verdict(small, claim)
    assert v.status == "inconclusive" and v.lean == decide.LEANS_WITH and "binomial s.e." in v.measured


# -- (10) the machine spread is never the band, nor another family's seed spread -------------------------------------


def test_the_machine_spread_is_reported_beside_the_band_never_used_as_one(tmp_path, monkeypatch):
    folder = tmp_path / "figures"
    folder.mkdir()
    monkeypatch.setattr(noise, "pooled_path", lambda scale: folder / "seed_spread.json")
    rec = {"rel_sd": 0.003, "df": 30, "groups": 10, "cells": 40, "experiments": ["FAKE"], "date": "FAKE"}
    (folder / "verdict_stability.json").write_text(
        json.dumps({"date": "FAKE", "machine_spread": {"fig9_retrain": {"test_acc": {"rel_sd": 0.05, "pairs": 4}}}})
    )
    root = tmp_path / "results"
    _write_csv(root, "fig9_retrain", [{"method": "retrain", "seed": 0, "status": "completed", "test_acc": 0.95}])
    _write_csv(
        root,
        "fig9_random",
        [
            {"method": "random", "sample": i, "seed": 0, "status": "completed", "test_acc": a}
            for i, a in enumerate((0.85, 0.93))
        ],
    )
    doc, claim = _claim("partitioned", "fig9_retrained_beat_random")
    # only another family measured a seed spread: neither it nor the (5 %) machine spread stands in
    (folder / "seed_spread.json").write_text(json.dumps({"families": {"federated": {"test_acc": rec}}}))
    ctx = reproduction.Context(root, "quick", [doc])
    assert ctx.spread(["fig9_retrain", "fig9_random"], "test_acc") is None
    v = claims.verdict(ctx, claim)
    assert v.status == "not testable" and v.measured.startswith("a single cell decides it"), v.measured
    # its own family measured 0.3 %: the band is 0.8 points, the 2-point gap holds (a 5 % band would not order it)
    (folder / "seed_spread.json").write_text(json.dumps({"families": {"affine_invariance": {"test_acc": rec}}}))
    ctx = reproduction.Context(root, "quick", [doc])
    v = claims.verdict(ctx, claim)
    assert v.status == "holds", v.measured
    band = T30 * math.sqrt(2) * 0.003 * 0.95
    assert f"noise band {band:.2g}" in v.measured
    assert "beside it, not part of the band: machine spread 5.00% over 4 re-run pairs" in v.measured


def test_the_stability_line_counts_only_claims_that_still_exist(tmp_path):
    """FAKE record: a claim renamed since the stability run is named and left out of "k of n unchanged", so the
    report never counts a verdict it cannot show; an unstable one is named with both verdicts."""
    (tmp_path / "quick").mkdir()
    rows = [
        {"claim": "kept_a", "stable": True, "archive": "holds", "rerun": "holds"},
        {"claim": "kept_b", "stable": False, "archive": "holds", "rerun": "inconclusive"},
        {"claim": "old_name", "stable": True, "archive": "holds", "rerun": "holds"},
    ]
    rec = {"date": "FAKE", "experiments": ["e"], "rerun": "threads 2", "claims": rows, "stable": 2, "of": 3}
    (tmp_path / "quick" / "verdict_stability.json").write_text(json.dumps(rec))
    line = reproduction.stability_line("quick", {"kept_a", "kept_b", "new_claim"}, figures=tmp_path)
    assert "1 of 2 verdicts unchanged; changed: kept_b (holds -> inconclusive)" in line
    assert "no longer exist (left out): old_name." in line
    assert "2 of 3" in reproduction.stability_line("quick", None, figures=tmp_path)  # no claim list: all counted
    assert "not measured at paper scale" in reproduction.stability_line("paper", set(), figures=tmp_path)


def _mask_rows(informative: list[float], spurious: list[float]) -> list[dict]:
    """FAKE learned masks: per seed, 3 informative inputs then 3 spurious ones (keep-probabilities)."""
    rows = []
    for seed, (inf, spur) in enumerate(zip(informative, spurious)):
        p = [inf, inf + 0.01, inf + 0.02, spur, spur - 0.01, spur - 0.02]
        rows.append({"seed": seed, **{f"p_keep_{i:02d}": v for i, v in enumerate(p)}})
    return rows


@pytest.mark.parametrize(
    "informative, spurious, verdict",
    [
        ([0.95, 0.96, 0.94], [0.60, 0.62, 0.61], "holds"),  # clearly apart: the first 3 are the most kept
        ([0.70, 0.95, 0.60], [0.65, 0.55, 0.62], "inconclusive"),  # apart on average, not beyond the paired band
        ([0.55, 0.56, 0.54], [0.90, 0.91, 0.89], "does not hold"),  # the spurious ones are the most kept
    ],
)
def test_the_ranking_reading_of_an_input_mask(informative, spurious, verdict):
    ctx = Cells({"mask": _mask_rows(informative, spurious)}, spread=fam())
    args = {"experiment": "mask", "prefix": "p_keep_", "expected_first": 3, "reading": "rank"}
    v = claims.check(ctx, "inputs_kept", args)
    assert v.status == verdict, v.measured
    if verdict == "holds":  # the threshold reading of the same mask: the spurious ones stay above 0.5, so it fails
        threshold = claims.check(ctx, "inputs_kept", {**args, "reading": "threshold", "threshold": 0.5})
        assert threshold.status == "does not hold", threshold.measured


# -- (9) a curve-speed claim, decided per set on the sets whose evaluations resolve the crossings -----------------


class Curves(Cells):
    """FAKE learning curves: {experiment: rows of (method, dataset, seed, step, test_nll)}."""

    def __init__(self, curves: dict, **kw):
        super().__init__({}, **kw)
        self._curves = {e: pd.DataFrame(rs) for e, rs in curves.items()}

    def curves(self, experiment, where):
        return self._select(self._curves.get(experiment, pd.DataFrame()), where)


def _curve(method: str, dataset: str, crossing_step: int, steps) -> list[dict]:
    """A FAKE test-NLL curve from 1.0 to 0.0 that drops to 0.05 (past 90 % of its improvement) at the first
    evaluation at or after `crossing_step`, and reaches its best at the last evaluation."""
    last = steps[-1]
    return [
        {
            "method": method,
            "dataset": dataset,
            "seed": 0,
            "step": s,
            "test_nll": 1.0 if s < crossing_step else (0.0 if s == last else 0.05),
        }
        for s in steps
    ]


def _speed_args(**extra) -> dict:
    return {
        "experiments": ["e"],
        "fast": {"method": "fast", "label": "FAST"},
        "slow": [{"method": "slow", "label": "SLOW"}],
        "ratio": 0.5,
        **extra,
    }


def test_crossings_within_one_evaluation_order_nothing_and_apart_they_decide():
    # FAKE evaluations every 10 steps: crossings are known between two evaluations, (before, at]
    assert convergence._faster((10.0, 20.0), (40.0, 50.0), 0.5) is True  # 20 / 40 <= 0.5: faster, apart by an interval
    assert convergence._faster((40.0, 50.0), (10.0, 20.0), 0.5) is False  # apart, the other way round
    # adjacent intervals (20, 30] and (10, 20]: ordered by the intervals alone, but one evaluation is the seeds' scatter
    assert convergence._faster((20.0, 30.0), (10.0, 20.0), 0.5) == decide.UNRESOLVED
    assert convergence._faster((10.0, 20.0), (10.0, 20.0), 0.5) == decide.UNRESOLVED  # the same interval
    assert convergence._faster((0.0, 10.0), (0.0, 10.0), 0.5) == decide.UNRESOLVED  # both at the first evaluation
    # apart, but the intervals allow both answers: (20, 30] against (40, 50] is a ratio in (0.4, 0.75)
    assert convergence._faster((20.0, 30.0), (40.0, 50.0), 0.5) == decide.UNRESOLVED


@pytest.mark.parametrize(
    "slow_on_b, status",
    [
        (20, "holds"),  # set b: both cross between steps 10 and 20: unresolved, the claim rests on set a
        (90, "holds"),  # set b resolves and agrees: decided on both
        (10, "does not hold"),  # set b: FAST crosses at 20, SLOW at 10 ... within one evaluation: unresolved
    ],
)
def test_a_speed_claim_is_decided_on_the_sets_that_resolve_and_names_them(slow_on_b, status):
    steps = list(range(0, 101, 10))
    rows = _curve("fast", "a", 10, steps) + _curve("slow", "a", 60, steps)  # set a: 10 against 60, decided
    rows += _curve("fast", "b", 20 if slow_on_b != 10 else 60, steps) + _curve("slow", "b", slow_on_b, steps)
    v = claims.check(Curves({"e": rows}), "converges_faster", _speed_args())
    assert v.status == status, v.measured
    assert "a faster (FAST 0-10 vs SLOW 50-60)" in v.measured  # the sides by their labels, the crossings' intervals
    if slow_on_b == 20:
        assert "b not resolved" in v.measured and "within one evaluation of each other" in v.measured
        assert v.subset.startswith("decided on a,") and v.subset.endswith("not resolved: b")
    elif slow_on_b == 90:
        assert "b faster" in v.measured and v.subset == ""
    else:  # set b: FAST at 60 against SLOW at 10, apart: not faster, which one clear set is enough to fail
        assert "b not faster" in v.measured


def test_a_speed_claim_no_set_resolves_is_not_testable_and_a_missing_curve_is_not_run():
    steps = list(range(0, 101, 10))
    rows = _curve("fast", "a", 10, steps) + _curve("slow", "a", 10, steps)  # both at the first evaluation
    v = claims.check(Curves({"e": rows}), "converges_faster", _speed_args())
    assert v.status == "not testable" and "both at the first evaluation" in v.measured, v.measured
    # the slow side's curves have not run: not run, naming the side by its label
    v = claims.check(Curves({"e": _curve("fast", "a", 10, steps)}), "converges_faster", _speed_args())
    assert v.status == "not run" and "e SLOW: no curves" in v.measured, v.measured


def test_a_sides_label_names_it_and_never_selects_cells():
    rows = [{"method": m, "seed": s, "test_acc": x} for m, x in (("a", 0.95), ("b", 0.90)) for s in range(3)]
    rows = [{**r, "test_acc": r["test_acc"] + 0.001 * r["seed"]} for r in rows]
    claim = compare_claim(a={"method": "a", "label": "BALI"}, b={"method": "b", "label": "DO"})
    v = claims.verdict(Cells({"e": rows}, spread=fam()), claim)
    assert v.status == "holds" and v.measured.startswith("test_acc, BALI vs DO:"), v.measured
    # several b sides: each comparison is named by its side's label
    claim = compare_claim(b=[{"method": "b", "label": "DO"}, {"method": "a", "label": "BALI again"}])
    v = claims.verdict(Cells({"e": rows}, spread=fam()), claim)
    assert "DO: " in v.measured and "BALI again: " in v.measured, v.measured
