"""In-memory ring of recent events (bucket moves, gateway state changes, switch role).

The durable log is part B's IntentStore; this ring answers `events()` when the store is
unavailable and costs nothing on the hot path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from supergw_proto.api import EventView


class EventRing:
    def __init__(self, size: int = 2000) -> None:
        self._events: deque[EventView] = deque(maxlen=size)
        self._next_id = 1

    def add(
        self,
        ts: float,
        kind: str,
        reason: str,
        *,
        bucket: int | None = None,
        src: str | None = None,
        dst: str | None = None,
        detail: str = "",
        who: str | None = None,
    ) -> EventView:
        ev = EventView(
            id=self._next_id, ts=ts, kind=kind, bucket=bucket, src=src, dst=dst, reason=reason, detail=detail, who=who
        )
        self._next_id += 1
        self._events.append(ev)
        return ev

    def extend(self, events: Iterable[EventView]) -> None:
        for ev in events:
            self.add(ev.ts, ev.kind, ev.reason, bucket=ev.bucket, src=ev.src, dst=ev.dst, detail=ev.detail, who=ev.who)

    def recent(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        """Newest first, at most `limit`, only ids > since_id."""
        out: list[EventView] = []
        for ev in reversed(self._events):
            if len(out) >= limit or (ev.id is not None and ev.id <= since_id):
                break
            out.append(ev)
        return out
