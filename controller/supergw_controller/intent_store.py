"""Operator intent (weights, drains, pins), remote-access takeovers and the move/event log,
persisted in SQLite.

`IntentStoreApi` is what every store offers (this one, the single-controller default, and
`etcd_store.EtcdIntentStore` for replicated controllers); `stores.build_intent_store`
picks one from the config.

stdlib sqlite3 behind `asyncio.to_thread`: one connection, used by one worker call at a
time (a lock serialises calls), so the event loop never blocks on disk. The event log is
bounded: after each insert the oldest rows beyond `max_events` are deleted.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from supergw_controller.rebalancer import Move

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gateway_intent (
    gateway TEXT PRIMARY KEY,
    weight  REAL,
    drained INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS pins (
    bucket  INTEGER PRIMARY KEY,
    gateway TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS takeovers (
    gateway           TEXT PRIMARY KEY,
    holder            TEXT NOT NULL,
    fenced_generation INTEGER,
    info              TEXT,
    since             REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    ts     REAL NOT NULL,
    kind   TEXT NOT NULL,
    bucket INTEGER,
    src    TEXT,
    dst    TEXT,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    who    TEXT
);
"""
# Databases written before the `who` column existed get it on open.
_MIGRATIONS = {("events", "who"): "ALTER TABLE events ADD COLUMN who TEXT"}


class IntentStoreError(RuntimeError):
    """The store is not open, or the database file (or etcd) cannot be used."""


class FencedError(IntentStoreError):
    """A fenced write found another leader's key (or none): this replica must not write."""


@dataclass(frozen=True)
class TakeoverRecord:
    """A gateway judged dead whose remote-access SAs another gateway took over
    (`takeover.Takeover`): kept until the gateway serves again, so a restarted controller
    keeps its fence and steers its clients as before."""

    gateway: str
    holder: str  # its backup at the verdict, which took it over
    fenced_generation: int | None  # the orders generation that fenced it; None once its agent cleared
    info: str | None  # its last `remote_access` claim (JSON): label, range and pool, steered without its reports
    since: float  # wall-clock time of the verdict


