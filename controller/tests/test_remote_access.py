"""Remote access in the composed core, on recording sessions for both switches: the outside
reconcile writes roles, flood groups, the gateways' outside MACs, the LAN's buckets and the
settings; reports become pins, labels and ranges (outside) and pools (LAN); a dead gateway's
pins go; LAN bucket moves are followed; uplink routers are learned; entities survive the
round trip through the P4Info (what the switch reads back is what was written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from finsy import P4MulticastGroupEntry, P4TableEntry
from finsy.p4schema import P4Schema

from supergw_proto import p4constants as pc
from supergw_proto.reports import GatewayReport
from supergw_controller.compose import ControllerCore
from supergw_controller.gateways import Transition
from supergw_controller.metrics import ControllerMetrics, Snapshot
from supergw_controller.remote_access import RemoteAccess
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import Op, Ternary
from supergw_controller.southbound.entities import BucketEntry, Update

from corekit import P4INFO, ROUND_ROBIN, Clock, RecordingSession, make_config
from rakit import OUTSIDE_PORTS, UPLINK, client, ra_config, ra_info, report


def tables_written(session: RecordingSession) -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    for batch in session.batches:
        for u in batch:
            e = u.entity
            if isinstance(e, BucketEntry):
                out.append((u.op.name, pc.TABLE_BUCKETS, (e.bucket, e.port)))
            elif isinstance(e, P4TableEntry):
                out.append((u.op.name, e.table_id, ent.held_target(e) if e.action is not None else None))
            else:
                out.append((u.op.name, type(e).__name__, None))
    return out


def pins_written(session: RecordingSession) -> dict[str, int | None]:
    """client address -> outside port (None: deleted), in write order."""
    out: dict[str, int | None] = {}
    for batch in session.batches:
        for u in batch:
            e = u.entity
            if isinstance(e, P4TableEntry) and e.table_id == pc.TABLE_CLIENT_PINS:
                key = ent.held_ra_key(pc.TABLE_CLIENT_PINS, e)
                assert isinstance(key, str)
                out[key] = None if u.op is Op.DELETE else ent.held_target(e)[0]
    return out


@pytest.fixture
async def ra_core(tmp_path: Path) -> tuple[ControllerCore, RemoteAccess, RecordingSession, RecordingSession]:
    lan, out = RecordingSession(), RecordingSession()
    core = ControllerCore(ra_config(tmp_path), clock=Clock(), session=lan, outside_session=out)
    await core.placement.load_intent()
    await core.switch.set_buckets(ROUND_ROBIN)
    await core.placement.serve()
    ra = core.remote_access
    assert ra is not None
    await ra.outside.reconcile()
    ra.outside.ready.set()
    lan.batches.clear()
    out.batches.clear()
    return core, ra, lan, out


async def test_outside_reconcile_writes_the_whole_outside(tmp_path: Path) -> None:
    lan, out = RecordingSession(), RecordingSession()
    core = ControllerCore(ra_config(tmp_path), clock=Clock(), session=lan, outside_session=out)
    await core.switch.set_buckets(ROUND_ROBIN)
    assert core.remote_access is not None
    await core.remote_access.outside.reconcile()
    w = tables_written(out)
    roles = [x for x in w if x[1] == pc.TABLE_PORT_ROLES]
    assert len(roles) == 1 + len(OUTSIDE_PORTS)
    groups = [u.entity for b in out.batches for u in b if isinstance(u.entity, P4MulticastGroupEntry)]
    assert {g.multicast_group_id: sorted(ent.replica_ports(g)) for g in groups} == {
        pc.GATEWAY_OUTSIDE_FLOOD_GROUP: sorted(OUTSIDE_PORTS.values()),
        pc.UPLINK_FLOOD_GROUP: [UPLINK],
    }
    macs = {x[2][0] for x in w if x[1] == pc.TABLE_MAC_TABLE}
    assert macs == set(OUTSIDE_PORTS.values())
    buckets = {x[2][0]: x[2][1] for x in w if x[1] == pc.TABLE_BUCKETS}
    assert buckets == {b: OUTSIDE_PORTS[g] for b, g in ROUND_ROBIN.items()}  # the LAN's assignment
    settings = [x for x in w if x[1] in (pc.TABLE_SETTINGS, pc.TABLE_RA_SETTINGS)]
    assert [s[1] for s in settings] == [pc.TABLE_SETTINGS, pc.TABLE_RA_SETTINGS]
    assert w[-2:] == settings  # last: until then the outside drops
    assert core.remote_access.outside.assignment == ROUND_ROBIN


async def test_reports_become_pins_labels_ranges_and_pools(ra_core: Any) -> None:
    core, ra, lan, out = ra_core
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    await core.accept_report(report("g2", ra_info(2), [client("198.51.100.2", 2)]))
    await ra.sync()
    assert pins_written(out) == {"198.51.100.1": OUTSIDE_PORTS["g1"], "198.51.100.2": OUTSIDE_PORTS["g2"]}
    labels = [x for x in tables_written(out) if x[1] == pc.TABLE_IKE_SPI_LABELS]
    ranges = [x for x in tables_written(out) if x[1] == pc.TABLE_ESP_SPI_RANGES]
    assert sorted(x[2][0] for x in labels) == [21, 22] and sorted(x[2][0] for x in ranges) == [21, 22]
    pools = [(x[0], x[2][0]) for x in tables_written(lan) if x[1] == pc.TABLE_CLIENT_POOLS]
    assert sorted(pools) == [("INSERT", 11), ("INSERT", 12)]  # the LAN ports of g1 and g2
    assert ra.pins == {"198.51.100.1": "g1", "198.51.100.2": "g2"}
    # nothing changed: nothing written
    out.batches.clear()
    lan.batches.clear()
    await ra.sync()
    assert out.batches == [] and lan.batches == []
    # the client's IKE SA goes down: its pin goes
    await core.accept_report(report("g1", ra_info(1), []))
    await ra.sync()
    assert pins_written(out) == {"198.51.100.1": None}
    assert ra.pins_installed_total == 2 and ra.pins_removed_total == 1


async def test_a_dead_gateways_pins_are_removed(ra_core: Any) -> None:
    core, ra, _lan, out = ra_core
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1), client("198.51.100.3", 3)]))
    await core.accept_report(report("g2", ra_info(2), [client("198.51.100.2", 2)]))
    await ra.sync()
    out.batches.clear()
    await ra.on_liveness([Transition("g1", True, "heartbeats stopped")])
    await ra.sync()
    assert pins_written(out) == {"198.51.100.1": None, "198.51.100.3": None}
    assert ra.pins == {"198.51.100.2": "g2"}


async def test_lan_bucket_moves_are_followed_on_the_outside(ra_core: Any) -> None:
    core, ra, _lan, out = ra_core
    await core.move(0, "g2")
    await ra.sync()
    assert [x for x in tables_written(out) if x[1] == pc.TABLE_BUCKETS] == [("MODIFY", pc.TABLE_BUCKETS, (0, OUTSIDE_PORTS["g2"]))]
    assert ra.outside.assignment[0] == "g2"


async def test_outside_write_failure_is_retried_by_the_next_sync(ra_core: Any) -> None:
    core, ra, _lan, out = ra_core
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    out.fail = True
    with pytest.raises(Exception, match="switch gone"):
        await ra.sync()
    assert ra.pins == {}  # the mirror changes only with a write
    out.fail = False
    await ra.sync()
    assert ra.pins == {"198.51.100.1": "g1"}


async def test_uplink_routers_are_learned_and_aged(ra_core: Any) -> None:
    _core, ra, _lan, out = ra_core

    class Digest(list[dict[str, int]]):
        def ack(self) -> str:
            return "ack"

    router = 0x02EE00000001
    dl = Digest([{pc.DIGEST_LEARN_DIGEST_SRC_MAC: router, pc.DIGEST_LEARN_DIGEST_PORT: UPLINK, pc.DIGEST_LEARN_DIGEST_SRC_IP: 0}])
    stray = Digest([{pc.DIGEST_LEARN_DIGEST_SRC_MAC: router + 1, pc.DIGEST_LEARN_DIGEST_PORT: 21, pc.DIGEST_LEARN_DIGEST_SRC_IP: 0}])
    await ra.outside.on_digest(dl)
    await ra.outside.on_digest(stray)  # not an uplink: nothing
    w = tables_written(out)
    assert [(x[0], x[1]) for x in w] == [("INSERT", pc.TABLE_LEARNED_SOURCES), ("INSERT", pc.TABLE_MAC_TABLE)]
    mac_update = out.batches[0][1].entity
    assert ent.held_l2(mac_update) == ("02:ee:00:00:00:01", UPLINK, int(pc.PortRole.UPLINK))
    assert out.sent == ["ack", "ack"]
    assert ra.outside.learned == {"02:ee:00:00:00:01": UPLINK}

    class Note:
        table_entry = [ent.learned("02:ee:00:00:00:01", UPLINK, 1)]

    await ra.outside.on_idle_timeout(Note())
    assert [u.op for u in out.batches[-1]] == [Op.DELETE, Op.DELETE]
    assert ra.outside.learned == {}


async def test_reconcile_adopts_held_entries_and_deletes_foreign_ones(tmp_path: Path) -> None:
    lan, out = RecordingSession(), RecordingSession()
    core = ControllerCore(ra_config(tmp_path), clock=Clock(), session=lan, outside_session=out)
    label = Ternary(2 << 56, 0xFF << 56)
    out.tables[pc.TABLE_IKE_SPI_LABELS] = [ent.ra_entry(pc.TABLE_IKE_SPI_LABELS, label, 21, "52:54:00:00:02:15")]
    out.tables[pc.TABLE_CLIENT_PINS] = [
        ent.ra_entry(pc.TABLE_CLIENT_PINS, "198.51.100.1", 21, "52:54:00:00:02:15"),
        ent.ra_entry(pc.TABLE_CLIENT_PINS, "198.51.100.2", 99, "52:54:00:00:09:99"),  # no such gateway
    ]
    assert core.remote_access is not None
    await core.remote_access.outside.reconcile()
    assert pins_written(out) == {"198.51.100.2": None}
    assert not [x for x in tables_written(out) if x[1] == pc.TABLE_IKE_SPI_LABELS]
    assert core.remote_access.outside.held.pins == {"198.51.100.1": "g1"}
    assert core.remote_access.outside.held.labels == {label: "g1"}


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (pc.TABLE_CLIENT_PINS, "198.51.100.7"),
        (pc.TABLE_IKE_SPI_LABELS, Ternary(0x01 << 56, 0xFF << 56)),
        (pc.TABLE_ESP_SPI_RANGES, Ternary(0xC1000000, 0xFF000000)),
        (pc.TABLE_CLIENT_POOLS, "10.90.1.0/24"),
    ],
)
def test_entities_round_trip_through_the_p4info(table: str, key: Any) -> None:
    schema = P4Schema(P4INFO)
    e = ent.ra_entry(table, key, 21, "52:54:00:00:02:15")
    back = P4TableEntry.decode(e.encode(schema), schema)
    assert ent.held_ra_key(table, back) == key
    assert ent.held_target(back) == (21, 0x5254_0000_0215)
    assert Update(Op.DELETE, ent.ra_entry(table, key)).entity.encode(schema).table_entry.match


async def test_views_and_metrics_show_clients_per_gateway(ra_core: Any) -> None:
    core, ra, _lan, _out = ra_core
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1), client("198.51.100.3", 3)]))
    await core.accept_report(report("g2", ra_info(1), [client("198.51.100.2", 2)]))  # g1's label: refused
    await ra.sync()
    views = await core.clients()
    assert sorted((v.gateway, v.remote_host, v.pinned) for v in views) == [
        ("g1", "198.51.100.1", True), ("g1", "198.51.100.3", True), ("g2", "198.51.100.2", True),
    ]
    gws = {g.name: g.clients for g in await core.gateways()}
    assert gws == {"g1": 2, "g2": 1, "g3": 0}
    status = await core.status()
    assert status.remote_access is not None
    assert (status.remote_access.clients, status.remote_access.pins) == (3, 3)
    assert "overlaps gateway g1" in status.remote_access.refused["g2"]
    m = ControllerMetrics()
    m.update(Snapshot(status=status, gateways=await core.gateways()))
    text = m.render().decode()
    assert 'supergw_gateway_clients{gateway="g1"} 2.0' in text
    assert "supergw_client_pins 3.0" in text
    assert 'supergw_gateway_remote_access_refused{gateway="g2"} 1.0' in text


async def test_without_remote_access_nothing_changes(tmp_path: Path) -> None:
    core = ControllerCore(make_config(tmp_path), clock=Clock(), session=RecordingSession())
    assert core.remote_access is None
    assert await core.clients() == []
    assert (await core.status()).remote_access is None
    assert {g.clients for g in await core.gateways()} == {None}


async def test_a_remote_access_only_gateway_is_not_judged_by_its_tunnel(tmp_path: Path) -> None:
    cfg = ra_config(tmp_path)
    gws = [g.model_copy(update={"site_to_site": n != "g1"}) for g, n in ((g, g.name) for g in cfg.gateways)]
    core = ControllerCore(cfg.model_copy(update={"gateways": gws}), clock=Clock(), session=RecordingSession(),
                          outside_session=RecordingSession())
    no_tunnel = report("g1", ra_info(1), []).model_copy(update={"sas": []})
    assert isinstance(no_tunnel, GatewayReport)
    await core.accept_report(no_tunnel)
    await core.accept_report(no_tunnel.model_copy(update={"gateway": "g2"}))
    state = {g.name: (g.alive, g.tunnel_up) for g in await core.gateways()}
    assert state["g1"] == (True, None)  # site_to_site false: no verdict from its tunnel
    assert state["g2"] == (False, False)  # a site-to-site gateway without its tunnel is dead
    # ... and the verdict says what to set if it has no site-to-site tunnel at all
    g2 = await core.gateway("g2")
    assert g2.unhealthy is not None and "set `site_to_site: false` on gateway 'g2'" in g2.unhealthy
    assert (await core.gateway("g3")).unhealthy is None


def pin_events(core: ControllerCore) -> list[tuple[str | None, str | None, str, str]]:
    """(src, dst, reason, detail) of the client_pin events, oldest first."""
    return [(e.src, e.dst, e.reason, e.detail) for e in reversed(core.eventlog.ring.recent(100)) if e.kind == "client_pin"]


async def test_drain_removes_the_pins_first_then_orders_the_redirect(ra_core: Any) -> None:
    core, ra, _lan, out = ra_core
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1), client("198.51.100.3", 3)]))
    await core.accept_report(report("g2", ra_info(2), [client("198.51.100.2", 2)]))
    await ra.sync()
    assert core.agent_orders("g1").empty and core.agent_orders("g2").empty
    out.batches.clear()
    await core.drain("g1")
    # the drain wrote the LAN; until the outside follows and the pins are gone: no redirect
    assert core.agent_orders("g1").empty
    await ra.sync()
    assert pins_written(out) == {"198.51.100.1": None, "198.51.100.3": None}
    assert "g1" not in ra.outside.assignment.values()
    # buckets before pins are not required, but both must be written before the order
    order = [x[1] for x in tables_written(out) if x[1] in (pc.TABLE_BUCKETS, pc.TABLE_CLIENT_PINS)]
    assert order.index(pc.TABLE_BUCKETS) < order.index(pc.TABLE_CLIENT_PINS)
    assert str(core.agent_orders("g1").redirect_to) == "203.0.113.1"
    assert core.agent_orders("g2").empty and core.agent_orders("g3").empty
    status = (await core.status()).remote_access
    assert status is not None and status.redirecting == ["g1"]
    # g1 still lists its clients (their SAs live until each has its new one): no pin comes back
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1), client("198.51.100.3", 3)]))
    await ra.sync()
    assert ra.pins == {"198.51.100.2": "g2"}
    # a redirected client's new SA on g2: pinned there while g1 still lists its old one
    await core.accept_report(report("g2", ra_info(2), [client("198.51.100.2", 2), client("198.51.100.1", 4)]))
    await ra.sync()
    assert ra.pins == {"198.51.100.2": "g2", "198.51.100.1": "g2"}
    assert pin_events(core)[-2:] == [
        ("g1", None, "drain", "2 removed: 198.51.100.1, 198.51.100.3"),
        (None, "g2", "sa-up", "1 added: 198.51.100.1"),
    ]
    await core.undrain("g1")
    await ra.sync()
    assert core.agent_orders("g1").empty


async def test_no_redirect_while_an_operator_pin_keeps_a_bucket_on_the_drained_gateway(ra_core: Any) -> None:
    core, ra, _lan, _out = ra_core
    await core.pin(0, "g1")
    await core.accept_report(report("g1", ra_info(1), [client("198.51.100.1", 1)]))
    await core.drain("g1")
    await ra.sync()
    assert ra.outside.assignment[0] == "g1"  # new clients of bucket 0 still go to g1
    assert ra.pins == {}  # but its pins are gone
    assert core.agent_orders("g1").empty  # a redirected client could land on g1 again
    await core.unpin(0)
    await core.drain("g1")  # the drain round again: bucket 0 leaves too (already drained: a no-op)
    await core.move(0, "g2")
    await ra.sync()
    assert str(core.agent_orders("g1").redirect_to) == "203.0.113.1"


async def test_pin_changes_are_in_the_event_log_with_why_one_event_per_burst(ra_core: Any) -> None:
    core, ra, _lan, _out = ra_core
    await core.accept_report(report("g1", ra_info(1), [client(f"198.51.100.{n}", n) for n in range(1, 11)]))
    await core.accept_report(report("g2", ra_info(2), [client("198.51.100.20", 20)]))
    await ra.sync()
    ev = pin_events(core)
    assert [(s, d, r) for s, d, r, _ in ev] == [(None, "g1", "sa-up"), (None, "g2", "sa-up")]
    assert ev[0][3] == "10 added: " + ", ".join(f"198.51.100.{n}" for n in (1, 10, 2, 3, 4, 5, 6, 7)) + ", ..."
    await core.accept_report(report("g2", ra_info(2), []))
    await ra.sync()
    assert pin_events(core)[-1] == ("g2", None, "sa-down", "1 removed: 198.51.100.20")
    await ra.on_liveness([Transition("g1", True, "heartbeats stopped")])
    await ra.sync()
    assert pin_events(core)[-1][:3] == ("g1", None, "gateway-dead") and pin_events(core)[-1][3].startswith("10 removed")
    # a MOBIKE-like move: the address is listed by another gateway now
    await core.accept_report(report("g2", ra_info(2), [client("198.51.100.30", 30)]))
    await ra.sync()
    await core.accept_report(report("g2", ra_info(2), []))
    await core.accept_report(report("g3", ra_info(3), [client("198.51.100.30", 31)]))
    await ra.sync()
    assert pin_events(core)[-1] == ("g2", "g3", "sa-moved", "1 moved: 198.51.100.30")
    events = await core.events(limit=3)
    assert events[0].kind == "client_pin" and events[0].reason == "sa-moved"
