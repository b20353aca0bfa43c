"""Benchmark frames: host -> gateway frames go to the sender's own vmac, gateway -> host frames
to each host, and a plan file holds them in order, each a valid Ethernet/IPv4/UDP frame."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.dataplane import frames
from supergw_proto.bucket import bucket_of, vmac

BASE = "02:5e:98:00:00:00"


def _records(data: bytes) -> list[bytes]:
    out, off = [], 0
    while off < len(data):
        (length,) = struct.unpack_from("<H", data, off)
        out.append(data[off + 2 : off + 2 + length])
        off += 2 + length
    assert off == len(data)
    return out


@pytest.mark.parametrize("size", [64, 1400])
def test_host_to_gateway_plan(tmp_path: Path, size: int) -> None:
    lan = frames.hosts(300)
    path = tmp_path / "plan.bin"
    assert frames.write_plan(path, frames.host_to_gateway(lan, BASE, 256), size) == 300
    records = _records(path.read_bytes())
    assert len({r[6:12] for r in records}) == 300  # every host its own source MAC
    for host, frame in zip(lan, records):
        assert len(frame) == size - frames.FCS_BYTES
        assert frame[0:6] == bytes.fromhex(vmac(BASE, bucket_of(host.mac, 256)).replace(":", ""))
        assert frame[6:12] == bytes.fromhex(host.mac.replace(":", ""))
        assert frame[26:30] == bytes(int(x) for x in host.ip.split("."))
        assert frames._checksum(frame[14:34]) == 0  # a valid IPv4 header sums to 0xffff


def test_gateway_to_host_plan(tmp_path: Path) -> None:
    lan = frames.hosts(5)
    path = tmp_path / "plan.bin"
    frames.write_plan(path, frames.gateway_to_host("02:be:00:00:00:02", lan), 64)
    for host, frame in zip(lan, _records(path.read_bytes())):
        assert frame[0:6] == bytes.fromhex(host.mac.replace(":", ""))
        assert frame[6:12] == bytes.fromhex("02be00000002")
        assert frame[30:34] == bytes(int(x) for x in host.ip.split("."))


def test_hosts_are_distinct_and_bounded() -> None:
    lan = frames.hosts(frames.MAX_HOSTS)
    assert len({h.mac for h in lan}) == len({h.ip for h in lan}) == frames.MAX_HOSTS
    with pytest.raises(ValueError, match="hosts"):
        frames.hosts(frames.MAX_HOSTS + 1)


def test_too_small_frame_is_rejected() -> None:
    with pytest.raises(ValueError, match="below the 46-byte"):
        frames.Frame("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2", 1).encode(40)


@pytest.mark.parametrize("size", [66, 1400])
def test_ipv6_host_to_gateway_plan_holds_valid_frames(tmp_path: Path, size: int) -> None:
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    lan = frames.hosts(300)
    path = tmp_path / "plan.bin"
    assert frames.write_plan(path, frames.host_to_gateway(lan, BASE, 256, ipv6=True), size) == 300
    for host, frame in zip(lan, _records(path.read_bytes())):
        assert len(frame) == size - frames.FCS_BYTES
        assert frame[0:6] == bytes.fromhex(vmac(BASE, bucket_of(host.mac, 256)).replace(":", ""))
        pkt = Ether(frame)
        assert pkt.type == 0x86DD and pkt[IPv6].src == host.ip6 and pkt[IPv6].dst == frames.REMOTE_IP6
        assert pkt[IPv6].plen == size - frames.FCS_BYTES - 54 and pkt[IPv6].hlim == 64
        # scapy's own checksum over the IPv6 pseudo-header agrees with the plan's
        again = Ether(frame)
        del again[UDP].chksum
        assert bytes(again) == frame, f"UDP checksum {pkt[UDP].chksum:#06x} differs from scapy's"
    assert lan[0].ip6 == "fd00:98::100" and lan[0].ip == "10.98.1.0"  # the twin: the same offset into the /64


def test_too_small_ipv6_frame_is_rejected() -> None:
    with pytest.raises(ValueError, match="below the 66-byte Ethernet\\+IPv6\\+UDP minimum"):
        frames.Frame("02:00:00:00:00:01", "02:00:00:00:00:02", "fd00:98::1", "fd00:97::1", 1).encode(64)
