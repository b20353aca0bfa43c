"""The intent store as a replica sees it: writes only while it leads.

The etcd store's own fence (`set_fence`) makes etcd refuse a write once the leader key
is not ours; this wrapper adds the local lease deadline in front of it, so a replica cut
off from etcd refuses at once instead of after an etcd timeout. A backup's event records
are dropped (the leader records the same events); its intent writes raise `Fenced`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from supergw_controller.ha.fence import Fenced, LeaseFence
from supergw_controller.intent_store import EventRecord, EventShortcuts, Intent, IntentStoreApi, TakeoverRecord

log = logging.getLogger(__name__)


class FencedStore(EventShortcuts):
    def __init__(self, inner: IntentStoreApi, fence: LeaseFence) -> None:
        self.inner = inner
        self._fence = fence

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def load(self) -> Intent:
        return await self.inner.load()

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventRecord]:
        return await self.inner.events(limit=limit, since_id=since_id)

    async def set_weight(self, gateway: str, weight: float) -> None:
        self._fence.check()
        await self.inner.set_weight(gateway, weight)

    async def set_drained(self, gateway: str, drained: bool) -> None:
        self._fence.check()
        await self.inner.set_drained(gateway, drained)

    async def pin(self, bucket: int, gateway: str) -> None:
        self._fence.check()
        await self.inner.pin(bucket, gateway)

    async def unpin(self, bucket: int) -> None:
        self._fence.check()
        await self.inner.unpin(bucket)

    async def save_takeover(self, record: TakeoverRecord) -> None:
        self._fence.check()
        await self.inner.save_takeover(record)

    async def drop_takeover(self, gateway: str) -> None:
        self._fence.check()
        await self.inner.drop_takeover(gateway)

    def _may_log(self, what: str) -> bool:
        try:
            self._fence.check()
        except Fenced as exc:
            log.debug("not storing %s: %s", what, exc)
            return False
        return True

    async def record_events(self, records: Sequence[EventRecord]) -> None:
        if self._may_log(f"{len(records)} events"):
            await self.inner.record_events(records)
