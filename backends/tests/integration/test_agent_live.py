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
