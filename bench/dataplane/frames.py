"""Benchmark frames: UDP between the LAN's hosts and its gateways, as the switch sees them.

- host -> gateway: from a host's MAC to its own vmac; the switch rewrites dst to the
  gateway MAC of the host's bucket and sends the frame to that gateway.
- gateway -> host: from a gateway's MAC to a host's MAC; the switch rewrites src to the
  host's vmac and sends the frame to the host's port.

A plan is a list of such frames (one per host), written as `<u16 LE length><bytes>` records:
the generator (`sgw-traffic`) sends them round robin.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from supergw_proto.bucket import bucket_of, vmac
from supergw_proto.p4constants import BucketHash

FCS_BYTES = 4  # counted in the nominal frame size, absent on a veth
# The bucket hash the benchmark configures (lan_state.py writes it into the settings).
BUCKET_HASH = BucketHash.CRC32
MAX_HOSTS = 4096  # sgw-traffic's plan size, and the switch's learned_sources / mac_table size
REMOTE_IP = "10.97.0.1"  # a host behind the tunnels


@dataclass(frozen=True)
class Host:
    mac: str
    ip: str


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
    words: tuple[int, ...] = struct.unpack(f"!{len(data) // 2}H", data)
    s = sum(words)
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def _mac(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def _ip(ip: str) -> bytes:
    return bytes(int(x) for x in ip.split("."))


@dataclass(frozen=True)
class Frame:
    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    port: int  # UDP source port

    def encode(self, nominal_size: int) -> bytes:
        """Ethernet/IPv4/UDP of `nominal_size` bytes including the (absent) FCS."""
        length = nominal_size - FCS_BYTES
        if length < 14 + 20 + 8:
            raise ValueError(f"frame size {nominal_size} is below the 46-byte Ethernet+IPv4+UDP minimum")
        eth = _mac(self.dst_mac) + _mac(self.src_mac) + b"\x08\x00"
        ip_len = length - 14
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, self.port, 0, 64, 17, 0, _ip(self.src_ip), _ip(self.dst_ip))
        ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", self.port, 9, ip_len - 20, 0)
        return eth + ip + udp + bytes(ip_len - 28)


def host_to_gateway(lan: list[Host], vmac_base: str, buckets: int) -> list[Frame]:
    """Each host to its own vmac, as after its ARP for the gateway IP."""
    return [Frame(h.mac, vmac(vmac_base, bucket_of_host(h.mac, buckets)), h.ip, REMOTE_IP, 10000 + i)
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
