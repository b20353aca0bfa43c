"""ndp.py's frames, byte by byte, against scapy's dissector and checksum (the controller
itself does not depend on scapy)."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from scapy.layers.inet6 import (
    IPv6,
    ICMPv6ND_RA,
    ICMPv6ND_RS,
    ICMPv6NDOptMTU,
    ICMPv6NDOptPrefixInfo,
    ICMPv6NDOptSrcLLAddr,
    in6_chksum,
)
from scapy.layers.l2 import Ether

from supergw_controller.ndp import (
    ALL_NODES,
    ALL_ROUTERS,
    PrefixInfo,
    RouterAdvert,
    icmpv6_checksum,
    multicast_mac,
    parse_router_solicitation,
    router_advert_frame,
)

LL = ipaddress.IPv6Address("fe80::1")
VMAC0 = "02:88:88:00:00:00"
HOST_MAC = "02:00:00:00:00:11"
HOST_LL = ipaddress.IPv6Address("fe80::11")


def _ra(**kw: object) -> RouterAdvert:
    prefixes = (
        PrefixInfo(ipaddress.IPv6Network("2001:db8:1::/64")),
        PrefixInfo(ipaddress.IPv6Network("fd00:5::/64"), autonomous=False, valid_lifetime_s=3600, preferred_lifetime_s=0),
    )
    args: dict[str, object] = {"router_lifetime_s": 1800, "prefixes": prefixes}
    args.update(kw)
    return RouterAdvert(**args)  # type: ignore[arg-type]


def test_ra_frame_matches_scapy_field_by_field() -> None:
    frame = router_advert_frame(_ra(mtu=1400, reachable_time_ms=30000, retrans_timer_ms=1000), LL, VMAC0)
    pkt = Ether(frame)
    assert pkt[Ether].dst == "33:33:00:00:00:01" and pkt[Ether].src == VMAC0 and pkt[Ether].type == 0x86DD
    ip = pkt[IPv6]
    assert (ip.src, ip.dst, ip.hlim, ip.nh, ip.plen) == ("fe80::1", "ff02::1", 255, 58, len(frame) - 54)
    ra = pkt[ICMPv6ND_RA]
    assert (ra.type, ra.code, ra.chlim, ra.M, ra.O, ra.routerlifetime) == (134, 0, 64, 0, 0, 1800)
    assert (ra.reachabletime, ra.retranstimer) == (30000, 1000)
    assert pkt[ICMPv6NDOptMTU].mtu == 1400
    p1, p2 = pkt[ICMPv6NDOptPrefixInfo], pkt[ICMPv6NDOptPrefixInfo][1:][ICMPv6NDOptPrefixInfo]
    assert (p1.prefix, p1.prefixlen, p1.L, p1.A, p1.validlifetime, p1.preferredlifetime) == (
        "2001:db8:1::", 64, 1, 1, 2_592_000, 604_800)
    assert (p2.prefix, p2.prefixlen, p2.L, p2.A, p2.validlifetime, p2.preferredlifetime) == (
        "fd00:5::", 64, 1, 0, 3600, 0)
    # RFC 4861 §4.2 allows leaving the source link-layer option out; we must.
    assert ICMPv6NDOptSrcLLAddr not in pkt


def test_ra_frame_is_what_scapy_builds() -> None:
    """Same bytes as scapy's own RA with the same fields, checksum included."""
    ours = router_advert_frame(_ra(), LL, VMAC0)
    theirs = (
        Ether(dst="33:33:00:00:00:01", src=VMAC0)
        / IPv6(src=str(LL), dst="ff02::1", hlim=255)
        / ICMPv6ND_RA(chlim=64, routerlifetime=1800, prf=0)
        / ICMPv6NDOptPrefixInfo(prefix="2001:db8:1::", prefixlen=64, L=1, A=1,
                                validlifetime=2_592_000, preferredlifetime=604_800)
        / ICMPv6NDOptPrefixInfo(prefix="fd00:5::", prefixlen=64, L=1, A=0, validlifetime=3600, preferredlifetime=0)
    )
    assert ours == bytes(theirs)


