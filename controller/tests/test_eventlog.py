"""The event log (ring, history, store behind one interface) and the store holder `Durable`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from supergw_controller.durable import Durable
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import Transition
from supergw_controller.history import History
from supergw_controller.intent_store import EventRecord, IntentStore
from supergw_controller.rebalancer import Move, MoveReason
from supergw_controller.views import OperatorAction


class BrokenStore(IntentStore):
    """A store that opened but now refuses every call (a disk error, etcd gone)."""

    async def record_events(self, records: Sequence[EventRecord]) -> None:
        raise OSError("disk I/O error")

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventRecord]:
        raise OSError("disk I/O error")

    async def set_weight(self, gateway: str, weight: float) -> None:
        raise OSError("disk I/O error")


async def opened(store: IntentStore) -> Durable:
    d = Durable(store)
    assert await d.load() is not None
    return d


async def test_moves_go_to_ring_history_counters_and_store(tmp_path: Path) -> None:
    log = EventLog(await opened(IntentStore(tmp_path / "s.sqlite3")), history=History(), wallclock=lambda: 5.0)
    await log.record_moves([])  # nothing written: nothing recorded
    await log.record_moves([Move(1, "g1", "g2", MoveReason.FAILOVER), Move(2, "g1", "g3", MoveReason.FAILOVER),
                            Move(3, "g2", "g3", MoveReason.REBALANCE)], "why")  # fmt: skip
    assert log.moves_total["failover"] == 2 and log.moves_total["rebalance"] == 1 and log.failovers_total == 1
    stored = await log.events(10)
    assert [(e.bucket, e.src, e.dst, e.reason, e.detail, e.ts) for e in stored] == [
        (3, "g2", "g3", "rebalance", "why", 5.0), (2, "g1", "g3", "failover", "why", 5.0),
        (1, "g1", "g2", "failover", "why", 5.0),
    ]  # fmt: skip
    assert [e.bucket for e in log.ring.recent(10)] == [3, 2, 1]
    sample = log.history.sample(6.0, [], {}, {}, 1.0)
    assert {(m.reason, m.count) for m in sample.markers} == {("failover", 2), ("rebalance", 1)}


async def test_gateway_events_are_noted_now_and_stored_when_persisted(tmp_path: Path) -> None:
    log = EventLog(await opened(IntentStore(tmp_path / "s.sqlite3")), history=History(), wallclock=lambda: 7.0)
    records = log.note_gateways([Transition("g2", True, "port down"), Transition("g1", False, "heartbeats resumed")])
    assert [(e.reason, e.src, e.detail) for e in log.ring.recent(10)] == [
        ("recovering", "g1", "heartbeats resumed"), ("dead", "g2", "port down")]  # fmt: skip
    assert await log.events(10) == []  # in the store only once persisted (after the failover write)
    await log.persist(records)
    assert [(e.kind, e.reason, e.src) for e in await log.events(10)] == [
        ("gateway", "recovering", "g1"), ("gateway", "dead", "g2")]  # fmt: skip
    log.note("switch", "backup", "controller is backup")  # the ring only
    assert log.ring.recent(1)[0].reason == "backup" and len(await log.events(10)) == 2
    await log.operator(OperatorAction(who="ops", action="drain", gateway="g1", outcome="refused: no"))
    op = (await log.events(1))[0]
    assert (op.kind, op.who, op.reason, op.src, op.detail) == ("operator", "ops", "drain", "g1", "refused: no")


async def test_without_a_store_or_when_it_fails_the_ring_answers(tmp_path: Path) -> None:
    none = EventLog(Durable(None), history=History())
    await none.record_moves([Move(1, None, "g1", MoveReason.UNASSIGNED)])
    assert [e.reason for e in await none.events()] == ["unassigned"]
    broken = EventLog(await opened(BrokenStore(tmp_path / "s.sqlite3")), history=History())
    await broken.record_moves([Move(1, None, "g1", MoveReason.UNASSIGNED)])  # logged, not raised
    assert [e.reason for e in await broken.events()] == ["unassigned"]


async def test_intent_writes_fail_loudly_but_only_with_a_store(tmp_path: Path) -> None:
    with pytest.raises(SwitchUnavailable, match="intent store write failed: disk I/O error"):
        await (await opened(BrokenStore(tmp_path / "s.sqlite3"))).save("set_weight", "g1", 2.0)
    await Durable(None).save("set_weight", "g1", 2.0)  # no store configured: nothing to keep
