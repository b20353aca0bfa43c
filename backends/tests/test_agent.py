"""The agent's loops against an HTTP transport that fails first: it retries and never dies."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from supergw_gateway.agent import Agent
from supergw_gateway.config import parse_config
from supergw_gateway.report import CpuSample, GatewayReport, Heartbeat
from supergw_gateway.vici_client import ChildSaStatus, IkeSaStatus


class _Sampler:
    def __init__(self) -> None:
        self.n = 0

    def cpu(self) -> CpuSample:
        self.n += 1
        return CpuSample(self.n * 0.1, self.n * 10, self.n, self.n)

    def sas(self) -> list[IkeSaStatus]:
        c = ChildSaStatus("sgw-gw1-net", "INSTALLED", 1, self.n * 100, 0, self.n, 0, "a", "b", None)
        return [IkeSaStatus("sgw-gw1", "ESTABLISHED", 1, "", "", [c])]


async def test_agent_survives_controller_downtime(gw_dict: dict[str, Any]) -> None:
    gw_dict["controller"] = {"url": "http://ctl.invalid:8080", "token": "tok",
                             "report_interval_ms": 50, "heartbeat_interval_ms": 50}
    cfg = parse_config(gw_dict)
    got: dict[str, list[dict[str, Any]]] = {"report": [], "heartbeat": []}
    calls = {"n": 0}

    def handler(req: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 4:
            raise httpx.ConnectError("controller down")
        assert req.headers["authorization"] == "Bearer tok"
        kind = req.url.path.rsplit("/", 1)[1]
        assert req.url.path.startswith("/api/v1/gateways/gw1/")
        got[kind].append(json.loads(req.content))
        return httpx.Response(204)

    client = httpx.AsyncClient(base_url="http://ctl.invalid:8080/api/v1",
                               headers={"Authorization": "Bearer tok"}, transport=httpx.MockTransport(handler))
    agent = Agent(cfg, client=client)
    agent.sampler = _Sampler()  # type: ignore[assignment]
    tasks = [asyncio.create_task(agent.report_loop()), asyncio.create_task(agent.heartbeat_loop())]
    for _ in range(100):
        await asyncio.sleep(0.05)
        if len(got["report"]) >= 2 and got["heartbeat"]:
            break
    for t in tasks:
        assert not t.done()  # never crashed
        t.cancel()
    assert agent.state.reports_failed + agent.state.heartbeats_failed >= 1
    reports = [GatewayReport.model_validate(r) for r in got["report"]]
    Heartbeat.model_validate(got["heartbeat"][0])
    assert reports[-1].tunnel_bytes_in > 0 and reports[-1].sas[0].state == "ESTABLISHED"
    code, body = agent.health()
    assert code == 503 and body["reports_ok"] >= 2  # no charon here: unhealthy, but still reporting