@pytest.mark.parametrize("lifetime", [0, 1, 9000, 65535])
def test_checksum_is_scapys(lifetime: int) -> None:
    frame = router_advert_frame(_ra(router_lifetime_s=lifetime, managed=True, other_config=True), LL, VMAC0)
    pkt = Ether(frame)
    icmp = bytes(pkt[IPv6].payload)
    received = struct.unpack_from("!H", icmp, 2)[0]
    zeroed = icmp[:2] + b"\0\0" + icmp[4:]
    assert received == in6_chksum(58, pkt[IPv6], zeroed)  # type: ignore[no-untyped-call]
    assert received == icmpv6_checksum(LL, ALL_NODES, zeroed)
    assert pkt[ICMPv6ND_RA].M == 1 and pkt[ICMPv6ND_RA].O == 1


def test_ra_refuses_a_global_source_and_bad_fields() -> None:
    with pytest.raises(ValueError, match="link-local"):
        router_advert_frame(_ra(), ipaddress.IPv6Address("2001:db8::1"), VMAC0)
    with pytest.raises(ValueError, match="router_lifetime_s"):
        RouterAdvert(router_lifetime_s=70000)
    with pytest.raises(ValueError, match="1280"):
        RouterAdvert(router_lifetime_s=0, mtu=1000)
    with pytest.raises(ValueError, match="exceeds valid_lifetime_s"):
        PrefixInfo(ipaddress.IPv6Network("2001:db8::/64"), valid_lifetime_s=10, preferred_lifetime_s=20)


def test_multicast_mac() -> None:
    assert multicast_mac(ALL_NODES) == "33:33:00:00:00:01"
    assert multicast_mac(ipaddress.IPv6Address("ff02::1:ff12:3456")) == "33:33:ff:12:34:56"
    with pytest.raises(ValueError):
        multicast_mac(LL)


# -- Router Solicitations


def _rs(src: str = str(HOST_LL), hlim: int = 255, slla: bool = True, code: int = 0, cksum: int | None = None) -> bytes:
    pkt = Ether(dst="33:33:00:00:00:02", src=HOST_MAC) / IPv6(src=src, dst=str(ALL_ROUTERS), hlim=hlim) / ICMPv6ND_RS(code=code, cksum=cksum)
    if slla:
        pkt = pkt / ICMPv6NDOptSrcLLAddr(lladdr=HOST_MAC)
    return bytes(pkt)


def test_parses_a_solicitation_with_and_without_its_link_layer_option() -> None:
    rs = parse_router_solicitation(_rs())
    assert rs is not None
    assert (rs.eth_src, rs.src, rs.dst, rs.source_ll) == (HOST_MAC, HOST_LL, ALL_ROUTERS, HOST_MAC)
    bare = parse_router_solicitation(_rs(src="::", slla=False))
    assert bare is not None and bare.source_ll is None and bare.src == ipaddress.IPv6Address("::")
    padded = parse_router_solicitation(_rs() + bytes(10))  # Ethernet padding after the payload
    assert padded == rs


@pytest.mark.parametrize(
    "why, frame",
    [
        ("hop limit not 255 (forwarded)", _rs(hlim=64)),
        ("code not 0", _rs(code=1)),
        ("unspecified source with a link-layer option", _rs(src="::")),
        ("bad checksum", _rs(cksum=0x1234)),
        ("not IPv6", bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC, type=0x0800) / bytes(60))),
        ("truncated", _rs()[:60]),
        ("an RA, not an RS", router_advert_frame(_ra(), LL, VMAC0)),
    ],
)
def test_refuses_invalid_solicitations(why: str, frame: bytes) -> None:
    assert parse_router_solicitation(frame) is None, why


def test_refuses_an_option_of_length_zero() -> None:
    pkt = Ether(src=HOST_MAC) / IPv6(src=str(HOST_LL), dst=str(ALL_ROUTERS), hlim=255) / ICMPv6ND_RS()
    pkt = pkt / ICMPv6NDOptSrcLLAddr(lladdr=HOST_MAC, len=0)
    assert parse_router_solicitation(bytes(pkt)) is None
