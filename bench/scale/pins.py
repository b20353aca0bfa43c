"""Remote-access clients at scale: their pins on the outside switch.

The remote-access emulation (topologies/remote-access.yaml: real gateways with real tunnels,
the real outside switch and controller) is booted with no strongSwan client. One charon per
client does not scale on this machine (each is a namespace and a process; an IKE handshake
each), so the clients come from a cheaper generator: the gateways' agents are replaced by
stand-ins that speak for them exactly as they do over REST — each gateway's own agent token,
a heartbeat every 100 ms, and every report interval the gateway's last real report (its SAs,
its remote-access claim: pool, SPI range and label) with M/N clients added (each with its own
outer address behind the clients' router, IKE SPIs under the gateway's label, an inner
address from its pool). What is not real: the clients' IKE SAs and the agents' VICI reading.
Everything after the report — the controller's client book, its pin writer, P4Runtime, the
outside switch's `client_pins` — is the shipped code.

Measured: the time from every gateway's first report listing its clients to the last pin read
on the outside switch (pins/s), a churn of a tenth of the clients (removed and added in one
report round), `GET /clients` at that size, and the table's limit: CLIENT_PINS_TABLE_SIZE
clients fit, one more shows what a user gets past it.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.probes import BenchError
from bench.scale.switchtables import Observer
from supergw_proto import p4constants as pc
from supergw_proto.reports import ClientSession, GatewayReport, Heartbeat
from supergw_proto.rest import ApiError, ControllerClient
from topologies.configs import agent_token_file
from topologies.paths import P4INFO
from topologies.poll import Timeout, wait_until
from topologies.site import Site

CLIENT_NET = ipaddress.IPv4Network("100.64.0.0/16")
HEARTBEAT_S = 0.1
REPORT_S = 0.5
REPORTS_WITHIN_S = 30.0  # from the site up to every real agent's first report (a report interval is ~1 s)


def clients_of(report: GatewayReport, index: int, count: int, first: int) -> list[ClientSession]:
    """`count` clients of gateway `index` (0-based), client numbers first.., each with its own
    outer address, IKE SPIs under the gateway's label and an inner address from its pool."""
    ra = report.remote_access
    if ra is None:
        raise BenchError(f"{report.gateway} reports no remote_access: is this the remote-access site?")
    pool = list(ipaddress.IPv4Network(ra.pool).hosts())
    out = []
    for n in range(first, first + count):
        responder = (ra.ike_spi_label & ra.ike_spi_mask) | (n & ~ra.ike_spi_mask & ((1 << 64) - 1))
        out.append(ClientSession(
            ike_id=n + 1, identity=f"rw{n}.clients.sgw.test", remote_host=CLIENT_NET.network_address + 10 + n,
            remote_port=4500, initiator_spi=f"{(0xA5 << 56) | n:016x}", responder_spi=f"{responder:016x}",
            vips=[pool[(n // 4) % len(pool)]], established_at=time.time(), bytes_in=0, bytes_out=0, present=True,
            present_s=0.0))
    return out


@dataclass
class StandIn:
    """The agents of a site's gateways, spoken for: heartbeats and reports with clients."""

    site: Site
    gateways: list[str]
    base: dict[str, GatewayReport]
    clients: dict[str, list[ClientSession]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _halt: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def set_clients(self, clients: dict[str, list[ClientSession]]) -> None:
        with self._lock:
            self.clients = clients

    def start(self) -> None:
        for g in self.gateways:
            t = threading.Thread(target=self._speak, args=(g,), name=f"stand-in-{g}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._halt.set()
        for t in self._threads:
            t.join(timeout=5)

    def _speak(self, g: str) -> None:
        token = agent_token_file(self.site.paths.config, g).read_text().strip()
        with ControllerClient(self.site.topo.api_url(None), token, timeout=2) as api:
            next_report = 0.0
            while not self._halt.is_set():
                now = time.time()
                try:
                    api.heartbeat(Heartbeat(gateway=g, timestamp=now))
                    if time.monotonic() >= next_report:
                        with self._lock:
                            mine = list(self.clients.get(g, []))
                        api.report(self.base[g].model_copy(update={"timestamp": now, "clients": mine}))
                        next_report = time.monotonic() + REPORT_S
                except ApiError as exc:
                    self.errors.append(f"{g}: {exc}")
                self._halt.wait(HEARTBEAT_S)


@dataclass
class PinRun:
    clients: int
    seconds: float | None  # reports with the clients -> every pin read on the outside switch
    pins: int  # pins the outside switch held at the end
    sync_errors: int  # the controller's failed remote-access syncs meanwhile

    @property
    def pins_per_s(self) -> float | None:
        return None if not self.seconds else self.pins / self.seconds

    def row(self, what: str) -> dict[str, Any]:
        return {"what": what, "clients": self.clients, "pins": self.pins,
                "seconds": None if self.seconds is None else round(self.seconds, 3),
                "pins_per_s": None if self.pins_per_s is None else round(self.pins_per_s),
                "sync_errors": self.sync_errors}


def take_over(site: Site) -> StandIn:
    """Stand-ins take over from the real agents (heartbeats first, then the agents stop)."""
    api = site.api()
    names = [g.name for g in site.topo.gateways]
    base: dict[str, GatewayReport] = {}

    def reported() -> tuple[bool, str]:
        # The site is up once its gateways beat; a first report follows within a report interval.
        for g in names:
            if g not in base and (last := api.gateway(g).last_report) is not None:
                base[g] = last
        return len(base) == len(names), f"no report yet from {', '.join(g for g in names if g not in base)}"

    try:
        wait_until(reported, REPORTS_WITHIN_S, "every gateway's first report")
    except Timeout as exc:
        raise BenchError(str(exc)) from None
    stand = StandIn(site, names, base)
    stand.start()
    time.sleep(0.5)
    for g in names:
        site.kill_agent(g)
    return stand


def pin_run(site: Site, stand: StandIn, observer: Observer, clients: int, timeout: float) -> PinRun:
    """All gateways list `clients` clients between them from their next report on; until the
    outside switch holds that many pins (or no more come for 10 s)."""
    n = len(stand.gateways)
    per = [clients // n + (1 if i < clients % n else 0) for i in range(n)]
    first = [sum(per[:i]) for i in range(n)]
    errors0 = _sync_errors(site)
    wanted = {g: clients_of(stand.base[g], i, per[i], first[i]) for i, g in enumerate(stand.gateways)}
    t0 = time.monotonic()
    stand.set_clients(wanted)
    seen = 0
    last_change = t0
    while True:
        held = observer.count(pc.TABLE_CLIENT_PINS)
        now = time.monotonic()
        if held != seen:
            seen, last_change = held, now
        if held >= clients or now - last_change > 10 or now - t0 > timeout:
            break
        time.sleep(0.02)
    done = last_change - t0 if seen else None
    return PinRun(clients, done if seen >= clients else None, seen, _sync_errors(site) - errors0)


def _sync_errors(site: Site) -> int:
    ra = site.api().status().remote_access
    return 0 if ra is None else ra.sync_errors_total


def outside_observer(site: Site) -> Observer:
    ra = site.topo.remote_access
    if ra is None:
        raise BenchError(f"{site.prefix} has no outside switch (not the remote-access site)")
    return Observer(site.topo.outside_p4runtime_addr, ra.outside.device_id, P4INFO)


def clear(site: Site, stand: StandIn, observer: Observer) -> None:
    stand.set_clients({})
    try:
        wait_until(lambda: (observer.count(pc.TABLE_CLIENT_PINS) == 0, "pins left"), 60, "every pin removed")
    except Timeout as exc:
        raise BenchError(str(exc)) from None
