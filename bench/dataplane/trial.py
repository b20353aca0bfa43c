"""One measured run of the testbed: a plan's frames in one direction, what reached the other
end with the switch's rewrite, and what it cost the switch's core.

Checks that can fail the benchmark: every frame that reached the receiving end carries the
rewrite (host -> gateway: dst is the receiving gateway's MAC; gateway -> host: src is a vmac),
and each gateway got the share of the frames that the bucket assignment gives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.dataplane.cputime import SwitchCpu, SwitchMeter
from bench.dataplane.generators import SinkCount, Traffic, TrafficResult

SHARE_TOLERANCE = 0.03  # a gateway's share of the delivered frames may differ this much from the plan's
SHARE_MIN_FRAMES = 10_000  # below this a share says little


class TrialError(RuntimeError):
    """The switch delivered wrong frames, or to the wrong place."""


def dst_rewritten(s: SinkCount) -> int:
    return s.dst_is_own_mac


def src_rewritten(s: SinkCount) -> int:
    return s.src_is_vmac


@dataclass(frozen=True)
class Direction:
    label: str  # "host -> gateway"
    gen: str  # NETNS:DEV the generator sends out of
    sinks: dict[str, float]  # NETNS:DEV -> the share of the plan's frames meant for it
    rewritten: Callable[[SinkCount], int]  # frames at a sink whose rewrite checks out
    rewrite: str  # what `rewritten` checks, for the report
    ipv6: bool = False  # IPv6/UDP frames (from the hosts' IPv6 addresses), else IPv4/UDP


@dataclass(frozen=True)
class Trial:
    direction: Direction
    size: int  # nominal frame size (FCS included)
    traffic: TrafficResult
    cpu: SwitchCpu
    rate: float | None  # paced rate, None when unpaced

    @property
    def delivered(self) -> int:
        return self.traffic.received

    @property
    def pps(self) -> float:
        """Frames delivered per wall-clock second of sending."""
        return self.delivered / self.traffic.seconds if self.traffic.seconds > 0 else 0.0

    @property
    def pps_per_cpu_second(self) -> float:
        """Frames delivered per CPU-second of the switch (its ports' NAPI threads and its process)."""
        return self.delivered / self.cpu.switch if self.cpu.switch > 0 else 0.0

    @property
    def pps_per_core_second(self) -> float:
        """Frames delivered per busy second of the switch's core, whoever kept it busy."""
        return self.delivered / self.cpu.core_busy if self.cpu.core_busy > 0 else 0.0

    @property
    def delivered_share(self) -> float:
        return self.delivered / self.traffic.sent if self.traffic.sent else 0.0

    def row(self) -> dict[str, object]:
        t, c = self.traffic, self.cpu
        return {
            "what": f"supergw-switch {self.direction.label} {self.size} B" + (f", paced {self.rate:,.0f}/s" if self.rate else ""),
            "generator": t.generator.mode, "sent": t.sent, "offered_pps": round(t.offered_pps), "delivered": self.delivered,
            "delivered_share": round(self.delivered_share, 4), "seconds": round(t.seconds, 3),
            "pps": round(self.pps), "switch_threads_s": round(c.threads, 3), "switch_process_s": round(c.process, 3),
            "pps_per_cpu_second": round(self.pps_per_cpu_second), "ns_per_frame": round(1e9 / max(1.0, self.pps_per_cpu_second), 1),
            "switch_thread_share": round(c.threads / c.wall, 3) if c.wall else None,
            "core_busy_s": round(c.core_busy, 2), "pps_per_core_second": round(self.pps_per_core_second),
            "core_steal_s": round(c.core_steal, 2), "wall_s": round(c.wall, 2),
            **{f"at {s.at}": s.frames for s in t.sinks},
        }


def run(
    traffic: Traffic, direction: Direction, plan: Path, size: int, seconds: float, traffic_cpu: int, meter: SwitchMeter,
    vmac_base: str, buckets: int, rate: float | None = None, prog_stats: list[str] | None = None,
) -> Trial:
    meter.start()
    result = traffic.run(direction.gen, list(direction.sinks), plan, seconds, traffic_cpu, vmac_base, buckets, rate,
                         prog_stats)
    trial = Trial(direction, size, result, meter.stop(), rate)
    check(trial)
    return trial


def check(trial: Trial) -> None:
    d = trial.direction
    family = "ipv6" if d.ipv6 else "ipv4"
    if trial.traffic.family != family:
        raise TrialError(f"{d.label}: the generator sent a plan of {trial.traffic.family} frames, not {family}")
    for s in trial.traffic.sinks:
        if d.rewritten(s) != s.frames:
            raise TrialError(f"{d.label}: {s.frames - d.rewritten(s)} of {s.frames} frames reached {s.at} without "
                             f"the rewrite ({d.rewrite})")
    if trial.delivered >= SHARE_MIN_FRAMES:
        for s in trial.traffic.sinks:
            share, want = s.frames / trial.delivered, d.sinks[s.at]
            if abs(share - want) > SHARE_TOLERANCE:
                raise TrialError(f"{d.label}: {s.at} got {share:.1%} of the delivered frames, the bucket assignment "
                                 f"gives it {want:.1%}")
