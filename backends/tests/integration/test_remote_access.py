"""Remote-access clients on real charon: the credential cache, SPI steering, IP_P without ARP.

One lab runs a gateway per cache strategy (each with its own public address, and its agent
reporting to a stand-in controller) and four clients per gateway, all at once:

- three come back within the lifetime, after a link outage, a sleep (charon SIGSTOPped) and
  an address change (MOBIKE), and must continue on the same IKE SA (same SPIs, no new
  IKE_AUTH) with traffic through their virtual IP;
- one comes back after the lifetime (clocked: the gateway's hard end at lifetime + over_time;
  established / data: its budget spent, then absent, and ended by the agent) and must get
  traffic through again only by a full IKE_SA_INIT + IKE_AUTH.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from supergw_gateway.agent import Agent
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.ra.client import ClientState, RemoteClient
from supergw_gateway.ra.lab import MOVE_NET, LabGateway, RaLab
from supergw_gateway.ra.sessions import SessionRecord
from supergw_gateway.runtime import Gateway
from supergw_proto.reports import GatewayReport
from tests.integration.conftest import require_root_strongswan
from tests.integration.test_agent_live import Collector

pytestmark = pytest.mark.integration

STRATEGIES = ("clocked", "established", "data")
CASES = ("outage", "sleep", "move", "after")
POLICIES: dict[str, dict[str, Any]] = {
    "clocked": {"strategy": "clocked", "lifetime_s": 20, "over_time_s": 2},
    "established": {"strategy": "established", "lifetime_s": 6, "idle_s": 2},
    "data": {"strategy": "data", "lifetime_bytes": 200_000, "idle_s": 2},
}
AWAY_S = 5  # outage and sleep within the lifetime
RESUME_TIMEOUT_S = 20
FULL_EXCHANGE_TIMEOUT_S = 60


@dataclass
class Outcome:
    before: ClientState
    after: ClientState | None
    auths_before: int
    auths_after: int
    back_s: float  # from the client's return until a ping through the tunnel is answered
    address: ipaddress.IPv4Interface


def gateway_has(gw: Gateway, responder_spi: str) -> bool:
    """The gateway holds this IKE SA usable (not deleting it)."""
    with gw.vici() as v:
        return any(ike.get("responder-spi") == responder_spi and ike.get("state") == "ESTABLISHED"
                   for entry in v.raw_sas(ra_gateway.conn_name(gw.cfg)) for ike in entry.values())


def wait_gone(gw: Gateway, responder_spi: str, timeout_s: float) -> float:
    t0 = time.monotonic()
    while gateway_has(gw, responder_spi):
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"{gw.cfg.name} still holds IKE SA {responder_spi} after {timeout_s}s")
        time.sleep(0.25)
    return time.monotonic() - t0


def scenario(lab: RaLab, gw: Gateway, c: RemoteClient, i: int, k: int, strategy: str, case: str) -> Outcome:
    target = lab.host_ip(k)
    before = c.connect()
    assert c.ping(target, count=2)[1] == 2, f"{c.cfg.name}: no traffic right after connecting"
    auths = c.ike_auths()
    if case == "outage":
        c.link_down()
        time.sleep(AWAY_S)
        c.link_up()
    elif case == "sleep":
        c.sleep()
        time.sleep(AWAY_S)
        c.wake()
    elif case == "move":
        c.move(lab.client_address(i, MOVE_NET), lab.router(MOVE_NET))
    else:
        if strategy == "established":  # present beyond the 6 s budget
            c.ping(target, count=16, interval=0.5)
        elif strategy == "data":  # ~2 x 120 x 1228 bytes, beyond the 200 kB budget
            c.ping(target, count=120, interval=0.01, size=1200)
        c.link_down()
        # The lifetime is over when the gateway has dropped the SA: clocked at lifetime +
        # over_time, the others once the agent saw the client absent with its budget spent.
        wait_gone(gw, before.responder_spi, 40)
        c.link_up()
    t0 = time.monotonic()
    c.wait_traffic(target, FULL_EXCHANGE_TIMEOUT_S if case == "after" else RESUME_TIMEOUT_S)
    back = time.monotonic() - t0
    return Outcome(before, c.state(), auths, c.ike_auths(), back, c.address)


class AgentsThread:
    """The gateways' agents and a stand-in controller on an event loop of their own."""

    def __init__(self, agents: list[Agent], port: int) -> None:
        self.agents, self.port = agents, port
        self.collector = Collector()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.tasks: list[asyncio.Task[None]] = []
        self.server: asyncio.Server | None = None

    def start(self) -> None:
        self.thread.start()

        async def go() -> None:
            self.server = await asyncio.start_server(self.collector.handle, "127.0.0.1", self.port)
            self.tasks = [asyncio.create_task(a.report_loop()) for a in self.agents]

        asyncio.run_coroutine_threadsafe(go(), self.loop).result(10)

    def stop(self) -> None:
        async def halt() -> None:
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            for a in self.agents:
                await a.aclose()
            if self.server is not None:
                self.server.close()

        asyncio.run_coroutine_threadsafe(halt(), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def reports(self, gateway: str) -> list[GatewayReport]:
        return [GatewayReport.model_validate(b) for p, b in list(self.collector.posts)
                if p == f"/api/v1/gateways/{gateway}/report"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Campaign:
    lab: RaLab
    gws: list[Gateway]
    outcomes: dict[tuple[str, str], Outcome]
    final: dict[tuple[str, str], ClientState | None]  # each client's SA when the last report was taken
    reports: dict[str, list[GatewayReport]]
    sessions: dict[str, list[SessionRecord]]


@pytest.fixture(scope="module")
def campaign() -> Iterator[Campaign]:
    require_root_strongswan()
    lab = RaLab("rc", [LabGateway(ipaddress.IPv4Address(f"203.0.113.{k + 1}"), {"caching": POLICIES[s]})
                       for k, s in enumerate(STRATEGIES)],
                clients=len(STRATEGIES) * len(CASES), state_dir=Path("/run/sgw-ra-rc"), client_dpd_s=3)
    lab.create()
    port = free_port()
    ctl = {"url": f"http://127.0.0.1:{port}", "token": "ra-campaign-token", "report_interval_ms": 500}
    gws = [Gateway(lab.gateway_config(k, controller=ctl), print) for k in range(len(STRATEGIES))]
    clients: list[RemoteClient] = []
    agents: AgentsThread | None = None
    try:
        for gw in gws:
            gw.cfg.run_dir.joinpath("ra-sessions.jsonl").unlink(missing_ok=True)
            gw.up()
        agents = AgentsThread([Agent(gw.cfg, heartbeat="http") for gw in gws], port)
        agents.start()
        jobs = []
        for k, strategy in enumerate(STRATEGIES):
            for j, case in enumerate(CASES):
                i = k * len(CASES) + j
                c = RemoteClient(lab.client_config(i, k))
                c.start()
                clients.append(c)
                jobs.append((strategy, case, i, k, c))
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = {(s, case): pool.submit(scenario, lab, gws[k], c, i, k, s, case) for s, case, i, k, c in jobs}
            outcomes = {key: f.result() for key, f in futures.items()}
        final = {(s, case): c.state() for s, case, _i, _k, c in jobs}
        time.sleep(1.5)  # a last report with every client where it ended up
        sessions = {}
        for gw in gws:
            path = gw.cfg.run_dir / "ra-sessions.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            sessions[gw.cfg.name] = [SessionRecord.model_validate(json.loads(line)) for line in lines]
        yield Campaign(lab, gws, outcomes, final, {gw.cfg.name: agents.reports(gw.cfg.name) for gw in gws}, sessions)
    finally:
        if agents is not None:
            agents.stop()
        for c in clients:
            c.stop()
        for gw in gws:
            gw.down()
        lab.destroy()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_resume_within_and_full_exchange_after_the_lifetime(campaign: Campaign, strategy: str) -> None:
    k = STRATEGIES.index(strategy)
    public = str(campaign.lab.gateways[k].public)
    for case in ("outage", "sleep", "move"):
        o = campaign.outcomes[(strategy, case)]
        assert o.after is not None, f"{strategy}/{case}: no IKE SA after coming back"
        assert (o.after.initiator_spi, o.after.responder_spi) == (o.before.initiator_spi, o.before.responder_spi), \
            f"{strategy}/{case}: a new IKE SA instead of the cached one"
        assert o.auths_before == 1 and o.auths_after == 1, f"{strategy}/{case}: IKE_AUTHs {o.auths_after}"
        assert o.after.remote == public, f"{strategy}/{case}: the SA left IP_P for {o.after.remote}"
        assert o.after.vip == o.before.vip
    moved = campaign.outcomes[(strategy, "move")]
    assert moved.after is not None and moved.after.local == str(moved.address.ip) and moved.address.ip in MOVE_NET
    late = campaign.outcomes[(strategy, "after")]
    assert late.after is not None and late.auths_after >= 2, f"{strategy}/after: no new IKE_AUTH ({late.auths_after})"
    assert late.after.responder_spi != late.before.responder_spi
    # The gateway's session log holds the ended session, with why it ended.
    name = campaign.gws[k].cfg.name
    ended = [r for r in campaign.sessions[name] if r.responder_spi == late.before.responder_spi]
    assert len(ended) == 1, campaign.sessions[name]
    if strategy == "clocked":
        assert ended[0].end_reason == "deleted"
        assert 20 <= ended[0].ended_at - ended[0].established_at <= 20 + 2 + 3
    else:
        assert ended[0].end_reason.startswith("evicted:"), ended[0].end_reason
    if strategy == "data":
        assert ended[0].bytes_in + ended[0].bytes_out >= 200_000
    if strategy == "established":
        assert ended[0].present_s >= 6
    print(f"{strategy}: back after outage {campaign.outcomes[(strategy, 'outage')].back_s:.1f}s, "
          f"sleep {campaign.outcomes[(strategy, 'sleep')].back_s:.1f}s, move {moved.back_s:.1f}s; "
          f"after the lifetime {late.back_s:.1f}s (full exchange)")


def test_agents_report_their_clients(campaign: Campaign) -> None:
    for k, strategy in enumerate(STRATEGIES):
        gw = campaign.gws[k]
        reports = campaign.reports[gw.cfg.name]
        assert reports, f"{gw.cfg.name}: no report reached the controller"
        last = reports[-1]
        assert last.remote_access is not None and last.remote_access.caching == strategy
        assert str(last.remote_access.public_address) == str(campaign.lab.gateways[k].public)
        assert last.clients is not None
        # By identity: the clocked clients have reauthenticated (new SPIs) by the last report.
        listed = {c.identity: c for c in last.clients}
        for j, case in enumerate(CASES):
            o = campaign.outcomes[(strategy, case)]
            ident = f"{campaign.lab.client_name(k * len(CASES) + j)}.sgw.test"
            assert ident in listed, f"{strategy}/{case}: {ident} missing in the report ({sorted(listed)})"
            c, now = listed[ident], campaign.final[(strategy, case)]
            assert now is not None and str(c.remote_host) == str(o.address.ip), "the report must follow MOBIKE"
            # Not always the VIP it had: a reauthentication from a MOBIKE-moved address gets a new
            # lease (charon's pool reassigns an online lease only to the same outer address).
            assert [str(v) for v in c.vips] == [now.vip] and c.responder_spi == now.responder_spi
            assert c.responder_spi[:2] == f"{k + 1:02x}", "IKE SPI label missing"
