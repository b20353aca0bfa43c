"""The one event log: bucket moves, client pins, takeovers, gateway, switch, HA and operator events, and the history.

Every event goes to the in-memory ring (`events.EventRing`, answers `events()` when the
store is unavailable and costs nothing on the hot path) and, except switch-role and HA
notes, to the durable store (`durable.Durable`); moves and gateway changes also become
markers of the per-second history (`history.History`) that the dashboard plots.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from supergw_proto.api import EventView, HistoryView
from supergw_controller.clients import PinChange
from supergw_controller.durable import Durable
from supergw_controller.events import EventRing
from supergw_controller.gateways import Transition
from supergw_controller.history import GatewayNow, History
from supergw_controller.intent_store import EventRecord
from supergw_controller.rebalancer import BucketRate, Move, MoveReason
from supergw_controller.views import OperatorAction

log = logging.getLogger(__name__)

PIN_ADDRESSES_SHOWN = 8  # per coalesced client_pin event


class EventLog:
    def __init__(
        self,
        durable: Durable,
        *,
        history: History,
        ring: EventRing | None = None,
        wallclock: Callable[[], float] = time.time,
    ) -> None:
        self._durable = durable
        self._wall = wallclock
        self.ring = ring if ring is not None else EventRing()
        self.history = history
        self.moves_total: dict[str, int] = {r.value: 0 for r in MoveReason}
        self.failovers_total = 0  # writes that moved buckets off a dead gateway
        self.takeovers_total = 0  # dead gateways whose remote-access SAs another gateway took over

    async def record_moves(self, moves: Sequence[Move], detail: str = "") -> None:
        """Buckets the switch now sends elsewhere (written: call after the write)."""
        if not moves:
            return
        ts = self._wall()
        records = []
        for m in moves:
            self.moves_total[m.reason.value] = self.moves_total.get(m.reason.value, 0) + 1
            self.ring.add(ts, "move", m.reason.value, bucket=m.bucket, src=m.src, dst=m.dst, detail=detail)
            records.append(EventRecord(None, ts, "move", m.bucket, m.src, m.dst, m.reason.value, detail))
        if any(m.reason is MoveReason.FAILOVER for m in moves):
            self.failovers_total += 1
        self.history.note_moves(ts, Counter(m.reason.value for m in moves))
        log.info("moved %d buckets (%s)", len(moves), ", ".join(sorted({m.reason.value for m in moves})))
        await self._durable.record(records)

    async def record_pins(self, changes: Sequence[PinChange]) -> None:
        """Client pins the outside switch now holds differently (written: call after the
        write). Coalesced: one `client_pin` event per (from, to, reason) of one write, its
        detail the count and the first addresses, so a burst of clients is one line."""
        if not changes:
            return
        ts = self._wall()
        groups: dict[tuple[str | None, str | None, str], list[str]] = {}
        for c in changes:
            groups.setdefault((c.src, c.dst, c.reason.value), []).append(c.address)
        records = []
        for (src, dst, reason), addresses in groups.items():
            shown = ", ".join(addresses[:PIN_ADDRESSES_SHOWN]) + (", ..." if len(addresses) > PIN_ADDRESSES_SHOWN else "")
            what = "added" if src is None else "removed" if dst is None else "moved"
            detail = f"{len(addresses)} {what}: {shown}"
            self.ring.add(ts, "client_pin", reason, src=src, dst=dst, detail=detail)
            records.append(EventRecord(None, ts, "client_pin", None, src, dst, reason, detail))
        await self._durable.record(records)

    async def record_takeover(self, reason: str, src: str | None, dst: str | None, detail: str) -> None:
        """A step of a remote-access takeover (`takeover.TakeoverReason`): ring and store."""
        ts = self._wall()
        if reason == "takeover":
            self.takeovers_total += 1
        log.warning("takeover: %s %s -> %s: %s", reason, src, dst, detail)
        self.ring.add(ts, "takeover", reason, src=src, dst=dst, detail=detail)
        await self._durable.record([EventRecord(None, ts, "takeover", None, src, dst, reason, detail)])

    def note_gateways(self, transitions: Sequence[Transition]) -> list[EventRecord]:
        """Gateways that died or came back: in the ring and the history now; returns the
        records for `persist`, which the caller runs after its failover write (traffic first)."""
        ts = self._wall()
        records = []
        for t in transitions:
            what = "dead" if t.died else "recovering"
            log.warning("gateway %s is %s: %s", t.gateway, what, t.why)
            self.ring.add(ts, "gateway", what, src=t.gateway, detail=t.why)
            self.history.note_gateway(ts, t.gateway, t.died, t.why)
            records.append(EventRecord(None, ts, "gateway", None, t.gateway, None, what, t.why))
        return records

    async def persist(self, records: Sequence[EventRecord]) -> None:
        await self._durable.record(records)

    def note(self, kind: str, reason: str, detail: str = "") -> None:
        """A switch-role or HA event: the ring only (each replica says its own)."""
        self.ring.add(self._wall(), kind, reason, detail=detail)

    async def operator(self, action: OperatorAction) -> None:
        """An operator's call through the REST API (the REST layer knows who made it)."""
        ts = self._wall()
        self.ring.add(
            ts, "operator", action.action, bucket=action.bucket, src=action.gateway, dst=action.target,
            detail=action.outcome, who=action.who,
        )  # fmt: skip
        await self._durable.record(
            [EventRecord(None, ts, "operator", action.bucket, action.gateway, action.target, action.action,
                         action.outcome, action.who)]
        )  # fmt: skip

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        """Newest first: the store's log, or the ring when there is no store or it fails."""
        try:
            recs = await self._durable.events(limit, since_id)
        except Exception as exc:  # noqa: BLE001
            log.warning("event store unavailable, serving the in-memory ring: %s", exc)
            recs = None
        if recs is None:
            return self.ring.recent(limit, since_id)
        return [
            EventView(id=r.id, ts=r.ts, kind=r.kind, bucket=r.bucket, src=r.src, dst=r.dst, reason=r.reason,
                      detail=r.detail, who=r.who)
            for r in recs
        ]  # fmt: skip

    def sample(
        self,
        gateways: Sequence[GatewayNow],
        assignment: Mapping[int, str],
        rates: Mapping[int, BucketRate],
        imbalance: float,
    ) -> None:
        """One history sample of what the core knows now."""
        self.history.sample(self._wall(), gateways, assignment, rates, imbalance)

    def history_since(self, since: float | None = None, limit: int = 600) -> HistoryView:
        return self.history.since(since, limit)
