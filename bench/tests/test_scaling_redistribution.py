"""Fig. 5's pure part (bench/scaling/redistribution.py): the snapshots' two criteria, the
paper's (delivered = offered) and ours (bucket spread), and which moves make a run invalid."""

from __future__ import annotations

import pytest

from bench.scaling.analysis import ZERO_LOSS
from bench.scaling.redistribution import (MoveRecord, Snapshot, bucket_spread, cpu_spread, delivers_offered,
                                          invalid_moves, offered_reached_s, redistribution_s, settled)

SITES = {"a": ["agw1", "agw2", "agw3"], "b": ["bgw1", "bgw2", "bgw3"]}


def snap(t: float, loss: float, a: tuple[int, int, int], b: tuple[int, int, int] = (6, 5, 5),
         cpu: tuple[float, float, float] = (30, 30, 30)) -> Snapshot:
    """One second of Fig. 5: loss, loaded buckets per gateway at each site, site A's CPU."""
    loaded = {f"agw{i + 1}": v for i, v in enumerate(a)} | {f"bgw{i + 1}": v for i, v in enumerate(b)}
    cpus = {f"agw{i + 1}": v for i, v in enumerate(cpu)} | {f"bgw{i + 1}": 30.0 for i in range(3)}
    return Snapshot(t_s=t, offered_pps=1000, delivered_pps=1000 * (1 - loss), loss=loss, gateway_cpu=cpus,
                    sites=SITES, loaded_buckets=loaded)


def test_cpu_spread_is_the_worst_site() -> None:
    s = Snapshot(t_s=1, offered_pps=1, delivered_pps=1, loss=0, sites=SITES,
                 gateway_cpu={"agw1": 30, "agw2": 30, "agw3": 30, "bgw1": 60, "bgw2": 15, "bgw3": 15})
    assert cpu_spread(s) == pytest.approx(2.0)
    assert cpu_spread(snap(1, 0, (6, 5, 5), cpu=(0, 0, 0))) == 1.0


def test_settled_needs_no_loss_and_the_best_spread_at_every_site() -> None:
    assert settled(snap(1, 0.0, (6, 5, 5)))
    assert settled(snap(1, 0.0, (5, 5, 6), (5, 6, 5)))
    assert not settled(snap(1, 0.0, (7, 5, 4)))  # 7 > ceil(16/3): one bucket could still move
    assert not settled(snap(1, 0.0, (6, 5, 5), (7, 5, 4)))  # the other site is not there yet
    assert not settled(snap(1, 2 * ZERO_LOSS, (6, 5, 5)))
    assert settled(snap(1, ZERO_LOSS, (6, 5, 5)))
    # CPU does not enter: 6/5/5 buckets are settled whatever the one-second CPU noise shows
    assert settled(snap(1, 0.0, (6, 5, 5), cpu=(40, 28, 25)))
    no_view = Snapshot(t_s=1, offered_pps=1, delivered_pps=1, loss=0.0, sites=SITES)
    assert not settled(no_view)  # without the controller's map nothing can be judged
    assert bucket_spread(snap(1, 0.0, (7, 5, 4)))[1] == pytest.approx(1.125)


def test_redistribution_is_the_end_of_the_first_second_that_stays_settled() -> None:
    run = [
        snap(1, 0.6, (16, 0, 0), (16, 0, 0)),
        snap(2, 0.2, (10, 4, 2), (12, 4, 0)),
        snap(3, 0.0, (8, 4, 4), (6, 5, 5)),  # no loss yet uneven at site A
        snap(4, 0.0, (6, 5, 5)),
        snap(5, 0.0, (5, 6, 5)),
        snap(6, 0.0, (5, 5, 6)),
    ]
    assert redistribution_s(run) == 4.0
    assert redistribution_s(list(reversed(run))) == 4.0  # order of the list does not matter


def test_a_relapse_restarts_the_clock_and_a_short_tail_is_not_settled() -> None:
    run = [snap(1, 0.0, (6, 5, 5)), snap(2, 0.01, (6, 5, 5))] + [snap(t, 0.0, (6, 5, 5)) for t in (3, 4, 5)]
    assert redistribution_s(run) == 3.0
    assert redistribution_s(run[:4]) is None  # settled for two snapshots only
    run = [snap(1, 0.0, (6, 5, 5)), snap(2, 0.0, (7, 5, 4))] + [snap(t, 0.0, (6, 5, 5)) for t in (3, 4, 5)]
    assert redistribution_s(run) == 3.0  # a bucket moved back onto the fullest gateway
    assert redistribution_s([snap(t, 0.0, (16, 0, 0)) for t in range(1, 30)]) is None
    assert redistribution_s([]) is None


def test_already_balanced_from_the_first_second() -> None:
    assert redistribution_s([snap(t, 0.0, (6, 5, 5)) for t in (1, 2, 3)]) == 1.0


def flow(t: float, offered: float, delivered: float, moves: tuple[MoveRecord, ...] = ()) -> Snapshot:
    return Snapshot(t_s=t, offered_pps=offered, delivered_pps=delivered,
                    loss=max(0.0, (offered - delivered) / offered) if offered else 0.0, sites=SITES, moves=moves)


def test_the_papers_criterion_is_the_offered_load_delivered_from_then_on() -> None:
    run = [flow(1, 1000, 400), flow(2, 1000, 700), flow(3, 1000, 995), flow(4, 1000, 940),
           flow(5, 1000, 991), flow(6, 1000, 1003), flow(7, 1000, 999)]
    assert offered_reached_s(run) == 5.0  # second 3 reached it, second 4 fell back: the clock restarted
    assert offered_reached_s(run[:6]) is None  # two seconds at the end are too few to say it holds
    assert not delivers_offered(flow(1, 0, 0))  # nothing offered: nothing reached
    assert delivers_offered(flow(1, 1000, 990)) and not delivers_offered(flow(1, 1000, 989))
    assert offered_reached_s([]) is None


def test_the_two_criteria_can_disagree() -> None:
    # the offered load is delivered while the loaded buckets are far from even (a gateway has room)
    run = [snap(t, 0.0, (10, 3, 3), (10, 3, 3)) for t in (1, 2, 3, 4)]
    assert offered_reached_s(run) == 1.0
    assert redistribution_s(run) is None


def move(t: float, reason: str, loaded: bool = True) -> MoveRecord:
    return MoveRecord(t_s=t, site="b", bucket=40, src="bgw1", dst="bgw2", reason=reason, loaded=loaded)


def test_a_move_of_another_reason_than_the_policys_is_invalid() -> None:
    run = [flow(1, 1000, 500, (move(0.4, "paper-rebalance"),)),
           flow(2, 1000, 900, (move(1.1, "failover"), move(1.1, "failover", loaded=False))),
           flow(3, 1000, 1000, (move(2.5, "drain"),))]
    bad = invalid_moves(run, {"paper-rebalance"})
    assert [m.reason for m in bad] == ["failover", "failover", "drain"]
    assert invalid_moves(run[:1], {"paper-rebalance"}) == []
    assert invalid_moves(run, {"paper-rebalance", "failover", "drain"}) == []
    assert "site b bucket 40 bgw1 -> bgw2 (failover, loaded)" in bad[0].describe()