@dataclass(frozen=True)
class Intent:
    weights: dict[str, float] = field(default_factory=dict)
    drained: set[str] = field(default_factory=set)
    pins: dict[int, str] = field(default_factory=dict)
    takeovers: dict[str, TakeoverRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class EventRecord:
    id: int | None
    ts: float
    kind: str
    bucket: int | None
    src: str | None
    dst: str | None
    reason: str
    detail: str = ""
    who: str | None = None  # the operator (token name) behind an operator action


class IntentStoreApi(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def load(self) -> Intent: ...
    async def set_weight(self, gateway: str, weight: float) -> None: ...
    async def set_drained(self, gateway: str, drained: bool) -> None: ...
    async def pin(self, bucket: int, gateway: str) -> None: ...
    async def unpin(self, bucket: int) -> None: ...
    async def save_takeover(self, record: TakeoverRecord) -> None:
        """Insert or replace the record of `record.gateway`."""
        ...

    async def drop_takeover(self, gateway: str) -> None:
        """The gateway serves again: its record goes (a no-op without one)."""
        ...

    async def record_events(self, records: Sequence[EventRecord]) -> None: ...
    async def record_event(self, ev: EventRecord) -> None: ...
    async def record_moves(self, moves: Sequence[Move], ts: float, detail: str = "") -> None: ...
    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventRecord]:
        """Newest first; only events with id > since_id."""
        ...


class EventShortcuts:
    """`record_event` and `record_moves`, both written in terms of a store's `record_events`."""

    async def record_events(self, records: Sequence[EventRecord]) -> None:
        raise NotImplementedError

    async def record_event(self, ev: EventRecord) -> None:
        await self.record_events([ev])

    async def record_moves(self, moves: Sequence[Move], ts: float, detail: str = "") -> None:
        await self.record_events(
            [EventRecord(None, ts, "move", m.bucket, m.src, m.dst, str(m.reason), detail) for m in moves]
        )


class IntentStore(EventShortcuts):
    def __init__(self, path: str | Path, max_events: int = 10_000) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self._path = str(path)
        self._max_events = max_events
        self._db: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> str:
        return self._path

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async with self._lock:
            db = self._db
            if db is None:
                raise IntentStoreError(f"intent store {self._path} is not open")
            return await asyncio.to_thread(fn, db)

    async def open(self) -> None:
        if self._db is not None:
            return

        def _open() -> sqlite3.Connection:
            if self._path != ":memory:":
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            try:
                db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL" if self._path != ":memory:" else "PRAGMA journal_mode=MEMORY")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                for (table, column), ddl in _MIGRATIONS.items():
                    if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                        db.execute(ddl)
            except sqlite3.Error as exc:
                raise IntentStoreError(f"cannot open intent store {self._path}: {exc}") from exc
            return db

        async with self._lock:
            if self._db is None:
                self._db = await asyncio.to_thread(_open)

    async def close(self) -> None:
        async with self._lock:
            db, self._db = self._db, None
            if db is not None:
                await asyncio.to_thread(db.close)

    async def load(self) -> Intent:
        def _load(db: sqlite3.Connection) -> Intent:
            weights: dict[str, float] = {}
            drained: set[str] = set()
            for gw, weight, is_drained in db.execute("SELECT gateway, weight, drained FROM gateway_intent"):
                if weight is not None:
                    weights[gw] = float(weight)
                if is_drained:
                    drained.add(gw)
            pins = {int(b): str(g) for b, g in db.execute("SELECT bucket, gateway FROM pins")}
            takeovers = {
                str(row[0]): TakeoverRecord(str(row[0]), str(row[1]), None if row[2] is None else int(row[2]),
                                            None if row[3] is None else str(row[3]), float(row[4]))
                for row in db.execute("SELECT gateway, holder, fenced_generation, info, since FROM takeovers")
            }
            return Intent(weights, drained, pins, takeovers)

        return await self._run(_load)

    async def set_weight(self, gateway: str, weight: float) -> None:
        if not weight > 0:
            raise ValueError(f"weight must be > 0, got {weight}")
        await self._run(
            lambda db: db.execute(
                "INSERT INTO gateway_intent(gateway, weight) VALUES (?, ?) "
                "ON CONFLICT(gateway) DO UPDATE SET weight = excluded.weight",
                (gateway, float(weight)),
            )
        )

    async def set_drained(self, gateway: str, drained: bool) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO gateway_intent(gateway, drained) VALUES (?, ?) "
                "ON CONFLICT(gateway) DO UPDATE SET drained = excluded.drained",
                (gateway, int(drained)),
            )
        )

    async def pin(self, bucket: int, gateway: str) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO pins(bucket, gateway) VALUES (?, ?) "
                "ON CONFLICT(bucket) DO UPDATE SET gateway = excluded.gateway",
                (bucket, gateway),
            )
        )

    async def unpin(self, bucket: int) -> None:
        await self._run(lambda db: db.execute("DELETE FROM pins WHERE bucket = ?", (bucket,)))

    async def save_takeover(self, record: TakeoverRecord) -> None:
        r = record
        await self._run(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO takeovers(gateway, holder, fenced_generation, info, since) VALUES (?, ?, ?, ?, ?)",
                (r.gateway, r.holder, r.fenced_generation, r.info, r.since),
            )
        )

    async def drop_takeover(self, gateway: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM takeovers WHERE gateway = ?", (gateway,)))

    async def record_events(self, records: Sequence[EventRecord]) -> None:
        if not records:
            return
        rows = [(r.ts, r.kind, r.bucket, r.src, r.dst, r.reason, r.detail, r.who) for r in records]
        keep = self._max_events

        def _insert(db: sqlite3.Connection) -> None:
            with db:  # one transaction for the batch and the trim
                db.execute("BEGIN")
                db.executemany(
                    "INSERT INTO events(ts, kind, bucket, src, dst, reason, detail, who) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                db.execute("DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", (keep,))

        await self._run(_insert)

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventRecord]:
        """Newest first; only events with id > since_id."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")

        def _select(db: sqlite3.Connection) -> list[EventRecord]:
            cur = db.execute(
                "SELECT id, ts, kind, bucket, src, dst, reason, detail, who FROM events "
                "WHERE id > ? ORDER BY id DESC LIMIT ?",
                (since_id, limit),
            )
            return [EventRecord(*row) for row in cur]

        return await self._run(_select)
