"""Placement on its own: a fake southbound that holds a bucket table and may fail, a real
event log and store. Which moves it decides, in which writes, what it records, and when
it may write at all."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from supergw_controller.bucket_stats import BucketStats
from supergw_controller.config import Config
from supergw_controller.durable import Durable
from supergw_controller.errors import NotPrimary, SwitchUnavailable
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.history import History
from supergw_controller.intent_store import IntentStore
from supergw_controller.placement import Placement

from corekit import ROUND_ROBIN, make_config


class FakeSwitch:
    """Holds the bucket table; `fail_on` = the number of the write (1-based) that fails."""

    def __init__(self, held: Mapping[int, str]) -> None:
        self.held = dict(held)
        self.writes: list[dict[int, str]] = []
        self.primary = True
        self.fail_on: int | None = None
        self.backups: dict[str, str] = {}

    @property
    def assignment(self) -> Mapping[int, str]:
        return self.held

    async def set_buckets(self, moves: Mapping[int, str]) -> None:
        if self.fail_on == len(self.writes) + 1:
            self.writes.append({})
            raise SwitchUnavailable("switch gone")
        self.writes.append(dict(moves))
        self.held.update(moves)

    async def set_backups(self, backups: Mapping[str, str]) -> int:
        changed = int(backups != self.backups)
        self.backups = dict(backups)
        return changed


class Permission:
    def __init__(self) -> None:
        self.asked: list[tuple[str, bool]] = []
        self.refuse = False

    def __call__(self, what: str, *, switch: bool = True) -> None:
        self.asked.append((what, switch))
        if self.refuse:
            raise NotPrimary("not now")


class Parts:
    def __init__(self, cfg: Config, store: IntentStore | None = None) -> None:
        self.switch = FakeSwitch(ROUND_ROBIN)
        self.registry = GatewayRegistry(cfg, 0.0, startup_grace_s=1e9)
        self.stats = BucketStats()
        self.durable = Durable(store)
        self.log = EventLog(self.durable, history=History(), wallclock=lambda: 1.0)
        self.permission = Permission()
        self.placement = Placement(cfg, self.registry, self.switch, self.log, self.durable, self.stats,
                                   may_write=self.permission)  # fmt: skip


@pytest.fixture
def parts(tmp_path: Path) -> Parts:
    return Parts(make_config(tmp_path), IntentStore(tmp_path / "s.sqlite3"))


def traffic(p: Parts, hot: set[int]) -> None:
    p.stats.update(1.0, {b: (0, 0) for b in range(16)})
    p.stats.update(2.0, {b: ((100, 6000) if b in hot else (0, 0)) for b in range(16)})


async def test_a_death_moves_hot_buckets_first_and_records_after_the_writes(parts: Parts) -> None:
    p = parts
    await p.placement.load_intent()
    await p.placement.serve()
    assert p.switch.writes == []  # all alive, table full: nothing to do
    traffic(p, {1, 4})
    p.registry.set_port_state(12, False, 1.0)  # g2's port is down
    await p.placement.on_liveness([Transition("g2", True, "port down")])
    g2 = {b for b in range(16) if b % 3 == 1}
    hot, cold = p.switch.writes
    assert set(hot) == {1, 4} and set(cold) == g2 - {1, 4}
    assert "g2" not in p.switch.held.values()
    assert p.log.moves_total["failover"] == len(g2) and p.log.failovers_total == 1
    stored = await p.durable.events(100, 0)
    assert stored is not None
    assert [e.kind for e in stored].count("move") == len(g2)
    assert [(e.kind, e.reason, e.src) for e in stored if e.kind == "gateway"] == [("gateway", "dead", "g2")]
    assert stored[0].kind == "gateway", "the durable death event is stored after the failover write"


async def test_a_failed_write_records_only_what_was_written_and_is_retried(parts: Parts) -> None:
    p = parts
    await p.placement.serve()
    traffic(p, {1})
    p.registry.set_port_state(12, False, 1.0)
    p.switch.fail_on = 2  # the hot write goes through, the cold one fails
    await p.placement.on_liveness([Transition("g2", True, "port down")])
    assert p.switch.held[1] != "g2" and p.switch.held[4] == "g2"
    assert p.log.moves_total["failover"] == 1  # only the written move
    p.switch.fail_on = None
    await p.placement.on_liveness([])  # the next watchdog tick retries the pending failover
    assert "g2" not in p.switch.held.values()
    await p.placement.on_liveness([])
    assert len(p.switch.writes) == 3, "nothing is pending any more"


async def test_no_writes_before_serving_or_while_not_primary(parts: Parts) -> None:
    p = parts
    p.registry.set_port_state(12, False, 1.0)
    await p.placement.on_liveness([Transition("g2", True, "port down")])
    assert p.switch.writes == []  # not primary and reconciled yet: pending
    p.switch.primary = False
    await p.placement.serve()
    assert p.switch.writes == []
    p.switch.primary = True
    await p.placement.on_liveness([])
    assert "g2" not in p.switch.held.values()
    p.placement.pause()
    p.registry.set_port_state(13, False, 2.0)
    await p.placement.on_liveness([Transition("g3", True, "port down")])
    assert "g3" in p.switch.held.values()


async def test_a_drain_that_cannot_be_written_changes_nothing(parts: Parts) -> None:
    p = parts
    await p.placement.load_intent()
    p.switch.fail_on = 1
    with pytest.raises(SwitchUnavailable):
        await p.placement.drain("g1")
    assert not p.registry.get("g1").drained
    assert p.switch.held == ROUND_ROBIN
    intent = await p.durable.load()
    assert intent is not None and intent.drained == set()


async def test_every_write_asks_permission_with_what_it_does(parts: Parts) -> None:
    p = parts
    await p.placement.load_intent()
    await p.placement.set_weight("g1", 2.0)
    await p.placement.pin(0, "g2")
    await p.placement.unpin(0)
    await p.placement.move(0, "g3")
    await p.placement.drain("g3")
    await p.placement.undrain("g3")
    await p.placement.rebalance()
    await p.placement.rebalance(dry_run=True)
    assert p.permission.asked == [
        ("set weights", False), ("pin buckets", True), ("unpin buckets", False), ("move buckets", True),
        ("drain gateways", True), ("undrain gateways", True), ("rebalance", True),
    ]  # fmt: skip
    p.permission.refuse = True
    writes = len(p.switch.writes)
    for call in (p.placement.drain("g1"), p.placement.pin(1, "g1"), p.placement.set_weight("g2", 3.0)):
        with pytest.raises(NotPrimary):
            await call
    assert len(p.switch.writes) == writes and p.registry.get("g2").weight == 2.0
    assert (await p.placement.rebalance(dry_run=True)).applied is False  # a read


def test_reconcile_keeps_what_the_switch_holds_and_gives_back_what_it_lost(parts: Parts) -> None:
    p = parts
    held = {b: g for b, g in ROUND_ROBIN.items() if b < 8}
    assert p.placement.wanted(held, before={}) == {**held, **p.placement.wanted(held, {})}
    wanted = p.placement.wanted(held, before=ROUND_ROBIN)
    assert wanted == ROUND_ROBIN  # a restarted switch: the same gateways as before, no host moves
    p.registry.get("g3").drained = True
    wanted = p.placement.wanted({}, before=ROUND_ROBIN)
    assert {b for b, g in ROUND_ROBIN.items() if g == "g3"} & {b for b, g in wanted.items() if g == "g3"} == set()
    assert len(wanted) == 16


async def test_intent_loading_drops_unknown_names_and_a_takeover_needs_the_store(tmp_path: Path) -> None:
    store = IntentStore(tmp_path / "s.sqlite3")
    await store.open()
    await store.set_weight("g1", 4.0)
    await store.set_drained("gone", True)
    await store.pin(3, "g2")
    await store.pin(99, "g2")  # beyond K
    await store.close()
    p = Parts(make_config(tmp_path), IntentStore(tmp_path / "s.sqlite3"))
    await p.placement.load_intent()
    assert p.registry.get("g1").weight == 4.0 and p.placement.pins == {3: "g2"}
    broken = Parts(make_config(tmp_path), IntentStore(tmp_path / "no-such-dir" / "x" / "s.sqlite3"))
    broken_dir = tmp_path / "no-such-dir"
    broken_dir.write_text("a file where the store's directory should be")
    await broken.placement.load_intent()  # start-up: logged, runs without the store
    assert not broken.durable.available
    await broken.placement.set_weight("g1", 2.0)  # not stored, not refused
    with pytest.raises(NotADirectoryError, match="no-such-dir"):
        await broken.placement.load_intent(required=True)  # a takeover must have it
