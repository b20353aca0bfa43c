"""UDP heartbeats: wire format, authentication, replay protection, and how the core uses
them (the watchdog drains the socket before judging, a charon-down beat fails over at once,
a tunnel reported down moves the buckets away and back)."""

from __future__ import annotations

import logging
import socket
import time
from ipaddress import IPv4Network
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections.abc import AsyncIterator, Iterator

from supergw_controller.compose import ControllerCore
from supergw_controller.config import HeartbeatsConfig
from supergw_proto.badinput import Tally
from supergw_proto.beats import FLAG_CHARON_DOWN, MAX_DATAGRAM, decode, encode
from supergw_controller.heartbeat import HeartbeatReceiver
from supergw_proto.reports import GatewayReport, SaState, tunnel_up

from corekit import Clock, RecordingSession, bucket_writes, make_config, running_core

KEYS = {"g1": b"unit-agent-g1-token", "g2": b"unit-agent-g2-token"}
NOW_NS = 1_800_000_000 * 10**9


def _rx() -> HeartbeatReceiver:
    return HeartbeatReceiver(KEYS, wallclock_ns=lambda: NOW_NS)


def _beat(name: str = "g1", key: bytes | None = None, epoch: int = 7, seq: int = 1, sent_ns: int = NOW_NS,
          flags: int = 0) -> bytes:
    return encode(name, KEYS[name] if key is None else key, epoch, seq, sent_ns, flags)


