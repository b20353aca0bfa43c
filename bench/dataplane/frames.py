"""Benchmark frames: UDP from a LAN host to its own vmac (the host -> gateway path)."""

from __future__ import annotations

import struct
from pathlib import Path

from supergw_proto.bucket import bucket_of, vmac
from supergw_proto.p4constants import BucketHash

FCS_BYTES = 4  # counted in the nominal frame size, absent on a veth
# The bucket hash the benchmark configures (control.py writes it into the settings).
BUCKET_HASH = BucketHash.CRC32


def host_macs(n: int) -> list[str]:
    return [f"02:aa:00:00:{i >> 8:02x}:{i & 0xff:02x}" for i in range(1, n + 1)]


def bucket_of_host(mac: str, buckets: int) -> int:
    return bucket_of(mac, buckets, BUCKET_HASH)


def _checksum(data: bytes) -> int:
    words: tuple[int, ...] = struct.unpack(f"!{len(data) // 2}H", data)
    s = sum(words)
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def frame(src_mac: str, dst_mac: str, index: int, nominal_size: int) -> bytes:
    """An Ethernet/IPv4/UDP frame of `nominal_size` bytes including the (absent) FCS."""
    length = nominal_size - FCS_BYTES
    if length < 14 + 20 + 8:
        raise ValueError(f"frame size {nominal_size} is below the 46-byte Ethernet+IPv4+UDP minimum")
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x08\x00"
    ip_len = length - 14
    src_ip = bytes([10, 98, 1 + (index >> 8), index & 0xFF])
    dst_ip = bytes([10, 97, 0, 1])
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, index & 0xFFFF, 0, 64, 17, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 10000 + index, 9, ip_len - 20, 0)
    payload = bytes(ip_len - 28)
    return eth + ip + udp + payload


def write_frames(path: Path, hosts: list[str], vmac_base: str, buckets: int, nominal_size: int) -> int:
    """<u16 LE length><frame> records, one per host, each to the host's own vmac."""
    with open(path, "wb") as f:
        for i, mac in enumerate(hosts):
            data = frame(mac, vmac(vmac_base, bucket_of_host(mac, buckets)), i, nominal_size)
            f.write(struct.pack("<H", len(data)) + data)
    return len(hosts)
