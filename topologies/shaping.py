"""A fixed forwarding capacity for an emulated gateway: a tbf qdisc on the egress of its WAN
interface (`wan0` in its namespace), i.e. on the ESP packets it sends after encrypting.

Every packet costs at least `packet_bytes` of tokens (tbf's `mpu`), and `packet_bytes` is the
largest frame the WAN carries (1514 B: a 1500-byte MTU plus the Ethernet header, which tbf
counts), so the cap is a packet rate: `pps` packets per second whatever their size. Both of the
clustering paper's frame sizes (64 and 1408 B, 1408 B becoming a ~1.5 kB ESP packet) then meet
the same capacity, as they would at a gateway whose cost is per packet. Packets over the rate
wait in tbf's queue for at most `latency_ms`, then are dropped: the loss a zero-loss search sees.

Pure command construction (unit-tested); `topologies.site.Site.cap_wan_egress` runs them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

WAN_DEV = "wan0"  # a gateway's WAN interface in its namespace (topologies/network.py)
MAX_FRAME_BYTES = 1514  # 1500-byte MTU + 14-byte Ethernet header: what tbf counts per packet on a veth


@dataclass(frozen=True)
class EgressCap:
    """At most `pps` packets per second out of the interface, each counted as at least
    `packet_bytes` (so small packets cannot pass faster); `burst_packets` may leave back to
    back, the rest queue up to `latency_ms`."""

    pps: float
    packet_bytes: int = MAX_FRAME_BYTES
    burst_packets: int = 8
    latency_ms: float = 50.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.pps) and 1.0 <= self.pps <= 10_000_000):
            raise ValueError(f"a capacity of {self.pps!r} packets per second: give 1 .. 10,000,000")
        if not 64 <= self.packet_bytes <= 65_535:
            raise ValueError(f"packet_bytes {self.packet_bytes}: give 64 .. 65535 (the largest frame the link carries)")
        if not 1 <= self.burst_packets <= 10_000:
            raise ValueError(f"burst_packets {self.burst_packets}: give 1 .. 10000 (at least one whole packet)")
        if not (math.isfinite(self.latency_ms) and 1.0 <= self.latency_ms <= 10_000):
            raise ValueError(f"latency_ms {self.latency_ms!r}: give 1 .. 10000")

    @property
    def rate_bit(self) -> int:
        """tbf's rate in bit/s: `pps` packets of `packet_bytes` each."""
        return round(self.pps * self.packet_bytes * 8)

    @property
    def burst_bytes(self) -> int:
        """The bucket: never less than one largest packet, or tbf drops every such packet."""
        return self.burst_packets * self.packet_bytes

    def add_argv(self, dev: str = WAN_DEV) -> list[str]:
        """`tc` command that installs the cap (replacing any root qdisc of `dev`)."""
        argv = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{self.rate_bit}bit",
                "burst", str(self.burst_bytes), "latency", f"{self.latency_ms:g}ms", "mpu", str(self.packet_bytes)]
        return argv

    def describe(self) -> str:
        return (f"{self.pps:g} packets/s (tbf rate {self.rate_bit / 1e6:.3f} Mbit/s, mpu {self.packet_bytes} B, "
                f"burst {self.burst_packets} packets, queue {self.latency_ms:g} ms)")


def remove_argv(dev: str = WAN_DEV) -> list[str]:
    """`tc` command that removes the root qdisc of `dev` (back to the kernel's default)."""
    argv = ["tc", "qdisc", "del", "dev", dev, "root"]
    return argv


def show_argv(dev: str = WAN_DEV) -> list[str]:
    argv = ["tc", "-s", "-j", "qdisc", "show", "dev", dev]
    return argv


@dataclass(frozen=True)
class QdiscStats:
    kind: str  # "tbf" when the cap is in place
    packets: int  # sent through it
    drops: int  # dropped by it (over the rate for longer than the queue holds)


def parse_root_qdisc(out: str) -> QdiscStats:
    """The root qdisc of `tc -s -j qdisc show dev X`'s output; ValueError when there is none."""
    try:
        qdiscs = json.loads(out)
    except json.JSONDecodeError as exc:
        raise ValueError(f"tc printed no JSON ({exc}): {out[:200]!r}") from None
    for q in qdiscs if isinstance(qdiscs, list) else []:
        if isinstance(q, dict) and q.get("root"):
            return QdiscStats(str(q.get("kind")), int(q.get("packets", 0)), int(q.get("drops", 0)))
    raise ValueError(f"no root qdisc in {out[:200]!r}")
