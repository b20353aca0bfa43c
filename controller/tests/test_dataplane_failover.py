"""The controller's part of the switch's own failover (docs/pipeline-contract.md, "Gateway
liveness"): it writes each gateway's backup (`backups.ring_backups`: the ring successor in
the config's order among the gateways that can serve) to `gateway_backups`, rewrites it
when a gateway dies, returns, is drained or undrained, reconciles it against what the
switch holds, and its own verdict moves a dead gateway's buckets to that same backup (the
lasting move confirms what the switch already does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from finsy import P4TableEntry

from corekit import PORTS, Clock, RecordingSession, bucket_writes, make_config, running_core
from supergw_proto import p4constants as pc
from supergw_proto.reports import Heartbeat
from supergw_controller.compose import ControllerCore
from supergw_controller.config import ConfigError
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import Op

MACS = {"g1": "52:54:00:00:01:01", "g2": "52:54:00:00:01:02", "g3": "52:54:00:00:01:03"}
NAMES = {port: name for name, port in PORTS.items()}


def held_backups(sess: RecordingSession) -> dict[str, str]:
    """gateway -> backup after replaying every gateway_backups write."""
    out: dict[str, str] = {}
    for batch in sess.backup_batches:
        for u in batch:
            gw = NAMES[u.entity.match[pc.MATCH_GATEWAY_BACKUPS_PORT]]
            if u.op is Op.DELETE:
                del out[gw]
            else:
                out[gw] = NAMES[u.entity.action.args[pc.PARAM_SET_BACKUP_PORT]]
    return out


async def beat(c: ControllerCore, *names: str) -> None:
    for n in names:
        await c.accept_heartbeat(Heartbeat(gateway=n, timestamp=0.0))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def core(tmp_path: Path, clock: Clock) -> tuple[ControllerCore, RecordingSession]:
    return await running_core(make_config(tmp_path, timing={"startup_grace_s": 0.5}), clock)


async def test_serving_writes_the_ring_with_the_configured_timeout(core: tuple[ControllerCore, RecordingSession]) -> None:
    c, sess = core
    assert held_backups(sess) == {"g1": "g2", "g2": "g3", "g3": "g1"}
    u = sess.backup_batches[0][0]
    assert u.op is Op.INSERT
    assert u.entity.action.args == {
        pc.PARAM_SET_BACKUP_PORT: PORTS["g2"],
        pc.PARAM_SET_BACKUP_GATEWAY_MAC: ent.mac_int(MACS["g2"]),
        pc.PARAM_SET_BACKUP_TIMEOUT_US: c.config.timing.lan_liveness_timeout_ms * 1000,
    }
    await c.placement.sync_backups()
    assert len(sess.backup_batches) == 1, "nothing changed: nothing written"


async def test_a_death_moves_buckets_to_the_backup_and_rewrites_the_ring(
    core: tuple[ControllerCore, RecordingSession], clock: Clock
) -> None:
    c, sess = core
    await beat(c, "g1", "g2")
    clock.t += 0.4
    await beat(c, "g1")
    await c.liveness.tick()
    assert (await c.gateway("g2")).state == "dead"
    moved = bucket_writes(sess.batches[0])
    assert set(moved) == {b for b in range(16) if b % 3 == 1}
    assert set(moved.values()) == {"g3"}, "the lasting move is where the switch already sends them"
    assert held_backups(sess) == {"g1": "g3", "g2": "g3", "g3": "g1"}
    await beat(c, "g2")  # back: recovering, a backup again
    await c.liveness.tick()
    assert held_backups(sess) == {"g1": "g2", "g2": "g3", "g3": "g1"}


async def test_drain_and_undrain_take_the_gateway_out_of_the_ring_and_back(
    core: tuple[ControllerCore, RecordingSession],
) -> None:
    c, sess = core
    await c.drain("g3")
    assert held_backups(sess) == {"g1": "g2", "g2": "g1", "g3": "g1"}
    await c.undrain("g3")
    assert held_backups(sess) == {"g1": "g2", "g2": "g3", "g3": "g1"}


async def test_reconcile_writes_only_the_difference_and_deletes_foreign_entries(tmp_path: Path, clock: Clock) -> None:
    c, sess = await running_core(make_config(tmp_path), clock)
    held = [
        ent.gateway_backup(PORTS["g1"], PORTS["g2"], MACS["g2"], 25_000),  # right
        ent.gateway_backup(PORTS["g2"], PORTS["g1"], MACS["g1"], 25_000),  # wrong backup
        ent.gateway_backup(99, PORTS["g1"], MACS["g1"], 25_000),  # no such gateway
    ]
    sess.tables[pc.TABLE_GATEWAY_BACKUPS] = held
    sess.batches.clear()
    await c.switch.reconcile(c.hosts_learning.reconcile, c.placement.wanted, c.placement.backups)
    got = [(u.op, u.entity.match[pc.MATCH_GATEWAY_BACKUPS_PORT]) for b in sess.batches for u in b
           if isinstance(u.entity, P4TableEntry) and u.entity.table_id == pc.TABLE_GATEWAY_BACKUPS]
    assert sorted(got) == [(Op.INSERT, PORTS["g3"]), (Op.MODIFY, PORTS["g2"]), (Op.DELETE, 99)]


async def test_timeout_zero_writes_no_backups_and_fails_over_as_before(tmp_path: Path, clock: Clock) -> None:
    c, sess = await running_core(make_config(tmp_path, timing={"startup_grace_s": 0.5, "lan_liveness_timeout_ms": 0}), clock)
    assert sess.backup_batches == [] and c.placement.backups() == {}
    await beat(c, "g1", "g2")
    clock.t += 0.4
    await beat(c, "g1")
    await c.liveness.tick()
    assert set(bucket_writes(sess.batches[0]).values()) <= {"g1", "g3"}
    assert sess.backup_batches == []


@pytest.mark.parametrize(
    ("timing", "why"),
    [
        ({"lan_liveness_interval_ms": 10, "lan_liveness_timeout_ms": 25}, "at least 3 x"),
        ({"lan_liveness_interval_ms": 0, "lan_liveness_timeout_ms": 25}, "needs lan_liveness_interval_ms"),
        ({"lan_liveness_interval_ms": -1}, "lan_liveness_interval_ms"),
        ({"lan_liveness_timeout_ms": 60_001}, "lan_liveness_timeout_ms"),
    ],
)
def test_bad_liveness_timing_is_refused(tmp_path: Path, timing: dict[str, Any], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        make_config(tmp_path, timing=timing)


def test_agents_are_told_the_interval(tmp_path: Path) -> None:
    t = make_config(tmp_path, timing={"lan_liveness_interval_ms": 2, "lan_liveness_timeout_ms": 10}).agent_timing()
    assert t.lan_liveness_interval_ms == 2 and "liveness frames every 2 ms" in t.describe()


def test_stale_watch_counts_episodes_not_polls() -> None:
    from supergw_controller.stale_watch import StaleEpisode, StaleWatch

    w = StaleWatch()
    assert w.update({"g1": 5, "g2": 0}) == [], "the first read is the baseline, not an episode"
    assert w.update({"g1": 5, "g2": 0}) == []
    assert w.update({"g1": 9, "g2": 0}) == [StaleEpisode("g1", 4)]
    assert w.update({"g1": 20, "g2": 0}) == [], "still the same episode"
    assert w.update({"g1": 20, "g2": 0}) == []
    assert w.update({"g1": 21, "g2": 3}) == [StaleEpisode("g1", 1), StaleEpisode("g2", 3)]
    assert w.update({"g1": 0, "g2": 3}) == [], "a reset counter is a new baseline"
    assert w.episodes == {"g1": 2, "g2": 1}


async def test_a_switch_failover_is_an_event(tmp_path: Path, clock: Clock) -> None:
    from finsy import P4CounterData, P4CounterEntry

    c, sess = await running_core(make_config(tmp_path), clock)

    def counters(g2: int) -> None:
        sess.tables["P4CounterEntry"] = [P4CounterEntry(pc.COUNTER_FAILOVER_FRAMES, index=PORTS["g2"],
                                                        data=P4CounterData(packet_count=g2, byte_count=100 * g2))]

    counters(0)
    c._note_stale(c.stale.update(await c.switch.read_failover_frames()))
    counters(7)
    c._note_stale(c.stale.update(await c.switch.read_failover_frames()))
    evs = [e for e in await c.events(limit=20) if e.reason == "stale"]
    assert len(evs) == 1 and evs[0].kind == "gateway"
    assert "g2: the switch sent 7 frames of its buckets to g3" in (evs[0].detail or "")
