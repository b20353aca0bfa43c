"""bench/chaos's loss-rate invariant and the flows' paths: a flow that loses a share of its
probes forever must fail, a fault on its path may cost what its budget explains, and the
run's flows are spread over every gateway."""

from __future__ import annotations

from dataclasses import dataclass

from bench.chaos.checker import Injected
from bench.chaos.loss import BASE_LOSS, WINDOW_PROBES, LossTracker
from bench.chaos.paths import FlowRoute, PathBook, pair_index
from bench.chaos.runner import carried_seconds, spread_moves
from bench.chaos.schedule import Fault

INTERVAL = 0.02
PAIRS = pair_index([["agw1", "agw2", "agw3"], ["bgw1", "bgw2", "bgw3"]])


def paths() -> PathBook:
    b = PathBook([FlowRoute("f", "sgw-a", 1, "sgw-b", 2)], PAIRS)
    b.observe(0.0, {"sgw-a": {1: "agw1"}, "sgw-b": {2: "bgw2"}})
    return b


def tracker() -> LossTracker:
    return LossTracker(interval_s=INTERVAL, settle_s=10.0, reply_window_s=1.0, paths=paths())


def run(t: LossTracker, probes: int, lost: set[int]) -> None:
    for seq in range(1, probes + 1):
        t.probe("f", seq, seq * INTERVAL, seq not in lost)


def test_pair_index() -> None:
    assert PAIRS == {"agw1": 1, "agw2": 2, "agw3": 3, "bgw1": 1, "bgw2": 2, "bgw3": 3}


def test_a_flow_losing_a_third_of_its_probes_forever_fails_every_window() -> None:
    t = tracker()
    run(t, 5 * WINDOW_PROBES, {s for s in range(1, 5 * WINDOW_PROBES + 1) if s % 3 == 0})
    out = t.check([], 200.0, final=True)
    assert len(out) == 5 and all(v.invariant == "loss" and "33." in v.what for v in out)


def test_a_clean_flow_and_its_baseline_pass() -> None:
    t = tracker()
    run(t, 3 * WINDOW_PROBES, set(range(100, 100 + int(BASE_LOSS * WINDOW_PROBES) * 2)))  # 2 % in one window
    assert t.check([], 100.0, final=True) == []
    assert [j.lost for j in t.judged] == [10, 0, 0]


def test_windows_wait_for_their_answers() -> None:
    t = tracker()
    run(t, WINDOW_PROBES + 10, set())
    assert t.check([], 20.0) == [] and t.judged == []  # late answers may still come
    run(t, WINDOW_PROBES + 60, set())
    t.check([], 20.0)
    assert [j.index for j in t.judged] == [0]


def test_a_gateway_fault_on_the_path_may_cost_its_budget_of_probes() -> None:
    freeze = Injected(Fault(0, 3.0, "gateway_freeze", "a", "agw1", 2.0, 0.0, None), 3.0, 5.0, "agw1")
    silent = set(range(150, 150 + 25))  # 0.5 s of a 20 ms probe
    t = tracker()
    run(t, WINDOW_PROBES, silent)
    assert t.check([freeze], 20.0, final=True) == []
    off_path = Injected(Fault(0, 3.0, "gateway_freeze", "a", "agw3", 2.0, 0.0, None), 3.0, 5.0, "agw3")
    t2 = tracker()
    run(t2, WINDOW_PROBES, silent)
    [v] = t2.check([off_path], 20.0, final=True)
    assert "25 of 500" in v.what and "base 1 %" in v.what


def test_wan_loss_explains_its_share_in_both_directions() -> None:
    wan = Injected(Fault(0, 0.0, "wan_loss", "a", "wan", 15.0, 20.0, None), 0.0, 15.0, "wan")
    t = tracker()
    run(t, WINDOW_PROBES, {s for s in range(1, WINDOW_PROBES + 1) if s % 3 == 0})  # 33 % < 36 % expected
    assert t.check([wan], 20.0, final=True) == []
    t2 = tracker()
    run(t2, WINDOW_PROBES, {s for s in range(1, WINDOW_PROBES + 1) if s % 2 == 0})  # 50 %: more than it explains
    assert len(t2.check([wan], 20.0, final=True)) == 1


@dataclass
class B:
    bucket: int
    gateway: str | None
    pinned: str | None = None


def test_spread_moves_give_every_eligible_gateway_a_host() -> None:
    buckets = [B(1, "bgw1"), B(2, "bgw1"), B(3, "bgw1"), B(4, "bgw2", "bgw2")]
    moves = spread_moves([1, 2, 3, 4], buckets, ["bgw1", "bgw2", "bgw3"])
    assert moves == [(3, "bgw3")]
    assert spread_moves([1], [B(1, "agw1")], ["agw1", "agw2"]) == []  # nothing to spare
    assert spread_moves([4, 5], [B(4, "agw1", "agw1"), B(5, "agw1", "agw1")], ["agw1", "agw2"]) == []  # pinned


def test_carried_seconds_per_pair() -> None:
    b = paths()
    b.observe(10.0, {"sgw-a": {1: "agw3"}, "sgw-b": {2: "bgw2"}})
    out = carried_seconds(b, 30.0)
    assert out["agw1"] == out["bgw1"] == 10.0 and out["agw2"] == 30.0 and out["bgw3"] == 20.0
    assert b.carrying("sgw-a") == {"agw3"} and b.carrying("sgw-b") == {"bgw2"}
    b.observe(11.0, {"sgw-b": {2: "bgw1"}})  # site A unreadable: its leg stays
    assert b.legs["f"] == ("agw3", "bgw1")
