"""What the core says to the switch and hears from it, in its own words (no finsy here).

`southbound.switch.Southbound` turns these into P4Runtime entities and back; everything
outside `southbound/` speaks only these: host entries to write, and the switch's digests,
packet-ins and idle timeouts as plain events.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from enum import IntEnum


def ip6_text(packed: bytes) -> str:
    """The 16 bytes of an IPv6 address as text, exactly as `str(ipaddress.IPv6Address(packed))`
    writes it (RFC 5952), by the C library: ipaddress takes microseconds per address, and a cold
    start of H hosts reads H addresses from digests and learns them. The C library writes an
    address with an IPv4 tail ("::ffff:10.0.0.1") differently: those go to ipaddress."""
    text = socket.inet_ntop(socket.AF_INET6, packed)
    return text if "." not in text else str(ipaddress.IPv6Address(packed))


class Op(IntEnum):
    """P4Runtime Update.Type values."""

    INSERT = 1
    MODIFY = 2
    DELETE = 3


@dataclass(frozen=True)
class LearnedSource:
    """`learned_sources` (mac, port): the switch knows this host; ages out when idle."""

    mac: str
    port: int


@dataclass(frozen=True)
class L2Entry:
    """`mac_table`: frames to `mac` leave on host port `port`."""

    mac: str
    port: int


@dataclass(frozen=True)
class HostIp:
    """`host_ips`: the switch answers gateways' ARP for `ip` with `mac`."""

    ip: str
    mac: str


@dataclass(frozen=True)
class LearnedIp6:
    """`learned_ip6s` (ip6, mac): the switch knows this host address; ages out when idle."""

    ip6: str
    mac: str


@dataclass(frozen=True)
class HostIp6:
    """`host_ip6s`: the switch answers gateways' Neighbor Solicitations for `ip6` with `mac`."""

    ip6: str
    mac: str


HostEntry = LearnedSource | L2Entry | HostIp | LearnedIp6 | HostIp6


@dataclass(frozen=True)
class HostWrite:
    """One change to a host table (a DELETE needs only the entry's key fields)."""

    op: Op
    entry: HostEntry


@dataclass(frozen=True)
class HostCapacity:
    """What the switch's host tables hold, from the sizes in the P4Info it runs: `hosts` the
    smallest of `learned_sources`, `mac_table` and `host_ips` (one entry per host each),
    `ip6s` the smaller of `learned_ip6s` and `host_ip6s` (one per IPv6 address); None when
    the P4Info states no size (the target decides)."""

    hosts: int | None
    ip6s: int | None


@dataclass(frozen=True)
class HeldHosts:
    """The host tables as the switch holds them (read at reconcile and by a backup).

    `l2` maps a MAC to its host port, or to None when the entry is not one this controller
    would write (its role is not HOST): it points nowhere and is rewritten or deleted.
    """

    learned: list[LearnedSource]
    l2: dict[str, int | None]
    ips: dict[str, str]  # ip -> mac
    learned_ip6s: list[LearnedIp6] = field(default_factory=list)
    ip6s: dict[str, str] = field(default_factory=dict)  # host_ip6s: ip6 -> mac


# -- what the switch tells the controller


@dataclass(frozen=True)
class HostSeen:
    """One learn digest: (src MAC, host port) missed `learned_sources`; `ip` None when the
    frame carried no IPv4 source."""

    mac: str
    port: int
    ip: str | None


@dataclass(frozen=True)
class HostIdle:
    """`learned_sources` (mac, port) went idle (idle-timeout notification)."""

    mac: str
    port: int


@dataclass(frozen=True)
class Ip6Seen:
    """One IPv6 learn digest: (IPv6 source, src MAC) missed `learned_ip6s` on host port `port`."""

    mac: str
    port: int
    ip6: str


@dataclass(frozen=True)
class Ip6Idle:
    """`learned_ip6s` (ip6, mac) went idle (idle-timeout notification)."""

    ip6: str
    mac: str


@dataclass(frozen=True)
class PacketIn:
    """A frame the switch punted to the controller."""

    reason: int  # p4constants.PuntReason
    port: int  # ingress port
    payload: bytes


# -- remote access: the outside switch's per-gateway tables and the LAN's client pools


@dataclass(frozen=True)
class Ternary:
    """A ternary match (value, mask) on an SPI: an IKE SPI label or a prefix of an ESP SPI range."""

    value: int
    mask: int

    def overlaps(self, other: Ternary) -> bool:
        """Some key matches both (two entries at one priority would be ambiguous)."""
        return (self.value ^ other.value) & self.mask & other.mask == 0


@dataclass(frozen=True)
class RaTables:
    """What the remote-access tables map to gateways (by name): `pins` client outer IPv4
    address -> gateway (`client_pins`, outside), `labels` IKE SPI label -> gateway
    (`ike_spi_labels`), `ranges` ESP SPI prefix -> gateway (`esp_spi_ranges`), `pools`
    inner-address pool "a.b.c.d/n" -> gateway (`client_pools`, on the LAN switch)."""

    pins: dict[str, str]
    labels: dict[Ternary, str]
    ranges: dict[Ternary, str]
    pools: dict[str, str]

    @staticmethod
    def empty() -> RaTables:
        return RaTables({}, {}, {}, {})
