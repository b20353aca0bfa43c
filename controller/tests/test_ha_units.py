"""The `ha:` config section and what a backup's REST layer says (no etcd, no switch)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from supergw_controller.config import Config
from supergw_controller.errors import NotPrimary
from supergw_controller.compose import ControllerCore, ReplicaCore
from supergw_controller.ha.gate import NotLeader, leader_check
from supergw_controller.ha.view import HaView
from supergw_controller.southbound.session import Role
from test_config import bad, base, cfgdir, load  # noqa: F401 - cfgdir is a fixture

from corekit import Clock, config_data, make_config, running_core

ETCD = {"backend": "etcd", "etcd": {"endpoints": ["127.0.0.1:2379"]}}


def test_ha_defaults_and_needs_the_etcd_store(cfgdir: Path) -> None:
    c: Config = load(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "r1"}})
    assert c.ha is not None and (c.ha.replica, c.ha.lease_ttl_s, c.ha.fence_margin_s) == ("r1", 2, 0.5)
    assert load(cfgdir, base()).ha is None, "no ha: section = one controller, as before"
    msg = bad(cfgdir, {**base(), "ha": {"replica": "r1"}})
    assert "ha: replicas need the shared etcd store: set store.backend: etcd" in msg, msg
    msg = bad(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "r1", "lease_ttl_s": 1, "fence_margin_s": 1}})
    assert "fence_margin_s 1.0 must be below lease_ttl_s 1" in msg, msg
    assert "replica" in bad(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "has space"}})
    assert "lease_ttl_s" in bad(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "r", "lease_ttl_s": 0}})


class _Replica:
    name = "r2"

    def __init__(self, leading: bool) -> None:
        self._leading = leading

    @property
    def leading(self) -> bool:
        return self._leading

    def view(self) -> HaView:
        return HaView("r2", "backup", 7, "none", "r1", "http://10.0.0.9:18700", 0)


async def test_a_backup_refuses_admin_writes_naming_the_leader(tmp_path: Path) -> None:
    core, sess = await running_core(make_config(tmp_path), Clock())
    replica = _Replica(leading=False)
    core.permission.require_leader(leader_check(replica))
    with pytest.raises(NotLeader) as ei:
        await core.drain("g1")
    assert isinstance(ei.value, NotPrimary)  # the REST layer's 503
    assert "replica r2 is a backup and does not drain gateways" in str(ei.value)
    assert "the leader is r1 (http://10.0.0.9:18700)" in str(ei.value)
    # Intent-only writes too (a backup's store is fenced anyway); nothing was changed.
    for call in (core.set_weight("g1", 2.0), core.unpin(3), core.pin(3, "g2"), core.move(3, "g2"), core.rebalance()):
        with pytest.raises(NotLeader):
            await call
    assert sess.batches == [] and (await core.gateway("g1")).weight == 1.0
    assert (await core.rebalance(dry_run=True)).dry_run, "a dry run is a read"
    assert len(await core.buckets()) == 16
    replica._leading = True
    assert (await core.move(3, "g2")).gateway == "g2"
    sess.role = Role.BACKUP  # the leader is not primary on the switch (yet): still refused
    with pytest.raises(NotPrimary):
        await core.move(4, "g2")


async def test_a_replica_core_shows_its_term_and_refuses_writes_as_a_backup(tmp_path: Path) -> None:
    from supergw_controller.config import parse_config
    from supergw_controller.intent_store import IntentStore

    cfg = parse_config(config_data(store=ETCD, ha={"replica": "r1"}), tmp_path)
    core = ReplicaCore(cfg, IntentStore(tmp_path / "unused.sqlite3"))
    assert isinstance(core, ControllerCore) and core.ha_status().role == "backup"
    status = await core.status()
    assert status.election_id == "none" and status.role == "disconnected"  # a backup holds no election id
    with pytest.raises(NotLeader, match="replica r1 is a backup and does not set weights"):
        await core.set_weight("g1", 2.0)


class _Client:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, msg: Any) -> None:
        self.sent.append(msg)


class _Switch:
    device_id = 9

    def __init__(self) -> None:
        self._p4client = _Client()
        self.transitions: list[str] = []

    def _become_primary(self) -> None:
        self.transitions.append("primary")

    def _become_backup(self) -> None:
        self.transitions.append("backup")


def _update(code: int, eid: int) -> Any:
    from finsy.proto import U128, p4r

    msg = p4r.MasterArbitrationUpdate(device_id=9, election_id=U128.encode(eid))
    msg.status.code = code
    return msg


def test_the_replica_arbitrator_never_bids_on_its_own() -> None:
    from finsy.proto import p4r

    from supergw_controller.southbound.arbitration import ReplicaArbitrator
    from supergw_controller.ha.fence import Fenced, LeaseFence
    from supergw_controller.ha.term import election_id

    seen: list[tuple[bool, int]] = []
    fence = LeaseFence(2.0, 0.5)
    arb = ReplicaArbitrator(lambda present, eid: seen.append((present, eid)), fence.check)
    sw = _Switch()
    old, new = election_id(3), election_id(9)
    asyncio.run(arb.update(sw, _update(6, old)))  # ALREADY_EXISTS: someone else is primary
    asyncio.run(arb.update(sw, _update(5, old)))  # NOT_FOUND: the primary left
    assert sw._p4client.sent == [], "a backup sends nothing when the primary leaves (finsy would bid)"
    assert seen == [(True, old), (False, old)] and not arb.is_primary
    req = p4r.WriteRequest(device_id=9)
    with pytest.raises(Fenced):
        arb.complete_request(req)  # not the leader: every write refused before it leaves
    asyncio.run(arb.claim(sw, new))
    (claim,) = sw._p4client.sent
    assert claim.arbitration.election_id.low == 9
    asyncio.run(arb.update(sw, _update(0, new)))  # OK: we are primary
    assert sw.transitions == ["primary"] and arb.is_primary
    fence.grant(9, sent_at=__import__("time").monotonic())
    arb.complete_request(req)
    assert req.election_id.low == 9
    asyncio.run(arb.release(sw))
    assert not sw._p4client.sent[-1].arbitration.HasField("election_id"), "released: no id at all"
    asyncio.run(arb.update(sw, _update(5, new)))
    assert sw.transitions == ["primary", "backup"]


def test_the_fenced_store_writes_only_while_the_lease_is_confirmed(tmp_path: Path) -> None:
    from supergw_controller.ha.fence import Fenced, LeaseFence
    from supergw_controller.ha.fenced_store import FencedStore
    from supergw_controller.intent_store import EventRecord, IntentStore, TakeoverRecord

    now = [10.0]
    fence = LeaseFence(2.0, 0.5, clock=lambda: now[0])
    store = FencedStore(IntentStore(tmp_path / "s.sqlite3"), fence)
    ev = EventRecord(id=None, ts=1.0, kind="gateway", bucket=None, src="gw1", dst=None, reason="dead", detail="", who=None)

    async def main() -> tuple[int, int, float]:
        await store.open()
        try:
            with pytest.raises(Fenced):
                await store.set_weight("gw1", 2.0)  # a backup: refused
            await store.record_event(ev)  # a backup's event: dropped (the leader records it)
            fence.grant(5, sent_at=10.0)
            await store.set_weight("gw1", 3.0)
            await store.record_event(ev)
            now[0] = 11.6  # the lease was last confirmed 1.6 s ago: past TTL - margin
            with pytest.raises(Fenced, match="etcd unreachable"):
                await store.pin(1, "gw1")
            with pytest.raises(Fenced, match="etcd unreachable"):
                await store.save_takeover(TakeoverRecord("gw1", "gw2", 1, None, 1.0))
            with pytest.raises(Fenced, match="etcd unreachable"):
                await store.drop_takeover("gw1")
            intent = await store.load()
            return len(await store.events()), len(intent.pins), intent.weights["gw1"]
        finally:
            await store.close()

    assert asyncio.run(main()) == (1, 0, 3.0)
