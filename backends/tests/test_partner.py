"""Pair beacons (partner.py): authentication, replay, skew, loss, what a partner says of itself,
two monitors talking over real sockets, the heartbeat flag they drive, and the config."""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections.abc import Iterator

from supergw_proto.badinput import Tally
from supergw_proto.beats import FLAG_CHARON_DOWN, FLAG_LAN_DOWN, MAGIC, PAIR_MAGIC, encode
from supergw_controller.heartbeat import HeartbeatReceiver

from supergw_gateway.agent import Agent
from supergw_gateway.beacon import HeartbeatSender
from supergw_gateway.config import parse_config
from supergw_gateway.errors import ConfigError
from supergw_gateway.partner import PartnerMonitor, link_running

KEY = b"pair-secret-0123456789abcdef"
NOW_NS = 1_800_000_000 * 10**9
PARTNER = ("10.2.0.1", 8790)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _monitor(clock: Clock, **kw: Any) -> PartnerMonitor:
    args: dict[str, Any] = dict(interval_s=0.1, missed=3, own_flags=lambda: 0, startup_grace_s=5.0,
                                monotonic=clock, wallclock_ns=lambda: NOW_NS)
    args.update(kw)
    return PartnerMonitor("agw1", "bgw1", KEY, ("10.1.0.1", 8790), PARTNER, **args)


def _beacon(seq: int, key: bytes = KEY, name: str = "bgw1", epoch: int = 7, sent_ns: int = NOW_NS, flags: int = 0,
            magic: bytes = PAIR_MAGIC) -> bytes:
    return encode(name, key, epoch, seq, sent_ns, flags, magic=magic)


SRC = f"{PARTNER[0]}:{PARTNER[1]}"


def test_partner_is_unknown_within_the_grace_then_down_without_beacons() -> None:
    clock = Clock()
    m = _monitor(clock)
    assert m.verdict() == (None, "no beacon from bgw1 yet")
    assert not m.down()
    clock.t += 5.1
    up, why = m.verdict()
    assert up is False and why is not None and "since the agent started" in why
    assert m.down()


def test_beacons_keep_the_partner_up_and_silence_past_missed_intervals_is_down() -> None:
    clock = Clock()
    m = _monitor(clock)
    for seq in range(1, 4):
        assert m.receive(_beacon(seq), SRC)
        clock.t += 0.1
    assert m.verdict() == (True, None)
    clock.t += 0.2  # 0.3 s since the last one: 3 intervals, not yet more
    assert m.verdict()[0] is True
    clock.t += 0.011
    up, why = m.verdict()
    assert up is False and why is not None and why.startswith("no beacon through the tunnel for 31")
    # one lost beacon in between is fine: loss is only silence past `missed` intervals
    assert m.receive(_beacon(4), SRC)
    assert m.verdict() == (True, None)
    st = m.state()
    assert st.up is True and st.why is None and st.beacons_received == 4 and st.last_beacon_age_s == 0


