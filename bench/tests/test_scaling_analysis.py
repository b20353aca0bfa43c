"""bench/scaling's pure logic: the zero-loss search and redistribution_s (no timing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.scaling.analysis import ZERO_LOSS, Snapshot, cpu_spread, redistribution_s, zero_loss_rate


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


SITES = {"a": ["agw1", "agw2", "agw3"], "b": ["bgw1", "bgw2", "bgw3"]}


def snap(t: float, loss: float, a: tuple[float, float, float], b: tuple[float, float, float] = (30, 30, 30)) -> Snapshot:
    cpu = {f"agw{i + 1}": v for i, v in enumerate(a)} | {f"bgw{i + 1}": v for i, v in enumerate(b)}
    return Snapshot(t_s=t, offered_pps=1000, delivered_pps=1000 * (1 - loss), loss=loss, gateway_cpu=cpu, sites=SITES)


def test_cpu_spread_is_the_worst_site() -> None:
    assert cpu_spread(snap(1, 0, (30, 30, 30), (60, 15, 15))) == pytest.approx(2.0)
    assert cpu_spread(snap(1, 0, (0, 0, 0), (0, 0, 0))) == 1.0


def test_redistribution_is_the_end_of_the_first_second_that_stays_settled() -> None:
    run = [
        snap(1, 0.6, (50, 0, 0)),
        snap(2, 0.2, (50, 30, 10)),
        snap(3, 0.0, (50, 30, 10)),  # no loss yet uneven
        snap(4, 0.0, (31, 30, 29)),
        snap(5, 0.0, (30, 31, 30)),
        snap(6, 0.0, (30, 30, 32)),
    ]
    assert redistribution_s(run) == 4.0
    assert redistribution_s(list(reversed(run))) == 4.0  # order of the list does not matter


def test_a_relapse_restarts_the_clock_and_a_short_tail_is_not_settled() -> None:
    run = [snap(1, 0.0, (30, 30, 30)), snap(2, 0.01, (30, 30, 30))] + [snap(t, 0.0, (30, 30, 30)) for t in (3, 4, 5)]
    assert redistribution_s(run) == 3.0
    assert redistribution_s(run[:4]) is None  # settled for two snapshots only
    assert redistribution_s([snap(t, 0.0, (90, 0, 0)) for t in range(1, 30)]) is None
    assert redistribution_s([]) is None


def test_already_balanced_from_the_first_second() -> None:
    assert redistribution_s([snap(t, 0.0, (30, 30, 30)) for t in (1, 2, 3)]) == 1.0


def test_k_spreads_the_simulated_hosts_or_is_the_largest(tmp_path: Path) -> None:
    import yaml
    from supergw_proto.bucket import bucket_of

    from bench.scaling.__main__ import BASE_TOPOLOGY, choose_buckets
    from topologies.schema import load

    k, why = choose_buckets(BASE_TOPOLOGY, None)
    site = load(BASE_TOPOLOGY).sites[0]
    macs = list(site.simulated_hosts.macs())  # type: ignore[union-attr]
    assert len({bucket_of(m, k, site.lan.dispatch.hash) for m in macs}) >= len(macs) / 2 or k == 4096
    assert f"K = {k}" in why
    assert choose_buckets(BASE_TOPOLOGY, 64)[0] == 64
    data = yaml.safe_load(BASE_TOPOLOGY.read_text())
    data.pop("simulated_hosts")
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit, match="no simulated_hosts"):
        choose_buckets(bare, None)
