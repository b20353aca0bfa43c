"""The intent store as the core uses it: the one holder of the store, fenced under HA.

The store (SQLite or etcd; `ha.fenced_store.FencedStore` in front of etcd under HA) is
handed in at construction and never swapped. A single controller whose store cannot be
opened at start runs without it (`available` false: nothing is stored, intent writes are
not refused); a replica taking over must have it, so `load(required=True)` opens it then
and raises when it cannot. Placement stores operator intent through `save`, the event log
its events through `record`; nobody else touches the store.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from supergw_controller.errors import SwitchUnavailable
from supergw_controller.intent_store import EventRecord, Intent, IntentStoreApi

log = logging.getLogger(__name__)


class Durable:
    def __init__(self, store: IntentStoreApi | None) -> None:
        self._store = store
        self._available = store is not None

    @property
    def available(self) -> bool:
        return self._available

    async def load(self, *, required: bool = False) -> Intent | None:
        """Open the store (a no-op when open) and read the operator intent.

        Not `required` (start-up): a store that fails is logged and left out (None).
        `required` (an HA takeover: the leader must write to etcd): the failure raises,
        and a store left out at start is used again once it answers.
        """
        if self._store is None:
            return None
        try:
            await self._store.open()
            intent = await self._store.load()
        except Exception as exc:  # noqa: BLE001 - the controller still works without its store
            if required:
                raise
            log.error("intent store unavailable (%s); starting without operator intent", exc)
            self._available = False
            return None
        self._available = True
        return intent

    async def save(self, method: str, *args: object) -> None:
        """One intent write (`set_drained`, `set_weight`, `pin`, `unpin`); a failure raises
        `SwitchUnavailable` so the operator's call fails as a whole."""
        if self._store is None or not self._available:
            return
        try:
            await getattr(self._store, method)(*args)
        except Exception as exc:  # noqa: BLE001
            log.error("could not store operator intent %s%s: %s", method, args, exc)
            raise SwitchUnavailable(f"intent store write failed: {exc}") from exc

    async def record(self, records: Sequence[EventRecord]) -> None:
        """Append events; a failure is logged (the in-memory ring still has them)."""
        if self._store is None or not self._available or not records:
            return
        try:
            await self._store.record_events(records)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not store %d event(s): %s", len(records), exc)

    async def events(self, limit: int, since_id: int) -> list[EventRecord] | None:
        """Newest first, ids > since_id; None when there is no store (the caller serves its ring)."""
        if self._store is None or not self._available:
            return None
        return await self._store.events(limit=limit, since_id=since_id)

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
