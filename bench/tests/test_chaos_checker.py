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
from bench.chaos.schedule import Fault

SETTLE = 10.0


def fault(kind: str, at: float, duration: float = 2.0, seq: int = 0) -> Fault:
    return Fault(seq, at, kind, "a", "agw1", duration, 0.0, None)


def answers(t: FlowTracker, flow: str, start: float, end: float, step: float = 0.02) -> None:
    n = int(round((end - start) / step))
    for k in range(n + 1):
        t.answer(flow, start + k * step)


def test_steady_flow_has_no_violation() -> None:
    t = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(t, "f", 0, 10)
    assert t.check([], 10.0) == []
    assert t.silences == []


def test_silence_without_a_fault_is_held_to_the_baseline() -> None:
    t = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(t, "f", 0, 5)
    answers(t, "f", 5.6, 8)  # 600 ms > 500 ms + one interval
    [v] = t.check([], 8.0)
    assert v.invariant == "flow" and "600 ms" in v.what and "none" in v.what
    assert t.check([], 8.5) == []  # reported once


def test_gateway_fault_allows_its_budget_and_no_more() -> None:
    freeze = Injected(fault("gateway_freeze", 5.0), 5.0, 7.0)
    ok = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(ok, "f", 0, 5)
    answers(ok, "f", 5.45, 9)
    assert ok.check([freeze], 9.0) == []
    assert ok.recovery_s(freeze, 9.0) == pytest.approx(0.45)
    bad = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(bad, "f", 0, 5)
    answers(bad, "f", 5.8, 9)
    [v] = bad.check([freeze], 9.0)
    assert "gateway_freeze" in v.what and "allowed 520 ms" in v.what


def test_overlapping_controller_and_gateway_budgets_add_up() -> None:
    kill = Injected(fault("leader_kill", 5.0, seq=0), 5.0, 10.0)
    freeze = Injected(fault("gateway_freeze", 5.0, seq=1), 5.0, 7.0)
    t = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(t, "f", 0, 5)
    answers(t, "f", 6.4, 9)  # 1.4 s: over either budget alone, within 1 s + 500 ms
    assert t.check([kill], 9.0) != []
    t2 = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(t2, "f", 0, 5)
    answers(t2, "f", 6.4, 9)
    assert t2.check([kill, freeze], 9.0) == []


def test_a_flow_that_never_returns_is_caught_while_it_is_silent() -> None:
    freeze = Injected(fault("gateway_freeze", 5.0), 5.0, None)  # still frozen
    t = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(t, "f", 0, 5)
    assert t.check([freeze], 5.3) == []
    [v] = t.check([freeze], 5.6)
    assert "still silent" in v.what


def test_fault_window_includes_settling_after_undo() -> None:
    link = Injected(fault("gateway_link", 5.0), 5.0, 7.0)
    t = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(t, "f", 0, 12)  # a silence 5 s after the undo (the refill) is still the fault's
    answers(t, "f", 12.5, 13)
    assert t.check([link], 13.0) == []
    late = FlowTracker(interval_s=0.02, settle_s=SETTLE)
    answers(late, "f", 0, 20)
    answers(late, "f", 20.6, 21)  # after undo + settle: back to the baseline
    assert late.check([link], 21.0) != []


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
