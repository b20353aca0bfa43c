"""The agent's state replication: this gateway's remote-access SAs out to its backup, the
protected gateway's in, and the takeover (docs/DESIGN.md, "Stateful takeover").

Inputs: sync messages from this gateway's charon (`CharonLink`), state from the protected
gateway's agent (`HolderServer`), and the controller's `ReplicationOrders` (a level: who is
this gateway's backup, whom it protects, whom it takes over, whether it is fenced). Outputs:
sync messages to the backup's agent (`BackupLink`), injections into this charon, VICI rekeys,
and `ReplicationState` for the reports.

Takeover of `v` (ordered by the controller, after it fenced `v` and steered `v`'s traffic
here): the connection from `v` is cut first (a thawed `v` must not delete what is taken
over), `v`'s lineages become this gateway's own (and are replayed to its backup), charon is
told to deactivate and activate segment 1 (every PASSIVE IKE SA becomes ESTABLISHED), and the
taken-over SAs are rekeyed: CHILD SAs first (new outbound sequence numbers: the client's
replay window would drop the old ones; new inbound SPIs in this gateway's range), then the
IKE SA (new SPIs with this gateway's label). With a credential cache only present clients
are rekeyed (an exchange toward an absent client would end its cached SA); an absent one is
rekeyed when its ESP comes back. Until rekeyed, an SA counts in `foreign_sas`, so the
controller keeps steering `v`'s label and range here.

Fenced (this gateway was judged dead and taken over, and came back): replication stops, every
remote-access SA is ended (forced; the DELETE it sends is dropped by the switch's fence) and
every held copy is dropped; then `fence_cleared` says so.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from supergw_gateway.statesync import hamsg
from supergw_gateway.statesync.book import SaBook
from supergw_gateway.statesync.hamsg import HaMessageError, MsgType
from supergw_gateway.statesync.links import BackupLink, CharonLink, HolderServer, LinkStats, TlsFiles
from supergw_gateway.statesync.ownership import SpiOwnership
from supergw_gateway.vici_client import ViciClient
from supergw_proto.replication import ReplicationOrders, ReplicationState

log = logging.getLogger(__name__)

REKEY_RETRY_S = 10.0  # a rekey asked for and not done yet is asked again after this long
FAST_SWEEP_S = (0.1, 3.0)  # right after a takeover: sweep this often, for this long


@dataclass(frozen=True)
class ReplicationSettings:
    name: str  # this gateway
    netns: str  # the gateway's namespace: charon's sync socket is reached from there
    listen: str  # the replication listener, host:port
    tls: TlsFiles
    agent_address: str  # this agent's end of charon's sync socket
    charon_address: str  # charon's end
    conn: str  # the remote-access connection's name (the same on every gateway)
    ours: SpiOwnership
    rekey_absent: bool  # False with a credential cache: never start an exchange toward an absent client


@dataclass
class _Taken:
    origin: str
    sas: int
    ids: set[tuple[str, str]] = field(default_factory=set)  # (initiator SPI, responder SPI), hex as VICI


class Replicator:
    def __init__(self, s: ReplicationSettings, vici: Callable[[], ViciClient],
                 on_change: Callable[[], None] = lambda: None) -> None:
        self.s = s
        self._vici = vici
        self._on_change = on_change  # a takeover made progress: report now, the controller waits for it
        self.own = SaBook(s.conn)
        self.held = SaBook(s.conn)
        self.held_origin: str | None = None
        self.out_stats, self.in_stats = LinkStats(), LinkStats()
        self.backup = BackupLink(s.name, s.tls.client(), self._replay_own, self.out_stats)
        self.server = HolderServer(s.tls.server(), self._held_sync, self._held_reset, self.in_stats)
        self.charon: CharonLink | None = None
        self.endpoint: str | None = None
        self.orders: ReplicationOrders | None = None
        self.taken: dict[str, _Taken] = {}
        self.foreign: dict[str, int] = {}
        self.unrenewed: dict[str, int] = {}
        self.fence_cleared: int | None = None
        self.parse_errors = 0
        self.error: str | None = None
        self._rekeyed: dict[int, float] = {}  # charon unique id (IKE or CHILD) -> when asked
        self._lock = threading.Lock()  # the sweep runs in a thread; books are touched in the loop only
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.charon = await CharonLink.open(self.s.netns, self.s.agent_address, self.s.charon_address,
                                            self._from_charon)
        self.endpoint = await self.server.start(self.s.listen)
        log.warning("replication: listening on %s, charon's sync socket %s:%d <-> %s:%d", self.endpoint,
                    self.s.charon_address, 4510, self.s.agent_address, 4510)

    async def close(self) -> None:
        await self.backup.close()
        await self.server.close()
        if self.charon is not None:
            self.charon.close()
        for t in list(self._tasks):
            t.cancel()

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.error = f"{task.get_name()}: {task.exception()}"
            log.error("replication: %s failed: %s", task.get_name(), task.exception())

    # ------------------------------------------------------------------ state flows
    def _from_charon(self, raw: bytes) -> None:
        arrived = time.monotonic()
        try:
            msg = hamsg.parse(raw)
        except HaMessageError as exc:
            self.parse_errors += 1
            log.error("replication: unreadable sync message from charon (%s): not relayed", exc)
            return
        for m in self.own.take(msg).relay:
            self.backup.send(m.raw, arrived)

    def _replay_own(self) -> list[bytes]:
        return [m.raw for m in self.own.replay()]

    async def _held_sync(self, origin: str, raw: bytes) -> None:
        try:
            msg = hamsg.parse(raw)
        except HaMessageError as exc:
            self.parse_errors += 1
            log.error("replication: unreadable sync message from %s (%s): dropped", origin, exc)
            return
        if msg.type in (MsgType.SEGMENT_DROP, MsgType.SEGMENT_TAKE, MsgType.STATUS, MsgType.RESYNC):
            log.error("replication: %s sent segment control %s: dropped", origin, msg.type.name)
            return
        self.held_origin = origin
        self.held.take(msg)
        assert self.charon is not None
        await self.charon.inject(raw)

    async def _held_reset(self, origin: str) -> None:
        await self._forget_held()
        self.held_origin = origin

    async def _forget_held(self) -> None:
        """Drop every copy held for the protected gateway (charon deletes them silently)."""
        ids = self.held.all_ids()
        self.held.clear()
        self.held_origin = None
        assert self.charon is not None
        for ike in ids:
            await self.charon.inject(hamsg.ike_delete(ike))
        if ids:
            log.info("replication: dropped %d held IKE SAs", len(ids))

    # ------------------------------------------------------------------ orders
    def apply(self, orders: ReplicationOrders) -> None:
        """The controller's orders now (a level: the same orders twice change nothing)."""
        if orders == self.orders:
            return
        before, self.orders = self.orders, orders
        log.warning("replication orders (generation %d): backup %s, protects %s%s%s", orders.generation,
                    orders.backup.name if orders.backup else "none", orders.protects or "nobody",
                    f", take over {', '.join(orders.take_over)}" if orders.take_over else "",
                    ", FENCED" if orders.fenced else "")
        if orders.fenced:
            self.backup.retarget(None)
            self.server.set_protects(None)
            if before is not None and before.fenced and self.fence_cleared is not None:
                self.fence_cleared = orders.generation  # already clean: only the number moved
            else:
                self._spawn(self._clear_fence(orders.generation), "fence-cleanup")
            return
        for v in orders.take_over:
            if v not in self.taken:
                self._take_over(v)
        if orders.protects != self.server.protects:
            if self.held_origin is not None and self.held_origin not in orders.take_over:
                self._spawn(self._forget_held(), "forget-held")
            self.server.set_protects(orders.protects)
        self.backup.retarget((orders.backup.name, orders.backup.endpoint) if orders.backup else None)

    def _take_over(self, v: str) -> None:
        self.server.drop(v)  # first: a thawed v must never reach its copies again
        if self.held_origin != v or len(self.held) == 0:
            self.taken[v] = _Taken(v, 0)
            log.error("replication: asked to take over %s, but this gateway holds no state of it (it holds %s)", v,
                      self.held_origin or "nothing")
            return
        adopted = self.own.adopt(self.held)
        self.held_origin = None
        taken = _Taken(v, len(adopted), {(i.spi_hex(False), i.spi_hex(True)) for lin in adopted for i in lin.ids})
        self.taken[v] = taken
        # Until a sweep has looked, every adopted CHILD SA counts as not renewed.
        self.unrenewed[v] = sum(1 for lin in adopted for m in lin.messages if m.type is MsgType.CHILD_ADD)
        self.foreign[v] = len(adopted)
        for lin in adopted:  # the backup's copy of them, in order, before any later change
            for m in lin.messages:
                self.backup.send(m.raw, None)
        log.warning("replication: taking over %s: %d IKE SAs", v, len(adopted))
        self._spawn(self._activate(v), f"takeover-{v}")

    async def _activate(self, v: str) -> None:
        assert self.charon is not None
        # Deactivate first: only a flip from inactive to active turns PASSIVE SAs ESTABLISHED
        # (ha_segments.c), and a second takeover finds segment 1 active already.
        await self.charon.inject(hamsg.control(MsgType.SEGMENT_TAKE))
        await self.charon.inject(hamsg.control(MsgType.SEGMENT_DROP))
        end = time.monotonic() + FAST_SWEEP_S[1]
        while True:
            await asyncio.to_thread(self.sweep)
            self._on_change()
            if not self.foreign.get(v) or time.monotonic() > end:
                break
            await asyncio.sleep(FAST_SWEEP_S[0])

    async def _clear_fence(self, generation: int) -> None:
        await asyncio.to_thread(self._end_own_sas)
        await self._forget_held()
        self.own.clear()
        self.taken.clear()
        self.foreign.clear()
        self.fence_cleared = generation
        log.warning("replication: fenced: every remote-access SA ended and every held copy dropped (generation %d)",
                    generation)

    def _end_own_sas(self) -> None:
        with self._vici() as v:
            v.terminate(ike=self.s.conn, timeout_ms=-1, force=True)

    # ------------------------------------------------------------------ the sweep (in a thread)
    def sweep(self) -> None:
        """Rekey what a takeover left with another gateway's SPIs, and count what is left."""
        if not self.taken:
            return
        with self._lock, self._vici() as v:
            sas = [ike for entry in list(v.raw_sas(self.s.conn)) for ike in entry.values()]  # read to the end first
            foreign: dict[str, int] = {}
            unrenewed: dict[str, int] = {}
            todo: list[tuple[int | None, int | None]] = []
            for ike in sas:
                todo += self._sweep_one(ike, foreign, unrenewed)
            self.foreign, self.unrenewed = foreign, unrenewed
            now = time.monotonic()
            for ike_id, child_id in todo:
                self._rekey(v, now, ike_id=ike_id, child_id=child_id)

    def _sweep_one(self, ike: dict[str, Any], foreign: dict[str, int],
                   unrenewed: dict[str, int]) -> list[tuple[int | None, int | None]]:
        """Count one IKE SA if it still has another gateway's SPIs; the rekeys it needs now,
        as (IKE SA id, CHILD SA id) with one of them None."""
        spis = (str(ike.get("initiator-spi", "")), str(ike.get("responder-spi", "")))
        if ike.get("state") == "PASSIVE":
            taker = next((t.origin for t in self.taken.values() if spis in t.ids), None)
            if taker is not None:  # taken over, and charon has not activated it yet
                foreign[taker] = foreign.get(taker, 0) + 1
                unrenewed[taker] = unrenewed.get(taker, 0) + len(ike.get("child-sas", {}))
            return []  # else a held copy of the protected gateway's
        we_initiated = ike.get("initiator") == "yes"
        local_spi = spis[0] if we_initiated else spis[1]
        children = list(ike.get("child-sas", {}).values())
        ike_foreign = not self.s.ours.ike_is_ours(local_spi)
        esp_foreign = self.s.ours.foreign_children(children)
        if not ike_foreign and not esp_foreign:
            return []
        origin = next((t.origin for t in self.taken.values() if spis in t.ids), None) or next(reversed(self.taken))
        foreign[origin] = foreign.get(origin, 0) + 1
        if ike.get("state") != "ESTABLISHED":
            return []
        present = any(int(c.get("bytes-in", 0)) > 0 for c in children)
        if not (self.s.rekey_absent or present):
            return []
        if esp_foreign:  # the CHILD SAs first: they carry the client's traffic
            unrenewed[origin] = unrenewed.get(origin, 0) + len(esp_foreign)
            return [(None, int(c["uniqueid"])) for c in esp_foreign if c.get("state") == "INSTALLED"]
        return [(int(ike["uniqueid"]), None)]

    def _rekey(self, v: ViciClient, now: float, ike_id: int | None = None, child_id: int | None = None) -> None:
        key = child_id if child_id is not None else -int(ike_id or 0)
        if now - self._rekeyed.get(key, -REKEY_RETRY_S) < REKEY_RETRY_S:
            return
        self._rekeyed[key] = now
        try:
            v.rekey_sa(ike_id=ike_id, child_id=child_id)
        except Exception as exc:  # a CHILD SA may go away meanwhile: the next sweep sees
            log.warning("replication: rekey of %s %d failed: %s", "CHILD SA" if child_id else "IKE SA",
                        child_id or ike_id, exc)

    # ------------------------------------------------------------------ report
    def state(self) -> ReplicationState:
        st = self.out_stats
        own = len(self.own)
        outstanding = self.backup.outstanding if self.backup.connected else own
        lag_max, st.lag_ms_max = st.lag_ms_max, None  # per report
        errors = [e for e in (self.error, st.last_error, self.in_stats.last_error,
                              self.charon.last_error if self.charon else None) if e]
        return ReplicationState(
            endpoint=self.endpoint, generation=self.orders.generation if self.orders else -1,
            backup=self.backup.peer[0] if self.backup.peer else None, backup_connected=self.backup.connected,
            protects=self.server.protects, own_sas=own, replicated_sas=max(0, own - outstanding),
            held_sas=len(self.held), messages_out=st.messages_out, bytes_out=st.bytes_out,
            messages_in=self.in_stats.messages_in, bytes_in=self.in_stats.bytes_in, lag_ms_last=st.lag_ms_last,
            lag_ms_max=lag_max, taken_over={t.origin: t.sas for t in self.taken.values()},
            foreign_sas=dict(self.foreign), unrenewed_children=dict(self.unrenewed), fence_cleared=self.fence_cleared,
            error="; ".join(errors)[:512] if errors else None,
        )

