"""Watching a stock host's Neighbour Unreachability Detection of its router (RFC 4861 §7.3):
shortened NUD timers, a capture of the host's ND for the router and its neighbour-table
notifications, each read into counts the IPv6 integration test asserts on.

What is counted comes from two independent views of one host interface:
- the wire (`tcpdump -w` on the host's interface, read with scapy): every NS for the router
  the host sent, unicast to the vmac (a NUD probe) or to the solicited-node group (a fresh
  resolution), and every NA for the router it received, judged by its target link-layer
  option and R/S flags;
- the kernel (`ip -6 monitor neigh`): every state the host's entry for the router went
  through and the link-layer address it held then.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, IPv6
from scapy.layers.l2 import Ether
from scapy.utils import PcapReader

# Linux's defaults (net.ipv6.neigh.default.*): an entry in use is REACHABLE for
# base_reachable_time (30 s; 15-45 s at random), then STALE; the next packet makes it DELAY
# for delay_first_probe_time (5 s), then PROBE: one unicast NS to the cached address. A host
# whose traffic gives no upper-layer confirmation (ping, UDP) therefore sends one NUD probe
# every ~35 s while it talks to the router: an hour of that is this many confirmations.
DEFAULT_REACHABLE_S = 30.0
DEFAULT_DELAY_FIRST_PROBE_S = 5.0
HOUR_OF_PROBES = math.ceil(3600 / (DEFAULT_REACHABLE_S + DEFAULT_DELAY_FIRST_PROBE_S))

# The test's shortened timers (net.ipv6.neigh.<if>.*): the same cycle in ~0.1 s. A probe that
# goes unanswered is repeated ucast_solicit times retrans_time_ms apart, then the entry FAILS
# (mcast_resolicit 0): a switch that stopped answering is seen within 0.3 s.
SHORT_NUD_SYSCTLS = {
    "base_reachable_time_ms": "100",
    "delay_first_probe_time": "0",
    "retrans_time_ms": "100",
    "ucast_solicit": "3",
    "mcast_resolicit": "0",
}

# The traffic that keeps the router's entry in use without confirming it: one UDP datagram
# every `interval` s to the discard port of a remote host, through the router. Not ping:
# iputils ping sends with MSG_CONFIRM once it got a reply, which tells the kernel the
# neighbour is reachable and so spares it every NUD probe; TCP's ACKs do the same. A send
# error (the route or the neighbour lost) ends the sender with the error.
UDP_SENDER = """
import socket, sys, time
dst, interval = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
while True:
    s.sendto(b"nud", (dst, 9))
    time.sleep(interval)
"""

STATES = ("INCOMPLETE", "REACHABLE", "STALE", "DELAY", "PROBE", "FAILED", "NOARP", "PERMANENT", "NONE")


def nud_sysctls(dev: str, values: dict[str, str] = SHORT_NUD_SYSCTLS) -> list[str]:
    """`sysctl -w` arguments that set `values` on `dev`'s IPv6 neighbour parameters."""
    return [f"net.ipv6.neigh.{dev}.{k}={v}" for k, v in values.items()]


@dataclass(frozen=True)
class NeighEvent:
    """One `ip -6 monitor neigh` line about the router's entry."""

    state: str  # the NUD state, "DELETED" for a removal
    lladdr: str | None
    router: bool
    line: str


def neigh_events(text: str, addr: str) -> list[NeighEvent]:
    """The notifications about `addr` in `ip -6 monitor neigh` output, in order."""
    out: list[NeighEvent] = []
    for line in text.splitlines():
        words = line.split()
        deleted = bool(words) and words[0] == "Deleted"
        if deleted:
            words = words[1:]
        if not words or words[0] != addr:
            continue
        lladdr = words[words.index("lladdr") + 1].lower() if "lladdr" in words else None
        state = "DELETED" if deleted else next((w for w in reversed(words) if w in STATES), "?")
        out.append(NeighEvent(state, lladdr, "router" in words, line.strip()))
    return out


@dataclass
class NdExchange:
    """The host's ND about the router `router` seen on its interface (module doc)."""

    unicast_ns: int = 0  # NS for the router sent to the vmac (Ethernet) and the router (IPv6): NUD probes
    multicast_ns: int = 0  # NS for the router sent to its solicited-node group: a fresh resolution
    other_ns: list[str] = field(default_factory=list)  # NS for the router sent anywhere else (Ethernet dst)
    na_good: int = 0  # NA for the router from the vmac, target link-layer option = the vmac, R and S set
    na_bad: list[str] = field(default_factory=list)  # every other NA for the router, described
    ns_sources: Counter[str] = field(default_factory=Counter)  # IPv6 sources of the NUD probes

    def problems(self) -> list[str]:
        """Why this exchange is not "every probe to the vmac, every answer the vmac"."""
        out = [f"NA for the router that is not the switch's answer: {d}" for d in self.na_bad]
        out += [f"NS for the router to {d}, neither the vmac nor its solicited-node group" for d in self.other_ns]
        if self.multicast_ns:
            out.append(f"{self.multicast_ns} multicast NS for the router: the host resolved it afresh "
                       "(its entry had failed or was removed)")
        if self.na_good < self.unicast_ns - 1:  # the last probe may still be in flight when the capture ends
            out.append(f"{self.unicast_ns} NUD probes but only {self.na_good} answers with the vmac")
        return out


def read_nd(pcap: Path, router: str, vmac: str) -> NdExchange:
    """Counts of the ND about `router` in `pcap` (a capture on the host's interface)."""
    vmac = vmac.lower()
    ex = NdExchange()
    with PcapReader(str(pcap)) as frames:
        for frame in frames:
            if Ether not in frame or IPv6 not in frame:
                continue
            eth, ip6 = frame[Ether], frame[IPv6]
            if ICMPv6ND_NS in frame and frame[ICMPv6ND_NS].tgt == router:
                dst = str(eth.dst).lower()
                if dst == vmac and ip6.dst == router:
                    ex.unicast_ns += 1
                    ex.ns_sources[str(ip6.src)] += 1
                elif dst.startswith("33:33:ff") and ip6.dst.startswith("ff02::1:ff"):
                    ex.multicast_ns += 1
                else:
                    ex.other_ns.append(f"{dst} / {ip6.dst}")
            elif ICMPv6ND_NA in frame and frame[ICMPv6ND_NA].tgt == router:
                na = frame[ICMPv6ND_NA]
                tll = str(frame[ICMPv6NDOptDstLLAddr].lladdr).lower() if ICMPv6NDOptDstLLAddr in frame else None
                if str(eth.src).lower() == vmac and tll == vmac and na.R == 1 and na.S == 1:
                    ex.na_good += 1
                else:
                    ex.na_bad.append(f"from {eth.src}, target link-layer {tll}, R={na.R} S={na.S} O={na.O}")
    return ex
