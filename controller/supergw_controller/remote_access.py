"""Remote access in the core: gateways' reports and verdicts -> the outside switch and the LAN's pools.

| input | what follows |
|---|---|
| a gateway's report (`clients`, `remote_access`) | `clients.ClientBook` updates; pins, labels, ranges (outside) and pools (LAN) are synced |
| a liveness transition | a dead gateway's pins go (its clients reconnect and land by hash on live gateways) |
| an operator's drain | the drained gateway's pins go; once the outside sends it no new client (no bucket, no pin), its agent is told to redirect its clients to IP_P (`orders`, RFC 5685) |
| a LAN bucket move (placement) | the outside's bucket table follows: moves steer new clients only |
| the outside switch becomes primary | `OutsideSouthbound.reconcile` with the book's tables and the LAN's assignment |

One task (`_sync_loop`) writes, woken by any of these, so writes never interleave and a burst
of reports costs one diff. A failed write is retried half a second later; a periodic wake-up
catches anything a failed write left behind. Every pin written is recorded in the event log
(`client_pin` events, one per gateway pair and reason per sync: a burst of reports costs one
event, not one per client).

**Redirect on drain (RFC 5685).** Order matters, so that no client is sent back to the
drained gateway or left without traffic: (1) placement moves the drained gateway's buckets
(the outside follows) and this writer removes its pins — its clients' IKE and ESP still
reach it by SPI label and range, so their SAs keep working; (2) only when the outside
switch holds neither a bucket nor a pin for it does `orders` tell its agent (in the answer
to its next report) to redirect every client to IP_P; (3) each client builds a new IKE SA
to IP_P (make-before-break: its old SA carries its traffic until the new one is up), whose
IKE_SA_INIT the outside hashes to a live gateway, and deletes the old one; (4) the new
gateway reports it and it is pinned there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from supergw_controller.clients import ClientBook
from supergw_controller.config import Config
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import Transition
from supergw_controller.southbound.domain import RaTables
from supergw_controller.southbound.outside import OutsideSouthbound
from supergw_controller.southbound.switch import SessionLike, Southbound
from supergw_controller.tasks import run_together
from supergw_proto.api import ClientView, RemoteAccessStatus
from supergw_proto.reports import AgentOrders, ClientSession, GatewayReport

log = logging.getLogger(__name__)

RETRY_S = 0.5
RESYNC_S = 5.0


class RemoteAccess:
    def __init__(
        self,
        config: Config,
        lan: Southbound,
        *,
        outside_session: SessionLike | None = None,
        drained: Callable[[], Collection[str]] = frozenset,
        events: EventLog | None = None,
    ) -> None:
        ra = config.remote_access
        if ra is None:
            raise ValueError("no remote_access section")
        self.book = ClientBook([g.name for g in config.gateways], ra.public_ip, pins=ra.pins)
        self._lan = lan
        self._public_ip = str(ra.public_ip)
        self._redirect_orders = AgentOrders(redirect_to=ra.public_ip)
        self._drained = drained
        self._events = events
        self._redirecting: set[str] = set()  # drained gateways whose agents are told to redirect
        self._held_back: set[str] = set()  # drained gateways that still get new clients (said once)
        self.outside = OutsideSouthbound(
            config, self.book.wanted, lambda: lan.assignment, session=outside_session, on_ready=self.kick
        )
        self._wake = asyncio.Event()
        self._pools_loaded = False
        self.syncs_total = 0
        self.sync_errors_total = 0
        self.pins_installed_total = 0
        self.pins_removed_total = 0

    # ------------------------------------------------------------------ inputs
    def kick(self) -> None:
        self._wake.set()

    def report(self, report: GatewayReport) -> None:
        self.book.report(report)
        self.kick()

    def on_liveness(self, transitions: Sequence[Transition]) -> None:
        for t in transitions:
            self.book.set_alive(t.gateway, not t.died)
        if transitions:
            self.kick()

    def lan_serving(self) -> None:
        """The LAN switch was (re)reconciled: read its pools again before writing them."""
        self._pools_loaded = False
        self.kick()

    # ------------------------------------------------------------------ views
    def orders(self, gateway: str) -> AgentOrders:
        """What the agent of `gateway` is asked now (the answer to its report says it)."""
        return self._redirect_orders if gateway in self._redirecting else AgentOrders()

    def clients(self) -> dict[str, list[ClientSession]]:
        return {name: self.book.clients(name) for name in self.outside.targets}

    def client_views(self) -> list[ClientView]:
        pins = self.pins
        return [
            ClientView(
                gateway=gw,
                identity=c.identity,
                remote_host=str(c.remote_host),
                remote_port=c.remote_port,
                vips=[str(v) for v in c.vips],
                established_at=c.established_at,
                present=c.present,
                bytes_in=c.bytes_in,
                bytes_out=c.bytes_out,
                pinned=pins.get(str(c.remote_host)) == gw,
            )
            for gw, sessions in self.clients().items()
            for c in sessions
        ]

    def status_view(self) -> RemoteAccessStatus:
        out = self.outside
        refused = {gw: why for gw in out.targets if (why := self.book.refused(gw)) is not None}
        return RemoteAccessStatus(
            public_ip=self._public_ip,
            outside_address=out.address,
            outside_role=out.role.value,
            outside_ready=out.ready.is_set(),
            clients=sum(len(c) for c in self.clients().values()),
            pins=len(self.pins),
            pins_installed_total=self.pins_installed_total,
            pins_removed_total=self.pins_removed_total,
            sync_errors_total=self.sync_errors_total,
            pins_refused=out.pins_refused,
            refused=refused,
            redirecting=sorted(self._redirecting),
        )

    @property
    def pins(self) -> Mapping[str, str]:
        """client address -> gateway, as the outside switch holds them."""
        return self.outside.held.pins

    # ------------------------------------------------------------------ the writer
    async def run(self) -> None:
        await run_together({"p4runtime-outside": self.outside.run(), "remote-access-sync": self._sync_loop()})

    async def _sync_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), RESYNC_S)
            self._wake.clear()
            try:
                await self.sync()
            except SwitchUnavailable as exc:
                self.sync_errors_total += 1
                log.warning("remote-access sync failed, retrying in %.1fs: %s", RETRY_S, exc)
                await asyncio.sleep(RETRY_S)
                self._wake.set()
            except Exception:
                self.sync_errors_total += 1
                log.exception("remote-access sync failed")
                await asyncio.sleep(RETRY_S)

    async def sync(self) -> None:
        """Bring both switches in line with the book and the LAN's buckets (the difference only)."""
        self.syncs_total += 1
        out = self.outside
        self.book.set_drained(self._drained())
        if self._lan.primary and not self._pools_loaded:
            await self._lan.read_pools()
            self._pools_loaded = True
        held = RaTables(dict(out.held.pins), dict(out.held.labels), dict(out.held.ranges), dict(self._lan.pools))
        wanted = self.book.wanted(held)
        if out.ready.is_set():
            moves = {b: gw for b, gw in self._lan.assignment.items() if out.assignment.get(b) != gw}
            if moves:
                await out.set_buckets(moves)
            before = out.held.pins
            if await out.set_tables(wanted):
                changes = self.book.pin_changes(before, out.held.pins)  # as written: a full table refuses some
                added = sum(1 for c in changes if c.dst is not None)
                removed = sum(1 for c in changes if c.dst is None)
                self.pins_installed_total += added
                self.pins_removed_total += removed
                if changes:
                    log.info("client pins: +%d -%d, %d in all", added, removed, len(out.held.pins))
                    if self._events is not None:
                        await self._events.record_pins(changes)
        self._update_redirects()
        if self._lan.primary and self._pools_loaded:
            await self._lan.set_pools(wanted.pools)

    def _update_redirects(self) -> None:
        """Drained gateways the outside no longer sends new clients to (no bucket, no pin):
        their agents may redirect their clients now; before that a redirected client could
        land on the drained gateway again."""
        out = self.outside
        now: set[str] = set()
        if out.ready.is_set():
            dispatched = set(out.assignment.values()) | set(out.held.pins.values())
            for gw in self._drained():
                if gw not in out.targets:
                    continue
                if gw not in dispatched:
                    now.add(gw)
                elif gw not in self._held_back:
                    self._held_back.add(gw)
                    held = sorted(b for b, g in out.assignment.items() if g == gw)
                    shown = ", ".join(map(str, held[:8])) + (", ..." if len(held) > 8 else "")
                    log.warning("gateway %s is drained but the outside still sends it new clients (%d buckets: %s; "
                                "pinned by an operator, or no other gateway alive?): its clients are redirected once "
                                "none is left", gw, len(held), shown)
        self._held_back &= set(self._drained()) - now
        for gw in sorted(now - self._redirecting):
            n = len(self.book.clients(gw))
            log.info("gateway %s is drained and gets no new clients: its agent redirects its %d clients to %s",
                     gw, n, self._public_ip)
            if self._events is not None:
                self._events.note("gateway", "redirect", f"{gw}: drained, its {n} clients redirected to {self._public_ip}")
        for gw in sorted(self._redirecting - now):
            log.info("gateway %s: no longer redirecting its clients", gw)
        self._redirecting = now
