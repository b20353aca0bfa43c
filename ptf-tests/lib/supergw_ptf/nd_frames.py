"""IPv6 and Neighbor Discovery frame builders for the ND PTF cases (scapy), as bytes.

scapy computes every ICMPv6 checksum itself, so an expected NA built here checks the
switch's checksum byte for byte (docs/pipeline-contract.md, "The NA the switch builds")."""

from __future__ import annotations

import ipaddress

from scapy.layers.inet import UDP
from scapy.layers.inet6 import (
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6ND_Redirect,
    ICMPv6ND_RA,
    ICMPv6ND_RS,
    ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
)
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

ALL_NODES = "ff02::1"
ALL_NODES_MAC = "33:33:00:00:00:01"
ALL_ROUTERS = "ff02::2"
UNSPECIFIED = "::"
ND_HOP_LIMIT = 255
# RFC 7527's DAD nonce option: type 14, length 1 (8 bytes), 6 random bytes. Linux sends it
# in every DAD probe (enhanced_dad); scapy 2.8 has no layer for it.
ND_OPTION_NONCE = 14


def multicast_mac(addr: str) -> str:
    """The Ethernet group address of an IPv6 multicast address (RFC 2464: 33:33 + last 4 bytes)."""
    low = ipaddress.IPv6Address(addr).packed[-4:]
    return "33:33:" + ":".join(f"{b:02x}" for b in low)


def solicited_node(addr: str) -> str:
    """ff02::1:ffXX:XXXX of `addr` (RFC 4291 2.7.1)."""
    low = int(ipaddress.IPv6Address(addr)) & 0xFFFFFF
    return str(ipaddress.IPv6Address(int(ipaddress.IPv6Address("ff02::1:ff00:0")) | low))


def nonce_option(nonce: bytes = b"\x01\x02\x03\x04\x05\x06") -> bytes:
    return bytes([ND_OPTION_NONCE, 1]) + nonce


def _frame(eth_src: str, eth_dst: str, ip: Packet, body: Packet) -> bytes:
    return bytes(Ether(src=eth_src, dst=eth_dst) / ip / body)


def ns(
    *,
    eth_src: str,
    target: str,
    ip_src: str,
    eth_dst: str | None = None,
    ip_dst: str | None = None,
    sllao: bool = True,
    options: bytes = b"",
    hlim: int = ND_HOP_LIMIT,
    code: int = 0,
    tc: int = 0,
    fl: int = 0,
) -> bytes:
    """A Neighbor Solicitation for `target`; by default to its solicited-node group, with a
    source link-layer option of eth_src (never from `::`, RFC 4861 4.3), then `options`."""
    dst = ip_dst or solicited_node(target)
    body: Packet = ICMPv6ND_NS(tgt=target, code=code)
    if sllao and ip_src != UNSPECIFIED:
        body = body / ICMPv6NDOptSrcLLAddr(lladdr=eth_src)
    if options:
        body = body / Raw(options)
    ip = IPv6(src=ip_src, dst=dst, hlim=hlim, tc=tc, fl=fl)
    return _frame(eth_src, eth_dst or multicast_mac(dst), ip, body)


def na(
    *,
    eth_src: str,
    eth_dst: str,
    ip_src: str,
    ip_dst: str,
    target: str,
    router: bool,
    solicited: bool,
    override: bool = True,
    tllao: str | None = None,
    hlim: int = ND_HOP_LIMIT,
    tc: int = 0,
    fl: int = 0,
) -> bytes:
    """A Neighbor Advertisement, with a target link-layer option when `tllao` is given."""
    body: Packet = ICMPv6ND_NA(tgt=target, R=int(router), S=int(solicited), O=int(override))
    if tllao is not None:
        body = body / ICMPv6NDOptDstLLAddr(lladdr=tllao)
    return _frame(eth_src, eth_dst, IPv6(src=ip_src, dst=ip_dst, hlim=hlim, tc=tc, fl=fl), body)


def rs(*, eth_src: str, ip_src: str) -> bytes:
    body: Packet = ICMPv6ND_RS()
    if ip_src != UNSPECIFIED:
        body = body / ICMPv6NDOptSrcLLAddr(lladdr=eth_src)
    return _frame(eth_src, multicast_mac(ALL_ROUTERS), IPv6(src=ip_src, dst=ALL_ROUTERS, hlim=ND_HOP_LIMIT), body)


def ra(*, eth_src: str, ip_src: str, eth_dst: str = ALL_NODES_MAC, ip_dst: str = ALL_NODES) -> bytes:
    body = ICMPv6ND_RA(routerlifetime=1800) / ICMPv6NDOptSrcLLAddr(lladdr=eth_src)
    return _frame(eth_src, eth_dst, IPv6(src=ip_src, dst=ip_dst, hlim=ND_HOP_LIMIT), body)


def redirect(*, eth_src: str, eth_dst: str, ip_src: str, ip_dst: str, target: str, dst: str) -> bytes:
    body = ICMPv6ND_Redirect(tgt=target, dst=dst) / ICMPv6NDOptDstLLAddr(lladdr=eth_src)
    return _frame(eth_src, eth_dst, IPv6(src=ip_src, dst=ip_dst, hlim=ND_HOP_LIMIT), body)


def ipv6_udp(*, eth_src: str, eth_dst: str, ip_src: str, ip_dst: str, payload: bytes = b"supergw6") -> bytes:
    frame = Ether(src=eth_src, dst=eth_dst) / IPv6(src=ip_src, dst=ip_dst, hlim=64) / UDP(sport=4000, dport=5000)
    return bytes(frame / Raw(payload))
