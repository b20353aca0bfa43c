"""Frame builders for the supergw PTF tests (scapy), as bytes."""

from __future__ import annotations

import ipaddress
import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw
from supergw_proto.addresses import mac_to_bytes

BROADCAST = "ff:ff:ff:ff:ff:ff"
ETH_ARP = 0x0806
ETH_IPV4 = 0x0800
ARP_REQUEST = 1
ARP_REPLY = 2


def arp(
    *,
    eth_src: str,
    eth_dst: str = BROADCAST,
    op: int = ARP_REQUEST,
    sha: str | None = None,
    spa: str,
    tha: str = "00:00:00:00:00:00",
    tpa: str,
) -> bytes:
    """An ARP frame, unpadded (42 bytes): what a target must answer or forward byte-exact."""
    frame = Ether(src=eth_src, dst=eth_dst, type=ETH_ARP) / ARP(
        hwtype=1, ptype=ETH_IPV4, hwlen=6, plen=4, op=op, hwsrc=sha or eth_src, psrc=spa, hwdst=tha, pdst=tpa
    )
    return bytes(frame)


def raw_arp(
    *,
    eth_src: str,
    eth_dst: str = BROADCAST,
    htype: int = 1,
    ptype: int = ETH_IPV4,
    hlen: int = 6,
    plen: int = 4,
    op: int = ARP_REQUEST,
    spa: str = "10.0.0.10",
    tpa: str = "10.0.0.1",
    truncate: int | None = None,
) -> bytes:
    """An ARP frame with arbitrary header fields (addresses stay 6+4 bytes), optionally cut
    to `truncate` bytes: the malformed-ARP cases."""
    eth = bytes(Ether(src=eth_src, dst=eth_dst, type=ETH_ARP))
    body = struct.pack("!HHBBH", htype, ptype, hlen, plen, op)
    body += mac_to_bytes(eth_src) + ipaddress.IPv4Address(spa).packed
    body += bytes(6) + ipaddress.IPv4Address(tpa).packed
    frame = eth + body
    return frame[:truncate] if truncate is not None else frame


def ipv4_udp(
    *, eth_src: str, eth_dst: str, ip_src: str = "10.0.0.10", ip_dst: str = "192.0.2.1", payload: bytes = b"supergw"
) -> bytes:
    frame = Ether(src=eth_src, dst=eth_dst) / IP(src=ip_src, dst=ip_dst, ttl=64) / UDP(sport=4000, dport=5000)
    return bytes(frame / Raw(payload))


def ether(*, eth_src: str, eth_dst: str, ethertype: int, payload: bytes = bytes(46)) -> bytes:
    return bytes(Ether(src=eth_src, dst=eth_dst, type=ethertype)) + payload


def with_macs(frame: bytes, *, eth_src: str | None = None, eth_dst: str | None = None) -> bytes:
    """The same frame with its Ethernet addresses rewritten (what the switch does)."""
    dst = mac_to_bytes(eth_dst) if eth_dst else frame[0:6]
    src = mac_to_bytes(eth_src) if eth_src else frame[6:12]
    return dst + src + frame[12:]
