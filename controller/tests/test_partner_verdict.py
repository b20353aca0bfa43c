"""The controller's verdict on a gateway whose partner (gateway i of the partner site) is down,
and the heartbeat socket under a flood of bad datagrams: bounded drains that neither block
the loop nor let forged datagrams hide a good beat from a verdict."""

from __future__ import annotations

import socket
import time
from collections import deque

import pytest

from supergw_controller.compose import ControllerCore
from supergw_proto.beats import FLAG_PARTNER_DOWN, encode
from supergw_controller.heartbeat import HeartbeatReceiver
from supergw_proto.reports import GatewayReport, Heartbeat, PartnerState, SaState

from corekit import Clock, RecordingSession, bucket_writes
from test_heartbeat_udp import KEYS, Agent, clock, composed, disp, sess  # noqa: F401 - fixtures

G2_BUCKETS = {b for b in range(16) if b % 3 == 1}


def _report(name: str, partner: PartnerState | None) -> GatewayReport:
    sas = [SaState(name=f"sgw-{name}-net", kind="child", state="INSTALLED", established_s=1, bytes_in=0, bytes_out=0,
                   packets_in=0, packets_out=0)]
    return GatewayReport(gateway=name, timestamp=1.0, backend="libipsec", cpu_percent=10, softirq_percent=0,
                         charon_cpu_percent=5, tunnel_bytes_in=0, tunnel_bytes_out=0, tunnel_packets_in=0,
                         tunnel_packets_out=0, sas=sas, partner=partner)


async def test_partner_down_fails_the_gateway_over_at_once_and_partner_up_gives_its_share_back(
    disp: ControllerCore, sess: RecordingSession, clock: Clock
) -> None:
    agent = Agent(disp)
    agent.send("g1")
    agent.send("g2")
    await disp.liveness.tick()
    await disp.accept_report(_report("g2", PartnerState(name="bgw2", up=True)))
    assert (await disp.gateway("g2")).partner_up is True
    assert (await disp.gateway("g1")).partner_up is None  # no partner configured: the feature is off
    # g2's agent talks, its charon runs, its tunnel is up -- but its partner went silent.
    await disp.accept_report(_report("g2", PartnerState(name="bgw2", up=False,
                                                        why="no beacon through the tunnel for 312 ms")))
    assert (await disp.gateway("g2")).state == "alive"  # a report alone does not decide: the beat does
    agent.send("g2", FLAG_PARTNER_DOWN)
    disp.liveness.readable()  # the socket's reader: acts at once, not at the next tick
    await disp.liveness.settle()
    g2 = await disp.gateway("g2")
    assert g2.state == "dead" and g2.partner_up is False and g2.buckets == 0
    assert g2.unhealthy == "partner down (no beacon through the tunnel for 312 ms)"
    assert len(sess.batches) == 1 and set(bucket_writes(sess.batches[0])) == G2_BUCKETS
    events = await disp.events(limit=50)
    assert any(e.kind == "gateway" and e.reason == "dead" and e.src == "g2" and (e.detail or "").startswith("partner down")
               for e in events)
    moves = [e for e in events if e.kind == "move" and e.src == "g2"]
    assert {e.reason for e in moves} == {"failover"} and len(moves) == len(G2_BUCKETS)
    # Still down on the next beats; then the partner's beacons resume.
    agent.send("g2", FLAG_PARTNER_DOWN)
    await disp.liveness.tick()
    assert (await disp.gateway("g2")).state == "dead"
    agent.send("g2")
    await disp.liveness.tick()
    assert (await disp.gateway("g2")).state == "recovering"
    assert any(e.kind == "gateway" and e.reason == "recovering" and e.detail == "partner up"
               for e in await disp.events(limit=50))
    await disp.rebalance()
    assert (await disp.gateway("g2")).buckets == 8  # weights g1:1 g2:2 g3:1 over K = 16


async def test_the_rest_heartbeat_carries_the_same_flags(disp: ControllerCore, sess: RecordingSession, clock: Clock) -> None:
    await disp.accept_heartbeat(Heartbeat(gateway="g1", timestamp=1.0))
    await disp.accept_heartbeat(Heartbeat(gateway="g2", timestamp=1.0, partner_down=True))
    g2 = await disp.gateway("g2")
    assert g2.state == "dead" and g2.unhealthy == "partner down"
    await disp.accept_heartbeat(Heartbeat(gateway="g2", timestamp=1.1, partner_down=False))
    assert (await disp.gateway("g2")).state == "recovering"
    await disp.accept_heartbeat(Heartbeat(gateway="g1", timestamp=1.1, charon_down=True))
    assert (await disp.gateway("g1")).unhealthy == "agent reports charon stopped"


# -- the heartbeat socket under a flood


FLOODER = ("192.0.2.66", 4000)
AGENT = ("127.0.0.1", 5000)  # where the `Agent` of test_heartbeat_udp beats from


class FloodSocket:
    """A socket whose queue holds what the test put there, each datagram with its source;
    counts every read."""

    def __init__(self, datagrams: list[tuple[bytes, tuple[str, int]]]) -> None:
        self.queue = deque(datagrams)
        self.reads = 0

    def recvfrom(self, n: int) -> tuple[bytes, tuple[str, int]]:
        self.reads += 1
        if not self.queue:
            raise BlockingIOError
        data, source = self.queue.popleft()
        return data[:n], source

    def close(self) -> None:
        pass