@pytest.mark.parametrize(
    ("data", "source", "reason"),
    [
        (_beacon(1, key=b"not-the-pair-secret-000000"), SRC, "bad_mac"),
        (_beacon(1, name="bgw2"), SRC, "unknown_gateway"),  # another pair's gateway
        (_beacon(1, magic=MAGIC), SRC, "malformed"),  # a controller heartbeat is no beacon
        (_beacon(1)[:-1], SRC, "malformed"),
        (b"\x00" * 80, SRC, "malformed"),
        (_beacon(1, sent_ns=NOW_NS + 31 * 10**9), SRC, "stale"),  # skew beyond max_skew_s
        (_beacon(1, sent_ns=NOW_NS - 31 * 10**9), SRC, "stale"),
        (_beacon(1), "10.2.0.99:8790", "wrong_source"),  # not from the partner's address
    ],
)
def test_bad_beacons_are_rejected_counted_and_keep_nobody_up(data: bytes, source: str, reason: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    m = _monitor(clock, startup_grace_s=0.0)
    clock.t += 0.01
    with caplog.at_level(logging.WARNING, logger="supergw_gateway.partner"):
        assert not m.receive(data, source)
    assert m.rejected == {reason: 1} and m.received == 0
    assert m.verdict()[0] is False
    assert f"rejected ({reason})" in caplog.text
    assert KEY.decode() not in caplog.text


def test_replayed_and_reordered_beacons_are_rejected() -> None:
    clock = Clock()
    m = _monitor(clock)
    recorded = _beacon(1)
    assert m.receive(recorded, SRC) and m.receive(_beacon(2), SRC)
    clock.t += 0.5  # the partner froze: an attacker replays what it recorded
    assert not m.receive(recorded, SRC)
    assert not m.receive(_beacon(2), SRC)
    assert not m.receive(_beacon(99, epoch=6), SRC)  # an earlier run of the partner's agent
    assert m.rejected == {"replayed": 3}
    assert m.verdict()[0] is False
    # a restarted partner agent: newer epoch, seq from 1
    assert m.receive(_beacon(1, epoch=8), SRC)
    assert m.verdict() == (True, None)


@pytest.mark.parametrize(("flags", "said"), [(FLAG_CHARON_DOWN, "charon stopped"), (FLAG_LAN_DOWN, "LAN interface down")])
def test_a_partner_that_says_it_cannot_carry_traffic_is_down(flags: int, said: str) -> None:
    clock = Clock()
    m = _monitor(clock)
    assert m.receive(_beacon(1, flags=flags), SRC)
    up, why = m.verdict()
    assert up is False and why == f"bgw1 reports its {said}"
    assert m.receive(_beacon(2), SRC)
    assert m.verdict() == (True, None)


def test_the_verdict_reads_queued_beacons_first() -> None:
    """A monitor whose thread was stalled judges only after reading what arrived meanwhile."""
    clock = Clock()
    m = _monitor(clock)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    m.sock = rx
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.bind(("127.0.0.1", 0))
            m.remote = ("127.0.0.1", tx.getsockname()[1])
            assert m.receive(_beacon(1), f"127.0.0.1:{tx.getsockname()[1]}")
            clock.t += 2.0  # stalled for 2 s; a beacon sits in the socket
            tx.sendto(_beacon(2), rx.getsockname())
            time.sleep(0.05)
            assert not m.down()
            assert m.received == 2
    finally:
        rx.close()
        m.sock = None


def _pair(interval: float, flags_a: dict[str, int], changes: list[tuple[str, bool | None]]) -> tuple[PartnerMonitor, PartnerMonitor]:
    """Two monitors on 127.0.0.1 beaconing each other from their own threads."""
    ports = []
    for _ in range(2):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    a = PartnerMonitor("agw1", "bgw1", KEY, ("127.0.0.1", ports[0]), ("127.0.0.1", ports[1]), interval, 3,
                       lambda: flags_a["flags"], lambda up: changes.append(("a", up)), startup_grace_s=1.0)
    b = PartnerMonitor("bgw1", "agw1", KEY, ("127.0.0.1", ports[1]), ("127.0.0.1", ports[0]), interval, 3,
                       lambda: 0, lambda up: changes.append(("b", up)), startup_grace_s=1.0)
    return a, b


def wait_for(cond: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return bool(cond())


def test_two_monitors_see_each_other_and_the_silence_of_a_stopped_one() -> None:
    changes: list[tuple[str, bool | None]] = []
    flags_a = {"flags": 0}
    a, b = _pair(0.05, flags_a, changes)
    a.start()
    b.start()
    try:
        assert wait_for(lambda: a.verdict()[0] is True and b.verdict()[0] is True)
        flags_a["flags"] = FLAG_LAN_DOWN  # a says its LAN is down: b sees it at the next beacon
        assert wait_for(lambda: b.verdict() == (False, "agw1 reports its LAN interface down"))
        flags_a["flags"] = 0
        assert wait_for(lambda: b.verdict()[0] is True)
        a.stop()  # a's agent is gone: b counts 3 intervals of silence
        t0 = time.monotonic()
        assert wait_for(lambda: ("b", False) in changes[-1:])
        print(f"b judged a down {1000 * (time.monotonic() - t0):.0f} ms after a stopped (3 x 50 ms)")
        assert b.state().up is False and b.rejected == {} and a.rejected == {}
    finally:
        a.stop()
        b.stop()
    assert ("a", True) in changes and ("b", True) in changes


def test_a_changed_verdict_is_sent_to_the_controller_at_once() -> None:
    """The heartbeat carries FLAG_PARTNER_DOWN, and poke() sends it without waiting for the next beat."""
    rx = HeartbeatReceiver({"agw1": b"agent-token-0123456789"})
    port = rx.open("127.0.0.1", 0).getsockname()[1]
    partner = {"down": False}
    sender = HeartbeatSender("agw1", [(f"http://127.0.0.1:{port}", b"agent-token-0123456789")], 5.0,
                             lambda: True, lambda: partner["down"])
    sender.start()
    try:
        assert wait_for(lambda: len(rx.drain()) == 1)  # the first beat; the next is 5 s away
        partner["down"] = True
        sender.poke()
        beats: list[Any] = []
        assert wait_for(lambda: bool(beats.extend(rx.drain()) or beats), 2.0)
        assert beats[0].partner_down and not beats[0].charon_down
    finally:
        sender.stop()
        rx.close()
    assert sender.stats.partner_down_beats == 1


def test_link_running_reads_this_namespace() -> None:
    assert link_running("lo") is True
    assert link_running("no-such-if0") is None


# -- config and the agent


def _secret(tmp_path: Path, text: str = "s3cret-pair-key-0123456789", name: str = "pair.secret") -> Path:
    p = tmp_path / name
    p.write_text(text + "\n")
    os.chmod(p, 0o600)
    return p


def test_partner_config_is_checked(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    gw_dict["partner"] = {"name": "bgw1", "address": "10.2.0.251", "secret_file": str(_secret(tmp_path))}
    cfg = parse_config(gw_dict)
    assert cfg.partner is not None and str(cfg.partner_local_address) == "10.1.0.1"
    assert cfg.partner.secret() == b"s3cret-pair-key-0123456789"
    bad = [
        ({"address": "192.0.2.2"}, "would not cross the tunnel"),
        ({"local_address": "192.0.2.1"}, "partner.local_address 192.0.2.1 is not in local.subnets"),
        ({"secret_file": str(tmp_path / "missing")}, "cannot read"),
        ({"secret_file": str(_secret(tmp_path, "short", "short.secret"))}, "at least 16"),
        ({"name": "gw1"}, "own name"),
        ({"interval_ms": 5}, "interval_ms"),
    ]
    for change, msg in bad:
        d = dict(gw_dict, partner={**gw_dict["partner"], **change})
        with pytest.raises(ConfigError, match=msg):
            parse_config(d)


def test_agent_without_partner_says_the_feature_is_off(gw_dict: dict[str, Any]) -> None:
    gw_dict["controller"] = {"url": "http://127.0.0.1:9", "token": "agent-test-token"}
    agent = Agent(parse_config(gw_dict))
    assert agent.partner is None
    assert "pair beacons off" in agent.partner_line()
    code, body = agent.health()
    assert body["partner"] is None and "pair beacons off" in str(body["pair_beacons"])


def test_agent_with_partner_reports_it(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    gw_dict["controller"] = {"url": "http://127.0.0.1:9", "token": "agent-test-token"}
    gw_dict["partner"] = {"name": "bgw1", "address": "10.2.0.251", "secret_file": str(_secret(tmp_path))}
    agent = Agent(parse_config(gw_dict))
    assert agent.partner is not None and agent.sender is not None
    assert "pair beacons with bgw1: 10.1.0.1 <-> 10.2.0.251 port 8790" in agent.partner_line()
    st = agent.partner.state()
    assert st.name == "bgw1" and st.up is None  # not heard yet, within the grace
    _, body = agent.health()
    assert isinstance(body["partner"], dict) and body["partner"]["name"] == "bgw1"
    assert "s3cret" not in str(body)


def test_uml_backend_turns_pair_beacons_off_and_says_why(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    gw_dict["controller"] = {"url": "http://127.0.0.1:9", "token": "agent-test-token"}
    gw_dict["partner"] = {"name": "bgw1", "address": "10.2.0.251", "secret_file": str(_secret(tmp_path))}
    gw_dict["backend"] = "uml"
    agent = Agent(parse_config(gw_dict))
    assert agent.partner is None and "UML backend" in agent.partner_line()


# -- arbitrary bytes, mutated beacons and oversized datagrams (issue 21: bad input at every interface)

BEACON_EXAMPLES = 500


@pytest.fixture(scope="module")
def beacon_tally() -> Iterator[Tally]:
    t = Tally(interface="pair-beacon", detail={"examples": f"hypothesis, {BEACON_EXAMPLES} per run"})
    yield t
    t.write()


def _flip(data: bytes, at: int, xor: int) -> bytes:
    at %= len(data)
    return data[:at] + bytes([data[at] ^ xor]) + data[at + 1:]


BEACONS = st.one_of(
    st.binary(max_size=4096),  # arbitrary, truncated and oversized
    st.builds(_flip, st.just(_beacon(1)), st.integers(0, 10**6), st.integers(1, 255)),  # one byte changed
    st.builds(lambda n: _beacon(1) + bytes(n), st.integers(1, 65_000)),  # a valid beacon with a tail
    st.builds(lambda n: _beacon(1)[:n], st.integers(0, len(_beacon(1)) - 1)),  # truncated
)


@settings(max_examples=BEACON_EXAMPLES, deadline=None)
@given(data=BEACONS)
def test_no_bad_beacon_is_accepted_or_crashes(beacon_tally: Tally, data: bytes) -> None:
    """No datagram but the partner's signed beacon is taken; every refusal counted by reason,
    and the partner stays judged down."""
    clock = Clock()
    m = _monitor(clock, startup_grace_s=0.0)
    clock.t += 0.01
    try:
        taken = m.receive(data, SRC)
    except Exception:
        beacon_tally.crashes += 1
        raise
    assert not taken and m.received == 0 and sum(m.rejected.values()) == 1, m.rejected
    assert m.verdict()[0] is False
    beacon_tally.count(f"refused:{next(iter(m.rejected))}")
