"""Intent store: round trip through a real SQLite file, restart, bounded event log."""

from __future__ import annotations

from pathlib import Path

import pytest

from supergw_controller.intent_store import EventRecord, IntentStore, IntentStoreError
from supergw_controller.rebalancer import Move, MoveReason

from corekit import write_intent


async def test_round_trip_survives_restart(tmp_path: Path) -> None:
    path = tmp_path / "state" / "intent.sqlite3"
    store = IntentStore(path)
    await store.open()
    written = await write_intent(store)
    await store.record_moves([Move(7, "gw2", "gw1", MoveReason.PIN), Move(3, None, "gw1", MoveReason.UNASSIGNED)], ts=100.0)
    await store.close()

    again = IntentStore(path)
    await again.open()
    assert await again.load() == written
    events = await again.events()
    assert [(e.bucket, e.src, e.dst, e.reason, e.kind) for e in events] == [
        (3, None, "gw1", "unassigned", "move"),
        (7, "gw2", "gw1", "pin", "move"),
    ]
    await again.close()


async def test_event_log_is_bounded_and_paged() -> None:
    store = IntentStore(":memory:", max_events=5)
    await store.open()
    for i in range(12):
        await store.record_event(EventRecord(None, float(i), "gateway", None, None, None, "dead", f"gw{i}"))
    events = await store.events(limit=100)
    assert [e.detail for e in events] == [f"gw{i}" for i in range(11, 6, -1)]
    newer = await store.events(limit=2, since_id=events[2].id or 0)
    assert [e.detail for e in newer] == ["gw11", "gw10"]
    await store.close()


async def test_bad_use_is_a_clear_error(tmp_path: Path) -> None:
    store = IntentStore(tmp_path / "x.sqlite3")
    with pytest.raises(IntentStoreError, match="is not open"):
        await store.load()
    await store.open()
    with pytest.raises(ValueError, match="weight must be > 0"):
        await store.set_weight("gw1", 0)
    with pytest.raises(ValueError, match="limit must be >= 1"):
        await store.events(limit=0)
    await store.close()
    with pytest.raises(ValueError, match="max_events"):
        IntentStore(":memory:", max_events=0)


async def test_unusable_path_is_reported(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = IntentStore(tmp_path / "file" / "db.sqlite3")
    with pytest.raises((IntentStoreError, OSError)):
        await store.open()


async def test_not_a_database_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this is definitely not an sqlite database" * 100)
    store = IntentStore(path)
    with pytest.raises(IntentStoreError, match="cannot open intent store"):
        await store.open()


async def test_who_is_stored_and_old_databases_are_migrated(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite3"
    # An event log written before the `who` column existed.
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, kind TEXT NOT NULL, "
        "bucket INTEGER, src TEXT, dst TEXT, reason TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');"
        "INSERT INTO events(ts, kind, reason) VALUES (1.0, 'move', 'failover');"
    )
    db.commit()
    db.close()
    store = IntentStore(path)
    await store.open()
    await store.record_event(EventRecord(None, 2.0, "operator", None, "gw1", None, "drain", "ok", who="alice"))
    events = await store.events()
    assert [(e.kind, e.reason, e.who) for e in events] == [("operator", "drain", "alice"), ("move", "failover", None)]
    await store.close()
    again = IntentStore(path)  # opening a migrated database again changes nothing
    await again.open()
    assert (await again.events())[0].who == "alice"
    await again.close()
