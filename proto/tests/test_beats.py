"""The heartbeat / pair-beacon datagram: version 2 declares the sender's interval; version 1
(older agents) still decodes; and the agent timing the controller sends in its answers."""

from __future__ import annotations

import pytest

from supergw_proto.beats import MAGIC, PAIR_MAGIC, BadHeartbeat, decode, encode
from supergw_proto.reports import AgentTiming

KEY = b"k" * 20


@pytest.mark.parametrize("magic", [MAGIC, PAIR_MAGIC])
def test_version_2_carries_the_interval_and_version_1_still_decodes(magic: bytes) -> None:
    v2 = encode("gw1", KEY, 7, 3, 11, 0x01, magic=magic, interval_ms=250)
    v1 = encode("gw1", KEY, 7, 3, 11, 0x01, magic=magic)
    assert v2[4] == 2 and v1[4] == 1 and len(v2) == len(v1) + 4
    b2, b1 = decode(v2, {"gw1": KEY}, magic=magic), decode(v1, {"gw1": KEY}, magic=magic)
    assert (b2.gateway, b2.epoch, b2.seq, b2.sent_ns, b2.flags, b2.interval_ms) == ("gw1", 7, 3, 11, 1, 250)
    assert (b1.gateway, b1.seq, b1.flags, b1.interval_ms) == ("gw1", 3, 1, None)


def test_the_interval_is_authenticated_and_checked() -> None:
    v2 = bytearray(encode("gw1", KEY, 7, 3, 11, interval_ms=100))
    v2[34] ^= 0x01  # the interval's last byte, changed in flight
    with pytest.raises(BadHeartbeat) as ei:
        decode(bytes(v2), {"gw1": KEY})
    assert ei.value.reason == "bad_mac"
    for bad in (0, 1 << 32):
        with pytest.raises(ValueError, match="interval_ms"):
            encode("gw1", KEY, 7, 3, 11, interval_ms=bad)
    for version in (0, 3):
        data = bytearray(encode("gw1", KEY, 7, 3, 11, interval_ms=100))
        data[4] = version
        with pytest.raises(BadHeartbeat, match=f"version {version}"):
            decode(bytes(data), {"gw1": KEY})


def test_agent_timing_round_trips_through_its_header_and_refuses_nonsense() -> None:
    t = AgentTiming(heartbeat_interval_ms=40, missed_heartbeats=5, report_interval_ms=250)
    assert AgentTiming.from_header(t.header()) == t and t.dead_after_s == 0.2
    assert AgentTiming.from_header('{"heartbeat_interval_ms": 40, "said_by": "a newer controller"}').missed_heartbeats == 3
    for bad in ("not json", '{"heartbeat_interval_ms": 0}', '{"missed_heartbeats": 0}', '{"report_interval_ms": -1}'):
        with pytest.raises(ValueError):
            AgentTiming.from_header(bad)
    assert "every 40 ms (dead after 5 missed)" in t.describe()
