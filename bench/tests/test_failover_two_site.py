"""The two-site failover benchmark's summary: the keys measure returns, worst direction's median."""

from __future__ import annotations

import pytest

from bench.failover.two_site import BenchError, Trial, run_trials, summarize
from bench.gaps import FlowGap


def _flow(gap_ms: float) -> FlowGap:
    return FlowGap("h1 -> r1", 500, 470, 0, 30, gap_ms, 0.0, True, None)


def _t(kind: str, a_to_b: float, b_to_a: float, both: float) -> Trial:
    return Trial(kind, 0, "agw1", "bgw1", _flow(a_to_b), _flow(b_to_a), _flow(both), 300.0, 320.0, "partner down", 2.0)


def test_summary_headline_is_the_flow_through_the_pair_both_ways() -> None:
    trials = [_t("freeze", 300, 410, 420), _t("freeze", 350, 390, 380), _t("freeze", 320, 900, 1200),
              _t("link", 20, 130, 140), _t("link", 30, 110, 120)]
    s = summarize(trials)
    assert s["failover_freeze_a_to_b_ms"] == 320 and s["failover_freeze_b_to_a_ms"] == 410
    assert s["failover_freeze_ms"] == 420 and s["failover_freeze_max_ms"] == 1200
    assert s["failover_link_ms"] == 130 and s["failover_link_a_to_b_ms"] == 25
    assert "failover_kill_ms" not in s  # only the kinds that ran
    assert all(isinstance(v, float | int) for v in s.values())


@pytest.mark.parametrize(("trials", "kinds"), [(0, ["freeze"]), (5, ["melt"])])
def test_bad_arguments_are_refused_before_anything_runs(trials: int, kinds: list[str]) -> None:
    with pytest.raises(BenchError, match="kinds must be among"):
        run_trials(trials, kinds)
