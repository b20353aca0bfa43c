"""The soak's liveness gap listener: the gap summary, and (root) the listener against real
liveness frames on lo."""

from __future__ import annotations

import os

import pytest

from bench.failover.liveness_gaps import Gaps, listen


def test_gaps_summary() -> None:
    g = Gaps()
    for t in (0, 5_000_000, 10_000_000, 40_000_000):
        g.seen(t)
    assert g.summary() == {"frames": 4, "max_gap_ms": 30.0, "p99_gap_ms": 30.0, "median_gap_ms": 5.0}
    assert Gaps().summary() == {"frames": 0, "max_gap_ms": None, "p99_gap_ms": None, "median_gap_ms": None}


@pytest.mark.skipif(os.geteuid() != 0, reason="packet sockets need root")
def test_listener_sees_the_agents_frames_on_lo() -> None:
    from supergw_gateway.liveness import LivenessSender

    sender = LivenessSender("lo", "gap-test", 5)
    sender.start()
    try:
        got = listen(["lo"], 0.5)["lo"]
    finally:
        sender.stop()
    assert isinstance(got["frames"], int) and 60 <= got["frames"] <= 110
    assert got["max_gap_ms"] is not None and got["max_gap_ms"] < 50
