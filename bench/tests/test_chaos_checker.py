"""bench/chaos's invariants on synthetic inputs: each must fail when it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos.checker import (
    BASELINE_S,
    FlowTracker,
    Injected,
    Intent,
    LogScanner,
    StuckTracker,
    growth,
    intent_diff,
    percentile,
    split_brain,
)
from bench.chaos.paths import FlowRoute, PathBook
from bench.chaos.schedule import KINDS, Fault

SETTLE = 10.0
PAIRS = {"agw1": 1, "agw2": 2, "agw3": 3, "bgw1": 1, "bgw2": 2, "bgw3": 3}


def fault(kind: str, at: float, duration: float = 2.0, seq: int = 0, target: str = "agw1", site: str = "a") -> Fault:
    return Fault(seq, at, kind, site, target, duration, 0.0, None)


def inj(kind: str, at: float, undone: float | None, seq: int = 0, target: str = "agw1") -> Injected:
    return Injected(fault(kind, at, seq=seq, target=target), at, undone, target)


def book(pairs: dict[str, tuple[str, str]]) -> PathBook:
    """Flows whose request and answer enter by the given gateways from t = 0 on."""
    routes = [FlowRoute(f, "sgw-a", i, "sgw-b", 100 + i) for i, f in enumerate(pairs)]
    b = PathBook(routes, PAIRS)
    b.observe(0.0, {"sgw-a": {i: pairs[f][0] for i, f in enumerate(pairs)},
                    "sgw-b": {100 + i: pairs[f][1] for i, f in enumerate(pairs)}})
    return b


def tracker(paths: PathBook | None = None) -> FlowTracker:
    return FlowTracker(interval_s=0.02, settle_s=SETTLE, paths=paths or book({"f": ("agw1", "bgw2")}))


def answers(t: FlowTracker, flow: str, start: float, end: float, step: float = 0.02) -> None:
    n = int(round((end - start) / step))
    for k in range(n + 1):
        t.answer(flow, start + k * step)


def test_steady_flow_has_no_violation() -> None:
    t = tracker()
    answers(t, "f", 0, 10)
    assert t.check([], 10.0) == []
    assert t.silences == []


def test_silence_without_a_fault_is_held_to_the_baseline() -> None:
    t = tracker()
    answers(t, "f", 0, 5)
    answers(t, "f", 5.6, 8)  # 600 ms > 500 ms + one interval
    [v] = t.check([], 8.0)
    assert v.invariant == "flow" and "600 ms" in v.what and "no fault on its path" in v.what
    assert t.check([], 8.5) == []  # reported once


def test_gateway_fault_on_the_flows_pair_allows_its_budget_and_no_more() -> None:
    freeze = inj("gateway_freeze", 5.0, 7.0, target="bgw1")  # pair 1: the flow's request leg
    ok = tracker()
    answers(ok, "f", 0, 5)
    answers(ok, "f", 5.45, 9)
    assert ok.check([freeze], 9.0) == []
    assert [s.seconds for s in ok.charged([freeze], 9.0)[0]] == [pytest.approx(0.45)]
    bad = tracker()
    answers(bad, "f", 0, 5)
    answers(bad, "f", 5.8, 9)
    [v] = bad.check([freeze], 9.0)
    assert "charged to #0 gateway_freeze" in v.what and "allowed 520 ms" in v.what


def test_budgets_are_not_added_and_a_switch_restart_before_does_not_cover_a_later_freeze() -> None:
    # the 30-minute run of 2026-11-26 let a 1.19 s silence pass because a switch restart and a
    # WAN burst overlapped it: the silence is the most recent fault's, with its budget alone
    switch = inj("switch_restart", 2.0, 2.0, seq=0, target="switch")
    wan = inj("wan_loss", 3.0, 10.0, seq=1, target="wan")
    freeze = inj("gateway_freeze", 5.0, 8.0, seq=2, target="agw1")
    t = tracker()
    answers(t, "f", 0, 2.0)
    answers(t, "f", 3.0, 5.0)  # the switch's silence: 1 s of its 10 s
    answers(t, "f", 6.2, 9)  # after the freeze: 1.2 s, more than the freeze's 500 ms
    [v] = t.check([switch, wan, freeze], 9.0)
    assert "1200 ms" in v.what and "charged to #2 gateway_freeze" in v.what and "allowed 520 ms" in v.what
    assert {seq: [round(s.seconds, 2) for s in ss] for seq, ss in t.charged([switch, wan, freeze], 9.0).items()} \
        == {0: [1.0], 2: [1.2]}


def test_a_gateway_fault_off_the_flows_path_gives_it_nothing() -> None:
    other = inj("gateway_freeze", 5.0, 8.0, target="agw3")  # pair 3: the flow crosses pairs 1 and 2
    t = tracker()
    answers(t, "f", 0, 5)
    answers(t, "f", 5.6, 9)
    [v] = t.check([other], 9.0)
    assert "no fault on its path" in v.what
    paths = book({"f": ("agw3", "bgw2")})
    t2 = tracker(paths)
    answers(t2, "f", 0, 5)
    answers(t2, "f", 5.45, 9)
    assert t2.check([other], 9.0) == []


def test_the_flows_path_is_read_before_the_fault_moved_it() -> None:
    paths = book({"f": ("agw1", "bgw2")})
    paths.observe(5.3, {"sgw-a": {0: "agw2"}, "sgw-b": {100: "bgw2"}})  # failed over off pair 1
    assert paths.pairs("f", 0, 5) == {1, 2} and paths.pairs("f", 6, 9) == {2}
    freeze = inj("gateway_freeze", 5.0, 8.0, target="agw1")
    t = tracker(paths)
    answers(t, "f", 0, 5)
    answers(t, "f", 5.45, 9)
    assert t.check([freeze], 9.0) == []


def test_a_controller_fault_silences_nothing_but_extends_a_gateway_fault_during_it() -> None:
    kill = inj("leader_kill", 5.0, 10.0, seq=0, target="c1")
    freeze = inj("gateway_freeze", 5.0, 7.0, seq=1, target="agw1")
    t = tracker()
    answers(t, "f", 0, 5)
    answers(t, "f", 5.9, 9)  # 0.9 s: over the freeze's 500 ms, within the takeover's 1 s
    [v] = t.check([kill], 9.0)  # the leader's death alone silences no flow
    assert "no fault on its path" in v.what
    t2 = tracker()
    answers(t2, "f", 0, 5)
    answers(t2, "f", 5.9, 9)
    assert t2.check([kill, freeze], 9.0) == []
    t3 = tracker()
    answers(t3, "f", 0, 5)
    answers(t3, "f", 6.4, 9)  # 1.4 s: the old sum (1 s + 500 ms) allowed it, the max does not
    [v] = t3.check([kill, freeze], 9.0)
    assert "allowed 1020 ms" in v.what


def test_a_restarted_site_b_controller_budget_includes_its_downtime() -> None:
    restart = Injected(Fault(0, 5.0, "controller_restart", "b", "controller", 2.0, 0.0, None), 5.0, 7.0,
                       "sgw-b controller")
    assert restart.budget_s == pytest.approx(KINDS["controller_restart"].budget_s + 2.0)
    freeze = inj("gateway_freeze", 6.0, 9.0, seq=1, target="bgw2")
    t = tracker()
    answers(t, "f", 0, 6)
    answers(t, "f", 9.0, 12)  # 3 s: within the restart's downtime + start + failover
    assert t.check([restart, freeze], 12.0) == []


def test_a_flow_that_never_returns_is_caught_while_it_is_silent() -> None:
    freeze = inj("gateway_freeze", 5.0, None)  # still frozen
    t = tracker()
    answers(t, "f", 0, 5)
    assert t.check([freeze], 5.3) == []
    [v] = t.check([freeze], 5.6)
    assert "still silent" in v.what


def test_fault_window_includes_settling_after_undo() -> None:
    link = inj("gateway_link", 5.0, 7.0)
    t = tracker()
    answers(t, "f", 0, 12)  # a silence 5 s after the undo (the refill) is still the fault's
    answers(t, "f", 12.5, 13)
    assert t.check([link], 13.0) == []
    late = tracker()
    answers(late, "f", 0, 20)
    answers(late, "f", 20.6, 21)  # after undo + settle: back to the baseline
    assert late.check([link], 21.0) != []


def test_a_silence_that_began_long_before_the_fault_is_not_its() -> None:
    freeze = inj("gateway_freeze", 5.0, 7.0)
    t = tracker()
    answers(t, "f", 0, 3)
    answers(t, "f", 5.4, 9)  # silent since t = 3: 2.4 s, the freeze came 2 s into it
    [v] = t.check([freeze], 9.0)
    assert "no fault on its path" in v.what


def test_stuck_bucket() -> None:
    s = StuckTracker(settle_s=SETTLE, slack_s=0.5)
    s.observe("sgw-a", {0: "agw1", 1: None}, set(), 1.0)
    assert s.check([], 1.5) == []
    [v] = s.check([], 1.0 + BASELINE_S + 0.6)
    assert "bucket 1 unassigned" in v.what
    s.observe("sgw-a", {0: "agw1", 1: "agw2"}, {"agw1"}, 3.0)
    assert ("sgw-a", 1) not in s.since
    [v] = s.check([], 4.5)
    assert "bucket 0 on dead agw1" in v.what
    s.observe("sgw-a", {0: "agw2", 1: "agw2"}, {"agw1"}, 5.0)
    assert s.since == {}


def test_split_brain_counts_each_pair_once() -> None:
    seen: set[tuple[int, int]] = set()
    [v] = split_brain([(3, 4)], seen, 1.0)
    assert "terms 3 and 4" in v.what
    assert split_brain([(3, 4)], seen, 2.0) == []


def test_intent_diff() -> None:
    want = Intent({"agw1": 2.0, "agw2": 1.0}, frozenset({"agw3"}), {7: "agw2"})
    assert intent_diff(want, {"agw1": 2.0, "agw2": 1.0}, {"agw3"}, {7: "agw2"}) == []
    diff = intent_diff(want, {"agw1": 1.0, "agw2": 1.0}, set(), {7: "agw1", 9: "agw2"})
    assert diff == ["agw1 weight 1.0 (set 2)", "agw3 no longer drained", "bucket 7 pinned to agw1 (set agw2)",
                    "bucket 9 pinned to agw2, not by the run"]


def test_growth_needs_both_factor_and_absolute() -> None:
    flat = [(float(t), 100.0 + (t % 3)) for t in range(0, 600, 5)]
    leak = [(float(t), 50.0 + t / 2) for t in range(0, 600, 5)]
    small = [(float(t), 5.0 + t / 100) for t in range(0, 600, 5)]
    out = growth({"sgw-a/controller-c1[9] rss_mb": flat, "sgw-a/switch[8] rss_mb": leak,
                  "sgw-a/agent-agw1[7] fds": small, "x[1] tasks": leak[:10]}, warmup_s=120, now=600)
    assert [v.what.split(":")[0] for v in out] == ["sgw-a/switch[8] rss_mb"]


def test_log_scanner_reads_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "controller-c1.log"
    log.write_text("ts=1 fine\nTraceback (most recent call last):\n  File x\n")
    s = LogScanner()
    [v] = s.scan([log], 1.0)
    assert "controller-c1.log: Traceback" in v.what
    assert s.scan([log], 2.0) == []
    with open(log, "a") as f:
        f.write("panic: runtime error: index out of range")  # no newline yet: not read
    assert s.scan([log], 3.0) == []
    with open(log, "a") as f:
        f.write("\n")
    [v] = s.scan([log], 4.0)
    assert "panic: runtime error" in v.what
    assert s.scan([tmp_path / "gone.log"], 5.0) == []


def test_percentile() -> None:
    assert percentile([], 99) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([float(x) for x in range(1, 101)], 99) == 99.0
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0
