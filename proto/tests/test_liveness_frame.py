"""The gateway liveness frame: layout, round trip, the switch's ethertype, bad input."""

from __future__ import annotations

import pytest

from supergw_proto import p4constants as c
from supergw_proto.liveness import LIVENESS_DST, MIN_FRAME, BadLivenessFrame, decode, encode


def test_frame_is_what_the_switch_matches() -> None:
    frame = encode("02:60:00:00:01:02", "gw2", 7, 5000)
    assert len(frame) == MIN_FRAME
    assert frame[:6] == bytes.fromhex(LIVENESS_DST.replace(":", ""))
    assert frame[6:12] == bytes.fromhex("026000000102")
    assert int.from_bytes(frame[12:14], "big") == c.ETHERTYPE_LIVENESS == 0x88B6
    assert frame[14:18] == b"SGWL"


def test_round_trip_and_sequence_wraps() -> None:
    got = decode(encode(bytes.fromhex("026000000101"), "gateway-with-a-long-name", (1 << 32) + 3, 2500))
    assert (got.gateway, got.seq, got.interval_us, got.src_mac.hex()) == ("gateway-with-a-long-name", 3, 2500, "026000000101")


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (b"\x00" * 20, "shorter"),
        (encode("02:00:00:00:00:01", "gw", 1, 1)[:12] + b"\x88\xb5" + encode("02:00:00:00:00:01", "gw", 1, 1)[14:], "ethertype"),
        (encode("02:00:00:00:00:01", "gw", 1, 1).replace(b"SGWL", b"SGWX"), "magic"),
        (encode("02:00:00:00:00:01", "gw", 1, 1)[:30], "does not fit"),
    ],
)
def test_bad_frames_are_refused_with_a_reason(frame: bytes, why: str) -> None:
    with pytest.raises(BadLivenessFrame, match=why):
        decode(frame)


@pytest.mark.parametrize(("name", "interval"), [("", 1), ("x" * 65, 1), ("gw", 0), ("gw", 1 << 32)])
def test_bad_arguments_are_refused(name: str, interval: int) -> None:
    with pytest.raises(ValueError):
        encode("02:00:00:00:00:01", name, 1, interval)
