"""Benchmark frames: UDP between the LAN's hosts and its gateways, as the switch sees them.

- host -> gateway: from a host's MAC to its own vmac; the switch rewrites dst to the
  gateway MAC of the host's bucket and sends the frame to that gateway. IPv4, or IPv6 from
  the host's IPv6 address (the LAN is dual stack: its IPv4 address's twin, as in the emulation).
- gateway -> host: from a gateway's MAC to a host's MAC; the switch rewrites src to the
  host's vmac and sends the frame to the host's port.

A plan is a list of such frames (one per host), written as `<u16 LE length><bytes>` records:
the generator (`sgw-traffic`) sends them round robin.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from pathlib import Path

from supergw_proto.bucket import bucket_of, vmac
from supergw_proto.p4constants import BucketHash
from topologies.model import twin6

FCS_BYTES = 4  # counted in the nominal frame size, absent on a veth
# The bucket hash the benchmark configures (lan_state.py writes it into the settings).
BUCKET_HASH = BucketHash.CRC32
MAX_HOSTS = 4096  # sgw-traffic's plan size, and the switch's learned_sources / mac_table size
REMOTE_IP = "10.97.0.1"  # a host behind the tunnels
REMOTE_IP6 = "fd00:97::1"  # the same, IPv6
LAN = ipaddress.IPv4Network("10.98.0.0/16")
LAN6 = ipaddress.IPv6Network("fd00:98::/64")  # dual stack: every LAN address's twin (topologies.model.twin6)
ETH_IP4_UDP = 14 + 20 + 8
ETH_IP6_UDP = 14 + 40 + 8


def ip6_of(ip: str) -> str:
    """The IPv6 twin of a LAN address."""
    return str(twin6(ipaddress.IPv4Address(ip), LAN, LAN6))


@dataclass(frozen=True)
class Host:
    mac: str
    ip: str

    @property
    def ip6(self) -> str:
        return ip6_of(self.ip)


def hosts(n: int) -> list[Host]:
    """n LAN hosts with distinct locally administered MACs and IPs in 10.98.0.0/16."""
    if not 1 <= n <= MAX_HOSTS:
        raise ValueError(f"{n} hosts: want 1..{MAX_HOSTS}")
    return [Host(f"02:aa:00:00:{i >> 8:02x}:{i & 0xff:02x}", f"10.98.{1 + (i >> 8)}.{i & 0xff}") for i in range(n)]


def host_macs(n: int) -> list[str]:
    return [h.mac for h in hosts(n)]


def bucket_of_host(mac: str, buckets: int) -> int:
    return bucket_of(mac, buckets, BUCKET_HASH)


def _checksum(data: bytes) -> int:
    data += bytes(len(data) % 2)  # an odd length is padded with a zero byte (RFC 1071)
    words: tuple[int, ...] = struct.unpack(f"!{len(data) // 2}H", data)
    s = sum(words)
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def _mac(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def _ip(ip: str) -> bytes:
    return ipaddress.ip_address(ip).packed


@dataclass(frozen=True)
class Frame:
    src_mac: str
    dst_mac: str
    src_ip: str  # IPv4, or IPv6 (then dst_ip too)
    dst_ip: str
    port: int  # UDP source port

    def encode(self, nominal_size: int) -> bytes:
        """Ethernet/IPv4/UDP (or Ethernet/IPv6/UDP) of `nominal_size` bytes including the (absent) FCS."""
        if ipaddress.ip_address(self.src_ip).version == 6:
            return self._encode6(nominal_size)
        length = nominal_size - FCS_BYTES
        if length < ETH_IP4_UDP:
            raise ValueError(f"frame size {nominal_size} is below the 46-byte Ethernet+IPv4+UDP minimum")
        eth = _mac(self.dst_mac) + _mac(self.src_mac) + b"\x08\x00"
        ip_len = length - 14
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, self.port, 0, 64, 17, 0, _ip(self.src_ip), _ip(self.dst_ip))
        ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", self.port, 9, ip_len - 20, 0)
        return eth + ip + udp + bytes(ip_len - 28)

    def _encode6(self, nominal_size: int) -> bytes:
        """Ethernet/IPv6/UDP, hop limit 64, with the UDP checksum IPv6 requires (RFC 8200 §8.1)."""
        length = nominal_size - FCS_BYTES
        if length < ETH_IP6_UDP:
            raise ValueError(f"frame size {nominal_size} is below the {ETH_IP6_UDP + FCS_BYTES}-byte "
                             "Ethernet+IPv6+UDP minimum")
        src, dst = _ip(self.src_ip), _ip(self.dst_ip)
        payload_len = length - 14 - 40
        udp = struct.pack("!HHHH", self.port, 9, payload_len, 0) + bytes(payload_len - 8)
        csum = _checksum(src + dst + struct.pack("!IxxxB", payload_len, 17) + udp) or 0xFFFF
        udp = udp[:6] + struct.pack("!H", csum) + udp[8:]
        ip = struct.pack("!IHBB16s16s", 6 << 28, payload_len, 17, 64, src, dst)
        return _mac(self.dst_mac) + _mac(self.src_mac) + b"\x86\xdd" + ip + udp


def host_to_gateway(lan: list[Host], vmac_base: str, buckets: int, ipv6: bool = False) -> list[Frame]:
    """Each host to its own vmac, as after its ARP for the gateway IP (IPv6: after its
    Neighbor Solicitation for the gateway's address, from its IPv6 address)."""
    return [Frame(h.mac, vmac(vmac_base, bucket_of_host(h.mac, buckets)), h.ip6 if ipv6 else h.ip,
                  REMOTE_IP6 if ipv6 else REMOTE_IP, 10000 + i)
            for i, h in enumerate(lan)]


def gateway_to_host(gateway_mac: str, lan: list[Host]) -> list[Frame]:
    """A gateway to each host, as after its ARP for the host's IP."""
    return [Frame(gateway_mac, h.mac, REMOTE_IP, h.ip, 10000 + i) for i, h in enumerate(lan)]


def write_plan(path: Path, plan: list[Frame], nominal_size: int) -> int:
    """`<u16 LE length><frame>` records, in plan order; returns how many."""
    with open(path, "wb") as f:
        for fr in plan:
            data = fr.encode(nominal_size)
            f.write(struct.pack("<H", len(data)) + data)
    return len(plan)
