"""The two-site failover benchmark's summary: the keys bench/scaling reads, worst direction's median."""

from __future__ import annotations

import pytest

from bench.failover.two_site import BenchError, Trial, run_trials, summarize
from bench.gaps import FlowGap


def _flow(gap_ms: float) -> FlowGap:
    return FlowGap("h1 -> r1", 500, 470, 0, 30, gap_ms, 0.0, True, None)


def _t(kind: str, a_to_b: float, b_to_a: float) -> Trial:
    return Trial(kind, 0, "agw1", "bgw1", _flow(a_to_b), _flow(b_to_a), 300.0, 320.0, "partner down", 2.0)


def test_summary_keys_are_the_worse_directions_median_and_per_direction() -> None:
    trials = [_t("freeze", 300, 410), _t("freeze", 350, 390), _t("freeze", 320, 900),
              _t("link", 20, 130), _t("link", 30, 110)]
    s = summarize(trials)
    assert s["failover_freeze_a_to_b_ms"] == 320 and s["failover_freeze_b_to_a_ms"] == 410
    assert s["failover_freeze_ms"] == 410 and s["failover_freeze_max_ms"] == 900
    assert s["failover_link_ms"] == 120 and s["failover_link_a_to_b_ms"] == 25
    assert "failover_kill_ms" not in s  # only the kinds that ran
    assert all(isinstance(v, float | int) for v in s.values())


@pytest.mark.parametrize(("trials", "kinds"), [(0, ["freeze"]), (5, ["melt"])])
def test_bad_arguments_are_refused_before_anything_runs(trials: int, kinds: list[str]) -> None:
    with pytest.raises(BenchError, match="kinds must be among"):
        run_trials(trials, kinds)
