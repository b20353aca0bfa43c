"""Neighbor Discovery on the wire: the Router Advertisements the controller sends and the
Router Solicitations it answers (RFC 4861 §4.1, §4.2, §4.6.2, §4.6.4, §6.1.1), and the
Neighbor Advertisement answering a gateway's solicitation the switch punts (§4.3, §4.4).

Packet-outs and packet-ins carry plain Ethernet frames; this module builds and parses
them with `struct` and `ipaddress` only (the controller does not depend on scapy; the
tests check every frame against scapy's dissector).

The RA carries **no source link-layer address option**: RFC 4861 §4.2 allows leaving it
out "to enable inbound load sharing across multiple link-layer addresses", which is what
the switch does — every host resolves the router's link-local address through Neighbor
Discovery and the switch answers with the host's own bucket's vmac.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from supergw_proto.addresses import mac_to_bytes, mac_to_str

ETH_IPV6 = 0x86DD
IPPROTO_ICMPV6 = 58
ICMPV6_ROUTER_SOLICITATION = 133
ICMPV6_ROUTER_ADVERTISEMENT = 134
ICMPV6_NEIGHBOR_SOLICITATION = 135
ICMPV6_NEIGHBOR_ADVERTISEMENT = 136
ND_HOP_LIMIT = 255  # every ND message is sent and must arrive with hop limit 255 (§6.1)

OPT_SOURCE_LL = 1
OPT_PREFIX_INFO = 3
OPT_TARGET_LL = 2
OPT_MTU = 5
NA_FLAG_ROUTER = 0x80000000
NA_FLAG_SOLICITED = 0x40000000
NA_FLAG_OVERRIDE = 0x20000000

ALL_NODES = ipaddress.IPv6Address("ff02::1")
ALL_ROUTERS = ipaddress.IPv6Address("ff02::2")
UNSPECIFIED = ipaddress.IPv6Address("::")
INFINITY = 0xFFFFFFFF  # a lifetime of all ones: infinite (§4.6.2)

_ETH = struct.Struct("!6s6sH")
_IPV6 = struct.Struct("!IHBB16s16s")
_RA = struct.Struct("!BBHBBHII")
_PREFIX = struct.Struct("!BBBBIII16s")
_MTU = struct.Struct("!BBHI")


def multicast_mac(ip: ipaddress.IPv6Address) -> str:
    """The Ethernet address of an IPv6 multicast group: 33:33 and its low 32 bits (RFC 2464 §7)."""
    if not ip.is_multicast:
        raise ValueError(f"{ip} is not a multicast address")
    return mac_to_str(b"\x33\x33" + ip.packed[12:])


def _ones_sum(src: ipaddress.IPv6Address, dst: ipaddress.IPv6Address, message: bytes) -> int:
    """The 16-bit one's complement sum of the IPv6 pseudo-header and `message`."""
    data = src.packed + dst.packed + struct.pack("!I3xB", len(message), IPPROTO_ICMPV6) + message
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def icmpv6_checksum(src: ipaddress.IPv6Address, dst: ipaddress.IPv6Address, message: bytes) -> int:
    """The ICMPv6 checksum of `message` (its checksum field zero) under the IPv6 pseudo-header
    (RFC 4443 §2.3, RFC 8200 §8.1)."""
    return ~_ones_sum(src, dst, message) & 0xFFFF


def icmpv6_checksum_ok(src: ipaddress.IPv6Address, dst: ipaddress.IPv6Address, message: bytes) -> bool:
    """`message` (checksum field as received) sums to zero (0xffff) under the pseudo-header."""
    return _ones_sum(src, dst, message) == 0xFFFF


@dataclass(frozen=True)
class PrefixInfo:
    """One Prefix Information option (§4.6.2)."""

    prefix: ipaddress.IPv6Network
    on_link: bool = True
    autonomous: bool = True
    valid_lifetime_s: int = 2_592_000  # AdvValidLifetime default, 30 days (§6.2.1)
    preferred_lifetime_s: int = 604_800  # AdvPreferredLifetime default, 7 days

    def __post_init__(self) -> None:
        for name in ("valid_lifetime_s", "preferred_lifetime_s"):
            v = getattr(self, name)
            if not 0 <= v <= INFINITY:
                raise ValueError(f"{name} {v} is outside 0..{INFINITY}")
        if self.preferred_lifetime_s > self.valid_lifetime_s:
            raise ValueError(
                f"preferred_lifetime_s {self.preferred_lifetime_s} exceeds valid_lifetime_s {self.valid_lifetime_s}"
            )

    def pack(self) -> bytes:
        flags = (0x80 if self.on_link else 0) | (0x40 if self.autonomous else 0)
        return _PREFIX.pack(
            OPT_PREFIX_INFO, 4, self.prefix.prefixlen, flags,
            self.valid_lifetime_s, self.preferred_lifetime_s, 0, self.prefix.network_address.packed,
        )


