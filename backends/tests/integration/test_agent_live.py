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
    ctl = {"url": f"http://127.0.0.1:{unused_tcp_port}", "token": "agent-live-token"}
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
    ctl = {"url": f"http://127.0.0.1:{unused_udp_port}", "token": token}  # no REST here: beats on the 100 ms default
    r = await asyncio.to_thread(lab_factory, "au", Backend.LIBIPSEC, a={"controller": ctl})
    rx = HeartbeatReceiver({"au-a": token.encode()})
    rx.open("127.0.0.1", unused_udp_port)
    agent = Agent(r.gws["a"].cfg)  # heartbeat="udp" is the default
    beats = asyncio.create_task(agent.heartbeat_loop())
    try:
        await asyncio.sleep(0.6)
        got = rx.drain()
        assert len(got) >= 4 and not any(b.charon_down for b in got) and rx.rejected == {}
        assert {b.interval_ms for b in got} == {100}  # every beat declares the interval it is sent at
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


async def test_a_mis_set_agent_beside_a_real_charon_is_told_the_timing_by_the_real_controller(
    lab_factory: Any, unused_tcp_port: int, tmp_path: Any
) -> None:
    """The real controller process (no switch: its liveness runs all the same) expects
    heartbeats every 50 ms, dead after 3 missed; the agent's config still says 1 s (the old
    key, ignored). Until the first report's answer the agent beats every 100 ms (the
    default) -- death by the controller's 150 ms, but the beats declare 100 ms -- then it
    adopts 50 ms. No gateway event in 4 s, and the controller named both intervals once."""
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    import yaml

    require_root_strongswan()
    token = "agent-live-timing-token"
    port = unused_tcp_port
    ctl = {"url": f"http://127.0.0.1:{port}", "token": token, "heartbeat_interval_ms": 1000,
           "report_interval_ms": 1000}  # fmt: skip
    r = await asyncio.to_thread(lab_factory, "at", Backend.LIBIPSEC, a={"controller": ctl})
    p4info = Path(__file__).resolve().parents[3] / "p4src" / "v1model" / "supergw.p4info.txtpb"
    config = tmp_path / "controller.yaml"
    config.write_text(yaml.safe_dump({
        "switch": {"address": "127.0.0.1:1", "device_id": 1},  # nothing listens: no switch
        "pipeline": {"p4info": str(p4info)},
        "gateway_ip": "10.0.0.1", "buckets": 16, "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway"},
        "gateways": [{"name": "at-a", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": token}],
        "api": {"listen": f"127.0.0.1:{port}", "token": "operator-token-0123456789"},
        "timing": {"heartbeat_interval_ms": 50, "missed_heartbeats": 3, "startup_grace_s": 0.3},
        "state_db": str(tmp_path / "state.sqlite3"),
    }))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "supergw_controller.cli", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    auth = {"Authorization": "Bearer operator-token-0123456789"}

    def get(path: str) -> Any:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1{path}", headers=auth)
        with urllib.request.urlopen(req, timeout=2) as resp:
            return json.loads(resp.read())

    agent = None
    loops: list[asyncio.Task[None]] = []
    try:
        for _ in range(100):
            try:
                await asyncio.to_thread(get, "/status")
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the controller's API never came up")
        agent = Agent(r.gws["a"].cfg)
        loops = [asyncio.create_task(agent.report_loop()), asyncio.create_task(agent.heartbeat_loop())]
        await asyncio.sleep(4.0)
        assert agent.timing.current.heartbeat_interval_ms == 50 and agent.sender is not None
        assert agent.sender.interval_s == 0.05
        gw = (await asyncio.to_thread(get, "/gateways/at-a"))
        events = [e for e in await asyncio.to_thread(get, "/events?limit=1000") if e["kind"] == "gateway"]
        assert events == [], f"spurious gateway events: {events}"
        assert gw["alive"] and gw["state"] == "alive" and gw["heartbeat_age_s"] < 0.15, gw
        status = await asyncio.to_thread(get, "/status")
        assert status["heartbeats_total"] >= 40 and status["heartbeats_rejected"] == {}, status
    finally:
        for t in loops:
            t.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        if agent is not None:
            await agent.aclose()
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert err.count("its agent sends heartbeats every 100 ms, but this controller's "
                     "timing.heartbeat_interval_ms is 50 ms") == 1, err[-2000:]
