"""Stateful takeover of a dead gateway's remote-access SAs: the state machine and its record.

docs/DESIGN.md, "Stateful takeover of a dead gateway's remote-access SAs". A gateway `v`
judged dead is taken over when takeover is on (`remote_access.takeover`) and its backup `b`
(its ring successor among the serving gateways at the verdict, `backups.ring_backups`) said
in its last report that it holds `v`'s state (`replication.protects == v`):

| step | what | where |
|---|---|---|
| begin | the record (v -> b, the generation that fences v, v's label, range and pool) is stored first | `on_death`, the durable store |
| fence | v's port_roles entries go on the LAN and the outside switch | `RemoteAccess.sync` (`set_fenced`) |
| steer | v's IKE SPI label, ESP SPI ranges and pool, and its last clients' pins, point to b | `RemoteAccess.sync` (`ClientBook.wanted`) |
| order | b's orders say `take_over: [v]` (a new generation: its long-poll answers at once) | `RemoteAccess.sync` (`OrdersBoard`) |
| unfence | v's report says `fence_cleared >=` the generation that fenced it (v may still be judged dead: its tunnel crosses the fence): its port roles come back | `review`, then `RemoteAccess.sync` |
| release | v unfenced, and no live gateway reports SAs under v's label or range (`foreign_sas`): the record goes, v serves again | `review` |

From the verdict until its release `v` is withheld (`GatewayRegistry.set_withheld`: no
buckets, no pins, not in the ring; `/gateways` says why). The record is in the durable store
(SQLite or etcd), so a restarted controller keeps the fence (reconcile never writes a fenced
port's role back) and the steering, and orders the holder again once its steering is written.
A verdict on a gateway that has a record repeats the steps (idempotent: the same record).

Without a backup holding `v`'s state (takeover off, the backup died with it, agents that do
not replicate) nothing happens here: `v`'s pins go, as before takeover existed. An event
(`skipped`) says why when replication was in use.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from pydantic import ValidationError

from supergw_controller.backups import ring_backups
from supergw_controller.config import Config
from supergw_controller.durable import Durable
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import GatewayRegistry
from supergw_controller.intent_store import Intent, TakeoverRecord
from supergw_controller.replication_orders import RingInput
from supergw_proto.replication import ReplicationState
from supergw_proto.reports import GatewayReport, RemoteAccessInfo

log = logging.getLogger(__name__)


class TakeoverReason(StrEnum):
    """The `reason` of a `takeover` event."""

    TAKEOVER = "takeover"  # fenced, steered and ordered; the detail has the timings
    REPEATED = "repeated"  # judged dead again (or a restarted controller) with its record in force
    SKIPPED = "skipped"  # dead and not taken over: why
    UNFENCE = "unfence"  # its agent dropped its remote-access SAs: its port roles come back
    RELEASE = "release"  # no SA under its label or range left elsewhere: it serves again


@dataclass(frozen=True)
class _Begun:
    """A takeover begun and not yet ordered (for its event)."""

    started: float  # clock at the verdict's reaction
    stored_ms: float
    clients: int
    held: int | None
    reason: TakeoverReason


class Takeover:
    def __init__(
        self,
        config: Config,
        registry: GatewayRegistry,
        durable: Durable,
        events: EventLog,
        *,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
    ) -> None:
        ra = config.remote_access
        if ra is None:
            raise ValueError("no remote_access section: there is nothing to take over")
        self.enabled = ra.takeover
        self._order = [g.name for g in config.gateways]
        self._registry = registry
        self._durable = durable
        self._events = events
        self._clock = clock
        self._wall = wallclock
        self._records: dict[str, TakeoverRecord] = {}
        self._ordered: set[str] = set()  # records whose holder's orders say take_over
        self._begun: dict[str, _Begun] = {}
        self._storing: set[str] = set()  # records being stored: in force once stored (fence after the record)

    # ------------------------------------------------------------------ state
    def load(self, intent: Intent | None) -> None:
        """The records the store kept (a restart): fences and steering stay in force, and the
        holders are ordered again once the steering is written."""
        if intent is None:
            return
        for name, r in intent.takeovers.items():
            if name not in self._order or r.holder not in self._order:
                log.warning("stored takeover of %s by %s ignored: not a gateway of this config", name, r.holder)
                continue
            self._records[name] = r
            self._begun[name] = _Begun(self._clock(), 0.0, 0, None, TakeoverReason.REPEATED)
            log.warning("takeover of %s by %s kept from the store (%s)", name, r.holder,
                        "fenced" if r.fenced_generation is not None else "fence lifted")
        self._update_withheld(frozenset())

    @property
    def records(self) -> Mapping[str, TakeoverRecord]:
        return self._records

    def fenced(self) -> set[str]:
        return {v for v, r in self._records.items() if r.fenced_generation is not None}

    def info(self, gateway: str) -> RemoteAccessInfo | None:
        """A taken-over gateway's `remote_access` claim as stored (steered without its reports)."""
        r = self._records.get(gateway)
        if r is None or r.info is None:
            return None
        try:
            return RemoteAccessInfo.model_validate_json(r.info)
        except ValidationError as exc:
            log.error("stored remote_access of taken-over gateway %s is unusable, not steered until it reports: %s",
                      gateway, exc)
            return None

    def holders(self, *, ordered_only: bool = False) -> dict[str, str]:
        """Taken-over gateway -> the gateway that holds its state now: its holder, or, when
        that one was taken over in turn, whoever took that one over (the chain's end)."""
        out: dict[str, str] = {}
        for v in self._records:
            if ordered_only and v not in self._ordered:
                continue
            h, seen = self._records[v].holder, {v}
            while h in self._records and h not in seen:
                seen.add(h)
                h = self._records[h].holder
            out[v] = h
        return out

    def serving(self, dead: Collection[str]) -> set[str]:
        """Gateways that can back another up: alive (`dead` is the verdicts acted on), not
        drained, not withheld, with a replication endpoint in their last report."""
        return {
            g.name for g in self._registry.all()
            if g.name not in dead and not g.drained and g.name not in self._records
            and (rep := _replication(g.last_report)) is not None and rep.endpoint is not None
        }  # fmt: skip

    def ring_input(self, dead: Collection[str]) -> RingInput:
        states = self.states()
        # A takeover begun but not ordered yet keeps its gateway in the ring: its backup must
        # keep its copies until the order that tells it to take them over.
        pending = {v for v in set(self._records) | self._storing
                   if v not in self._ordered and (s := states.get(v)) is not None and s.endpoint is not None}
        return RingInput(
            order=self._order,
            serving=self.serving(dead) | pending,
            endpoints={n: rep.endpoint for n, rep in states.items() if rep.endpoint is not None},
            holders=self.holders(ordered_only=True),
            fenced=self.fenced(),
            replicating=set(states),
        )

    def states(self) -> dict[str, ReplicationState]:
        """Each gateway's replication state from its last report (those that report one)."""
        return {g.name: rep for g in self._registry.all() if (rep := _replication(g.last_report)) is not None}

    # ------------------------------------------------------------------ the verdict
    async def on_death(
        self, v: str, dead: Collection[str], info: RemoteAccessInfo | None, clients: int, next_generation: int
    ) -> bool:
        """`v` was judged dead: begin its takeover (the record first) when its backup holds
        its state. True: begun (`RemoteAccess.sync` fences, steers and orders next)."""
        if not self.enabled:
            return False
        started = self._clock()
        record = self._records.get(v)
        if record is None:
            holder, why = self._backup_holding(v, dead)
            if holder is None:
                if why is not None:
                    await self._events.record_takeover(TakeoverReason.SKIPPED, v, None, why)
                return False
            if info is None:
                info = self.info(v)
            record = TakeoverRecord(v, holder, next_generation, None if info is None else info.model_dump_json(),
                                    self._wall())
            reason = TakeoverReason.TAKEOVER
        else:
            if record.fenced_generation is None:  # alive again, unfenced, and dead again before its release
                record = replace(record, fenced_generation=next_generation)
            reason = TakeoverReason.REPEATED
        self._storing.add(v)
        try:
            stored_ms = await self._store(record)
        finally:
            self._storing.discard(v)
        self._records[v] = record
        held = _held_by(self.states().get(record.holder), v)
        self._begun[v] = _Begun(started, stored_ms, clients, held, reason)
        self._update_withheld(dead)
        return True

    def _backup_holding(self, v: str, dead: Collection[str]) -> tuple[str | None, str | None]:
        """(the backup that holds v's state, None) or (None, why not; None when replication is
        not in use at all, so nothing needs saying)."""
        states = self.states()
        in_use = v in states or any(s.protects == v for s in states.values())
        b = ring_backups(self._order, self.serving(dead))[v]
        if b is None:
            return None, ("no other gateway serves with a replication endpoint: its clients reconnect on their own"
                          if in_use else None)
        rep = states.get(b)
        if rep is None:
            why = f"its backup {b} reports no replication state"
        elif rep.protects != v:
            why = f"its backup {b} holds the state of {rep.protects or 'nobody'}, not of {v}"
        else:
            return b, None
        return None, (why + ": its clients reconnect on their own (pins removed)") if in_use else None

    # ------------------------------------------------------------------ after the writes
    def mark_steered(self) -> list[str]:
        """The fence and the steering of every record are written: their holders may be
        ordered now. The gateways whose takeover is ordered by this call."""
        new = [v for v in self._records if v not in self._ordered]
        self._ordered |= set(self._records)
        return new

    async def ordered(self, fence_ms: float, steer_ms: float, order_ms: float, generation: int) -> None:
        """Record the takeovers whose orders are out now (`takeover` or `repeated` events)."""
        now = self._clock()
        for v in sorted(set(self._begun) & self._ordered):
            b = self._begun.pop(v)
            record = self._records.get(v)
            if record is None:
                continue
            held = "unknown" if b.held is None else str(b.held)
            detail = (
                f"{b.clients} clients, {held} SAs held by {record.holder}; "
                f"store {b.stored_ms:.1f} ms, fence {fence_ms:.1f} ms, steer {steer_ms:.1f} ms, order {order_ms:.1f} ms, "
                f"total {(now - b.started) * 1000.0:.1f} ms (verdict -> order); generation {generation}"
            )
            await self._events.record_takeover(b.reason, v, self.holders().get(v, record.holder), detail)

    async def review(self, dead: Collection[str]) -> bool:
        """Lift fences whose agent has cleared, release gateways nobody holds SAs of any more;
        True when a record changed (orders, steering and fences follow)."""
        changed = False
        states = self.states()
        for v, r in list(self._records.items()):
            if r.fenced_generation is not None:
                # A report that cleared this fence is proof enough that v's agent is back, even
                # while v is still judged dead: its tunnel crosses the fence and comes up only
                # once the fence is lifted.
                cleared = states[v].fence_cleared if v in states else None
                fenced_at = r.fenced_generation
                if cleared is None or cleared < fenced_at:
                    continue
                r = replace(r, fenced_generation=None)
                self._records[v] = r
                await self._store(r)
                changed = True
                await self._events.record_takeover(
                    TakeoverReason.UNFENCE, v, None,
                    f"its agent dropped its remote-access SAs (fence_cleared {cleared} >= {fenced_at}): "
                    f"port roles restored on the LAN and the outside switch",
                )
            if v in dead or self.foreign(v, dead):
                continue
            del self._records[v]
            self._ordered.discard(v)
            self._begun.pop(v, None)
            await self._drop(v)
            changed = True
            await self._events.record_takeover(
                TakeoverReason.RELEASE, v, None, "no gateway holds SAs under its IKE SPI label or ESP SPI range: it serves again"
            )
        self._update_withheld(dead)
        return changed

    def foreign(self, v: str, dead: Collection[str]) -> dict[str, int]:
        """Live gateways that report SAs still under v's label or range, with how many."""
        return {
            g: n for g, s in self.states().items()
            if g != v and g not in dead and (n := s.foreign_sas.get(v, 0)) > 0
        }  # fmt: skip

    def why(self, v: str, dead: Collection[str]) -> str | None:
        """Why `v` does not serve (None: it may)."""
        r = self._records.get(v)
        if r is None:
            return None
        holder = self.holders().get(v, r.holder)
        if r.fenced_generation is not None:
            cleared = s.fence_cleared if (s := self.states().get(v)) is not None else None
            return (f"fenced: its remote-access SAs were taken over by {holder}; it serves again once its agent has "
                    f"dropped its own (fence_cleared >= {r.fenced_generation}; it says {cleared}) and no gateway holds "
                    f"SAs under its label")
        left = self.foreign(v, dead)
        if left:
            held = ", ".join(f"{g} holds {n}" for g, n in sorted(left.items()))
            return f"its taken-over SAs still carry its IKE SPI label or ESP SPI range ({held}): it serves again when none is left"
        return f"taken over by {holder}: released at the next sync"

    def _update_withheld(self, dead: Collection[str]) -> None:
        for name in self._order:
            self._registry.set_withheld(name, self.why(name, dead))

    # ------------------------------------------------------------------ the store
    async def _store(self, record: TakeoverRecord) -> float:
        """Store the record (first: a restart must keep the fence); ms it took. A store that
        fails does not stop the takeover (its clients need it now); the log says so."""
        t0 = self._clock()
        try:
            await self._durable.save("save_takeover", record)
        except SwitchUnavailable as exc:
            log.error("takeover of %s by %s NOT stored (%s): a controller restart now would lift its fence",
                      record.gateway, record.holder, exc)
        return (self._clock() - t0) * 1000.0

    async def _drop(self, gateway: str) -> None:
        try:
            await self._durable.save("drop_takeover", gateway)
        except SwitchUnavailable as exc:
            log.error("released takeover of %s not removed from the store (%s): a restart fences it again until "
                      "its agent clears", gateway, exc)


def _replication(report: GatewayReport | None) -> ReplicationState | None:
    return None if report is None else report.replication


def _held_by(state: ReplicationState | None, v: str) -> int | None:
    """The SAs of `v` its holder said it holds (None: it does not say it protects v)."""
    return state.held_sas if state is not None and state.protects == v else None
