"""bench/scaling's shared pure logic: the zero-loss search, max/mean spreads, each gateway's
share of a probe (no timing)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.scaling.analysis import (ZERO_LOSS, Counters, best_imbalance, gateway_shares, imbalance, spread_by_site,
                                    zero_loss_rate)


def capacity(limit: float, calls: list[float]) -> Callable[[float], float]:
    def probe(rate: float) -> float:
        calls.append(rate)
        return 0.0 if rate <= limit else (rate - limit) / rate

    return probe


def test_search_finds_the_capacity_within_the_resolution() -> None:
    calls: list[float] = []
    result = zero_loss_rate(capacity(3300.0, calls), 1000.0, 100_000.0, resolution=0.02, max_probes=20)
    assert 3300.0 * 0.98 <= result.rate_pps <= 3300.0
    assert not result.at_ceiling
    assert calls[:3] == [1000.0, 2000.0, 4000.0]  # doubling until the first loss
    assert [p.rate_pps for p in result.probes] == calls
    assert all(p.passed == (p.rate_pps <= 3300.0) for p in result.probes)


def test_search_tolerates_loss_up_to_the_zero_definition() -> None:
    result = zero_loss_rate(lambda r: ZERO_LOSS if r <= 500 else 0.5, 100.0, 10_000.0, resolution=0.01, max_probes=30)
    assert 495 <= result.rate_pps <= 500


def test_search_at_the_ceiling_says_so() -> None:
    result = zero_loss_rate(lambda r: 0.0, 1000.0, 3000.0)
    assert result.rate_pps == 3000.0 and result.at_ceiling
    assert [p.rate_pps for p in result.probes] == [1000.0, 2000.0, 3000.0]


def test_search_below_the_start_and_the_probe_budget() -> None:
    calls: list[float] = []
    result = zero_loss_rate(capacity(100.0, calls), 1000.0, 5000.0, max_probes=4)
    assert len(calls) == 4 and calls[:2] == [1000.0, 500.0]
    assert result.rate_pps == 0.0  # 1000, 500, 250, 125 all lost frames


@pytest.mark.parametrize(
    ("start", "ceiling", "resolution", "probes"),
    [(0.0, 10.0, 0.05, 5), (20.0, 10.0, 0.05, 5), (1.0, float("inf"), 0.05, 5), (1.0, 10.0, 0.0, 5), (1.0, 10.0, 0.1, 0)],
)
def test_search_rejects_bad_arguments(start: float, ceiling: float, resolution: float, probes: int) -> None:
    with pytest.raises(ValueError):
        zero_loss_rate(lambda r: 0.0, start, ceiling, resolution=resolution, max_probes=probes)


def test_search_rejects_a_probe_that_returns_nonsense() -> None:
    with pytest.raises(ValueError, match="not a ratio"):
        zero_loss_rate(lambda r: -1.0, 1.0, 10.0)

@pytest.mark.parametrize(("loaded", "gateways", "best"), [
    (16, 3, 6 / (16 / 3)),  # the paper's Fig. 5: 6/5/5 at best, 1.125; a fixed 1.10 could never be met
    (15, 3, 1.0), (224, 3, 75 / (224 / 3)), (224, 4, 1.0), (2, 3, 1.5), (1, 1, 1.0), (0, 3, 1.0), (17, 4, 5 / (17 / 4)),
])
def test_best_imbalance_is_whole_buckets_as_even_as_they_go(loaded: int, gateways: int, best: float) -> None:
    assert best_imbalance(loaded, gateways) == pytest.approx(best)
    # it is reachable: ceil(B/N) on the fullest gateway, the rest as even as the remainder allows
    if loaded:
        counts = [loaded // gateways + (1 if i < loaded % gateways else 0) for i in range(gateways)]
        assert imbalance([float(c) for c in counts]) == pytest.approx(best)


@pytest.mark.parametrize(("loaded", "gateways"), [(-1, 3), (16, 0)])
def test_best_imbalance_refuses_nonsense(loaded: int, gateways: int) -> None:
    with pytest.raises(ValueError):
        best_imbalance(loaded, gateways)

def counters(buckets: dict[int, tuple[int, int]], owners: dict[int, str | None],
             tunnels: dict[str, tuple[int, int]]) -> Counters:
    return Counters(buckets=buckets, owners=owners, tunnels=tunnels)


def test_gateway_shares_from_bucket_counters_and_tunnel_reports() -> None:
    before = counters({1: (100, 140_800), 2: (0, 0), 3: (50, 70_400)}, {1: "g1", 2: "g2", 3: "g2"},
                      {"g1": (10, 20), "g2": (5, 5)})
    after = counters({1: (2100, 2_956_800), 2: (1000, 1_408_000), 3: (1050, 1_478_400)},
                     {1: "g1", 2: "g2", 3: "g2"}, {"g1": (2010, 2020), "g2": (2005, 2005)})
    shares = gateway_shares(before, after, 2.0)
    assert set(shares) == {"g1", "g2"}
    assert shares["g1"].dispatch_pps == pytest.approx(1000.0)
    assert shares["g1"].dispatch_mbps == pytest.approx(1000 * 1408 * 8 / 1e6)
    assert shares["g2"].dispatch_pps == pytest.approx(1000.0)  # (1000 + 1000) frames over 2 s
    assert shares["g1"].esp_out_pps == pytest.approx(1000.0) and shares["g2"].esp_in_pps == pytest.approx(1000.0)


def test_gateway_shares_count_a_moved_bucket_for_its_new_owner_and_skip_unassigned() -> None:
    before = counters({1: (0, 0), 2: (0, 0)}, {1: "g1", 2: "g1"}, {"g1": (0, 0), "g2": (0, 0)})
    after = counters({1: (300, 3000), 2: (700, 7000)}, {1: "g2", 2: None}, {"g1": (0, 0), "g2": (300, 0)})
    shares = gateway_shares(before, after, 1.0)
    assert shares["g2"].dispatch_pps == 300.0
    assert shares["g1"].dispatch_pps == 0.0  # bucket 2 is unassigned now: its frames count for nobody


@pytest.mark.parametrize(("before", "after", "seconds", "match"), [
    (counters({1: (10, 10)}, {1: "g1"}, {}), counters({1: (5, 5)}, {1: "g1"}, {}), 1.0, "went back"),
    (counters({}, {}, {"g1": (10, 0)}), counters({}, {}, {"g1": (3, 0)}), 1.0, "went back"),
    (counters({}, {}, {}), counters({}, {}, {}), 0.0, "window"),
    (counters({}, {}, {}), counters({}, {}, {}), float("nan"), "window"),
])
def test_gateway_shares_refuse_counters_that_mean_nothing(before: Counters, after: Counters, seconds: float,
                                                          match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gateway_shares(before, after, seconds)


def test_spread_by_site_is_the_worse_site_and_a_missing_gateway_counts_zero() -> None:
    sites = {"a": ["a1", "a2"], "b": ["b1", "b2"]}
    assert spread_by_site({"a1": 10, "a2": 10, "b1": 12, "b2": 8}, sites) == pytest.approx(1.2)
    assert spread_by_site({"a1": 10, "b1": 5, "b2": 5}, sites) == pytest.approx(2.0)
    assert spread_by_site({}, sites) == 1.0
    assert imbalance([]) == 1.0 and imbalance([0.0, 0.0]) == 1.0


def test_search_from_an_earlier_result_brackets_it_in_small_steps() -> None:
    calls: list[float] = []
    result = zero_loss_rate(capacity(1050.0, calls), 940.0, 100_000.0, resolution=0.02, max_probes=20, growth=1.12)
    assert 1050.0 * 0.98 <= result.rate_pps <= 1050.0
    assert calls[:2] == [940.0, pytest.approx(940.0 * 1.12)]
    calls.clear()
    result = zero_loss_rate(capacity(700.0, calls), 940.0, 100_000.0, resolution=0.02, max_probes=20, growth=1.12)
    assert 700.0 * 0.98 <= result.rate_pps <= 700.0  # the earlier result was too high: steps down first
    assert calls[1] == pytest.approx(940.0 / 1.12)


@pytest.mark.parametrize("growth", [1.0, 0.5, float("nan"), float("inf")])
def test_search_refuses_a_growth_that_never_brackets(growth: float) -> None:
    with pytest.raises(ValueError, match="growth"):
        zero_loss_rate(lambda r: 0.0, 1.0, 10.0, growth=growth)
