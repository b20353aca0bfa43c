"""The agent beside a real charon: reports real VICI counters, survives controller downtime."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from supergw_gateway.agent import Agent
from supergw_gateway.config import Backend
from supergw_gateway.report import GatewayReport, Heartbeat
from tests.integration.conftest import require_root_strongswan
from tests.integration.helpers import ping

pytestmark = pytest.mark.integration


class Collector:
    """A minimal HTTP server standing in for the controller's agent endpoints."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        length = int(next(l.split(":")[1] for l in head.split("\r\n") if l.lower().startswith("content-length")))
        body = json.loads(await reader.readexactly(length))
        self.posts.append((head.split()[1], body))
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


async def _get(port: int) -> tuple[int, dict[str, Any]]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    data = await r.read()
    w.close()
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_agent_reports_real_counters(lab_factory: Any, unused_tcp_port: int) -> None:
    require_root_strongswan()
    ctl = {"url": f"http://127.0.0.1:{unused_tcp_port}", "token": "agent-live-token",
           "report_interval_ms": 200, "heartbeat_interval_ms": 100}
    r = await asyncio.to_thread(lab_factory, "ag", Backend.LIBIPSEC, a={"controller": ctl})
    agent = Agent(r.gws["a"].cfg, heartbeat="http")
    health = await agent.start_health("127.0.0.1:0")
    hport = health.sockets[0].getsockname()[1]
    loops = [asyncio.create_task(agent.report_loop()), asyncio.create_task(agent.heartbeat_loop())]
    await asyncio.sleep(1.0)  # controller is down: failures, no crash
    assert agent.state.heartbeats_failed > 0 and not any(t.done() for t in loops)
    col = Collector()
    server = await asyncio.start_server(col.handle, "127.0.0.1", unused_tcp_port)
    await asyncio.to_thread(ping, r.lab, 20, 0.02)
    for _ in range(100):
        await asyncio.sleep(0.1)
        if sum(1 for p, _ in col.posts if p.endswith("/report")) >= 3:
            break
    code, body = await _get(hport)
    for t in loops:
        t.cancel()
    server.close()
    health.close()
    reports = [GatewayReport.model_validate(b) for p, b in col.posts if p == "/api/v1/gateways/ag-a/report"]
    beats = [Heartbeat.model_validate(b) for p, b in col.posts if p == "/api/v1/gateways/ag-a/heartbeat"]
    assert reports and beats
    last = reports[-1]
    assert last.backend == "libipsec" and last.tunnel_packets_out >= 20
    assert any(s.state == "INSTALLED" for s in last.sas)
    assert code == 200 and body["tunnel_up"] is True and body["reports_ok"] >= 1


async def test_udp_heartbeats_say_when_the_real_charon_is_stopped(lab_factory: Any, unused_udp_port: int) -> None:
    """The agent's UDP beats reach the controller's receiver, keyed by its agent token; a
    SIGSTOPped charon is reported at the next beat, and a running one again after SIGCONT.
    Reports carry the gateway's own CPU and the SA kinds the controller's failover reads."""
    import os
    import signal

    from supergw_controller.heartbeat import HeartbeatReceiver
    from supergw_proto.reports import tunnel_up

    require_root_strongswan()
    token = "agent-live-udp-token"
    ctl = {"url": f"http://127.0.0.1:{unused_udp_port}", "token": token,
           "report_interval_ms": 200, "heartbeat_interval_ms": 50}
    r = await asyncio.to_thread(lab_factory, "au", Backend.LIBIPSEC, a={"controller": ctl})
    rx = HeartbeatReceiver({"au-a": token.encode()})
    rx.open("127.0.0.1", unused_udp_port)
    agent = Agent(r.gws["a"].cfg)  # heartbeat="udp" is the default
    beats = asyncio.create_task(agent.heartbeat_loop())
    try:
        await asyncio.sleep(0.5)
        got = rx.drain()
        assert len(got) >= 4 and not any(b.charon_down for b in got) and rx.rejected == {}
        rep, _ = await agent.make_report(await asyncio.to_thread(agent.sampler.cpu))
        assert rep.cpu_scope == "processes" and tunnel_up(rep) is True and rep.sa_error is None
        pid = agent.gw.charon_pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(0.3)
            rx.drain()
            await asyncio.sleep(0.2)
            stopped = rx.drain()
            assert stopped and all(b.charon_down for b in stopped)
        finally:
            os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(0.3)
        rx.drain()
        await asyncio.sleep(0.2)
        again = rx.drain()
        assert again and not any(b.charon_down for b in again)
    finally:
        beats.cancel()
        await asyncio.gather(beats, return_exceptions=True)
        await agent.aclose()
        rx.close()
