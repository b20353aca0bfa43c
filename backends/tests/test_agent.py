"""The agent against controllers that fail: in-process HTTP servers that go down and come
back, hang, or answer slowly. It retries, never dies, and one controller never slows another."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from supergw_gateway.agent import HEARTBEAT_BACKOFF_CAP_S, Agent
from supergw_gateway.config import parse_config
from supergw_gateway.errors import ConfigError
from supergw_gateway.report import CpuSample, GatewayReport, Heartbeat
from supergw_gateway.vici_client import ChildSaStatus, IkeSaStatus
from supergw_proto.reports import TIMING_HEADER, AgentTiming

# What the fake controllers tell the agent: heartbeats every 100 ms, reports every 100 ms.
TOLD = AgentTiming(heartbeat_interval_ms=100, report_interval_ms=100)
FAST = AgentTiming(heartbeat_interval_ms=50, report_interval_ms=50)


class FakeSampler:
    def __init__(self) -> None:
        self.n = 0

    def cpu(self) -> CpuSample:
        self.n += 1
        return CpuSample(self.n * 0.1, self.n * 10, self.n, self.n)

    def sas(self) -> list[IkeSaStatus]:
        c = ChildSaStatus("sgw-gw1-net", "INSTALLED", 1, self.n * 100, 0, self.n, 0, "a", "b", None)
        return [IkeSaStatus("sgw-gw1", "ESTABLISHED", 1, "", "", [c])]


class FakeController:
    """HTTP/1.1 keep-alive server on 127.0.0.1 recording the agent's POSTs.

    `report_delay` holds report answers back (a slow controller); `hang` accepts connections
    and never answers (an unreachable-but-routed controller)."""

    def __init__(self, port: int, report_delay: float = 0.0, hang: bool = False,
                 timing: AgentTiming | None = TOLD) -> None:
        self.port, self.report_delay, self.hang, self.timing = port, report_delay, hang, timing
        self.posts: list[tuple[float, str, dict[str, Any]]] = []
        self.server: asyncio.Server | None = None
        self.conns: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def times(self, kind: str) -> list[float]:
        return [t for t, p, _ in self.posts if p.endswith("/" + kind)]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.conns.add(writer)
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                if self.hang:
                    await asyncio.sleep(3600)
                lines = head.split("\r\n")
                length = next((int(l.split(":")[1]) for l in lines if l.lower().startswith("content-length")), 0)
                body = json.loads(await reader.readexactly(length)) if length else {}
                path = lines[0].split()[1]
                assert lines and any(l.lower() == "authorization: bearer agent-test-token" for l in lines)
                if path.endswith("/report") and self.report_delay:
                    await asyncio.sleep(self.report_delay)
                self.posts.append((time.monotonic(), path, body))
                told = "" if self.timing is None else f"{TIMING_HEADER}: {self.timing.header()}\r\n"
                writer.write(f"HTTP/1.1 204 No Content\r\n{told}Content-Length: 0\r\n\r\n".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.conns.discard(writer)
            writer.close()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for w in list(self.conns):
                w.transport.abort()
            await self.server.wait_closed()
            self.server = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agent(gw_dict: dict[str, Any], ctl: dict[str, Any]) -> Agent:
    gw_dict["controller"] = {"token": "agent-test-token", **ctl}
    agent = Agent(parse_config(gw_dict), heartbeat="http")  # these tests drive the REST heartbeat
    agent.sampler = FakeSampler()  # type: ignore[assignment]
    return agent


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for t in tasks:
        assert not t.done()  # the loops never end on their own
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _start(agent: Agent, tasks: list[asyncio.Task[None]]) -> None:
    tasks += [asyncio.create_task(agent.report_loop()), asyncio.create_task(agent.heartbeat_loop())]


async def until(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.01)
    return bool(cond())


async def test_agent_survives_controller_downtime(gw_dict: dict[str, Any], running: list[Any]) -> None:
    """Transport-level failures first, then success: reports and heartbeats validate."""
    got: dict[str, list[dict[str, Any]]] = {"report": [], "heartbeat": []}
    calls = {"n": 0}

    def handler(req: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 4:
            raise httpx.ConnectError("controller down")
        assert req.headers["authorization"] == "Bearer agent-test-token"
        assert req.url.path.startswith("/api/v1/gateways/gw1/")
        got[req.url.path.rsplit("/", 1)[1]].append(json.loads(req.content))
        return httpx.Response(204, headers={TIMING_HEADER: FAST.header()})

    gw_dict["controller"] = {"url": "http://ctl.invalid:8080", "token": "agent-test-token"}
    agent = Agent(parse_config(gw_dict), transport=httpx.MockTransport(handler), heartbeat="http")
    agent.sampler = FakeSampler()  # type: ignore[assignment]
    _start(agent, running)
    assert await until(lambda: len(got["report"]) >= 2 and got["heartbeat"], 5)
    assert agent.state.reports_failed + agent.state.heartbeats_failed >= 1
    reports = [GatewayReport.model_validate(r) for r in got["report"]]
    Heartbeat.model_validate(got["heartbeat"][0])
    assert reports[-1].tunnel_bytes_in > 0 and reports[-1].sas[0].state == "ESTABLISHED"
    code, body = agent.health()
    assert code == 503 and body["reports_ok"] >= 2  # no charon here: unhealthy, but still reporting


async def test_heartbeats_resume_quickly_after_long_downtime(gw_dict: dict[str, Any], running: list[Any]) -> None:
    ctl = FakeController(free_port())
    agent = _agent(gw_dict, {"url": ctl.url})
    _start(agent, running)
    await asyncio.sleep(2.5)  # long enough for any uncapped backoff to grow past 1 s
    assert agent.state.heartbeats_failed >= 5 and agent.state.heartbeats_ok == 0
    await ctl.start()
    t_up = time.monotonic()
    try:
        assert await until(lambda: ctl.times("heartbeat"), 2.0)
        # cap + one timeout/scheduling slack; the controller's dead timer is 0.3 s
        assert ctl.times("heartbeat")[0] - t_up <= HEARTBEAT_BACKOFF_CAP_S + 0.25
        # and then the normal 100 ms cadence
        await asyncio.sleep(1.0)
        beats = [t for t in ctl.times("heartbeat") if t > t_up + 0.8]
        assert len(beats) >= 3
        assert await until(lambda: ctl.times("report"), 6.0)  # reports come back too (longer cap)
    finally:
        await ctl.stop()


async def test_controller_restart_then_back(gw_dict: dict[str, Any], running: list[Any]) -> None:
    """Up, down (connections reset), up again on the same port."""
    port = free_port()
    ctl = FakeController(port)
    await ctl.start()
    agent = _agent(gw_dict, {"url": ctl.url})
    _start(agent, running)
    assert await until(lambda: len(ctl.times("heartbeat")) >= 3 and ctl.times("report"), 3)
    await ctl.stop()
    await asyncio.sleep(1.5)
    failed = agent.state.heartbeats_failed
    assert failed >= 3
    ctl2 = FakeController(port)
    await ctl2.start()
    t_up = time.monotonic()
    try:
        assert await until(lambda: ctl2.times("heartbeat"), 2.0)
        assert ctl2.times("heartbeat")[0] - t_up <= HEARTBEAT_BACKOFF_CAP_S + 0.25
    finally:
        await ctl2.stop()


@pytest.mark.parametrize("down", ["refused", "hang"])
async def test_two_controllers_one_down(gw_dict: dict[str, Any], running: list[Any], down: str) -> None:
    """Both get heartbeats and reports independently; the dead one does not slow the live one."""
    live = FakeController(free_port())
    dead = FakeController(free_port(), hang=down == "hang")
    await live.start()
    if down == "hang":
        await dead.start()
    agent = _agent(gw_dict, {"urls": [dead.url, live.url]})
    _start(agent, running)
    try:
        await asyncio.sleep(2.0)
        beats = live.times("heartbeat")
        assert len(beats) >= 12, f"only {len(beats)} heartbeats in 2 s at 100 ms"
        gaps = [b - a for a, b in zip(beats, beats[1:])]
        # Were heartbeats to the live controller waiting on the dead one, every gap would be
        # >= interval + the 0.2 s heartbeat timeout. One late beat is allowed: the agent and
        # both fake controllers share one event loop on a shared VM, where a single scheduling
        # hiccup of a few hundred ms happens (seen once in CI: 0.42 s among 0.1 s gaps).
        late = [g for g in gaps if g >= 0.3]
        assert len(late) <= 1 and max(gaps) < 0.6, f"heartbeat gaps {sorted(gaps)[-3:]}: the dead controller delays the live one"
        assert len(live.times("report")) >= 8
        assert not dead.posts
        _, body = agent.health()
        per = {c["url"]: c for c in body["controllers"]}  # type: ignore[attr-defined]
        assert per[live.url]["heartbeats_ok"] >= 12 and per[live.url]["heartbeats_failed"] == 0
        assert per[dead.url]["heartbeats_ok"] == 0 and per[dead.url]["heartbeats_failed"] >= 1
        # the backup comes up and is told too, without restarting the agent
        if down == "refused":
            await dead.start()
            assert await until(lambda: dead.times("heartbeat") and dead.times("report"), 6.0)
    finally:
        await live.stop()
        await dead.stop()


async def test_slow_report_post_does_not_delay_heartbeats(gw_dict: dict[str, Any], running: list[Any]) -> None:
    ctl = FakeController(free_port(), report_delay=1.0)
    await ctl.start()
    agent = _agent(gw_dict, {"url": ctl.url})
    _start(agent, running)
    try:
        await asyncio.sleep(2.5)
        beats = ctl.times("heartbeat")
        assert len(beats) >= 15
        assert max(b - a for a, b in zip(beats, beats[1:])) < 0.3
        assert 1 <= len(ctl.times("report")) <= 3  # the slow ones did go through, one at a time
    finally:
        await ctl.stop()


def test_controller_urls_config(gw_dict: dict[str, Any]) -> None:
    gw_dict["controller"] = {"url": "http://10.0.0.1:8080"}
    cfg = parse_config(gw_dict)
    assert cfg.controller is not None and cfg.controller.endpoints == ["http://10.0.0.1:8080"]
    gw_dict["controller"] = {"urls": ["http://10.0.0.1:8080", "http://10.0.0.2:8080/"]}
    cfg = parse_config(gw_dict)
    assert cfg.controller is not None and len(cfg.controller.endpoints) == 2
    for bad, msg in (({}, "exactly one of"), ({"urls": []}, "exactly one of"),
                     ({"url": "http://a:1", "urls": ["http://b:1"]}, "exactly one of"),
                     ({"urls": ["http://a:1", "http://a:1/"]}, "duplicate controller URLs"),
                     ({"urls": ["ftp://a:1"]}, "controller.urls.0")):
        gw_dict["controller"] = bad
        with pytest.raises(ConfigError, match=msg):
            parse_config(gw_dict)
