"""One source of timing (issue 16): the controller tells each agent its heartbeat interval,
miss count and report interval in the answer to every report; heartbeats and pair beacons
declare their interval, so nobody judges a sender by a cadence it was not told.

The end-to-end cases run the real agent parts (Timing, ControllerLink, HeartbeatSender)
against the real controller core (REST app in process, UDP heartbeats on a real socket)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from supergw_controller.api import create_app
from supergw_controller.compose import ControllerCore
from supergw_controller.config import parse_config as parse_controller
from supergw_controller.heartbeat import HeartbeatReceiver
from supergw_controller.southbound.session import Role
from supergw_gateway.agent import Agent, Orders, Timing
from supergw_gateway.beacon import HeartbeatSender
from supergw_gateway.config import parse_config
from supergw_gateway.partner import PartnerMonitor
from supergw_proto.beats import PAIR_MAGIC, decode, encode
from supergw_proto.reports import ORDERS_HEADER, TIMING_HEADER, AgentOrders, AgentTiming

from tests.test_agent import FakeController, FakeSampler, free_port, until
from tests.test_partner import wait_for

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"
TOKEN = "agent-test-token-0123456789"


# -- the agent follows what it is told


def _orders(value: str | None, url: str = "http://c1") -> httpx.Response:
    headers = {} if value is None else {ORDERS_HEADER: value}
    return httpx.Response(204, headers=headers, request=httpx.Request("POST", url))


def test_orders_hold_while_a_controller_says_them_and_a_bad_header_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    changes: list[object] = []
    o = Orders(lambda: changes.append(o.redirect_to))
    o.heard("http://c1", _orders(None))
    assert o.redirect_to is None and changes == []
    redirect = AgentOrders(redirect_to=ipaddress.IPv4Address("203.0.113.1")).header()
    assert redirect == '{"redirect_to":"203.0.113.1"}'
    o.heard("http://c1", _orders(redirect))
    o.heard("http://c1", _orders(redirect))  # a level: said again, nothing new
    o.heard("http://c2", _orders(None))  # another controller without orders does not withdraw c1's
    assert str(o.redirect_to) == "203.0.113.1" and len(changes) == 1
    with caplog.at_level(logging.WARNING):
        o.heard("http://c1", _orders('{"redirect_to": "not an address"}'))
    assert "unusable Supergw-Orders header" in caplog.text and str(o.redirect_to) == "203.0.113.1"
    o.heard("http://c1", _orders('{"something_newer": 1}'))  # unknown keys: ignored, nothing asked
    assert o.redirect_to is None and changes == [ipaddress.IPv4Address("203.0.113.1"), None]


def _answer(timing: AgentTiming | None, url: str = "http://c1") -> httpx.Response:
    headers = {} if timing is None else {TIMING_HEADER: timing.header()}
    return httpx.Response(204, headers=headers, request=httpx.Request("POST", url))


def test_timing_is_the_controllers_the_fastest_of_several_and_defaults_until_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    changes: list[AgentTiming] = []
    t = Timing(changes.append)
    assert t.current == AgentTiming()  # before any answer: the protocol defaults (100 ms x 3, 500 ms)
    with caplog.at_level(logging.WARNING):
        t.heard("http://c1", _answer(None))
        t.heard("http://c1", _answer(None))
    assert caplog.text.count("does not say its timing") == 1 and changes == []
    slow = AgentTiming(heartbeat_interval_ms=250, missed_heartbeats=4, report_interval_ms=1000)
    t.heard("http://c1", _answer(slow))
    assert t.current == slow and changes == [slow]
    t.heard("http://c1", _answer(slow))
    assert changes == [slow]  # the same answer again changes nothing
    with caplog.at_level(logging.WARNING):
        t.heard("http://c2", _answer(AgentTiming(heartbeat_interval_ms=50, missed_heartbeats=5, report_interval_ms=2000)))
    assert t.current == AgentTiming(heartbeat_interval_ms=50, missed_heartbeats=4, report_interval_ms=1000)
    assert "controllers tell different timings" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        bad = httpx.Response(204, headers={TIMING_HEADER: '{"heartbeat_interval_ms": 0}'})
        t.heard("http://c3", bad)
    assert "unusable Supergw-Timing header" in caplog.text and "heartbeat_interval_ms" in caplog.text
    assert len(changes) == 2


def test_the_sender_declares_its_interval_and_follows_a_new_one_at_once() -> None:
    rx = HeartbeatReceiver({"gw1": TOKEN.encode()})
    port = rx.open("127.0.0.1", 0).getsockname()[1]
    sender = HeartbeatSender("gw1", [(f"http://127.0.0.1:{port}", TOKEN.encode())], 5.0, lambda: True)
    sender.start()
    try:
        beats: list[Any] = []
        assert wait_for(lambda: bool(beats.extend(rx.drain()) or beats))
        assert beats[0].interval_ms == 5000
        sender.set_interval(0.02)  # told 20 ms: the next beat goes now, not in 5 s
        t0 = time.monotonic()
        fast: list[Any] = []
        assert wait_for(lambda: len(fast.extend(rx.drain()) or fast) >= 5, 2.0)
        assert time.monotonic() - t0 < 1.0 and all(b.interval_ms == 20 for b in fast)
    finally:
        sender.stop()
        rx.close()


def test_a_partner_is_judged_by_the_interval_its_beacons_declare() -> None:
    clock = [100.0]
    key = b"pair-secret-0123456789abcdef"
    m = PartnerMonitor("agw1", "bgw1", key, ("10.1.0.1", 8790), ("10.2.0.1", 8790), 0.1, 3, lambda: 0,
                       monotonic=lambda: clock[0], wallclock_ns=lambda: 1_800_000_000 * 10**9)
    assert decode(m.beacon(), {"agw1": key}, magic=PAIR_MAGIC).interval_ms == 100

    def beacon(seq: int, interval_ms: int | None) -> bytes:
        return encode("bgw1", key, 1, seq, 1_800_000_000 * 10**9, magic=PAIR_MAGIC, interval_ms=interval_ms)

    # The partner's controller says 1 s: it beacons every second and says so.
    assert m.receive(beacon(1, 1000), "10.2.0.1:8790")
    clock[0] += 0.9
    assert m.verdict() == (True, None), "late by our 100 ms clock, on time by its own"
    clock[0] += 2.2
    assert m.verdict()[0] is False  # 3.1 s: three of its intervals missed
    # An older partner (version 1 beacons) is judged by our interval, as before.
    assert m.receive(beacon(2, None), "10.2.0.1:8790")
    clock[0] += 0.35
    assert m.verdict()[0] is False
    # Our controller tells a slower timing: beacons follow it, and so does the verdict.
    m.set_timing(0.5, 2)
    assert m.receive(beacon(3, None), "10.2.0.1:8790")
    clock[0] += 0.9
    assert m.verdict() == (True, None) and m.dead_after_s == 1.0
    assert decode(m.beacon(), {"agw1": key}, magic=PAIR_MAGIC).interval_ms == 500


def test_the_old_timing_keys_still_load_but_are_ignored(gw_dict: dict[str, Any], tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    secret = tmp_path / "pair.secret"
    secret.write_text("s3cret-pair-key-0123456789\n")
    secret.chmod(0o600)
    gw_dict["controller"] = {"url": "http://127.0.0.1:9", "token": TOKEN, "report_interval_ms": 1000,
                             "heartbeat_interval_ms": 1000}  # fmt: skip
    gw_dict["partner"] = {"name": "bgw1", "address": "10.2.0.251", "secret_file": str(secret), "interval_ms": 1000,
                          "missed": 9}  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="supergw_gateway.config"):
        agent = Agent(parse_config(gw_dict))
    for key in ("controller.report_interval_ms", "controller.heartbeat_interval_ms", "partner.interval_ms",
                "partner.missed"):
        assert f"config: {key} is deprecated and ignored" in caplog.text, key
    assert agent.timing.current == AgentTiming()
    assert agent.sender is not None and agent.sender.interval_s == 0.1
    assert agent.partner is not None and (agent.partner.interval_s, agent.partner.missed) == (0.1, 3)
    assert "now 100 ms" in agent.partner_line()


async def test_the_agent_adopts_the_timing_of_the_first_answer_and_of_every_change(
    gw_dict: dict[str, Any], running: list[asyncio.Task[None]]
) -> None:
    ctl = FakeController(free_port(), timing=AgentTiming(heartbeat_interval_ms=300, report_interval_ms=200))
    await ctl.start()
    gw_dict["controller"] = {"url": ctl.url, "token": "agent-test-token"}
    agent = Agent(parse_config(gw_dict), heartbeat="http")
    agent.sampler = FakeSampler()  # type: ignore[assignment]
    running += [asyncio.create_task(agent.report_loop()), asyncio.create_task(agent.heartbeat_loop())]
    try:
        assert await until(lambda: agent.timing.current.heartbeat_interval_ms == 300, 3.0)
        await asyncio.sleep(1.2)
        beats = ctl.times("heartbeat")[-4:]
        gaps = [b - a for a, b in zip(beats, beats[1:])]
        assert gaps and min(gaps) > 0.2, f"REST heartbeats every 300 ms as told, gaps {gaps}"
        ctl.timing = AgentTiming(heartbeat_interval_ms=100, report_interval_ms=200)
        assert await until(lambda: agent.timing.current.heartbeat_interval_ms == 100, 3.0)
        _, body = agent.health()
        assert body["timing"] == {"heartbeat_interval_ms": 100, "missed_heartbeats": 3, "report_interval_ms": 200,
                                  "lan_liveness_interval_ms": 5}
    finally:
        await ctl.stop()


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# -- end to end: a mis-set agent against the real controller


def _controller(tmp_path: Path, port: int, heartbeat_ms: int = 100) -> ControllerCore:
    cfg = parse_controller({
        "switch": {"address": "127.0.0.1:50790", "device_id": 790},
        "pipeline": {"p4info": str(P4INFO)},
        "gateway_ip": "10.0.0.1",
        "buckets": 16,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway"},
        "gateways": [{"name": "gw1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": TOKEN}],
        "api": {"listen": f"127.0.0.1:{port}", "token": "operator-token-0123456789"},
        # The grace covers only the wait for the first beat (then beats judge): room for a slow start.
        "timing": {"heartbeat_interval_ms": heartbeat_ms, "missed_heartbeats": 3, "startup_grace_s": 1.0},
    }, tmp_path)  # fmt: skip
    return ControllerCore(cfg, None, session=_NoSwitch())


class _NoSwitch:
    """The controller's switch session stand-in: no switch at all (liveness needs none)."""

    role = Role.DISCONNECTED
    errors = reconnects = 0
    cookie = None
    schema = None

    def require_primary(self) -> None:
        raise AssertionError("nothing may be written in these tests")


