"""The agent beside charon: load reports every T_L, heartbeats, and a /health endpoint.

It survives controller downtime: every failed POST is logged and retried with backoff,
and no error ends the loops.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from supergw_gateway import tunnel
from supergw_gateway.config import GatewayConfig
from supergw_gateway.errors import GatewayError
from supergw_gateway.report import CpuSample, GatewayReport, Heartbeat, build_report, parse_pid_stat, parse_proc_stat
from supergw_gateway.runtime import Gateway
from supergw_gateway.vici_client import IkeSaStatus, ViciClient

log = logging.getLogger(__name__)

_GUEST_SAMPLE = "cat /proc/stat; echo @@; cat /proc/$(cat /run/charon.pid)/stat 2>/dev/null || true"


class Sampler:
    """CPU and charon jiffies where the gateway's kernel runs, VICI SAs from its charon."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self._vici: ViciClient | None = None

    def cpu(self) -> CpuSample:
        t = time.monotonic()
        if self.gw.cfg.backend.value == "uml":
            out = self.gw.executor().run(["sh", "-c", _GUEST_SAMPLE], timeout=5).stdout
            stat, _, pid_stat = out.partition("@@")
            busy, soft = parse_proc_stat(stat)
            charon = parse_pid_stat(pid_stat) if pid_stat.strip() else 0
            return CpuSample(t, busy, soft, charon)
        busy, soft = parse_proc_stat(Path("/proc/stat").read_text())
        pid = self.gw.charon_pid()
        charon = 0
        if pid is not None:
            try:
                charon = parse_pid_stat(Path(f"/proc/{pid}/stat").read_text())
            except OSError:
                pass
        return CpuSample(t, busy, soft, charon)

    def sas(self) -> list[IkeSaStatus]:
        try:
            if self._vici is None:
                self._vici = self.gw.vici()
            return self._vici.list_sas()
        except Exception:
            if self._vici is not None:
                self._vici.close()
            self._vici = None
            raise


@dataclass
class AgentState:
    reports_ok: int = 0
    reports_failed: int = 0
    heartbeats_ok: int = 0
    heartbeats_failed: int = 0
    last_error: str | None = None
    last_report: GatewayReport | None = None
    started: float = field(default_factory=time.time)


class Backoff:
    def __init__(self, base: float, cap: float = 5.0) -> None:
        self.base, self.cap, self.cur = base, cap, base

    def ok(self) -> float:
        self.cur = self.base
        return self.base

    def fail(self) -> float:
        self.cur = min(self.cap, self.cur * 2)
        return self.cur


class Agent:
    def __init__(self, cfg: GatewayConfig, client: httpx.AsyncClient | None = None) -> None:
        if cfg.controller is None:
            raise GatewayError(f"{cfg.name}: no `controller` section in the config: the agent has nowhere to report")
        self.cfg = cfg
        self.ctl = cfg.controller
        self.gw = Gateway(cfg)
        self.sampler = Sampler(self.gw)
        self.state = AgentState()
        headers = {"Authorization": f"Bearer {self.ctl.token}"} if self.ctl.token else {}
        self.http = client or httpx.AsyncClient(base_url=self.ctl.url.rstrip("/") + "/api/v1",
                                                headers=headers, timeout=2.0)

    def backend_label(self) -> str:
        st = self.gw.backend_state()
        return st.label if st else ("xfrm_uml" if self.cfg.backend.value == "uml" else "libipsec")

    async def _post(self, path: str, body: str) -> None:
        r = await self.http.post(path, content=body, headers={"Content-Type": "application/json"})
        if r.status_code >= 300:
            raise GatewayError(f"POST {path}: HTTP {r.status_code}: {r.text[:200]}")

    async def make_report(self, prev: CpuSample) -> tuple[GatewayReport, CpuSample]:
        cur = await asyncio.to_thread(self.sampler.cpu)
        try:
            sas = await asyncio.to_thread(self.sampler.sas)
        except Exception as exc:  # charon down: report no SAs, the controller sees it
            log.warning("VICI unavailable: %s", exc)
            sas = []
        rep = build_report(self.cfg.name, self.backend_label(), prev, cur, sas, tunnel.conn_name(self.cfg))
        return rep, cur

    async def report_loop(self) -> None:
        period = self.ctl.report_interval_ms / 1000
        backoff = Backoff(period)
        prev = await asyncio.to_thread(self.sampler.cpu)
        while True:
            await asyncio.sleep(backoff.cur)
            try:
                rep, prev = await self.make_report(prev)
                self.state.last_report = rep
                await self._post(f"/gateways/{self.cfg.name}/report", rep.model_dump_json())
                self.state.reports_ok += 1
                backoff.ok()
            except Exception as exc:
                self.state.reports_failed += 1
                self.state.last_error = f"report: {exc}"
                log.warning("report failed (retry in %.1fs): %s", backoff.fail(), exc)

    async def heartbeat_loop(self) -> None:
        backoff = Backoff(self.ctl.heartbeat_interval_ms / 1000)
        while True:
            await asyncio.sleep(backoff.cur)
            try:
                hb = Heartbeat(gateway=self.cfg.name, timestamp=time.time())
                await self._post(f"/gateways/{self.cfg.name}/heartbeat", hb.model_dump_json())
                self.state.heartbeats_ok += 1
                backoff.ok()
            except Exception as exc:
                self.state.heartbeats_failed += 1
                self.state.last_error = f"heartbeat: {exc}"
                log.warning("heartbeat failed (retry in %.1fs): %s", backoff.fail(), exc)

    def health(self) -> tuple[int, dict[str, object]]:
        charon = self.gw.charon_pid()
        rep = self.state.last_report
        up = any(s.state in ("ESTABLISHED", "INSTALLED") for s in rep.sas) if rep else False
        body = {
            "gateway": self.cfg.name, "backend": self.backend_label(), "charon_pid": charon,
            "tunnel_up": up, "reports_ok": self.state.reports_ok, "reports_failed": self.state.reports_failed,
            "heartbeats_ok": self.state.heartbeats_ok, "heartbeats_failed": self.state.heartbeats_failed,
            "last_error": self.state.last_error, "uptime_s": round(time.time() - self.state.started, 1),
        }
        return (200 if charon is not None else 503), body

    async def _serve_health(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode(errors="replace").split()
            if len(parts) >= 2 and parts[0] == "GET" and parts[1] in ("/health", "/healthz"):
                code, body = await asyncio.to_thread(self.health)
            else:
                code, body = 404, {"error": "only GET /health"}
            data = json.dumps(body).encode()
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[code]
            writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start_health(self, listen: str) -> asyncio.Server:
        host, _, port = listen.rpartition(":")
        return await asyncio.start_server(self._serve_health, host or "127.0.0.1", int(port))


async def run_agent(cfg: GatewayConfig, health_listen: str = "127.0.0.1:0") -> None:
    agent = Agent(cfg)
    server = await agent.start_health(health_listen)
    addr = server.sockets[0].getsockname()
    log.warning("agent %s: health on http://%s:%d/health, reporting to %s", cfg.name, addr[0], addr[1],
                agent.ctl.url)
    async with server:
        await asyncio.gather(agent.report_loop(), agent.heartbeat_loop())