@dataclass(frozen=True)
class RouterAdvert:
    """The fields of one Router Advertisement (§4.2) and its options, SLLA never among them."""

    router_lifetime_s: int
    prefixes: tuple[PrefixInfo, ...] = ()
    cur_hop_limit: int = 64
    managed: bool = False
    other_config: bool = False
    reachable_time_ms: int = 0  # 0: unspecified by this router
    retrans_timer_ms: int = 0
    mtu: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.router_lifetime_s <= 0xFFFF:
            raise ValueError(f"router_lifetime_s {self.router_lifetime_s} is outside 0..65535")
        if not 0 <= self.cur_hop_limit <= 255:
            raise ValueError(f"cur_hop_limit {self.cur_hop_limit} is outside 0..255")
        for name in ("reachable_time_ms", "retrans_timer_ms"):
            if not 0 <= getattr(self, name) <= INFINITY:
                raise ValueError(f"{name} {getattr(self, name)} is outside 0..{INFINITY}")
        if self.mtu is not None and not 1280 <= self.mtu <= INFINITY:
            raise ValueError(f"mtu {self.mtu} is below IPv6's minimum 1280")

    def message(self) -> bytes:
        """The ICMPv6 message with its checksum field zero."""
        flags = (0x80 if self.managed else 0) | (0x40 if self.other_config else 0)
        out = _RA.pack(
            ICMPV6_ROUTER_ADVERTISEMENT, 0, 0, self.cur_hop_limit, flags,
            self.router_lifetime_s, self.reachable_time_ms, self.retrans_timer_ms,
        )
        if self.mtu is not None:
            out += _MTU.pack(OPT_MTU, 1, 0, self.mtu)
        return out + b"".join(p.pack() for p in self.prefixes)


def ipv6_frame(
    eth_dst: str, eth_src: str, src: ipaddress.IPv6Address, dst: ipaddress.IPv6Address, icmp: bytes
) -> bytes:
    """Ethernet + IPv6 (hop limit 255, no extension headers) around an ICMPv6 message whose
    checksum field is zero; the checksum is filled in."""
    csum = icmpv6_checksum(src, dst, icmp)
    icmp = icmp[:2] + struct.pack("!H", csum) + icmp[4:]
    ip = _IPV6.pack(6 << 28, len(icmp), IPPROTO_ICMPV6, ND_HOP_LIMIT, src.packed, dst.packed)
    return _ETH.pack(mac_to_bytes(eth_dst), mac_to_bytes(eth_src), ETH_IPV6) + ip + icmp


def router_advert_frame(
    ra: RouterAdvert,
    src: ipaddress.IPv6Address,
    eth_src: str,
    dst: ipaddress.IPv6Address = ALL_NODES,
    eth_dst: str | None = None,
) -> bytes:
    """The RA as an Ethernet frame from link-local `src` (§6.1.2: an RA's source must be
    link-local) to `dst` (all-nodes by default; `eth_dst` defaults to dst's multicast MAC)."""
    if not src.is_link_local:
        raise ValueError(f"a Router Advertisement is sent from a link-local address, not {src}")
    if eth_dst is None:
        eth_dst = multicast_mac(dst)
    return ipv6_frame(eth_dst, eth_src, src, dst, ra.message())


@dataclass(frozen=True)
class RouterSolicitation:
    eth_src: str
    src: ipaddress.IPv6Address
    dst: ipaddress.IPv6Address
    source_ll: str | None  # its source link-layer address option, if any


