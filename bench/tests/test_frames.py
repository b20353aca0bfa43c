"""Benchmark frames take the host -> gateway path: dst is the sender's own vmac."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench.dataplane import frames

pytest.importorskip("supergw_proto.bucket")
from supergw_proto.bucket import bucket_of, vmac  # noqa: E402


@pytest.mark.parametrize("size", [64, 1400])
def test_frames_file(tmp_path: Path, size: int) -> None:
    hosts = frames.host_macs(16)
    path = tmp_path / "f.bin"
    assert frames.write_frames(path, hosts, "02:5e:98:00:00:00", 256, size) == 16
    data = path.read_bytes()
    off = 0
    for mac in hosts:
        (length,) = struct.unpack_from("<H", data, off)
        frame = data[off + 2 : off + 2 + length]
        off += 2 + length
        assert length == size - frames.FCS_BYTES
        assert frame[0:6] == bytes.fromhex(vmac("02:5e:98:00:00:00", bucket_of(mac, 256)).replace(":", ""))
        assert frame[6:12] == bytes.fromhex(mac.replace(":", ""))
        assert frames._checksum(frame[14:34]) == 0  # a valid IPv4 header sums to 0xffff
    assert off == len(data)


def test_too_small_frame_is_rejected() -> None:
    with pytest.raises(ValueError, match="below the 46-byte"):
        frames.frame("02:00:00:00:00:01", "02:00:00:00:00:02", 0, 40)
