"""Operator intent and the event log in etcd: the store of replicated controllers.

The same API as the SQLite `IntentStore` (`intent_store.IntentStoreApi`). Keys, under the
configured prefix P:

    P/weight/<gateway>     weight, decimal text
    P/drained/<gateway>    "1" while drained (absent otherwise)
    P/pin/<bucket>         the pinned gateway
    P/takeover/<gateway>   a taken-over gateway's record (`TakeoverRecord`), JSON
    P/event-seq            the id of the newest event
    P/events/<id:020d>     one event, JSON; ids count up from 1, zero-padded so key order is id order

Fencing: the leadership code calls `set_fence(leader_key, create_revision)` once it holds
the leader key, and `clear_fence()` when it steps down. While a fence is set, every write
is one etcd transaction whose first compare is "the leader key's create_revision is still
this one": if the key expired (lease lost) or another replica created it anew, the compare
fails, etcd applies nothing, and the write raises `FencedError`. etcd decides, at the
revision the write would get, so a replica that lost its lease cannot write even while
it still believes it leads.

The event log stays bounded like the SQLite one: each append also deletes the events
older than the newest `max_events`, in the same transaction. Appends take the next ids by
compare-and-swap on P/event-seq; appends of one process are serialised, so a retry
only follows another process's write (only the leader writes: rare).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from supergw_controller.etcd_kv import KV, Compare, Delete, EtcdError, EtcdKV, Get, Op, Put, prefix_end
from supergw_controller.etcd_tls import EtcdTls
from supergw_controller.intent_store import (
    EventRecord,
    EventShortcuts,
    FencedError,
    Intent,
    IntentStoreError,
    TakeoverRecord,
)

_ID_WIDTH = 20
_SEQ_RETRIES = 8


@dataclass(frozen=True)
class Fence:
    key: str
    create_revision: int


def validate_prefix(prefix: str) -> str:
    """A key prefix: absolute, no trailing or doubled '/', printable ASCII; ValueError says what is wrong."""
    if not prefix.startswith("/") or prefix == "/":
        raise ValueError(f"{prefix!r}: must start with '/' and name a directory, e.g. /supergw/site-a")
    if prefix.endswith("/") or "//" in prefix:
        raise ValueError(f"{prefix!r}: no trailing or doubled '/' (write /supergw/site-a)")
    if not prefix.isascii() or not prefix.isprintable() or any(c.isspace() for c in prefix):
        raise ValueError(f"{prefix!r}: printable ASCII without spaces only")
    return prefix


def _event_json(r: EventRecord) -> bytes:
    d = {"ts": r.ts, "kind": r.kind, "bucket": r.bucket, "src": r.src, "dst": r.dst}
    d |= {"reason": r.reason, "detail": r.detail, "who": r.who}
    return json.dumps(d, separators=(",", ":")).encode()


def _takeover_json(r: TakeoverRecord) -> bytes:
    d = {"holder": r.holder, "fenced_generation": r.fenced_generation, "info": r.info, "since": r.since}
    return json.dumps(d, separators=(",", ":")).encode()


def _takeover(gateway: str, raw: bytes) -> TakeoverRecord:
    d: dict[str, Any] = json.loads(raw)
    fenced = d.get("fenced_generation")
    info = d.get("info")
    return TakeoverRecord(gateway, str(d["holder"]), None if fenced is None else int(fenced),
                          None if info is None else str(info), float(d["since"]))


def _event(event_id: int, raw: bytes) -> EventRecord:
    d: dict[str, Any] = json.loads(raw)
    return EventRecord(
        id=event_id,
        ts=float(d["ts"]),
        kind=str(d["kind"]),
        bucket=None if d.get("bucket") is None else int(d["bucket"]),
        src=d.get("src"),
        dst=d.get("dst"),
        reason=str(d["reason"]),
        detail=str(d.get("detail", "")),
        who=d.get("who"),
    )


class EtcdIntentStore(EventShortcuts):
    def __init__(
        self,
        endpoints: Sequence[str],
        prefix: str,
        timeout_s: float = 1.0,
        max_events: int = 10_000,
        tls: EtcdTls | None = None,
    ) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if not endpoints:
            raise ValueError("no etcd endpoints given")
        self._endpoints = list(endpoints)
        self._prefix = validate_prefix(prefix)
        self._timeout_s = timeout_s
        self._tls = tls
        self._max_events = max_events
        self._kv: EtcdKV | None = None
        self._fence: Fence | None = None
        self._append = asyncio.Lock()  # this process's appends take ids one after another

    @property
    def path(self) -> str:
        """Where the intent lives, for messages (the SQLite store's file path)."""
        return f"etcd://{','.join(self._endpoints)}{self._prefix}"

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def fence(self) -> Fence | None:
        return self._fence

    def set_fence(self, key: str, create_revision: int) -> None:
        if create_revision < 1:
            raise ValueError(f"create_revision must be >= 1 (the leader key exists), got {create_revision}")
        self._fence = Fence(key, create_revision)

    def clear_fence(self) -> None:
        self._fence = None

    def _key(self, *parts: str) -> bytes:
        return "/".join((self._prefix, *parts)).encode()

    def _event_key(self, event_id: int) -> bytes:
        return self._key("events", f"{event_id:0{_ID_WIDTH}d}")

    def _client(self) -> EtcdKV:
        if self._kv is None:
            raise IntentStoreError(f"intent store {self.path} is not open")
        return self._kv

    async def open(self) -> None:
        if self._kv is not None:
            return
        kv = EtcdKV(self._endpoints, self._timeout_s, self._tls)
        seq = self._key("event-seq")
        try:
            # Fails now, not at the first write, if etcd is away, refuses our certificate, or
            # our user may not write the prefix: etcd checks the permissions of both branches
            # of a transaction, so a put behind a compare that never holds (no key has
            # version -1) is checked and never applied.
            await kv.range(seq)
            await kv.txn([Compare(seq, "version", -1)], [Put(seq, b"")])
        except EtcdError as exc:
            await kv.close()
            raise IntentStoreError(f"cannot open intent store {self.path}: {exc}") from None
        self._kv = kv

    async def close(self) -> None:
        kv, self._kv = self._kv, None
        if kv is not None:
            await kv.close()

    async def _read(self, key: bytes, range_end: bytes | None = None, **kw: Any) -> list[KV]:
        try:
            return await self._client().range(key, range_end, **kw)
        except EtcdError as exc:
            raise IntentStoreError(f"intent store {self.path}: {exc}") from None

    async def _write(self, ops: Sequence[Op], compare: Sequence[Compare] = ()) -> bool:
        """Apply `ops` if the fence (when set) and `compare` hold. False: `compare` failed.

        Raises FencedError, and writes nothing, when the fence does not hold.
        """
        fence = self._fence
        cmp = list(compare)
        failure: list[Op] = []
        if fence is not None:
            cmp.insert(0, Compare(fence.key.encode(), "create", fence.create_revision))
            failure.append(Get(fence.key.encode()))
        try:
            result = await self._client().txn(cmp, ops, failure)
        except EtcdError as exc:
            raise IntentStoreError(f"intent store {self.path}: {exc}") from None
        if result.succeeded:
            return True
        if fence is not None:
            leader = result.gets[0]
            now = leader[0].create_revision if leader else 0
            if now != fence.create_revision:
                held = f"was created anew at revision {now}" if now else "no longer exists (its lease expired)"
                raise FencedError(
                    f"write refused: this replica is no longer the leader (leader key {fence.key}"
                    f" {held}; this replica held it since revision {fence.create_revision}); nothing was written"
                )
        return False

    async def _under(self, kind: str) -> list[tuple[str, bytes]]:
        """(name, value) of every key P/<kind>/<name>."""
        root = self._key(kind, "")
        return [(kv.key[len(root) :].decode(), kv.value) for kv in await self._read(root, prefix_end(root))]

    async def load(self) -> Intent:
        weights = {name: float(v) for name, v in await self._under("weight")}
        drained = {name for name, v in await self._under("drained") if v == b"1"}
        pins = {int(name): v.decode() for name, v in await self._under("pin")}
        takeovers = {name: _takeover(name, v) for name, v in await self._under("takeover")}
        return Intent(weights, drained, pins, takeovers)

    async def set_weight(self, gateway: str, weight: float) -> None:
        if not weight > 0:
            raise ValueError(f"weight must be > 0, got {weight}")
        await self._write([Put(self._key("weight", gateway), repr(float(weight)).encode())])

    async def set_drained(self, gateway: str, drained: bool) -> None:
        key = self._key("drained", gateway)
        await self._write([Put(key, b"1")] if drained else [Delete(key)])

    async def pin(self, bucket: int, gateway: str) -> None:
        await self._write([Put(self._key("pin", str(int(bucket))), gateway.encode())])

    async def unpin(self, bucket: int) -> None:
        await self._write([Delete(self._key("pin", str(int(bucket))))])

    async def save_takeover(self, record: TakeoverRecord) -> None:
        await self._write([Put(self._key("takeover", record.gateway), _takeover_json(record))])

    async def drop_takeover(self, gateway: str) -> None:
        await self._write([Delete(self._key("takeover", gateway))])

    async def record_events(self, records: Sequence[EventRecord]) -> None:
        if not records:
            return
        async with self._append:
            await self._append_events(records)

    async def _append_events(self, records: Sequence[EventRecord]) -> None:
        seq_key = self._key("event-seq")
        for _ in range(_SEQ_RETRIES):
            seq = await self._read(seq_key)
            last = int(seq[0].value) if seq else 0
            newest = last + len(records)
            ops: list[Op] = [Put(seq_key, str(newest).encode())]
            ops += [Put(self._event_key(last + 1 + i), _event_json(r)) for i, r in enumerate(records)]
            oldest_kept = newest - self._max_events + 1
            if oldest_kept > 1:
                ops.append(Delete(self._key("events", ""), self._event_key(oldest_kept)))
            # mod revision 0 = the key does not exist yet
            if await self._write(ops, [Compare(seq_key, "mod", seq[0].mod_revision if seq else 0)]):
                return
        raise IntentStoreError(
            f"intent store {self.path}: {_SEQ_RETRIES} event appends in a row lost the race for {seq_key.decode()}:"
            " is another controller writing to the same prefix without a fence?"
        )

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventRecord]:
        """Newest first; only events with id > since_id."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        start = self._event_key(max(since_id, 0) + 1)
        end = prefix_end(self._key("events", ""))
        kvs = await self._read(start, end, limit=limit, descending=True)
        root = len(self._key("events", ""))
        return [_event(int(kv.key[root:]), kv.value) for kv in kvs]
