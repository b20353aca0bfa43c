"""A trial fails when a frame arrives without the switch's rewrite, or at the wrong gateway."""

from __future__ import annotations

import pytest

from bench.dataplane import trial
from bench.dataplane.cputime import SwitchCpu
from bench.dataplane.generators import GeneratorMode, SinkCount, TrafficResult

G1, G2 = "sgw-bench-g1:eth0", "sgw-bench-g2:eth0"
TO_GATEWAY = trial.Direction("host -> gateway", "sgw-bench-h:eth0", {G1: 0.5, G2: 0.5}, trial.dst_rewritten, "dst")


def _trial(g1: SinkCount, g2: SinkCount, family: str = "ipv4", direction: trial.Direction = TO_GATEWAY) -> trial.Trial:
    traffic = TrafficResult(sent=100_000, seconds=1.0, offered_pps=1e5, frame_bytes=60, family=family, plan_frames=1024,
                            cpu=1, sinks=[g1, g2], programs=[], generator=GeneratorMode("af-packet-tx-ring", "test"))
    cpu = SwitchCpu(threads=0.04, process=0.01, core_busy=0.1, core_softirq=0.0, core_steal=0.0, wall=1.0)
    return trial.Trial(direction, 64, traffic, cpu, None)


def _sink(at: str, frames: int, rewritten: int | None = None) -> SinkCount:
    return SinkCount(at, frames, frames * 60, frames if rewritten is None else rewritten, 0)


def test_good_trial_passes_and_counts_per_switch_cpu_second() -> None:
    t = _trial(_sink(G1, 25_000), _sink(G2, 25_500))
    trial.check(t)
    assert t.delivered == 50_500
    assert t.pps_per_cpu_second == pytest.approx(50_500 / 0.05)
    assert t.row()["generator"] == "af-packet-tx-ring"
    assert t.pps == pytest.approx(50_500)
    assert t.delivered_share == pytest.approx(0.505)


def test_a_frame_without_the_rewrite_fails() -> None:
    with pytest.raises(trial.TrialError, match="1 of 25000 frames reached sgw-bench-g1:eth0 without the rewrite"):
        trial.check(_trial(_sink(G1, 25_000, 24_999), _sink(G2, 25_000)))


def test_a_gateway_with_the_wrong_share_fails() -> None:
    with pytest.raises(trial.TrialError, match="got 60.0% of the delivered frames, the bucket assignment gives it 50.0%"):
        trial.check(_trial(_sink(G1, 30_000), _sink(G2, 20_000)))


def test_a_share_is_not_judged_on_a_handful_of_frames() -> None:
    trial.check(_trial(_sink(G1, 30), _sink(G2, 0)))


def test_a_plan_of_the_other_family_fails() -> None:
    to_gateway6 = trial.Direction("IPv6 host -> gateway", "sgw-bench-h:eth0", {G1: 0.5, G2: 0.5}, trial.dst_rewritten,
                                  "dst", ipv6=True)
    trial.check(_trial(_sink(G1, 25_000), _sink(G2, 25_000), "ipv6", to_gateway6))
    with pytest.raises(trial.TrialError, match="IPv6 host -> gateway: the generator sent a plan of ipv4 frames, not ipv6"):
        trial.check(_trial(_sink(G1, 25_000), _sink(G2, 25_000), "ipv4", to_gateway6))
    with pytest.raises(trial.TrialError, match="a plan of ipv6 frames, not ipv4"):
        trial.check(_trial(_sink(G1, 25_000), _sink(G2, 25_000), "ipv6"))
