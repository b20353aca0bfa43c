"""Remote access in the core: gateways' reports and verdicts -> the outside switch and the LAN's pools.

| input | what follows |
|---|---|
| a gateway's report (`clients`, `remote_access`) | `clients.ClientBook` updates; pins, labels, ranges (outside) and pools (LAN) are synced |
| a liveness transition | a dead gateway is taken over by its backup when that one holds its state (`takeover.py`: fence, steer, order, each awaited); else its pins go (its clients reconnect and land by hash on live gateways) |
| an operator's drain | the drained gateway's pins go; once the outside sends it no new client (no bucket, no pin), its agent is told to redirect its clients to IP_P (`orders`, RFC 5685) |
| a LAN bucket move (placement) | the outside's bucket table follows: moves steer new clients only |
| the outside switch becomes primary | `OutsideSouthbound.reconcile` with the book's tables and the LAN's assignment |
| any of these | every gateway's replication orders (`replication_orders.py`): who backs up whom, who takes over whom, who is fenced; one generation bumped on any change, said in the answer to each report and by the long-poll |

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

**Takeover (issue 27).** Each sync writes, in this order: the fences (`set_fenced` on both
switches: a taken-over gateway's ports lose their port roles), the outside's tables and the
LAN's pools (the book steers a taken-over gateway's label, ranges, pool and clients to its
holder), and then the orders (`OrdersBoard.publish`): a holder is told to take over only once
the fence and its steering are written. A verdict runs that sync at once and records the
time of each step in the `takeover` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from supergw_controller.clients import MAX_POOL_ENTRIES, ClientBook
from supergw_controller.config import Config
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import Transition
from supergw_controller.intent_store import Intent
from supergw_controller.replication_orders import OrdersBoard, ring_orders
from supergw_controller.southbound.domain import RaTables
from supergw_controller.southbound.outside import OutsideSouthbound
from supergw_controller.southbound.switch import SessionLike, Southbound
from supergw_controller.takeover import Takeover
from supergw_controller.tasks import run_together
from supergw_proto.api import ClientView, RemoteAccessStatus, ReplicationGatewayView, ReplicationStatus
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
        takeover: Takeover | None = None,
        board: OrdersBoard | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        ra = config.remote_access
        if ra is None:
            raise ValueError("no remote_access section")
        self.book = ClientBook([g.name for g in config.gateways], ra.public_ip, pins=ra.pins)
        self.takeover = takeover if takeover is not None and takeover.enabled else None
        self.board = board if board is not None else OrdersBoard(0)
        self._clock = clock
        self._lock = asyncio.Lock()  # one sync at a time: the loop's and a verdict's
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
        self._routes_missing = 0  # clients away from their pool's gateway without a /32 (said once per change)
        self.syncs_total = 0
        self.sync_errors_total = 0
        self.pins_installed_total = 0
        self.pins_removed_total = 0

    # ------------------------------------------------------------------ inputs
    def kick(self) -> None:
        self._wake.set()

    def report(self, report: GatewayReport) -> None:
        self.book.report(report)
        self.publish_orders()  # a new replication endpoint re-links the ring at once
        self.kick()

    async def load(self, intent: Intent | None) -> None:
        """At start, before the switches are reconciled: the takeovers the store kept (their
        fences, steering and orders go on; a fenced port's role is never written back)."""
        tk = self.takeover
        if tk is None:
            return
        tk.load(intent)
        for v in tk.records:
            info = tk.info(v)
            if info is not None:
                self.book.restore(v, info)
        self._steer()
        fenced = tk.fenced()
        await self._lan.set_fenced(fenced)
        await self.outside.set_fenced(fenced)

    async def on_liveness(self, transitions: Sequence[Transition]) -> None:
        """Verdicts (after placement's failover): a dead gateway whose backup holds its state
        is taken over now (record, fence, steer, order: `sync`); else its pins go."""
        if not transitions:
            return
        for t in transitions:
            self.book.set_alive(t.gateway, not t.died)
        tk = self.takeover
        begun = False
        if tk is not None:
            dead = self.book.dead
            for t in transitions:
                if t.died:
                    clients = len(self.book.last_clients(t.gateway))
                    begun |= await tk.on_death(t.gateway, dead, self.book.info(t.gateway), clients,
                                               self.board.generation + 1)
        if begun:
            try:
                await self.sync()
            except SwitchUnavailable as exc:
                self.sync_errors_total += 1
                log.error("takeover writes failed, the remote-access sync retries them: %s", exc)
            except Exception:
                self.sync_errors_total += 1
                log.exception("takeover sync failed, the remote-access sync retries it")
        self.kick()

    def lan_serving(self) -> None:
        """The LAN switch was (re)reconciled: read its pools again before writing them."""
        self._pools_loaded = False
        self.kick()

    # ------------------------------------------------------------------ views
    def orders(self, gateway: str) -> AgentOrders:
        """What the agent of `gateway` is asked now (the answer to its report and the
        long-poll say it): redirect its clients (drained), and its replication orders."""
        return AgentOrders(
            redirect_to=self._redirect_orders.redirect_to if gateway in self._redirecting else None,
            replication=self.board.orders(gateway) if self.takeover is not None else None,
        )

    def publish_orders(self) -> None:
        """Every gateway's replication orders from what is known now (a new generation when
        any changed). Called after each sync and each report."""
        if self.takeover is not None:
            self.board.publish(ring_orders(self.takeover.ring_input(self.book.dead)))

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
            refused=refused,
            redirecting=sorted(self._redirecting),
        )

    def replication_view(self) -> ReplicationStatus:
        """Per gateway: its orders in force and what its agent reports of its replication."""
        tk = self.takeover
        states = {} if tk is None else tk.states()
        holders = {} if tk is None else tk.holders()
        fenced = set() if tk is None else tk.fenced()
        gateways = []
        for gw in self.outside.targets:
            o = self.board.orders(gw) if tk is not None else None
            st = states.get(gw)
            gateways.append(ReplicationGatewayView(
                gateway=gw,
                backup=None if o is None or o.backup is None else o.backup.name,
                protects=None if o is None else o.protects,
                endpoint=None if st is None else st.endpoint,
                applied_generation=None if st is None else st.generation,
                backup_connected=None if st is None else st.backup_connected,
                own_sas=None if st is None else st.own_sas,
                replicated_sas=None if st is None else st.replicated_sas,
                held_sas=None if st is None else st.held_sas,
                lag_ms_last=None if st is None else st.lag_ms_last,
                lag_ms_max=None if st is None else st.lag_ms_max,
                fenced=gw in fenced,
                taken_over_by=holders.get(gw),
                taking_over=[] if o is None else list(o.take_over),
                foreign_sas={} if st is None else dict(st.foreign_sas),
                error=None if st is None else st.error,
            ))
        return ReplicationStatus(
            takeover=tk is not None,
            generation=self.board.generation,
            takeovers_total=0 if self._events is None else self._events.takeovers_total,
            gateways=gateways,
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
        """Bring both switches in line with the book and the LAN's buckets (the difference
        only): fences first, then the tables, then the replication orders."""
        async with self._lock:
            await self._sync()

    def _steer(self) -> None:
        tk = self.takeover
        if tk is not None:
            self.book.set_takeovers(tk.holders(), {v for v in tk.records if v not in self.book.dead})

    async def _sync(self) -> None:
        self.syncs_total += 1
        out = self.outside
        self.book.set_drained(self._drained())
        tk = self.takeover
        if tk is not None:
            await tk.review(self.book.dead)
            self._steer()
        t0 = self._clock()
        if tk is not None:
            fenced = tk.fenced()
            await self._lan.set_fenced(fenced)
            await out.set_fenced(fenced)
        t1 = self._clock()
        if self._lan.primary and not self._pools_loaded:
            await self._lan.read_pools()
            self._pools_loaded = True
        held = RaTables(dict(out.held.pins), dict(out.held.labels), dict(out.held.ranges), dict(self._lan.pools))
        wanted = self.book.wanted(held)
        self._say_routes_missing(self.book.routes_missing(wanted.pools))
        if out.ready.is_set():
            moves = {b: gw for b, gw in self._lan.assignment.items() if out.assignment.get(b) != gw}
            if moves:
                await out.set_buckets(moves)
            before = out.held.pins
            if await out.set_tables(wanted):
                changes = self.book.pin_changes(before, wanted.pins)
                added = sum(1 for c in changes if c.dst is not None)
                removed = sum(1 for c in changes if c.dst is None)
                self.pins_installed_total += added
                self.pins_removed_total += removed
                if changes:
                    log.info("client pins: +%d -%d, %d in all", added, removed, len(wanted.pins))
                    if self._events is not None:
                        await self._events.record_pins(changes)
        self._update_redirects()
        if self._lan.primary and self._pools_loaded:
            await self._lan.set_pools(wanted.pools)
        if tk is None:
            return
        t2 = self._clock()
        # Ordered only once its fence and its steering are on both switches.
        if out.ready.is_set() and self._lan.primary and self._pools_loaded:
            tk.mark_steered()
        self.publish_orders()
        t3 = self._clock()
        await tk.ordered((t1 - t0) * 1000.0, (t2 - t1) * 1000.0, (t3 - t2) * 1000.0, self.board.generation)

    def _say_routes_missing(self, missing: int) -> None:
        if missing != self._routes_missing and missing:
            log.error("client_pools is full (%d entries): %d clients away from their pool's gateway (taken over) get no "
                      "/32 route: their LAN return traffic goes to the pool's gateway", MAX_POOL_ENTRIES, missing)
        self._routes_missing = missing

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
