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


# ---- remote access: what clients send to the public address (IKE, ESP, NAT-T)

IP_PROTO_ICMP = 1
IP_PROTO_UDP = 17
IP_PROTO_ESP = 50
IKE_FLAG_INITIATOR = 0x08
IKE_SA_INIT = 34
IKE_AUTH = 35
NON_ESP_MARKER = bytes(4)
NAT_T_KEEPALIVE = b"\xff"


def ike_header(spi_i: int, spi_r: int, *, flags: int = IKE_FLAG_INITIATOR, exchange: int = IKE_AUTH) -> bytes:
    """An IKEv2 header (RFC 7296 §3.1, 28 bytes) and nothing after it: the switch reads
    only the SPIs and the flags."""
    return struct.pack("!QQBBBBII", spi_i, spi_r, 33, 0x20, exchange, flags, 0, 28)


def esp_header(spi: int, seq: int = 1, payload: bytes = bytes(16)) -> bytes:
    """An ESP packet (RFC 4303): SPI, sequence number, then opaque bytes."""
    return struct.pack("!II", spi, seq) + payload


def ipv4(
    *, eth_src: str, eth_dst: str, ip_src: str, ip_dst: str, proto: int, payload: bytes, frag: int = 0, flags: int = 0
) -> bytes:
    """An IPv4 frame carrying `payload` as protocol `proto` (no L4 header added)."""
    ip = IP(src=ip_src, dst=ip_dst, ttl=64, proto=proto, frag=frag, flags=flags)
    return bytes(Ether(src=eth_src, dst=eth_dst) / ip / Raw(payload))


def udp_payload(sport: int, dport: int, payload: bytes) -> bytes:
    """A UDP header (length and checksum 0, as the switch ignores the checksum) + payload."""
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