def _forged(n: int, source: tuple[str, int] = FLOODER) -> list[tuple[bytes, tuple[str, int]]]:
    return [(encode("g1", b"guessed-secret-000000", 1, i, time.time_ns()), source) for i in range(1, n + 1)]


def test_a_drain_stops_at_its_limit_and_says_a_backlog_is_left() -> None:
    rx = HeartbeatReceiver(KEYS)
    good = (encode("g1", KEYS["g1"], 1, 1, time.time_ns()), AGENT)
    sock = FloodSocket([*_forged(10_000), good])
    rx.sock = sock  # type: ignore[assignment]
    assert rx.drain(max_datagrams=4096, budget_s=10.0) == [] and sock.reads == 4096 and rx.backlog
    assert rx.drain(max_datagrams=4096, budget_s=10.0) == [] and sock.reads == 8192 and rx.backlog
    beats = rx.drain(max_datagrams=4096, budget_s=10.0)
    assert [b.gateway for b in beats] == ["g1"] and not rx.backlog  # behind the flood, not lost
    # The flooder's first burst of datagrams costs an HMAC each; the rest are refused unread.
    assert rx.rejected["bad_mac"] >= 100 and sum(rx.rejected.values()) == 10_000 and rx.accepted == 1


def test_a_drain_reads_everything_queued_within_its_time_budget() -> None:
    rx = HeartbeatReceiver(KEYS)
    good = (encode("g1", KEYS["g1"], 1, 1, time.time_ns()), AGENT)
    sock = FloodSocket([*_forged(10_000), good])
    rx.sock = sock  # type: ignore[assignment]
    assert [b.gateway for b in rx.drain(budget_s=10.0)] == ["g1"] and not rx.backlog
    assert sock.reads == 10_002  # the last read found the socket empty
    assert rx.drain(budget_s=0.0) == [] and sock.reads == 10_003


async def test_a_flood_does_not_hide_a_good_beat_from_the_verdict(disp: ControllerCore, sess: RecordingSession, clock: Clock) -> None:
    agent = Agent(disp)
    agent.send("g1")
    agent.send("g2")
    await disp.liveness.tick()
    real = disp.liveness.receiver.sock
    clock.t += 0.35  # past dead-after (3 x 100 ms): only the beats behind the flood keep them alive
    good = [(encode(n, KEYS[n], 2, 1, time.time_ns()), AGENT) for n in ("g1", "g2")]
    flood = FloodSocket([*_forged(9_000), *good])
    disp.liveness.receiver.sock = flood  # type: ignore[assignment]
    rx = disp.liveness.receiver
    drain = rx.drain
    rx.drain = lambda: drain(max_datagrams=4096, budget_s=10.0)  # type: ignore[method-assign]  # a flood that outruns the reader
    try:
        await disp.liveness.tick()  # one bounded drain, a backlog left: silence is not judged now
        assert flood.reads == 4096
        assert [g.state for g in await disp.gateways()] == ["alive", "alive", "alive"]
        assert disp.liveness.silence_verdicts_deferred == 1
        disp.liveness.readable()  # the loop turns; the socket's reader keeps draining
        disp.liveness.readable()
        assert not flood.queue
        clock.t += 0.02
        await disp.liveness.tick()
        assert [g.state for g in await disp.gateways()] == ["alive", "alive", "alive"]
        # A flood that never ends cannot keep a silent gateway alive: after one dead-after
        # of deferred verdicts, silence is judged anyway.
        flood.queue.extend(_forged(50_000))
        for _ in range(5):
            clock.t += 0.1
            await disp.liveness.tick()
        assert (await disp.gateway("g1")).state == "dead"
        assert flood.reads < 4096 * 8  # every tick read one bounded batch
    finally:
        del rx.drain
        disp.liveness.receiver.sock = real


def test_good_beats_between_forged_ones_on_a_real_socket_are_all_read() -> None:
    rx = HeartbeatReceiver(KEYS)
    sock = rx.open("127.0.0.1", 0)
    addr = sock.getsockname()
    rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    per_burst = max(8, min(200, rcvbuf // 2048))  # bursts the socket buffer holds whole
    got: list[int] = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gw:
            tx.bind(("127.0.0.2", 0))  # the flooder: another source than the gateway's
            for seq in range(1, 21):
                for d, _ in _forged(per_burst):
                    tx.sendto(d, addr)
                gw.sendto(encode("g1", KEYS["g1"], 3, seq, time.time_ns()), addr)
                time.sleep(0.002)
                while True:
                    got += [b.seq for b in rx.drain(max_datagrams=64)]
                    if not rx.backlog:
                        break
    finally:
        rx.close()
    assert got == list(range(1, 21)), f"good beats read: {got} ({rx.rejected})"
    assert sum(rx.rejected.values()) == 20 * per_burst
    assert set(rx.rejected) <= {"bad_mac", "rate_limited"}


@pytest.mark.parametrize("n", [0, 1])
def test_no_backlog_when_the_socket_empties(n: int) -> None:
    rx = HeartbeatReceiver(KEYS)
    rx.sock = FloodSocket(_forged(n))  # type: ignore[assignment]
    rx.drain(max_datagrams=1 if n == 0 else 2)
    assert not rx.backlog
