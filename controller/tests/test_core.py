"""The composed core's decisions on a recording switch session: which bucket writes a
failover, a drain, pins and operator moves cause, and what the read model and the event
log say afterwards. The real P4Runtime path is covered by tests/integration."""

from __future__ import annotations

from pathlib import Path

import pytest

from supergw_controller.compose import ControllerCore
from supergw_controller.errors import Conflict, NotPrimary, UnknownBucket, UnknownGateway
from supergw_controller.intent_store import IntentStore
from supergw_controller.southbound.session import Role
from supergw_proto.reports import Heartbeat

from corekit import Clock, RecordingSession, bucket_writes, make_config, running_core


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def core(tmp_path: Path, clock: Clock) -> tuple[ControllerCore, RecordingSession]:
    return await running_core(make_config(tmp_path, timing={"startup_grace_s": 0.5}), clock,
                              store=tmp_path / "state.sqlite3")


async def beat(c: ControllerCore, *names: str) -> None:
    for n in names:
        await c.accept_heartbeat(Heartbeat(gateway=n, timestamp=0.0))


async def test_failover_is_one_batch_of_all_the_dead_gateways_buckets(
    core: tuple[ControllerCore, RecordingSession], clock: Clock
) -> None:
    c, sess = core
    await beat(c, "g1", "g2")
    clock.t += 0.2
    await beat(c, "g1")
    clock.t += 0.2
    await beat(c, "g1")
    await c.liveness.tick()
    assert len(sess.batches) == 1
    moved = bucket_writes(sess.batches[0])
    assert set(moved) == {b for b in range(16) if b % 3 == 1}  # every g2 bucket, nothing else
    assert set(moved.values()) <= {"g1", "g3"}
    assert "g2" not in c.placement.assignment.values()
    assert (await c.gateway("g2")).state == "dead"
    st = await c.status()
    assert st.failovers_total == 1 and st.moves_total["failover"] == len(moved)
    evs = await c.events(limit=50)
    assert sum(1 for e in evs if e.kind == "move" and e.reason == "failover") == len(moved)
    assert any(e.kind == "gateway" and e.reason == "dead" and e.src == "g2" for e in evs)
    # `events()` above came from the store; the ring holds the same moves
    ring = c.eventlog.ring.recent(50)
    assert sum(1 for e in ring if e.kind == "move" and e.reason == "failover") == len(moved)


async def test_recovered_gateway_is_recovering_and_gets_no_burst(
    core: tuple[ControllerCore, RecordingSession], clock: Clock
) -> None:
    c, sess = core
    clock.t += 1.0
    await beat(c, "g1")
    await c.liveness.tick()  # g2 dead (g1 alive, g3 needs no heartbeat)
    assert (await c.gateway("g2")).state == "dead"
    await beat(c, "g2")
    assert (await c.gateway("g2")).state == "recovering"
    n = len(sess.batches)
    await beat(c, "g2")
    assert len(sess.batches) == n  # recovery itself moves nothing; rounds refill


async def test_drain_moves_unpinned_buckets_at_once_and_persists(
    core: tuple[ControllerCore, RecordingSession], tmp_path: Path
) -> None:
    c, sess = core
    await c.pin(0, "g1")
    sess.batches.clear()
    v = await c.drain("g1")
    assert v.drained and v.state == "drained"
    moved = bucket_writes(sess.batches[0])
    assert 0 not in moved  # pinned there: stays
    assert set(moved) == {b for b in range(16) if b % 3 == 0 and b != 0}
    stored = IntentStore(tmp_path / "state.sqlite3")
    await stored.open()
    intent = await stored.load()
    assert intent.drained == {"g1"} and intent.pins == {0: "g1"}
    await c.undrain("g1")
    assert (await c.gateway("g1")).state == "recovering"
    assert (await stored.load()).drained == set()
    await stored.close()


async def test_pin_move_conflicts_and_errors(core: tuple[ControllerCore, RecordingSession]) -> None:
    c, _ = core
    with pytest.raises(UnknownBucket):
        await c.pin(16, "g1")
    with pytest.raises(UnknownGateway):
        await c.pin(1, "nope")
    await c.drain("g3")
    with pytest.raises(Conflict):
        await c.pin(1, "g3")
    with pytest.raises(Conflict):
        await c.move(1, "g3")
    await c.pin(1, "g1")
    assert (await c.bucket(1)).gateway == "g1"
    with pytest.raises(Conflict):
        await c.move(1, "g2")
    await c.unpin(1)
    b = await c.move(1, "g2", "test")
    assert b.gateway == "g2" and b.pinned is None
    last = (await c.events(limit=1))[0]
    assert (last.kind, last.reason, last.bucket, last.dst, last.detail) == ("move", "operator", 1, "g2", "test")


async def test_backup_refuses_writes_but_serves_reads(core: tuple[ControllerCore, RecordingSession]) -> None:
    c, sess = core
    sess.role = Role.BACKUP
    with pytest.raises(NotPrimary):
        await c.drain("g1")
    with pytest.raises(NotPrimary):
        await c.rebalance()
    assert (await c.rebalance(dry_run=True)).applied is False
    assert len(await c.buckets()) == 16
    assert (await c.status()).role == "backup"
    assert sess.batches == []


async def test_intent_is_loaded_on_start(tmp_path: Path, clock: Clock) -> None:
    cfg = make_config(tmp_path)
    store = IntentStore(tmp_path / "state.sqlite3")
    await store.open()
    await store.set_drained("g2", True)
    await store.set_weight("g1", 5.0)
    await store.pin(3, "g3")
    await store.pin(4, "gone")  # a gateway no longer in the config: ignored
    await store.close()
    c = ControllerCore(cfg, IntentStore(tmp_path / "state.sqlite3"), clock=clock, session=RecordingSession())
    await c.placement.load_intent()
    assert (await c.gateway("g2")).drained
    assert (await c.gateway("g1")).weight == 5.0
    assert c.placement.pins == {3: "g3"}


async def test_a_rebalance_round_says_how_long_it_planned_and_wrote(core: tuple[ControllerCore, RecordingSession]) -> None:
    c, sess = core
    for b in range(8):  # g1 carries everything that moves
        await c.move(b, "g1")
    c.stats.update(1.0, {b: (0, 0) for b in range(16)})
    c.stats.update(2.0, {b: (1000, 1_000_000) if b < 8 else (0, 0) for b in range(16)})
    dry = await c.rebalance(dry_run=True)
    assert dry.moves and dry.plan_ms is not None and dry.plan_ms >= 0 and dry.write_ms is None
    done = await c.rebalance()
    assert done.applied and done.write_ms is not None and done.write_ms >= 0 and done.plan_ms is not None
