"""supergw_controller.bucket against the BMv2-computed vectors in p4src/vectors/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supergw_controller import bucket
from supergw_controller.p4constants import MAX_BUCKETS

VECTORS = Path(__file__).resolve().parents[2] / "p4src" / "vectors" / "bucket-crc16.json"


def _vectors() -> list[dict[str, Any]]:
    data = json.loads(VECTORS.read_text())
    vectors: list[dict[str, Any]] = data["vectors"]
    assert vectors, "the vector file holds no vectors"
    return vectors


@pytest.mark.parametrize("vec", _vectors(), ids=lambda v: v["mac"])
def test_vectors(vec: dict[str, Any]) -> None:
    mac = vec["mac"]
    raw = bucket.mac_to_bytes(mac)
    assert bucket.crc16_arc(raw) == vec["crc16"]
    assert bucket.bucket_of(mac, 256) == vec["bucket_k256"]
    assert bucket.bucket_of(mac, 4096) == vec["bucket_k4096"]
    assert bucket.bucket_of(raw, 4096) == vec["bucket_k4096"]
    assert bucket.bucket_of(mac.upper(), 256) == vec["bucket_k256"]


def test_crc16_arc_check_value() -> None:
    # The catalogue check value of CRC-16/ARC.
    assert bucket.crc16_arc(b"123456789") == 0xBB3D


@pytest.mark.parametrize("k", [1, 2, 256, 4096])
def test_valid_k(k: int) -> None:
    assert bucket.bucket_mask(k) == k - 1
    assert 0 <= bucket.bucket_of("02:00:00:00:00:01", k) < k


@pytest.mark.parametrize("k", [0, -1, 3, 100, MAX_BUCKETS * 2])
def test_bad_k(k: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        bucket.bucket_of("02:00:00:00:00:01", k)


def test_k_must_be_int() -> None:
    with pytest.raises(TypeError):
        bucket.bucket_of("02:00:00:00:00:01", True)


@pytest.mark.parametrize(
    "mac", ["", "02:00:00:00:00", "02:00:00:00:00:0g", "0200.0000.0001", "02:00:00:00:00:001", "2:0:0:0:0:1"]
)
def test_bad_mac_string(mac: str) -> None:
    with pytest.raises(ValueError, match="MAC"):
        bucket.bucket_of(mac, 256)


def test_bad_mac_bytes() -> None:
    with pytest.raises(ValueError, match="6 bytes"):
        bucket.bucket_of(b"\x00" * 5, 256)


def test_vmac() -> None:
    assert bucket.vmac("02:53:47:57:00:00", 0) == "02:53:47:57:00:00"
    assert bucket.vmac("02:53:47:57:00:00", 0xABC) == "02:53:47:57:0a:bc"
    assert bucket.vmac(bytes.fromhex("025347570000"), 255) == "02:53:47:57:00:ff"


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("03:53:47:57:00:00", "unicast"),
        ("00:53:47:57:00:00", "locally administered"),
        ("02:53:47:57:00:01", "low 16 bits"),
    ],
)
def test_bad_vmac_base(base: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bucket.vmac(base, 1)


@pytest.mark.parametrize("b", [-1, MAX_BUCKETS])
def test_vmac_bad_bucket(b: int) -> None:
    with pytest.raises(ValueError, match="bucket"):
        bucket.vmac("02:53:47:57:00:00", b)


def test_bucket_of_vmac() -> None:
    base = "02:53:47:57:00:00"
    assert bucket.bucket_of_vmac("02:53:47:57:00:07", base, 256) == 7
    assert bucket.bucket_of_vmac("02:53:47:57:00:ff", base, 256) == 255
    # Above the mask: not a vmac for this K (the data plane forwards it by L2).
    assert bucket.bucket_of_vmac("02:53:47:57:01:00", base, 256) is None
    assert bucket.bucket_of_vmac("02:53:47:58:00:07", base, 256) is None
    assert bucket.is_vmac("02:53:47:57:0f:ff", base, 4096)
    assert not bucket.is_vmac("aa:bb:cc:dd:ee:ff", base, 4096)


def test_round_trip_vmac_of_host() -> None:
    base = "02:53:47:57:00:00"
    for vec in _vectors():
        b = bucket.bucket_of(vec["mac"], 4096)
        assert bucket.bucket_of_vmac(bucket.vmac(base, b), base, 4096) == b