def test_round_trip_and_flags() -> None:
    b = decode(_beat(flags=FLAG_CHARON_DOWN, seq=5), KEYS)
    assert (b.gateway, b.epoch, b.seq, b.sent_ns, b.charon_down) == ("g1", 7, 5, NOW_NS, True)
    assert not decode(_beat(), KEYS).charon_down


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "malformed"),
        (b"GET / HTTP/1.1\r\n\r\n" + bytes(60), "malformed"),
        (_beat()[:-1], "malformed"),  # truncated
        (b"SGHB\x03" + _beat()[5:], "malformed"),  # another version
        (_beat()[:5] + b"\x80" + _beat()[6:], "bad_mac"),  # flags changed in flight
        (_beat(key=b"unit-agent-g2-token"), "bad_mac"),  # g2's key cannot speak for g1
        (_beat(key=b"guessed-secret-000000"), "bad_mac"),
        (encode("ghost", b"whatever-key-123456", 1, 1, NOW_NS), "unknown_gateway"),
        (_beat(sent_ns=NOW_NS - 31 * 10**9), "stale"),  # recorded more than max_skew_s ago
    ],
)
def test_bad_datagrams_are_rejected_counted_and_logged(data: bytes, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    rx = _rx()
    with caplog.at_level(logging.WARNING, logger="supergw_controller.heartbeat"):
        assert rx.accept(data, "192.0.2.9:4000") is None
    assert rx.rejected == {reason: 1} and rx.accepted == 0
    assert f"heartbeat from 192.0.2.9:4000 rejected ({reason})" in caplog.text


def test_replays_and_old_epochs_are_rejected(caplog: pytest.LogCaptureFixture) -> None:
    rx = _rx()
    first = _beat(seq=1)
    assert rx.accept(first, "a:1") is not None
    assert rx.accept(_beat(seq=2), "a:1") is not None
    with caplog.at_level(logging.WARNING, logger="supergw_controller.heartbeat"):
        assert rx.accept(first, "evil:1") is None  # the recorded datagram, sent again
        assert rx.accept(_beat(seq=2), "evil:1") is None  # the same beat twice
        assert rx.accept(_beat(epoch=6, seq=99), "evil:1") is None  # an earlier agent run
    assert rx.rejected == {"replayed": 3}
    assert "not newer than 7/2" in caplog.text
    # A restarted agent starts a newer epoch at seq 1, and other gateways are judged apart.
    assert rx.accept(_beat(epoch=8, seq=1), "a:1") is not None
    assert rx.accept(_beat("g2", seq=1), "b:1") is not None
    assert rx.accepted == 4


def test_rejection_log_is_rate_limited_but_every_one_counted(caplog: pytest.LogCaptureFixture) -> None:
    rx = _rx()
    with caplog.at_level(logging.WARNING, logger="supergw_controller.heartbeat"):
        for _ in range(50):
            rx.accept(b"junk", "192.0.2.9:4000")
    assert rx.rejected == {"malformed": 50}
    assert caplog.text.count("rejected (malformed)") == 1


def test_socket_drain_reads_everything_queued() -> None:
    rx = _rx()
    sock = rx.open("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            for seq in range(1, 6):
                tx.sendto(_beat(seq=seq), ("127.0.0.1", port))
            tx.sendto(b"forged", ("127.0.0.1", port))
        deadline = time.monotonic() + 2
        got: list[int] = []
        while len(got) < 5 and time.monotonic() < deadline:
            got += [b.seq for b in rx.drain()]
        assert got == [1, 2, 3, 4, 5]
        rx.drain()
        assert rx.rejected == {"malformed": 1}
        assert rx.drain() == []  # nothing queued: returns at once
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            for _ in range(5):
                tx.sendto(b"flood", ("127.0.0.1", port))
        time.sleep(0.05)
        rx.drain(max_datagrams=3)  # a flood is read in bounded batches
        assert rx.rejected == {"malformed": 4}
        rx.drain()
        assert rx.rejected == {"malformed": 6}
    finally:
        rx.close()


def test_busy_port_is_a_clear_error() -> None:
    rx, other = _rx(), _rx()
    sock = rx.open("127.0.0.1", 0)
    try:
        with pytest.raises(OSError, match=r"heartbeat UDP 127\.0\.0\.1:\d+"):
            other.open("127.0.0.1", sock.getsockname()[1])
    finally:
        rx.close()


# -- the core


@pytest.fixture
async def composed(tmp_path: Path, clock: Clock) -> AsyncIterator[tuple[ControllerCore, RecordingSession]]:
    """The core with its heartbeat socket on a free loopback port (the agents' keys are KEYS)."""
    cfg = make_config(tmp_path, timing={"startup_grace_s": 0.5})
    c, sess = await running_core(cfg, clock, store=tmp_path / "state.sqlite3")
    c.liveness.receiver.open("127.0.0.1", 0)
    yield c, sess
    c.liveness.receiver.close()


@pytest.fixture
def disp(composed: tuple[ControllerCore, RecordingSession]) -> ControllerCore:
    return composed[0]


@pytest.fixture
def sess(composed: tuple[ControllerCore, RecordingSession]) -> RecordingSession:
    return composed[1]


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Agent:
    """Sends real datagrams to the dispatcher's socket and waits until they are queued."""

    def __init__(self, d: ControllerCore) -> None:
        rx = d.liveness.receiver.sock
        assert rx is not None
        self.addr = rx.getsockname()
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.seq = 0
        self.rx = rx

    def send(self, name: str, flags: int = 0) -> None:
        self.seq += 1
        self.tx.sendto(encode(name, KEYS[name], 1, self.seq, time.time_ns(), flags), self.addr)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:  # loopback delivery is immediate, but say so
            try:
                if self.rx.recv(1, socket.MSG_PEEK):
                    return
            except BlockingIOError:
                time.sleep(0.001)


async def test_queued_beats_are_counted_before_the_verdict(disp: ControllerCore, sess: RecordingSession, clock: Clock) -> None:
    """The loop was stalled for a second: beats that arrived meanwhile keep g1 and g2 alive."""
    agent = Agent(disp)
    clock.t += 1.0
    agent.send("g1")
    agent.send("g2")
    await disp.liveness.tick()
    assert [g.state for g in await disp.gateways()] == ["alive", "alive", "alive"]
    assert sess.batches == []
    assert (await disp.status()).heartbeats_total == 2


async def test_silence_fails_over_and_a_charon_down_beat_fails_over_at_once(disp: ControllerCore, sess: RecordingSession, clock: Clock) -> None:
    agent = Agent(disp)
    agent.send("g1")
    agent.send("g2")
    await disp.liveness.tick()
    # g2's agent still beats, but says charon is stopped: no waiting for silence.
    agent.send("g2", FLAG_CHARON_DOWN)
    agent.send("g1")
    await disp.liveness.tick()
    g2 = await disp.gateway("g2")
    assert g2.state == "dead" and g2.unhealthy == "agent reports charon stopped" and g2.buckets == 0
    assert set(bucket_writes(sess.batches[0])) == {b for b in range(16) if b % 3 == 1}
    # charon runs again: recovering.
    agent.send("g2")
    await disp.liveness.tick()
    assert (await disp.gateway("g2")).state == "recovering"
    # g1 goes silent past 3 x 100 ms.
    clock.t += 0.35
    agent.send("g2")
    await disp.liveness.tick()
    assert (await disp.gateway("g1")).state == "dead"


async def test_forged_beats_do_not_keep_a_gateway_alive(disp: ControllerCore, sess: RecordingSession, clock: Clock) -> None:
    agent = Agent(disp)
    agent.send("g1")
    agent.send("g2")
    await disp.liveness.tick()
    clock.t += 0.35
    agent.seq += 1
    agent.tx.sendto(encode("g2", b"not-the-agent-secret", 1, agent.seq, time.time_ns()), agent.addr)
    agent.send("g1")
    await disp.liveness.tick()
    assert (await disp.gateway("g2")).state == "dead"
    st = await disp.status()
    assert st.heartbeats_rejected == {"bad_mac": 1}


def _report(name: str, *children: str, sa_error: str | None = None) -> GatewayReport:
    sas = [SaState(name=f"sgw-{name}", kind="ike", state="ESTABLISHED", established_s=1, bytes_in=0, bytes_out=0,
                   packets_in=0, packets_out=0)]
    sas += [SaState(name=f"sgw-{name}-net", kind="child", state=c, established_s=1, bytes_in=0, bytes_out=0,
                    packets_in=0, packets_out=0) for c in children]
    return GatewayReport(gateway=name, timestamp=1.0, backend="libipsec", cpu_percent=10, softirq_percent=0,
                         charon_cpu_percent=5, tunnel_bytes_in=0, tunnel_bytes_out=0, tunnel_packets_in=0,
                         tunnel_packets_out=0, sas=sas, sa_error=sa_error)


def test_tunnel_up_reads_child_sas_only() -> None:
    assert tunnel_up(_report("g1", "INSTALLED")) is True
    assert tunnel_up(_report("g1", "REKEYING")) is True
    assert tunnel_up(_report("g1")) is False  # IKE ESTABLISHED, no CHILD SA: no ESP, no traffic
    assert tunnel_up(_report("g1", "CREATED")) is False
    assert tunnel_up(_report("g1", sa_error="VICI: timeout")) is None  # unknown, not down


async def test_a_down_tunnel_moves_the_buckets_away_in_one_batch_and_back(disp: ControllerCore, sess: RecordingSession, clock: Clock) -> None:
    await disp.accept_report(_report("g1", "INSTALLED"))
    await disp.accept_report(_report("g2", "INSTALLED"))
    assert sess.batches == []
    await disp.accept_report(_report("g2", "DELETING"))  # its agent still talks
    g2 = await disp.gateway("g2")
    assert g2.state == "dead" and g2.tunnel_up is False and g2.buckets == 0
    assert g2.unhealthy == "tunnel down (no installed CHILD SA)"
    assert len(sess.batches) == 1 and set(bucket_writes(sess.batches[0])) == {b for b in range(16) if b % 3 == 1}
    # A report that could not read the SAs changes nothing.
    await disp.accept_report(_report("g2", sa_error="VICI: timeout"))
    assert (await disp.gateway("g2")).state == "dead"
    # The tunnel returns: recovering, and the next round gives back its idle share at once.
    await disp.accept_report(_report("g2", "INSTALLED"))
    assert (await disp.gateway("g2")).state == "recovering"
    await disp.rebalance()
    g2 = await disp.gateway("g2")
    # weights g1:1 g2:2 g3:1 over K = 16: g2's share is 8 buckets, all idle here.
    assert g2.buckets == 8
    await disp.rebalance()  # nothing left to refill: back to alive
    assert (await disp.gateway("g2")).state == "alive"
    from supergw_controller.metrics import ControllerMetrics, Snapshot

    m = ControllerMetrics()
    m.update(Snapshot(status=await disp.status(), gateways=await disp.gateways()))
    text = m.render().decode()
    assert 'supergw_gateway_tunnel_up{gateway="g2"} 1.0' in text


# -- per-source limits (the flood itself: test_heartbeat_flood.py)


def test_an_untrusted_source_is_rate_limited_after_its_burst_a_trusted_one_never(caplog: pytest.LogCaptureFixture) -> None:
    t = [0.0]
    rx = HeartbeatReceiver(KEYS, wallclock_ns=lambda: NOW_NS, monotonic=lambda: t[0],
                           limits=HeartbeatsConfig(untrusted_rate_per_s=10, untrusted_burst=5))
    forged = _beat(key=b"guessed-secret-000000")
    with caplog.at_level(logging.WARNING, logger="supergw_controller.heartbeat"):
        for _ in range(8):
            assert rx.accept(forged, "192.0.2.66:4000") is None
    assert rx.rejected == {"bad_mac": 5, "rate_limited": 3}  # the burst costs HMACs, the rest is refused unread
    assert "192.0.2.66, which has sent no valid heartbeat: refused unread" in caplog.text
    t[0] += 0.1  # one token back
    assert rx.accept(forged, "192.0.2.66:4000") is None and rx.rejected["bad_mac"] == 6
    # The real agent's source, once it sent a valid beat, is never rate-limited: what comes
    # from it (a spoofer's datagrams too) is checked in full.
    assert rx.accept(_beat(seq=1), "192.0.2.10:5000") is not None
    for _ in range(20):
        assert rx.accept(forged, "192.0.2.10:5000") is None
    assert rx.accept(_beat(seq=2), "192.0.2.10:5000") is not None
    assert rx.rejected == {"bad_mac": 26, "rate_limited": 3}


def test_heartbeat_from_refuses_other_sources_before_the_hmac() -> None:
    rx = HeartbeatReceiver(KEYS, wallclock_ns=lambda: NOW_NS, sources={"g1": [IPv4Network("192.0.2.0/29")]})
    assert rx.accept(_beat(seq=1), "198.51.100.1:5000") is None
    assert rx.rejected == {"unknown_source": 1}
    assert rx.accept(_beat(seq=1), "192.0.2.3:5000") is not None
    assert rx.accept(_beat("g2", seq=1), "198.51.100.1:5000") is not None  # g2 has no heartbeat_from
    assert rx.accept(b"x" * (MAX_DATAGRAM + 1), "192.0.2.3:5000") is None
    assert rx.rejected == {"unknown_source": 1, "malformed": 1}


def test_the_socket_asks_for_a_large_receive_buffer() -> None:
    rx = _rx()
    rx.open("127.0.0.1", 0)
    try:
        # The kernel grants at most net.core.rmem_max without CAP_NET_ADMIN; the receiver
        # says what it got either way.
        assert rx.receive_buffer >= min(HeartbeatsConfig().receive_buffer_bytes,
                                        int(Path("/proc/sys/net/core/rmem_max").read_text()))
    finally:
        rx.close()


# -- arbitrary bytes, mutated beats and oversized datagrams (issue 21: bad input at every interface)

FUZZ_EXAMPLES = 500


@pytest.fixture(scope="module")
def heartbeat_tally() -> Iterator[Tally]:
    t = Tally(interface="heartbeat-udp", detail={"examples": f"hypothesis, {FUZZ_EXAMPLES} per run"})
    yield t
    t.write()


def _flip(data: bytes, at: int, xor: int) -> bytes:
    at %= len(data)
    return data[:at] + bytes([data[at] ^ xor]) + data[at + 1:]


DATAGRAMS = st.one_of(
    st.binary(max_size=2 * MAX_DATAGRAM),  # arbitrary, truncated and oversized
    st.builds(_flip, st.just(_beat()), st.integers(0, 10**6), st.integers(1, 255)),  # one byte changed
    st.builds(lambda n: _beat() + bytes(n), st.integers(1, 65_000)),  # a valid beat with a tail
    st.builds(lambda n: _beat()[:n], st.integers(0, len(_beat()) - 1)),  # truncated
)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(data=DATAGRAMS)
def test_no_bad_datagram_is_accepted_or_crashes(heartbeat_tally: Tally, data: bytes) -> None:
    """Nothing but a beat the key signed is accepted; every refusal is counted by reason."""
    rx = _rx()
    try:
        beat = rx.accept(data, "192.0.2.9:4000")
    except Exception:
        heartbeat_tally.crashes += 1
        raise
    if beat is None:
        assert rx.accepted == 0 and sum(rx.rejected.values()) == 1, rx.rejected
        heartbeat_tally.count(f"refused:{next(iter(rx.rejected))}")
    else:  # only the untouched beat (a changed byte can hit nothing signed: none here is unsigned)
        assert data == _beat() and rx.accepted == 1
        heartbeat_tally.count("accepted")
