"""Fig. 4's yardstick and verdicts (bench/scaling/{partition,stats,fig4}.py): the partition's
prediction, the skewed control's partition, 95 % intervals of trials and of their ratio, and
the verdicts a run's trials get (no emulation: made-up trials)."""

from __future__ import annotations

import math
import statistics

import pytest

from bench.scaling import fig4, partition
from bench.scaling.__main__ import parse
from bench.scaling.fig4 import EVEN, SKEWED, Cell, Fig4Results, Trial
from bench.scaling.settings import BIG_FRAME, DEFAULT_SUITE, Settings
from bench.scaling.stats import mean_interval, ratio_interval, t975


@pytest.mark.parametrize(("a", "b", "predicted"), [
    ([224], [224], 1.0),
    ([112, 112], [112, 112], 2.0),
    ([75, 75, 74], [75, 75, 74], 224 / 75),  # the paper's 2.98
    ([56] * 4, [56] * 4, 4.0),
    ([75, 75, 74], [74, 75, 75], 448 / 150),  # pairs 149/150/149
    ([112, 56, 56], [112, 56, 56], 2.0),
])
def test_the_partition_predicts_n_times_mean_over_max_of_the_pairs(a: list[int], b: list[int], predicted: float) -> None:
    pairs = partition.pair_hosts(a, b)
    assert partition.prediction(pairs) == pytest.approx(predicted)
    assert partition.prediction(pairs) == pytest.approx(len(pairs) * statistics.fmean(pairs) / max(pairs))


@pytest.mark.parametrize(("a", "b"), [([1, 2], [1]), ([], []), ([-1, 3], [1, 1])])
def test_pairs_refuse_sites_that_do_not_pair(a: list[int], b: list[int]) -> None:
    with pytest.raises(ValueError):
        partition.pair_hosts(a, b)


def test_no_prediction_without_hosts() -> None:
    with pytest.raises(ValueError, match="no hosts"):
        partition.prediction([0, 0])


def test_hosts_per_gateway_come_from_the_bucket_map_and_an_unknown_owner_is_refused() -> None:
    owner: dict[int, str | None] = {24: "g1", 25: "g2", 26: "g1", 27: "g3"}
    assert partition.site_counts(owner, [24, 25, 26, 27], ["g1", "g2", "g3"]) == [2, 1, 1]
    with pytest.raises(ValueError, match="bucket 28"):
        partition.site_counts(owner | {28: None}, [24, 28], ["g1", "g2", "g3"])
    with pytest.raises(ValueError, match="'gx'"):
        partition.site_counts({24: "gx"}, [24], ["g1"])


