"""Takeover of a dead gateway's remote-access SAs, in the composed core on recording sessions
for both switches (one journal of every write, in order): the verdict fences the dead
gateway (its port roles go on both switches), steers its label, ranges, pool and clients to
its backup, and only then orders the backup; a returning gateway stays fenced until its
agent clears, and serves again only when nobody holds SAs under its label; the record
survives a controller restart; the failure cases of docs/DESIGN.md each end as written
there; agents that say nothing of replication see nothing of it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from finsy import P4TableEntry

from supergw_controller.compose import ControllerCore
from supergw_controller.intent_store import IntentStore, TakeoverRecord
from supergw_controller.metrics import ControllerMetrics, Snapshot
from supergw_controller.remote_access import RemoteAccess
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.entities import BucketEntry, Update
from supergw_proto import p4constants as pc
from supergw_proto.ctl import render
from supergw_proto.replication import ReplicationOrders, ReplicationPeer
from supergw_proto.reports import ClientSession, GatewayReport

from corekit import PORTS, ROUND_ROBIN, Clock, RecordingSession
from rakit import OUTSIDE_PORTS, client, endpoint, ra_config, ra_info, repl, report

Write = tuple[str, str, str, Any]  # switch ("lan" | "outside"), op, table, what


class JournalSession(RecordingSession):
    """A recording session that also appends every update to a journal shared by both switches."""

    def __init__(self, name: str, journal: list[Write]) -> None:
        super().__init__()
        self.name = name
        self.journal = journal

    async def write(self, updates: Sequence[Update], *, idempotent: bool = True) -> None:
        await super().write(updates, idempotent=idempotent)
        for u in updates:
            self.journal.append((self.name, u.op.name, *_what(u)))


def _what(u: Update) -> tuple[str, Any]:
    e = u.entity
    if isinstance(e, BucketEntry):
        return pc.TABLE_BUCKETS, (e.bucket, e.port)
    if not isinstance(e, P4TableEntry):
        return type(e).__name__, None
    if e.table_id == pc.TABLE_PORT_ROLES:
        return e.table_id, e.match["port"]
    if e.table_id in ent.RA_TABLES:
        key = ent.held_ra_key(e.table_id, e)
        return e.table_id, (key, None if e.action is None else ent.held_target(e)[0])
    return e.table_id, None


class Lab:
    """The core with remote access, both switches journaled, a SQLite store, fake clocks."""

    def __init__(self, tmp_path: Path, *, wall: float = 5000.0, store: type[IntentStore] = IntentStore,
                 **ra_over: Any) -> None:
        self.journal: list[Write] = []
        self.lan = JournalSession("lan", self.journal)
        self.out = JournalSession("outside", self.journal)
        self.clock = Clock()
        self.wall = Clock(wall)
        self.store_path = tmp_path / "state.sqlite3"
        self.store = store(self.store_path)
        self.core = ControllerCore(ra_config(tmp_path, **ra_over), self.store, clock=self.clock,
                                   wallclock=self.wall, session=self.lan, outside_session=self.out)
        ra = self.core.remote_access
        assert ra is not None
        self.ra: RemoteAccess = ra

    async def start(self) -> Lab:
        await self.core.load_intent()
        await self.core.switch.reconcile(lambda held: [], self.core.placement.wanted)
        await self.core.switch.set_buckets(ROUND_ROBIN)
        await self.core.placement.serve()
        await self.ra.outside.reconcile()
        self.ra.outside.ready.set()
        self.journal.clear()
        return self

    def writes(self, table: str, switch: str | None = None) -> list[tuple[str, str, Any]]:
        return [(sw, op, what) for sw, op, t, what in self.journal if t == table and switch in (None, sw)]

    def orders(self, gw: str) -> ReplicationOrders | None:
        return self.core.agent_orders(gw).replication

    def events(self, kind: str = "takeover") -> list[tuple[str, str | None, str | None, str]]:
        """(reason, src, dst, detail) of the events of `kind`, oldest first."""
        return [(e.reason, e.src, e.dst, e.detail) for e in reversed(self.core.eventlog.ring.recent(200)) if e.kind == kind]

    async def kill(self, gw: str) -> None:
        """The verdict on `gw`: its LAN port goes down (the same reaction as a heartbeat
        verdict); then the sync its reaction wakes."""
        await self.core.liveness.port_changed(PORTS[gw], False)
        await self.ra.sync()

    async def revive(self, gw: str) -> None:
        await self.core.liveness.port_changed(PORTS[gw], True)


# The ring g1 -> g2 -> g3 -> g1: g2 holds g1's SAs, g3 g2's, g1 g3's.
PROTECTS = {"g1": "g3", "g2": "g1", "g3": "g2"}
C1, C3 = client("198.51.100.1", 1, vip="10.90.1.2"), client("198.51.100.3", 3, vip="10.90.1.3")
C2 = client("198.51.100.2", 2, vip="10.90.2.2")
CLIENTS = {"g1": [C1, C3], "g2": [C2], "g3": []}


def k(gw: str) -> int:
    return int(gw[1:])


async def feed(lab: Lab, *, clients: dict[str, list[ClientSession]] | None = None, **states: dict[str, Any]) -> None:
    """One report of every gateway: its claim, its clients, its replication state (the ring's
    `protects`, a full copy held, unless `states` says otherwise for it; None: no replication)."""
    for gw in ("g1", "g2", "g3"):
        st = states.get(gw, {"protects": PROTECTS[gw], "held_sas": len(CLIENTS[PROTECTS[gw]])})
        rep = None if st is None else repl(gw, **st)
        await lab.core.accept_report(report(gw, ra_info(k(gw)), (clients or CLIENTS)[gw], rep))
    await lab.ra.sync()


@pytest.fixture
async def lab(tmp_path: Path) -> Lab:
    return await Lab(tmp_path).start()


async def test_the_ring_orders_reach_every_agent_that_replicates(lab: Lab) -> None:
    await feed(lab)
    for gw, prot in PROTECTS.items():
        o = lab.orders(gw)
        assert o is not None and o.protects == prot and not o.fenced and o.take_over == ()
        succ = {"g1": "g2", "g2": "g3", "g3": "g1"}[gw]
        assert o.backup == ReplicationPeer(name=succ, endpoint=endpoint(succ))
        assert o.generation == lab.ra.board.generation > 5000 * 1000  # starts at the start time in ms
    gen = lab.ra.board.generation
    await feed(lab)
    assert lab.ra.board.generation == gen  # nothing changed: no new generation
    g1 = await lab.core.gateway("g1")
    assert (g1.backup, g1.fenced, g1.withheld, g1.taken_over_by) == ("g2", False, None, None)


async def test_a_dead_gateway_is_fenced_then_steered_then_its_backup_ordered(lab: Lab) -> None:
    await feed(lab)
    gen = lab.ra.board.generation
    lab.journal.clear()
    await lab.kill("g1")

    # Every step is written before the next begins: the fence on both switches, then the
    # steering (labels, ranges, pins on the outside; the pool on the LAN); the LAN's bucket
    # failover and the switch's new backups around g1 (placement) precede them all.
    placement_tables = (pc.TABLE_BUCKETS, pc.TABLE_GATEWAY_BACKUPS)
    lan_failover = [i for i, w in enumerate(lab.journal) if w[0] == "lan" and w[2] in placement_tables]
    assert [w[1] for w in lab.journal if w[2] == pc.TABLE_GATEWAY_BACKUPS] == ["MODIFY"]  # g3's: g1 -> g2
    steps = [(sw, op, t, what) for sw, op, t, what in lab.journal if t not in placement_tables]
    assert steps[:2] == [("lan", "DELETE", pc.TABLE_PORT_ROLES, PORTS["g1"]),
                         ("outside", "DELETE", pc.TABLE_PORT_ROLES, OUTSIDE_PORTS["g1"])]
    steer = steps[2:]
    # The LAN's pool is not among them: ESP g2 sends on the copied CHILD SAs before it renewed
    # them would be replays to the clients, so the return traffic waits for g2's word (below).
    assert {(t, what[1]) for _, _, t, what in steer} == {
        (pc.TABLE_IKE_SPI_LABELS, OUTSIDE_PORTS["g2"]), (pc.TABLE_ESP_SPI_RANGES, OUTSIDE_PORTS["g2"]),
        (pc.TABLE_CLIENT_PINS, OUTSIDE_PORTS["g2"]),
    }
    assert {what[0] for _, _, t, what in steer if t == pc.TABLE_CLIENT_PINS} == {"198.51.100.1", "198.51.100.3"}
    assert lan_failover and lab.journal.index(steps[0]) > max(lan_failover)
    assert lab.ra.outside.fenced == {"g1"} and lab.core.switch.fenced == {"g1"}

    # ... and then the order, in a new generation (the backup's long-poll answers at once)
    g2 = lab.orders("g2")
    assert g2 is not None and g2.take_over == ("g1",) and g2.generation > gen
    assert g2.protects == "g3"  # the ring re-linked around g1

    # g2 reports the takeover: while a taken-over CHILD SA is not renewed, g1's pool stays put;
    # once g2 says they all are, the pool goes to g2.
    lab.journal.clear()
    live = {"g2": {"protects": "g3", "taken_over": {"g1": 2}, "unrenewed_children": {"g1": 1}},
            "g3": {"protects": "g2"}}
    await feed(lab, clients={"g1": [], "g2": CLIENTS["g2"] + CLIENTS["g1"], "g3": CLIENTS["g3"]}, g1=None, **live)
    assert lab.writes(pc.TABLE_CLIENT_POOLS) == []
    live["g2"]["unrenewed_children"] = {}
    await feed(lab, clients={"g1": [], "g2": CLIENTS["g2"] + CLIENTS["g1"], "g3": CLIENTS["g3"]}, g1=None, **live)
    assert lab.writes(pc.TABLE_CLIENT_POOLS) == [("lan", "MODIFY", ("10.90.1.0/24", PORTS["g2"]))]
    g1 = lab.orders("g1")
    assert g1 is not None and g1.fenced
    assert lab.ra.pins == {"198.51.100.1": "g2", "198.51.100.3": "g2", "198.51.100.2": "g2"}

    # the event log: the takeover with its timings, pins moved for it
    [(reason, src, dst, detail)] = lab.events()
    assert (reason, src, dst) == ("takeover", "g1", "g2")
    assert detail.startswith("2 clients, 2 SAs held by g2; store ")
    for step in ("fence", "steer", "order", "total"):
        assert f" {step} " in detail
    assert detail.endswith(f"generation {g2.generation}")
    assert [(e[1], e[2], e[0]) for e in lab.events("client_pin")][-1] == ("g1", "g2", "takeover")
    view = await lab.core.gateway("g1")
    assert (view.state, view.fenced, view.taken_over_by) == ("dead", True, "g2")
    assert view.withheld is not None and "taken over by g2" in view.withheld
    # the record is in the store
    stored = await _stored(lab)
    assert stored["g1"].holder == "g2" and stored["g1"].fenced_generation is not None
    assert stored["g1"].fenced_generation <= g2.generation


async def test_each_client_s_return_route_moves_as_its_own_child_sa_is_renewed(lab: Lab) -> None:
    await feed(lab)
    await lab.kill("g1")
    lab.journal.clear()
    live = {"g2": {"protects": "g3", "taken_over": {"g1": 2}, "unrenewed_children": {"g1": 1}},
            "g3": {"protects": "g2"}}

    def g2_lists(c1: bool, c3: bool) -> dict[str, list[ClientSession]]:
        moved = [C1.model_copy(update={"esp_renewed": c1}), C3.model_copy(update={"esp_renewed": c3})]
        return {"g1": [], "g2": [C2.model_copy(update={"esp_renewed": True}), *moved], "g3": CLIENTS["g3"]}

    # g2 renewed C1's CHILD SA, not C3's yet: C1's return traffic goes to g2, the pool waits
    await feed(lab, clients=g2_lists(True, False), g1=None, **live)
    assert lab.writes(pc.TABLE_CLIENT_POOLS) == [("lan", "INSERT", ("10.90.1.2/32", PORTS["g2"]))]
    # both: the pool goes to g2 and C1's /32 with it (one write, deletes first: for the
    # microseconds between, C1's return traffic meets g1's fence, never a replay)
    lab.journal.clear()
    live["g2"]["unrenewed_children"] = {}
    await feed(lab, clients=g2_lists(True, True), g1=None, **live)
    assert lab.writes(pc.TABLE_CLIENT_POOLS) == [("lan", "DELETE", ("10.90.1.2/32", None)),
                                                 ("lan", "MODIFY", ("10.90.1.0/24", PORTS["g2"]))]


class SlowStore(IntentStore):
    """Holds every takeover record until `gate` opens (a store that takes its time)."""

    gate: asyncio.Event

    async def save_takeover(self, record: TakeoverRecord) -> None:
        await self.gate.wait()
        await super().save_takeover(record)


async def test_nothing_is_fenced_and_the_backup_keeps_protecting_until_the_record_is_stored(tmp_path: Path) -> None:
    SlowStore.gate = asyncio.Event()
    lab = await Lab(tmp_path, store=SlowStore).start()
    await feed(lab)
    lab.journal.clear()
    verdict = asyncio.create_task(lab.kill("g1"))
    await asyncio.sleep(0.05)
    assert not verdict.done()  # the record is being stored
    # meanwhile reports arrive and the sync loop runs: no fence, no steering, and g2 is still
    # told to protect g1 (it must not drop the copies it is about to be told to activate)
    for gw in ("g2", "g3"):
        await lab.core.accept_report(report(gw, ra_info(k(gw)), CLIENTS[gw], repl(gw, protects=PROTECTS[gw])))
    await lab.ra.sync()
    assert lab.writes(pc.TABLE_PORT_ROLES) == [] and lab.writes(pc.TABLE_IKE_SPI_LABELS) == []
    g2 = lab.orders("g2")
    assert g2 is not None and g2.protects == "g1" and g2.take_over == ()
    SlowStore.gate.set()
    await asyncio.wait_for(verdict, 5.0)
    assert lab.writes(pc.TABLE_PORT_ROLES)[:2] == [("lan", "DELETE", PORTS["g1"]), ("outside", "DELETE", OUTSIDE_PORTS["g1"])]
    g2 = lab.orders("g2")
    assert g2 is not None and g2.take_over == ("g1",) and g2.protects == "g3"


async def _stored(lab: Lab) -> dict[str, Any]:
    store = IntentStore(lab.store_path)
    await store.open()
    try:
        return dict((await store.load()).takeovers)
    finally:
        await store.close()


async def test_takeover_off_or_agents_without_replication_change_nothing(tmp_path: Path) -> None:
    off = await Lab(tmp_path / "off", takeover=False).start()
    await feed(off)
    assert off.orders("g1") is None and off.core.agent_orders("g1").empty  # no orders header at all
    quiet = await Lab(tmp_path / "quiet").start()
    await feed(quiet, g1=None, g2=None, g3=None)  # today's agents: no replication state
    assert quiet.core.agent_orders("g2").empty
    for lab in (off, quiet):
        gen = lab.ra.board.generation
        lab.journal.clear()
        await lab.kill("g1")
        # today's behaviour: its pins go, its label, range and pool stay, no port is fenced
        assert lab.writes(pc.TABLE_CLIENT_PINS) == [("outside", "DELETE", ("198.51.100.1", None)),
                                                    ("outside", "DELETE", ("198.51.100.3", None))]
        assert lab.writes(pc.TABLE_PORT_ROLES) == []
        assert lab.writes(pc.TABLE_IKE_SPI_LABELS) == lab.writes(pc.TABLE_CLIENT_POOLS) == []
        assert lab.events() == [] and lab.ra.board.generation == gen
        assert lab.orders("g2") is None and (await lab.core.gateway("g1")).withheld is None
        assert (await lab.core.status()).replication is not None


async def test_no_takeover_when_the_backup_does_not_hold_the_dead_gateways_state(lab: Lab) -> None:
    await feed(lab, g2={"protects": "g3"})  # g2's agent has not applied its orders yet
    lab.journal.clear()
    await lab.kill("g1")
    assert lab.writes(pc.TABLE_PORT_ROLES) == []
    assert {what[0] for _, op, what in lab.writes(pc.TABLE_CLIENT_PINS) if op == "DELETE"} == {"198.51.100.1", "198.51.100.3"}
    [(reason, src, dst, detail)] = lab.events()
    assert (reason, src, dst) == ("skipped", "g1", None)
    assert "its backup g2 holds the state of g3, not of g1" in detail and "reconnect on their own" in detail
    g2 = lab.orders("g2")
    assert g2 is not None and g2.take_over == ()


async def test_a_returning_gateway_stays_fenced_until_its_agent_clears_and_serves_once_nothing_is_left(lab: Lab) -> None:
    await feed(lab)
    await lab.kill("g1")
    g2 = lab.orders("g2")
    assert g2 is not None
    fence_gen = (await _stored(lab))["g1"].fenced_generation
    assert fence_gen is not None

    # g1 thaws: alive, but fenced and withheld; its stale clients are not pinned back to it
    await lab.revive("g1")
    g2_after = {"protects": "g3", "held_sas": 0, "taken_over": {"g1": 2}, "foreign_sas": {"g1": 2}}
    g2_clients = {"g1": [C1, C3], "g2": [C2, C1, C3], "g3": []}
    await feed(lab, clients=g2_clients, g1={"fence_cleared": None}, g2=g2_after)
    view = await lab.core.gateway("g1")
    assert view.alive and view.state == "withheld" and view.fenced
    assert view.withheld is not None and f"fence_cleared >= {fence_gen}" in view.withheld
    o = lab.orders("g1")
    assert o is not None and o.fenced and o.backup is None
    assert "g1" not in set(lab.ra.pins.values()) and "g1" not in set(lab.core.placement.assignment.values())
    with pytest.raises(Exception, match="withheld"):
        await lab.core.move(0, "g1")

    # its agent dropped every remote-access SA: the fence is lifted (port roles back), but g2
    # still holds SAs under g1's label: still withheld, label and range still to g2
    lab.journal.clear()
    await feed(lab, clients=g2_clients, g1={"fence_cleared": fence_gen}, g2=g2_after)
    assert lab.writes(pc.TABLE_PORT_ROLES) == [("lan", "INSERT", PORTS["g1"]), ("outside", "INSERT", OUTSIDE_PORTS["g1"])]
    assert lab.events()[-1][:2] == ("unfence", "g1")
    view = await lab.core.gateway("g1")
    assert (view.state, view.fenced) == ("withheld", False)
    assert view.withheld is not None and "g2 holds 2" in view.withheld
    assert lab.ra.outside.held.labels[next(iter(lab.ra.outside.held.labels.keys() - _labels_of(lab, "g2", "g3")))] == "g2"

    # g2 rekeyed them all (its own label now): g1 is released and serves again; the clients g2
    # took over keep their addresses from g1's pool through a /32 each
    lab.journal.clear()
    await feed(lab, clients=g2_clients, g1={"fence_cleared": fence_gen},
               g2={"protects": "g3", "taken_over": {"g1": 2}, "foreign_sas": {}})
    assert lab.events()[-1][:2] == ("release", "g1")
    assert await _stored(lab) == {}
    assert lab.writes(pc.TABLE_CLIENT_POOLS) == [  # the /32s before the pool goes back
        ("lan", "INSERT", ("10.90.1.2/32", PORTS["g2"])), ("lan", "INSERT", ("10.90.1.3/32", PORTS["g2"])),
        ("lan", "MODIFY", ("10.90.1.0/24", PORTS["g1"])),
    ]
    assert {what[1] for _, _, what in lab.writes(pc.TABLE_IKE_SPI_LABELS)} == {OUTSIDE_PORTS["g1"]}
    view = await lab.core.gateway("g1")
    assert (view.state, view.fenced, view.withheld, view.backup) == ("recovering", False, None, "g2")
    g2 = lab.orders("g2")
    assert g2 is not None and g2.take_over == () and g2.protects == "g1"
    await lab.core.placement.periodic_round()
    assert "g1" in set(lab.core.placement.assignment.values())  # placement gives it buckets again
    assert lab.ra.pins["198.51.100.1"] == "g2"  # its old clients stay where their SA is

    # g2 dies in turn with them; g3, its backup, takes over. Until g3 renewed them their /32s stay
    # on g2 (fenced, lost there): back on g1's pool their return traffic would reach a gateway
    # that may hold copies of their SAs and sends ESP the clients have seen.
    await feed(lab, clients={"g1": [], "g2": [C2, C1, C3], "g3": []}, g1={"fence_cleared": fence_gen},
               g2={"protects": "g3", "taken_over": {"g1": 2}, "foreign_sas": {}})
    lab.journal.clear()
    await lab.kill("g2")
    away = ("10.90.1.2/32", "10.90.1.3/32")
    assert [w for w in lab.writes(pc.TABLE_CLIENT_POOLS) if w[2][0] in away] == []
    g3_clients = {"g1": [], "g2": [], "g3": [C2, C1, C3]}
    await feed(lab, clients=g3_clients, g1={"fence_cleared": fence_gen, "protects": "g3"},
               g3={"protects": "g1", "taken_over": {"g2": 3}, "unrenewed_children": {"g2": 3}})
    assert [w for w in lab.writes(pc.TABLE_CLIENT_POOLS) if w[2][0] in away] == []
    await feed(lab, clients=g3_clients, g1={"fence_cleared": fence_gen, "protects": "g3"},
               g3={"protects": "g1", "taken_over": {"g2": 3}, "foreign_sas": {"g2": 3}})
    assert sorted(w for w in lab.writes(pc.TABLE_CLIENT_POOLS) if w[2][0] in away) == [
        ("lan", "MODIFY", ("10.90.1.2/32", PORTS["g3"])), ("lan", "MODIFY", ("10.90.1.3/32", PORTS["g3"]))]
    # g3 dies too; g1, their pool's gateway, takes them over: once it renewed them the /32s go
    # (its pool route serves them), none is left pointing at a dead gateway
    lab.journal.clear()
    await lab.kill("g3")
    g1_clients = {"g1": [C2, C1, C3], "g2": [], "g3": []}
    await feed(lab, clients=g1_clients, g1={"protects": "g2", "taken_over": {"g3": 3}, "foreign_sas": {"g3": 3}},
               g2={"protects": "g1", "fence_cleared": 10**18}, g3=None)
    assert sorted(w for w in lab.writes(pc.TABLE_CLIENT_POOLS) if w[2][0] in away) == [
        ("lan", "DELETE", ("10.90.1.2/32", None)), ("lan", "DELETE", ("10.90.1.3/32", None))]


async def test_a_restarted_gateway_still_judged_dead_is_unfenced_once_its_agent_cleared(lab: Lab) -> None:
    # A killed gateway restarts: its agent reports at once, but its tunnel crosses the fence and
    # cannot come up, so the verdict stays dead (no CHILD SA) until the fence is lifted.
    await feed(lab)
    await lab.kill("g1")
    fence_gen = (await _stored(lab))["g1"].fenced_generation
    assert fence_gen is not None
    g2_after = {"protects": "g3", "held_sas": 0, "taken_over": {"g1": 2}, "foreign_sas": {"g1": 2}}
    g2_clients = {"g1": [], "g2": [C2, C1, C3], "g3": []}
    lab.journal.clear()
    await feed(lab, clients=g2_clients, g1={"fence_cleared": fence_gen}, g2=g2_after)
    assert lab.writes(pc.TABLE_PORT_ROLES) == [("lan", "INSERT", PORTS["g1"]), ("outside", "INSERT", OUTSIDE_PORTS["g1"])]
    assert lab.events()[-1][:2] == ("unfence", "g1")
    # still dead: not released, however little is left under its label
    await feed(lab, clients=g2_clients, g1={"fence_cleared": fence_gen},
               g2={"protects": "g3", "taken_over": {"g1": 2}, "foreign_sas": {}})
    assert "g1" in await _stored(lab) and lab.events()[-1][:2] == ("unfence", "g1")


def _labels_of(lab: Lab, *gws: str) -> set[Any]:
    return {key for key, gw in lab.ra.outside.held.labels.items() if gw in gws and key.value >> 56 == k(gw) + 1}


async def test_backup_dies_first_the_ring_relinks_and_the_new_backup_takes_over_later(lab: Lab) -> None:
    await feed(lab)
    await lab.kill("g2")  # g1's backup
    assert lab.events()[-1][:3] == ("takeover", "g2", "g3")
    g1, g3 = lab.orders("g1"), lab.orders("g3")
    assert g1 is not None and g1.backup == ReplicationPeer(name="g3", endpoint=endpoint("g3"))
    assert g3 is not None and g3.protects == "g1" and g3.take_over == ("g2",)
    # g3's agent took a full copy of g1 (replayed by g1's agent); then g1 dies too
    await feed(lab, g2=None, g3={"protects": "g1", "held_sas": 2, "foreign_sas": {"g2": 1}})
    await lab.kill("g1")
    assert lab.events()[-1][:3] == ("takeover", "g1", "g3")
    g3 = lab.orders("g3")
    assert g3 is not None and g3.take_over == ("g1", "g2")
    assert lab.ra.outside.fenced == {"g1", "g2"}
    labels = {key.value >> 56: gw for key, gw in lab.ra.outside.held.labels.items()}
    assert labels == {2: "g3", 3: "g3", 4: "g3"}  # g1's, g2's and its own


async def test_both_die_at_once_the_first_falls_back_the_second_is_taken_over(lab: Lab) -> None:
    await feed(lab)
    lab.journal.clear()
    # g1 and g2 stop at once (g3 sends no heartbeats in this config: it stays alive)
    lab.clock.t += lab.core.config.timing.startup_grace_s + 1.0
    await lab.core.liveness.tick()
    assert {(e[0], e[1]) for e in lab.events("gateway")} == {("dead", "g1"), ("dead", "g2")}  # one tick, both
    reasons = {(r, s, d) for r, s, d, _ in lab.events()}
    assert reasons == {("skipped", "g1", None), ("takeover", "g2", "g3")}
    # g1's state died with g2: today's behaviour, its pins removed, its label left alone
    assert ("outside", "DELETE", ("198.51.100.1", None)) in lab.writes(pc.TABLE_CLIENT_PINS)
    assert lab.ra.outside.fenced == {"g2"} and lab.core.switch.fenced == {"g2"}
    labels = {key.value >> 56: gw for key, gw in lab.ra.outside.held.labels.items()}
    assert labels == {2: "g1", 3: "g3", 4: "g3"}
    assert lab.ra.pins == {"198.51.100.2": "g3"}
    g3 = lab.orders("g3")
    assert g3 is not None and g3.take_over == ("g2",)


async def test_a_restarted_controller_keeps_the_fence_and_repeats_the_takeover(tmp_path: Path) -> None:
    first = await Lab(tmp_path, wall=1000.0).start()
    await feed(first)
    await first.kill("g1")
    fence_gen = (await _stored(first))["g1"].fenced_generation
    await first.core.close()

    # A new controller on the same store; both switches hold every port role (the worst case)
    again = Lab(tmp_path, wall=2000.0)
    again.lan.tables[pc.TABLE_PORT_ROLES] = [ent.port_role(p, pc.PortRole.GATEWAY) for p in PORTS.values()]
    again.out.tables[pc.TABLE_PORT_ROLES] = [ent.port_role(p, pc.PortRole.GATEWAY_OUTSIDE) for p in OUTSIDE_PORTS.values()]
    await again.core.load_intent()
    await again.core.switch.reconcile(lambda held: [], again.core.placement.wanted)
    await again.ra.outside.reconcile()
    again.ra.outside.ready.set()
    roles = again.writes(pc.TABLE_PORT_ROLES)
    assert ("lan", "DELETE", PORTS["g1"]) in roles and ("outside", "DELETE", OUTSIDE_PORTS["g1"]) in roles
    assert not [w for w in roles if w[1] == "INSERT" and w[2] in (PORTS["g1"], OUTSIDE_PORTS["g1"])]
    # g1 never reported to this controller: its label still goes to g2 (from the record)
    assert {key.value >> 56: gw for key, gw in again.ra.outside.held.labels.items()} == {2: "g2"}
    assert (await again.core.gateway("g1")).state == "withheld"  # within its start-up grace: not dead yet

    assert "g1" not in set(again.core.placement.assignment.values())  # reconcile gave it no bucket
    await again.core.placement.serve()
    await feed(again, g1=None, g2={"protects": "g3", "foreign_sas": {"g1": 2}, "taken_over": {"g1": 2}},
               clients={"g1": [], "g2": [C2, C1, C3], "g3": []})
    g2 = again.orders("g2")
    assert g2 is not None and g2.take_over == ("g1",) and g2.generation > (fence_gen or 0)
    assert again.events()[-1][:3] == ("repeated", "g1", "g2")
    # after its grace, g1 is judged dead again: the same steps, nothing new to write
    again.journal.clear()
    again.clock.t += again.core.config.timing.startup_grace_s + 1.0
    for gw in ("g2",):  # g2 keeps reporting (g3 sends no heartbeats)
        await again.core.accept_report(report(gw, ra_info(2), [C2, C1, C3], repl(gw, protects="g3", foreign_sas={"g1": 2})))
    await again.core.liveness.tick()
    assert (await again.core.gateway("g1")).state == "dead"
    assert again.events()[-1][:3] == ("repeated", "g1", "g2")
    assert again.writes(pc.TABLE_PORT_ROLES) == []
    assert (await _stored(again))["g1"].holder == "g2"
    # g1's agent clears against the new controller's generation: unfenced as before
    await again.revive("g1")
    await again.core.accept_report(report("g1", ra_info(1), [], repl("g1", fence_cleared=again.ra.board.generation)))
    await again.ra.sync()
    assert again.events()[-1][:2] == ("unfence", "g1")


async def test_status_gateways_metrics_and_supergwctl_show_replication(lab: Lab) -> None:
    await feed(lab, g2={"protects": "g1", "held_sas": 2, "own_sas": 1, "replicated_sas": 1, "lag_ms_last": 3.5,
                        "lag_ms_max": 9.0})
    await lab.kill("g1")
    status = await lab.core.status()
    r = status.replication
    assert r is not None and r.takeover and r.takeovers_total == 1 and r.generation == lab.ra.board.generation
    by = {g.gateway: g for g in r.gateways}
    assert (by["g1"].fenced, by["g1"].taken_over_by) == (True, "g2")
    assert (by["g2"].held_sas, by["g2"].replicated_sas, by["g2"].lag_ms_last, by["g2"].taking_over) == (2, 1, 3.5, ["g1"])
    gws = {g.name: g for g in await lab.core.gateways()}
    assert (gws["g2"].backup, gws["g2"].replicated_sas, gws["g2"].replication_lag_ms, gws["g2"].fenced) == ("g3", 1, 3.5, False)
    m = ControllerMetrics()
    m.update(Snapshot(status=status, gateways=await lab.core.gateways()))
    text = m.render().decode()
    for line in ("supergw_takeovers_total 1.0", 'supergw_gateway_fenced{gateway="g1"} 1.0',
                 'supergw_gateway_fenced{gateway="g2"} 0.0', 'supergw_replication_lag_ms{gateway="g2"} 3.5',
                 'supergw_replication_lag_max_ms{gateway="g2"} 9.0', 'supergw_held_sas{gateway="g2"} 2.0',
                 'supergw_replicated_sas{gateway="g2"} 1.0'):
        assert line in text, line
    table = render.gateways(await lab.core.gateways())
    head, *rows = table.splitlines()
    assert head.split()[11:15] == ["BACKUP", "REPLICATED", "LAG", "MS"]
    g1_row = next(r for r in rows if r.startswith("g1 ")).split()
    assert g1_row[11:15] == ["-", "0", "-", "yes"]  # out of the ring (no backup), fenced
    text = render.status(status)
    assert "replication: takeover on" in text and "1 takeovers since start" in text
    g2_line = next(line for line in text.splitlines() if line.startswith("g2 "))
    assert g2_line.split()[:6] == ["g2", "g3", "g3", "1", "1", "2"]  # backup, protects, own, replicated, held
    one = [" ".join(line.split()) for line in render.gateway(gws["g1"]).splitlines()]
    assert "fenced yes" in one and "taken over by g2" in one


async def test_a_client_away_from_its_pools_gateway_gets_a_32_route_within_the_tables_room(lab: Lab) -> None:
    await feed(lab, clients={"g1": [], "g2": [C2, client("198.51.100.9", 9, vip="10.90.3.9")], "g3": []})
    pools = lab.ra.book.wanted(lab.ra.outside.held).pools
    assert pools["10.90.3.9/32"] == "g2" and pools["10.90.3.0/24"] == "g3"
    assert "10.90.2.2/32" not in pools  # in its own gateway's pool: no entry
    many = [client(f"198.51.{n // 250}.{n % 250 + 1}", n, vip=f"10.90.3.{n % 250 + 1}") for n in range(1, 251)]
    many += [client(f"198.52.{n // 250}.{n % 250 + 1}", n, vip=f"10.90.1.{n % 250 + 1}") for n in range(1, 251)]
    await lab.core.accept_report(report("g2", ra_info(2), many, repl("g2", protects="g1")))
    pools = lab.ra.book.wanted(lab.ra.outside.held).pools
    assert len(pools) == pc.CLIENT_POOLS_TABLE_SIZE  # the rest logged, not written (the write would fail)
    assert lab.ra.book.routes_missing(pools) == 500 - (pc.CLIENT_POOLS_TABLE_SIZE - 3)  # 3 pools take room too


def test_replication_report_with_unknown_keys_is_refused() -> None:
    body = report("g1", ra_info(1), [], repl("g1")).model_dump(mode="json")
    body["replication"]["secret"] = "00" * 32
    with pytest.raises(Exception, match="secret"):
        GatewayReport.model_validate(body)
