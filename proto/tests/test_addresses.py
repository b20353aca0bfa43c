"""MAC and IPv4 helpers: canonical forms, and a clear ValueError for anything else."""

from __future__ import annotations

import pytest

from supergw_proto.addresses import (
    int_to_ipv4,
    int_to_mac,
    ipv4_to_int,
    mac_offset,
    mac_to_bytes,
    mac_to_int,
    mac_to_str,
    normalise_mac,
)


def test_mac_round_trips() -> None:
    assert mac_to_str("02:AB:00:00:00:01") == "02:ab:00:00:00:01"
    assert mac_to_bytes("02:ab:00:00:00:01") == b"\x02\xab\x00\x00\x00\x01"
    assert int_to_mac(mac_to_int("02:ab:00:00:00:01")) == "02:ab:00:00:00:01"
    assert mac_to_str(b"\x00\x00\x03\x00\x18\x00") == "00:00:03:00:18:00"


@pytest.mark.parametrize("bad", ["02:ab:00:00:00", "02:ab:00:00:00:0g", "02-ab-00-00-00-01", b"\x00" * 5])
def test_bad_macs_are_refused(bad: str | bytes) -> None:
    with pytest.raises(ValueError, match="MAC"):
        mac_to_bytes(bad)


def test_normalise_mac_takes_dashes_and_case() -> None:
    assert normalise_mac(" 02-AB-00-00-00-01 ") == "02:ab:00:00:00:01"
    with pytest.raises(ValueError, match="not a MAC address"):
        normalise_mac("02:ab")
    with pytest.raises(ValueError, match="must be a MAC address string"):
        normalise_mac(7)


def test_int_to_mac_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        int_to_mac(1 << 48)


def test_mac_offset_carries() -> None:
    assert mac_offset("00:00:03:00:18:ff", 1) == "00:00:03:00:19:00"


def test_ipv4() -> None:
    assert ipv4_to_int("10.60.0.1") == 0x0A3C0001
    assert int_to_ipv4(0x0A3C0001) == "10.60.0.1"
    with pytest.raises(ValueError):
        ipv4_to_int("10.60.0.256")