def _udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _watch(core: ControllerCore, seconds: float) -> list[str]:
    """Run the controller's liveness (watchdog + UDP socket) for `seconds`: gateway events seen."""
    task = asyncio.create_task(core.liveness.run(udp=True))
    try:
        await asyncio.sleep(seconds)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return _gateway_events(core)


async def _adopted(agent: Agent, interval_ms: int, timeout: float) -> float | None:
    """Wall-clock time at which the agent's timing became `interval_ms` (None: not in time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if agent.timing.current.heartbeat_interval_ms == interval_ms:
            return time.time()
        await asyncio.sleep(0.002)
    return None


def _gateway_events(core: ControllerCore, before: float = float("inf")) -> list[str]:
    return [f"{e.reason}: {e.detail}" for e in core.eventlog.ring.recent(100) if e.kind == "gateway" and e.ts < before]


@pytest.mark.parametrize("ctl_ms", [100, 30])
async def test_a_mis_set_agent_adopts_the_controllers_timing_and_is_never_failed_over(
    gw_dict: dict[str, Any], tmp_path: Path, running: list[asyncio.Task[None]], caplog: pytest.LogCaptureFixture,
    ctl_ms: int,
) -> None:
    """The agent's config still says 1 s heartbeats (the old key); the controller expects
    `ctl_ms` x 3. The first report's answer (after 500 ms, the default report interval) sets
    the agent right. Until then it beats every 100 ms (the default), which a 30 ms x 3
    controller would take for death -- but its beats declare 100 ms, so nothing between
    start and that answer looks like death. (After it, a 30 ms cadence with 60 ms of slack
    is at the mercy of this shared machine's scheduling, so that case is judged up to the
    answer; the 100 ms case over the whole 2.5 s.)"""
    port = _udp_port()
    core = _controller(tmp_path, port, ctl_ms)
    app = create_app(core, core.config)
    gw_dict["controller"] = {"url": f"http://127.0.0.1:{port}", "token": TOKEN, "heartbeat_interval_ms": 1000,
                             "report_interval_ms": 1000}  # fmt: skip
    agent = Agent(parse_config(gw_dict), transport=httpx.ASGITransport(app=app))
    agent.sampler = FakeSampler()  # type: ignore[assignment]
    assert agent.sender is not None
    agent.sender.charon_running = lambda: True  # no charon in a unit test
    with caplog.at_level(logging.WARNING):
        watch = asyncio.create_task(_watch(core, 2.5))
        await asyncio.sleep(0.05)  # the controller's socket is open before the first beat
        running += [asyncio.create_task(agent.report_loop()), asyncio.create_task(agent.heartbeat_loop())]
        adopted = await _adopted(agent, ctl_ms, 2.0)
        await watch
    assert adopted is not None, f"the agent never adopted {ctl_ms} ms: {agent.timing.current}"
    assert agent.timing.current == AgentTiming(heartbeat_interval_ms=ctl_ms, missed_heartbeats=3, report_interval_ms=500)
    assert agent.sender.interval_s == ctl_ms / 1000
    assert _gateway_events(core, before=adopted) == [], "spurious gateway events before the agent was told"
    if ctl_ms == 100:
        assert _gateway_events(core) == [], "spurious gateway events"
        assert not core.registry.get("gw1").dead
    else:  # its first beats were slower than this controller's 30 ms, and it said so
        assert "its agent sends heartbeats every 100 ms, but this controller's timing.heartbeat_interval_ms is 30 ms" in caplog.text
    assert core.liveness.heartbeats_total >= 15 and core.liveness.reports_total >= 3
    assert core.liveness.receiver.rejected == {}
    assert "controller.heartbeat_interval_ms is deprecated and ignored" in caplog.text


async def test_an_agent_that_is_never_told_is_judged_by_its_own_interval_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent whose reports do not reach this controller keeps its own 1 s cadence: the
    controller judges it by that (no failover while it beats) and says so, naming both."""
    port = _udp_port()
    core = _controller(tmp_path, port)
    sender = HeartbeatSender("gw1", [(f"http://127.0.0.1:{port}", TOKEN.encode())], 1.0, lambda: True)
    try:
        with caplog.at_level(logging.ERROR, logger="supergw_controller.liveness"):
            watch = asyncio.create_task(_watch(core, 2.6))
            await asyncio.sleep(0.05)  # the controller's socket is open before the first beat
            sender.start()
            events = await watch
    finally:
        sender.stop()
    assert events == [], f"spurious gateway events: {events}"
    assert core.liveness.heartbeats_total >= 2
    assert ("gateway gw1: its agent sends heartbeats every 1000 ms, but this controller's "
            "timing.heartbeat_interval_ms is 100 ms") in caplog.text
    assert caplog.text.count("its agent sends heartbeats every 1000 ms") == 1  # once, not per beat
    # ... and once it is silent for three of its own intervals, it is dead.
    events = await _watch(core, 3.3)
    assert events == ["dead: no heartbeat for 3s"]


async def test_without_the_declaration_the_same_cadence_is_death(tmp_path: Path) -> None:
    """The control: an older agent (version 1 beats, no interval) on a 1 s cadence is judged
    by the controller's 100 ms x 3, as every agent was before issue 16."""
    port = _udp_port()
    core = _controller(tmp_path, port)
    stop = asyncio.Event()

    async def old_agent() -> None:
        seq = 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            while not stop.is_set():
                seq += 1
                tx.sendto(encode("gw1", TOKEN.encode(), 1, seq, time.time_ns()), ("127.0.0.1", port))
                await asyncio.sleep(1.0)

    task = asyncio.create_task(old_agent())
    try:
        events = await _watch(core, 2.6)
    finally:
        stop.set()
        await task
    assert events and events[-1].startswith("dead: no heartbeat for 0.3s")
