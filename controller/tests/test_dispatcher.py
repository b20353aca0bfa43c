"""Dispatcher decisions against a recording stand-in for the switch session.

The real P4Runtime path is covered by tests/integration; here only the core's decisions
are checked: which updates it batches for failover, drain, pins and operator moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from supergw_proto import p4constants as pc
from supergw_controller.dispatcher import Dispatcher
from supergw_controller.errors import Conflict, NotPrimary, UnknownBucket, UnknownGateway
from supergw_controller.intent_store import IntentStore
from supergw_proto.reports import Heartbeat
from supergw_controller.southbound.entities import Op, Update
from supergw_controller.southbound.session import Role

from test_core_units import make_config


class RecordingSession:
    def __init__(self) -> None:
        self.role = Role.PRIMARY
        self.batches: list[list[Update]] = []
        self.errors = 0
        self.reconnects = 0
        self.cookie = None

    def require_primary(self) -> None:
        if self.role is not Role.PRIMARY:
            raise NotPrimary("backup")

    async def write(self, updates: Sequence[Update], *, idempotent: bool = True) -> None:
        self.require_primary()
        self.batches.append(list(updates))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def disp(tmp_path: Path, clock: Clock) -> Dispatcher:
    cfg = make_config(tmp_path, timing={"startup_grace_s": 0.5})
    store = IntentStore(tmp_path / "state.sqlite3")
    d = Dispatcher(cfg, store, clock=clock)
    await d._load_intent()
    d.session = RecordingSession()  # type: ignore[assignment]
    d.assignment = {b: ("g1", "g2", "g3")[b % 3] for b in range(16)}
    d.primary_ready.set()
    return d


def buckets_in(batch: list[Update]) -> dict[int, int]:
    out = {}
    for u in batch:
        assert u.entity.table_id == pc.TABLE_BUCKETS and u.op is Op.MODIFY
        out[int(dict(u.entity.match)["bucket"])] = int(u.entity.action.args["port"])
    return out


async def beat(d: Dispatcher, *names: str) -> None:
    for n in names:
        await d.accept_heartbeat(Heartbeat(gateway=n, timestamp=0.0))


async def test_failover_is_one_batch_of_all_the_dead_gateways_buckets(disp: Dispatcher, clock: Clock) -> None:
    await beat(disp, "g1", "g2")
    clock.t += 0.2
    await beat(disp, "g1")
    clock.t += 0.2
    await beat(disp, "g1")
    await disp._watchdog_tick()
    sess: RecordingSession = disp.session  # type: ignore[assignment]
    assert len(sess.batches) == 1
    moved = buckets_in(sess.batches[0])
    assert set(moved) == {b for b in range(16) if b % 3 == 1}  # every g2 bucket, nothing else
    assert set(moved.values()) <= {11, 13}
    assert "g2" not in disp.assignment.values()
    assert (await disp.gateway("g2")).state == "dead"
    st = await disp.status()
    assert st.failovers_total == 1 and st.moves_total["failover"] == len(moved)
    evs = await disp.events(limit=50)
    assert sum(1 for e in evs if e.kind == "move" and e.reason == "failover") == len(moved)
    assert any(e.kind == "gateway" and e.reason == "dead" and e.src == "g2" for e in evs)


async def test_recovered_gateway_is_recovering_and_gets_no_burst(disp: Dispatcher, clock: Clock) -> None:
    clock.t += 1.0
    await beat(disp, "g1")
    await disp._watchdog_tick()  # g2 dead (g1 alive, g3 needs no heartbeat)
    assert (await disp.gateway("g2")).state == "dead"
    await beat(disp, "g2")
    assert (await disp.gateway("g2")).state == "recovering"
    sess: RecordingSession = disp.session  # type: ignore[assignment]
    n = len(sess.batches)
    await beat(disp, "g2")
    assert len(sess.batches) == n  # recovery itself moves nothing; rounds refill


async def test_drain_moves_unpinned_buckets_at_once_and_persists(disp: Dispatcher, tmp_path: Path) -> None:
    await disp.pin(0, "g1")
    sess: RecordingSession = disp.session  # type: ignore[assignment]
    sess.batches.clear()
    v = await disp.drain("g1")
    assert v.drained and v.state == "drained"
    moved = buckets_in(sess.batches[0])
    assert 0 not in moved  # pinned there: stays
    assert set(moved) == {b for b in range(16) if b % 3 == 0 and b != 0}
    intent = await disp._store.load()  # type: ignore[union-attr]
    assert intent.drained == {"g1"} and intent.pins == {0: "g1"}
    await disp.undrain("g1")
    assert (await disp.gateway("g1")).state == "recovering"
    assert (await disp._store.load()).drained == set()  # type: ignore[union-attr]


async def test_pin_move_conflicts_and_errors(disp: Dispatcher) -> None:
    with pytest.raises(UnknownBucket):
        await disp.pin(16, "g1")
    with pytest.raises(UnknownGateway):
        await disp.pin(1, "nope")
    await disp.drain("g3")
    with pytest.raises(Conflict):
        await disp.pin(1, "g3")
    with pytest.raises(Conflict):
        await disp.move(1, "g3")
    await disp.pin(1, "g1")
    assert (await disp.bucket(1)).gateway == "g1"
    with pytest.raises(Conflict):
        await disp.move(1, "g2")
    await disp.unpin(1)
    b = await disp.move(1, "g2", "test")
    assert b.gateway == "g2" and b.pinned is None
    assert (await disp.events(limit=1))[0].reason in ("operator", "drain")


async def test_backup_refuses_writes_but_serves_reads(disp: Dispatcher) -> None:
    disp.session.role = Role.BACKUP  # type: ignore[misc]
    with pytest.raises(NotPrimary):
        await disp.drain("g1")
    with pytest.raises(NotPrimary):
        await disp.rebalance()
    assert (await disp.rebalance(dry_run=True)).applied is False
    assert len(await disp.buckets()) == 16
    assert (await disp.status()).role == "backup"


async def test_intent_is_loaded_on_start(tmp_path: Path, clock: Clock) -> None:
    cfg = make_config(tmp_path)
    store = IntentStore(tmp_path / "state.sqlite3")
    await store.open()
    await store.set_drained("g2", True)
    await store.set_weight("g1", 5.0)
    await store.pin(3, "g3")
    await store.pin(4, "gone")  # a gateway no longer in the config: ignored
    await store.close()
    d = Dispatcher(cfg, IntentStore(tmp_path / "state.sqlite3"), clock=clock)
    await d._load_intent()
    assert (await d.gateway("g2")).drained
    assert (await d.gateway("g1")).weight == 5.0
    assert d.pins == {3: "g3"}