@pytest.mark.parametrize(("n", "heavy", "first"), [(2, 1.5, 168), (3, 1.5, 112), (4, 1.5, 84), (3, 2.0, 149)])
def test_the_skewed_control_gives_gateway_1_its_multiple_and_shares_the_rest(n: int, heavy: float, first: int) -> None:
    buckets = list(range(24, 248))
    gateways = [f"g{i}" for i in range(1, n + 1)]
    placed = partition.skewed(buckets, gateways, heavy)
    assert sorted(placed) == buckets
    counts = partition.site_counts(dict(placed), buckets, gateways)
    assert counts[0] == first
    assert max(counts[1:]) - min(counts[1:]) <= 1
    even = partition.prediction([math.ceil(224 / n)] * 1 + [224 // n] * (n - 1))
    assert partition.prediction(counts) < even  # the control predicts less than the even partition


@pytest.mark.parametrize(("buckets", "n", "heavy"), [(224, 1, 1.5), (224, 3, 1.0), (224, 3, float("nan")), (2, 3, 1.5)])
def test_a_skew_that_is_no_control_is_refused(buckets: int, n: int, heavy: float) -> None:
    with pytest.raises(ValueError):
        partition.skewed(list(range(buckets)), [f"g{i}" for i in range(n)], heavy)


def test_t_quantiles_and_the_interval_of_a_mean() -> None:
    assert t975(1) == pytest.approx(12.706) and t975(4) == pytest.approx(2.776) and t975(30) == pytest.approx(2.042)
    assert t975(60) == pytest.approx(2.000, abs=0.005) and t975(1000) == pytest.approx(1.962, abs=0.003)
    iv = mean_interval([100.0, 102.0, 98.0, 100.0])
    half = 3.182 * statistics.stdev([100.0, 102.0, 98.0, 100.0]) / 2  # t(0.975, 3) s / sqrt(4)
    assert (iv.mean, iv.n) == (100.0, 4) and iv.half_width == pytest.approx(half)
    assert iv.known and "95 %" in iv.describe()
    one = mean_interval([5.0])
    assert not one.known and one.low == one.high == 5.0 and "no interval" in one.describe()
    with pytest.raises(ValueError):
        t975(0)
    for bad in ([], [1.0, float("nan")]):
        with pytest.raises(ValueError):
            mean_interval(bad)


def test_the_ratio_of_two_means_and_its_interval() -> None:
    r = ratio_interval([300.0, 303.0, 297.0], [100.0, 101.0, 99.0])
    assert r.mean == pytest.approx(3.0)
    assert r.low < 3.0 < r.high and r.half_width == pytest.approx(3.0 * 4.303 * math.hypot(
        statistics.stdev([300.0, 303.0, 297.0]) / math.sqrt(3) / 300, statistics.stdev([100.0, 101.0, 99.0]) / math.sqrt(3) / 100))
    assert not ratio_interval([300.0], [100.0, 101.0]).known
    with pytest.raises(ValueError, match="denominator"):
        ratio_interval([1.0], [0.0, 0.0])


HOSTS = {1: [224], 2: [112, 112], 3: [75, 75, 74], 4: [56] * 4}


def cell(n: int, rates: list[float], layout: str = EVEN, hosts: list[int] | None = None, quota: float = 10.0) -> Cell:
    h = hosts if hosts is not None else HOSTS[n]
    c = Cell(DEFAULT_SUITE, BIG_FRAME, n, layout, quota, {"a": h, "b": h})
    c.trials = [Trial(r, r * 1.02, 6, None, None) for r in rates]
    return c


def test_ratios_get_intervals_and_a_verdict_against_their_prediction() -> None:
    res = Fig4Results([cell(1, [1000, 1010, 990]), cell(3, [2950, 2990, 2970]), cell(3, [2000, 1990, 2010], SKEWED,
                                                                                            [112, 56, 56])])
    r = fig4.ratio(res, DEFAULT_SUITE, BIG_FRAME, 3)
    assert r is not None and r.mean == pytest.approx(2.97) and r.known
    assert "within 3 %" in fig4.verdict(r, 224 / 75)
    assert "outside 3 %" in fig4.verdict(r, 3.2)
    assert fig4.control_failures(res) == []
    m = fig4.metrics(settings(), res)
    assert m["ratio_n3"].value == pytest.approx(2.97) and m["ratio_n3"].goal == pytest.approx(0.97 * 224 / 75, abs=1e-3)
    assert m["ratio_n3"].met()
    assert m["ratio_prediction_n3"].value == pytest.approx(224 / 75, abs=1e-4)
    assert "lower than the even" in m["skewed_ratio_n3"].note
    assert m["ratio_n2"].value is None and "not measured" in m["ratio_n2"].note


def test_a_skewed_control_that_does_not_come_out_lower_breaks_the_method() -> None:
    res = Fig4Results([cell(1, [1000, 1000]), cell(3, [2900, 2950]), cell(3, [2940, 2960], SKEWED, [112, 56, 56])])
    problems = fig4.failures(res)
    assert len(problems) == 1 and "not lower" in problems[0] and "cannot tell" in problems[0]
    res = Fig4Results([cell(1, [1000]), cell(3, [2900]), cell(3, [], SKEWED, [112, 56, 56])])
    assert "not measured" in fig4.control_failures(res)[0]


def test_moves_during_the_searches_and_failed_boots_are_failures() -> None:
    res = Fig4Results([cell(1, [1000])], stray_moves=["N=3 gcm: t=3.0s site a bucket 40 agw1 -> agw2 (failover, loaded)"],
                      failed=["Fig. 4 N=2 gcm: the two-site emulation could not be booted"])
    problems = fig4.failures(res)
    assert any("could not be booted" in p for p in problems) and any("failover" in p for p in problems)


def test_rows_carry_trials_interval_ratio_and_prediction() -> None:
    res = Fig4Results([cell(1, [1000, 1010, 990]), cell(2, [1990, 2000, 2010]), cell(1, [510, 490], quota=5.0)])
    row = fig4.rows(res, 10.0)[1]
    assert row["trials_pps"] == "1990 2000 2010" and row["t_pps"] == pytest.approx(2000.0)
    assert row["ratio"] == pytest.approx(2.0, abs=1e-3) and row["prediction"] == 2.0
    assert row["hosts_per_pair"] == "224 224" and row["t_ci95"].count("..") == 1
    at_half = fig4.rows(res, 10.0)[2]  # another quota: compared with T(1) at the run's quota, predicted by the quotas
    assert at_half["ratio"] == pytest.approx(0.5, abs=1e-3) and at_half["prediction"] == 0.5
    res = Fig4Results([cell(1, [0.0])])
    assert fig4.rows(res, 10.0)[0]["trials_pps"] == "none passed" and fig4.rows(res, 10.0)[0]["t_pps"] is None


def settings() -> Settings:
    return parse(["--quick"])