def parse_router_solicitation(frame: bytes) -> RouterSolicitation | None:
    """A valid Router Solicitation (§6.1.1) in an Ethernet frame, or None.

    Valid: IPv6 without extension headers, ICMPv6 type 133 code 0, hop limit 255, a correct
    checksum, ICMP length >= 8, every option's length > 0 and inside the message, and no
    source link-layer option when the source is the unspecified address.
    """
    icmp = _icmpv6(frame, ICMPV6_ROUTER_SOLICITATION, 8)
    if icmp is None or not _options_ok(icmp, 8):
        return None
    src, dst = ipaddress.IPv6Address(frame[22:38]), ipaddress.IPv6Address(frame[38:54])
    source_ll: str | None = None
    at = 8
    while at < len(icmp):
        kind, units = icmp[at], icmp[at + 1]
        if kind == OPT_SOURCE_LL and units == 1:
            source_ll = mac_to_str(icmp[at + 2 : at + 8])
        at += 8 * units
    if src == UNSPECIFIED and source_ll is not None:
        return None
    return RouterSolicitation(eth_src=mac_to_str(frame[6:12]), src=src, dst=dst, source_ll=source_ll)



@dataclass(frozen=True)
class NeighborSolicitation:
    eth_src: str
    src: ipaddress.IPv6Address
    target: ipaddress.IPv6Address


def parse_neighbor_solicitation(frame: bytes) -> NeighborSolicitation | None:
    """A valid Neighbor Solicitation (§7.1.1: hop limit 255, code 0, checksum, ICMP length
    >= 24, target not multicast, options of nonzero length) in an Ethernet frame, or None."""
    icmp = _icmpv6(frame, ICMPV6_NEIGHBOR_SOLICITATION, 24)
    if icmp is None:
        return None
    src, target = ipaddress.IPv6Address(frame[22:38]), ipaddress.IPv6Address(icmp[8:24])
    if target.is_multicast or not _options_ok(icmp, 24):
        return None
    return NeighborSolicitation(eth_src=mac_to_str(frame[6:12]), src=src, target=target)


def neighbor_advert_frame(ns: NeighborSolicitation, answer_mac: str, *, router: bool = False) -> bytes:
    """The Neighbor Advertisement answering `ns` for its target at `answer_mac` (§7.2.4):
    Solicited and Override, with a target link-layer option; to the solicitor, or to all-nodes
    when it solicited from `::` (DAD, then not Solicited)."""
    dad = ns.src == UNSPECIFIED
    flags = NA_FLAG_OVERRIDE | (0 if dad else NA_FLAG_SOLICITED) | (NA_FLAG_ROUTER if router else 0)
    icmp = struct.pack("!BBHI16s", ICMPV6_NEIGHBOR_ADVERTISEMENT, 0, 0, flags, ns.target.packed)
    icmp += struct.pack("!BB6s", OPT_TARGET_LL, 1, mac_to_bytes(answer_mac))
    dst, eth_dst = (ALL_NODES, multicast_mac(ALL_NODES)) if dad else (ns.src, ns.eth_src)
    return ipv6_frame(eth_dst, answer_mac, ns.target, dst, icmp)


def _icmpv6(frame: bytes, kind: int, min_len: int) -> bytes | None:
    """The ICMPv6 message of type `kind` (code 0, hop limit 255, checksum right, at least
    `min_len` bytes) directly behind the IPv6 header of an Ethernet frame, or None."""
    if len(frame) < _ETH.size + _IPV6.size + min_len:
        return None
    _, _, ethertype = _ETH.unpack_from(frame)
    vtc, plen, nxt, hlim, src_b, dst_b = _IPV6.unpack_from(frame, _ETH.size)
    if ethertype != ETH_IPV6 or vtc >> 28 != 6 or nxt != IPPROTO_ICMPV6 or hlim != ND_HOP_LIMIT:
        return None
    start = _ETH.size + _IPV6.size
    if plen < min_len or start + plen > len(frame):
        return None
    icmp = frame[start : start + plen]
    if icmp[0] != kind or icmp[1] != 0:
        return None
    if not icmpv6_checksum_ok(ipaddress.IPv6Address(src_b), ipaddress.IPv6Address(dst_b), icmp):
        return None
    return icmp


def _options_ok(icmp: bytes, at: int) -> bool:
    while at < len(icmp):
        if at + 2 > len(icmp) or icmp[at + 1] == 0 or at + 8 * icmp[at + 1] > len(icmp):
            return False
        at += 8 * icmp[at + 1]
    return True
