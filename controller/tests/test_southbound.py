"""The southbound owner (`southbound/switch.py`) on a recording session: typed writes become
the right table updates, reads become the core's words, reconcile writes only the
difference, and the switch's streams reach the listener as plain events."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from pathlib import Path
from typing import Any

import pytest
from finsy import P4CounterData, P4DirectCounterEntry, P4TableEntry
from finsy.p4schema import P4Schema
from finsy.proto import p4r

from supergw_proto import p4constants as pc
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import (
    HeldHosts,
    HostIdle,
    HostIp,
    HostIp6,
    HostSeen,
    HostWrite,
    L2Entry,
    LearnedIp6,
    LearnedSource,
    Op,
    PacketIn,
)
from supergw_controller.southbound.entities import BucketEncoder, BucketEntry
from supergw_controller.southbound.session import Role
from supergw_controller.southbound.switch import Southbound

from corekit import P4INFO, RecordingSession, make_config

MAC1, MAC2, MAC3 = "52:54:00:00:01:01", "52:54:00:00:01:02", "52:54:00:00:01:03"


class Listener:
    """Records what the southbound tells the core."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def role_changed(self, role: Role) -> None:
        self.calls.append(("role", role))

    async def primary(self) -> None:
        self.calls.append(("primary", None))

    async def serving(self) -> None:
        self.calls.append(("serving", None))

    async def backup(self) -> None:
        self.calls.append(("backup", None))

    async def hosts_seen(self, hosts: list[HostSeen]) -> None:
        self.calls.append(("seen", hosts))

    async def hosts_idle(self, hosts: list[HostIdle]) -> None:
        self.calls.append(("idle", hosts))

    async def packet_in(self, packet: PacketIn) -> None:
        self.calls.append(("packet", packet))


@pytest.fixture
def sb(tmp_path: Path) -> tuple[Southbound, RecordingSession]:
    session = RecordingSession()
    s = Southbound(make_config(tmp_path, timing={"ageing_s": 300}), session=session)
    s.listen(Listener())
    return s, session


# The learn digest as the controller writes it with the unit config (no pipeline.device_config:
# digest_batching auto lets the switch batch, lists of 256 sent at the latest 2 ms after the first).
SWITCH_LISTS = ent.learn_digest(256, 2_000_000)
# ... and with a device config (BMv2): every digest at once, the controller gathers them.
AT_ONCE = ent.learn_digest()


def writes(batch: list[ent.Update]) -> list[tuple[str, str, Any]]:
    """(op, table or entity kind, key) of each update."""
    out: list[tuple[str, str, Any]] = []
    for u in batch:
        e = u.entity
        if isinstance(e, BucketEntry):
            out.append((u.op.name, pc.TABLE_BUCKETS, (e.bucket, e.port)))
        elif isinstance(e, ent.HostRow):
            out.append((u.op.name, e.table_id, tuple(sorted(e.match.items()))))
        elif isinstance(e, P4TableEntry):
            out.append((u.op.name, e.table_id, tuple(sorted(dict(e.match or {}).items()))))
        else:
            out.append((u.op.name, type(e).__name__, None))
    return out


# -- writes


async def test_set_buckets_inserts_new_modifies_held_and_mirrors_only_what_was_written(
    sb: tuple[Southbound, RecordingSession],
) -> None:
    s, session = sb
    await s.set_buckets({0: "g1", 1: "g2"})
    await s.set_buckets({1: "g3", 2: "g3"})
    assert [writes(b) for b in session.batches] == [
        [("INSERT", pc.TABLE_BUCKETS, (0, 11)), ("INSERT", pc.TABLE_BUCKETS, (1, 12))],
        [("MODIFY", pc.TABLE_BUCKETS, (1, 13)), ("INSERT", pc.TABLE_BUCKETS, (2, 13))],
    ]
    assert session.batches[1][0].entity == BucketEntry(1, 13, MAC3)  # the gateway's port and MAC, no finsy entity
    session.fail = True
    with pytest.raises(SwitchUnavailable):
        await s.set_buckets({0: "g2"})
    assert dict(s.assignment) == {0: "g1", 1: "g3", 2: "g3"}  # the failed write changed nothing


async def test_host_writes_carry_the_ageing_timeout_and_delete_by_key(sb: tuple[Southbound, RecordingSession]) -> None:
    s, session = sb
    await s.write_hosts([])
    assert session.batches == []  # nothing to write: no request
    await s.write_hosts([
        HostWrite(Op.INSERT, LearnedSource("02:00:00:00:00:01", 1)),
        HostWrite(Op.INSERT, L2Entry("02:00:00:00:00:01", 1)),
        HostWrite(Op.INSERT, HostIp("10.0.0.11", "02:00:00:00:00:01")),
        HostWrite(Op.DELETE, HostIp("10.0.0.12", "02:00:00:00:00:01")),
    ])  # fmt: skip
    (batch,) = session.batches
    rows = [u.entity for u in batch]
    assert all(isinstance(r, ent.HostRow) for r in rows)
    assert rows[0].entity() == ent.learned("02:00:00:00:00:01", 1, 300 * 10**9)
    assert rows[1].entity() == ent.mac_entry("02:00:00:00:00:01", 1)
    assert rows[2].entity() == ent.host_ip("10.0.0.11", "02:00:00:00:00:01")
    assert rows[3].entity() == ent.host_ip_key("10.0.0.12") and batch[3].op is Op.DELETE
    schema = P4Schema(P4INFO)
    encoder = ent.HostEncoder(schema)
    for u in batch:  # the fast encoding is finsy's, byte for byte
        want = p4r.Update(type=int(u.op), entity=u.entity.entity().encode(schema))
        assert encoder.encode(u.op, u.entity).SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)


async def test_packet_out_and_counter_reads(sb: tuple[Southbound, RecordingSession]) -> None:
    s, session = sb
    await s.send_packet(b"\x01" * 60, 11)
    assert session.sent == [ent.packet_out(b"\x01" * 60, 11)]
    counter = P4DirectCounterEntry(table_entry=ent.bucket(5, 11, MAC1), data=P4CounterData(byte_count=700, packet_count=7))
    no_data = P4DirectCounterEntry(table_entry=ent.bucket(6, 11, MAC1))
    session.tables[pc.TABLE_BUCKETS] = [counter, no_data]  # the wildcard read names the buckets table
    assert await s.read_bucket_counters() == {5: (7, 700)}


# -- reconcile


def held_switch(session: RecordingSession) -> None:
    """A switch a previous controller wrote, with leftovers of every kind."""
    session.tables.update({
        pc.TABLE_PORT_ROLES: [ent.port_role(1, pc.PortRole.HOST), ent.port_role(2, pc.PortRole.GATEWAY),
                              ent.port_role(7, pc.PortRole.HOST)],
        "P4MulticastGroupEntry": [ent.flood_group([1])],
        "P4DigestEntry": [SWITCH_LISTS],
        pc.TABLE_LEARNED_SOURCES: [ent.learned("02:00:00:00:00:01", 1, 1)],
        pc.TABLE_MAC_TABLE: [ent.mac_entry("02:00:00:00:00:01", 1)],
        pc.TABLE_HOST_IPS: [ent.host_ip("10.0.0.11", "02:00:00:00:00:01")],
        pc.TABLE_ND_SETTINGS: [ent.nd_settings(None, None)],
        pc.TABLE_BUCKETS: [ent.bucket(0, 11, MAC1), ent.bucket(1, 12, MAC1),  # 1: wrong MAC for port 12
                           ent.bucket(3, 13, MAC3), ent.bucket(20, 11, MAC1)],  # 20: beyond K = 16
    })  # fmt: skip


async def test_reconcile_writes_only_the_difference_and_the_settings_last(sb: tuple[Southbound, RecordingSession]) -> None:
    s, session = sb
    held_switch(session)
    seen: dict[str, Any] = {}

    def hosts(held: HeldHosts) -> list[HostWrite]:
        seen["hosts"] = held
        return [HostWrite(Op.INSERT, HostIp("10.0.0.12", "02:00:00:00:00:01"))]

    def buckets(held: Any, before: Any) -> dict[int, str]:
        seen["buckets"] = (dict(held), dict(before))
        return {**held, 1: "g2", 2: "g1"}

    await s.reconcile(hosts, buckets)
    assert seen["hosts"] == HeldHosts([LearnedSource("02:00:00:00:00:01", 1)], {"02:00:00:00:00:01": 1},
                                      {"10.0.0.11": "02:00:00:00:00:01"})  # fmt: skip
    assert seen["buckets"] == ({0: "g1", 3: "g3"}, {})  # only valid entries count as held
    batch, settings = session.batches
    assert sorted(writes(batch)) == sorted([
        ("MODIFY", pc.TABLE_PORT_ROLES, (("port", 2),)),
        ("DELETE", pc.TABLE_PORT_ROLES, (("port", 7),)),
        ("INSERT", pc.TABLE_PORT_ROLES, (("port", 11),)),
        ("INSERT", pc.TABLE_PORT_ROLES, (("port", 12),)),
        ("INSERT", pc.TABLE_PORT_ROLES, (("port", 13),)),
        ("MODIFY", "P4MulticastGroupEntry", None),  # host ports are 1 and 2 now
        ("INSERT", pc.TABLE_HOST_IPS, (("target_ip", ent.ip_int("10.0.0.12")),)),
        ("MODIFY", pc.TABLE_BUCKETS, (1, 12)),  # held but wrong: rewritten
        ("INSERT", pc.TABLE_BUCKETS, (2, 11)),
        ("DELETE", pc.TABLE_BUCKETS, (("bucket", 20),)),
    ])  # fmt: skip
    assert writes(settings) == [("MODIFY", pc.TABLE_SETTINGS, ())]
    assert dict(s.assignment) == {0: "g1", 1: "g2", 2: "g1", 3: "g3"}


async def test_reconcile_of_a_switch_in_line_writes_nothing(sb: tuple[Southbound, RecordingSession], tmp_path: Path) -> None:
    s, session = sb
    cfg = make_config(tmp_path)
    session.tables.update({
        pc.TABLE_PORT_ROLES: [ent.port_role(p, pc.PortRole.HOST if p < 10 else pc.PortRole.GATEWAY) for p in cfg.ports],
        "P4MulticastGroupEntry": [ent.flood_group([1, 2])],
        "P4DigestEntry": [SWITCH_LISTS],
        pc.TABLE_BUCKETS: [ent.bucket(b, 11, MAC1) for b in range(16)],
        pc.TABLE_SETTINGS: [ent.settings(str(cfg.gateway_ip), cfg.vmac_base, cfg.bucket_mask, cfg.dispatch.hash)],
        pc.TABLE_ND_SETTINGS: [ent.nd_settings(None, None)],
    })  # fmt: skip
    await s.reconcile(lambda held: [], lambda held, before: dict(held))
    assert session.batches == []
    assert set(s.assignment.values()) == {"g1"} and len(s.assignment) == 16


async def test_reconcile_writes_the_gateway_ipv6_addresses(tmp_path: Path) -> None:
    """gateway_ip6 -> nd_settings' default action set_nd_config(LL_G, GUA_G), in the batch
    before the dispatch settings; an absent global address is ::; a held equal one is
    not rewritten; dropping gateway_ip6 from the config restores mark_nd_unconfigured."""
    ll, gua = ipaddress.IPv6Address("fe80::1"), ipaddress.IPv6Address("2001:db8:1::1")
    schema = P4Schema(P4INFO)
    for ip6, want in [
        ({"link_local": "fe80::1", "global": "2001:db8:1::1"}, ent.nd_settings(ll, gua)),
        ({"link_local": "fe80::1"}, ent.nd_settings(ll, None)),
        (None, ent.nd_settings(None, None)),
    ]:
        session = RecordingSession()
        over = {} if ip6 is None else {"gateway_ip6": ip6}
        s = Southbound(make_config(tmp_path, **over), session=session)
        s.listen(Listener())
        held = ent.nd_settings(ll, None) if ip6 is None else ent.nd_settings(None, None)
        session.tables[pc.TABLE_ND_SETTINGS] = [held]
        await s.reconcile(lambda held: [], lambda held, before: dict(held))
        nd = [u for u in session.batches[0] if getattr(u.entity, "table_id", None) == pc.TABLE_ND_SETTINGS]
        assert [(u.op, u.entity) for u in nd] == [(Op.MODIFY, want)]
        nd[0].entity.encode(schema)  # fits the P4Info (128-bit params)

        session.batches.clear()
        session.tables[pc.TABLE_ND_SETTINGS] = [want]
        await s.reconcile(lambda held: [], lambda held, before: dict(held))
        assert not any(getattr(u.entity, "table_id", None) == pc.TABLE_ND_SETTINGS for b in session.batches for u in b)
    args = ent.nd_settings(ll, None).action
    assert args is not None and args.args[pc.PARAM_SET_ND_CONFIG_GLOBAL_IP6] == 0


async def test_a_backup_mirrors_the_bucket_table(sb: tuple[Southbound, RecordingSession]) -> None:
    s, session = sb
    held_switch(session)
    await s.refresh_buckets()
    assert dict(s.assignment) == {0: "g1", 3: "g3"}
    assert (await s.read_hosts()).ips == {"10.0.0.11": "02:00:00:00:00:01"}


# -- what the switch streams


class Digest(list[dict[str, int]]):
    def ack(self) -> str:
        return "ack"


async def test_digests_reach_the_listener_and_are_acked_after_it(sb: tuple[Southbound, RecordingSession]) -> None:
    s, session = sb
    listener = Listener()
    s.listen(listener)
    await s.on_digest(Digest([
        {pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int("02:00:00:00:00:01"), pc.DIGEST_LEARN_DIGEST_PORT: 1,
         pc.DIGEST_LEARN_DIGEST_SRC_IP: ent.ip_int("10.0.0.11")},
        {pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int("02:00:00:00:00:02"), pc.DIGEST_LEARN_DIGEST_PORT: 2,
         pc.DIGEST_LEARN_DIGEST_SRC_IP: 0},
    ]))  # fmt: skip
    assert listener.calls == [("seen", [HostSeen("02:00:00:00:00:01", 1, "10.0.0.11"), HostSeen("02:00:00:00:00:02", 2, None)])]
    assert session.sent == ["ack"]


async def test_idle_timeouts_of_other_tables_are_ignored_and_packet_ins_parsed(
    sb: tuple[Southbound, RecordingSession],
) -> None:
    s, _ = sb
    listener = Listener()
    s.listen(listener)
    note = type("Note", (), {"table_entry": [ent.learned("02:00:00:00:00:01", 2, 1), ent.mac_entry("02:00:00:00:00:01", 2)]})
    await s.on_idle_timeout(note)
    pkt = type("Pkt", (), {"metadata": {pc.CTRL_HDR_PACKET_IN_REASON: 3, pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11},
                           "payload": b"frame"})  # fmt: skip
    await s.on_packet_in(pkt)
    assert listener.calls == [("idle", [HostIdle("02:00:00:00:00:01", 2)]), ("packet", PacketIn(3, 11, b"frame"))]


# -- the bucket encoder (a failover rewrites thousands of entries)


def test_bucket_encoder_matches_finsy() -> None:
    schema = P4Schema(P4INFO)
    enc = BucketEncoder(schema)
    gws = [(11, MAC1), (12, MAC2), (65535, "ff:ff:ff:ff:ff:ff")]
    for b in range(pc.MAX_BUCKETS):
        port, mac = gws[b % 3]
        op = (Op.INSERT, Op.MODIFY)[b % 2]
        want = p4r.Update(type=int(op), entity=ent.bucket(b, port, mac).encode(schema))  # type: ignore[arg-type]
        assert enc.encode(op, BucketEntry(b, port, mac)) == want, b


def test_a_4096_bucket_failover_encodes_faster_than_finsy() -> None:
    """The failover write's encoding: BucketEncoder straight from (bucket, port, MAC) against
    finsy's generic encoder. Prints both (bench/controller measures the whole failover)."""
    schema = P4Schema(P4INFO)
    entries = [BucketEntry(b, 12, MAC2) for b in range(pc.MAX_BUCKETS)]

    def fast() -> float:
        t0 = time.perf_counter()
        enc = BucketEncoder(schema)
        for e in entries:
            enc.encode(Op.MODIFY, e)
        return time.perf_counter() - t0

    def generic() -> float:
        t0 = time.perf_counter()
        for e in entries:
            p4r.Update(type=int(Op.MODIFY), entity=ent.bucket(e.bucket, e.port, e.mac).encode(schema))  # type: ignore[arg-type]
        return time.perf_counter() - t0

    f, g = min(fast() for _ in range(3)), min(generic() for _ in range(3))
    print(f"encode {len(entries)} bucket updates: BucketEncoder {f * 1e3:.1f} ms, finsy {g * 1e3:.1f} ms ({g / f:.1f}x)")
    assert f < g


@pytest.mark.parametrize("op", [Op.INSERT, Op.MODIFY, Op.DELETE])
@pytest.mark.parametrize("entry", [
    LearnedSource("02:00:00:00:00:01", 7),
    L2Entry("0a:bc:de:f0:12:34", 200),
    HostIp("10.64.0.255", "02:00:00:00:00:00"),
    LearnedIp6("fe80::ff:fe00:1", "02:00:00:00:00:01"),
    HostIp6("fd00:64::c0a8:1", "ff:ff:ff:ff:ff:fe"),
])  # fmt: skip
def test_the_fast_host_encoding_is_finsys(op: Op, entry: Any) -> None:
    schema = P4Schema(P4INFO)
    row = ent.host_update(HostWrite(op, entry), 300 * 10**9).entity
    want = p4r.Update(type=int(op), entity=row.entity().encode(schema)).SerializeToString(deterministic=True)
    assert ent.HostEncoder(schema).encode(op, row).SerializeToString(deterministic=True) == want


@pytest.mark.parametrize("entry", [L2Entry("02:00:00:00:00", 1), HostIp("10.0.0.300", "02:00:00:00:00:01"),
                                   HostIp6("fd00::g", "02:00:00:00:00:01"), L2Entry("02:00:00:00:00:01", 1 << 20)])
def test_the_fast_host_encoding_refuses_what_does_not_fit(entry: Any) -> None:
    with pytest.raises(ValueError):
        ent.HostEncoder(P4Schema(P4INFO)).encode(Op.INSERT, ent.host_update(HostWrite(Op.INSERT, entry), 1).entity)


@pytest.mark.parametrize(("device_config", "held", "want"), [
    # BMv2 (a device config): a switch a batching controller left (lists of 256, 2 ms) is set
    # back to every digest at once: a PI-based server holds a lone host 100-200 ms for such a
    # list, whatever its max_timeout_ns
    (True, SWITCH_LISTS, (1, 0)),
    # the eBPF switch (no device config): one left sending at once batches again, by the same
    # numbers the controller gathers by (learning.digest_list_size, digest_timeout_ms)
    (False, AT_ONCE, (256, 2_000_000)),
])  # fmt: skip
async def test_reconcile_sets_the_digest_config_of_the_switch_it_runs(
        tmp_path: Path, device_config: bool, held: Any, want: tuple[int, int]) -> None:
    pipeline = {"p4info": str(P4INFO)}
    if device_config:
        (tmp_path / "supergw.json").write_text("{}")
        pipeline["device_config"] = "supergw.json"
    session = RecordingSession()
    s = Southbound(make_config(tmp_path, pipeline=pipeline), session=session)
    s.listen(Listener())
    held_switch(session)
    session.tables["P4DigestEntry"] = [held]
    await s.reconcile(lambda held: [], lambda held, before: dict(held))
    digests = [u for batch in session.batches for u in batch if u.entity.__class__.__name__ == "P4DigestEntry"]
    assert [(u.op, u.entity.max_list_size, u.entity.max_timeout_ns) for u in digests] == [(Op.MODIFY, *want)]


def test_the_digest_queue_holds_a_cold_start_of_the_whole_table() -> None:
    from supergw_controller.southbound.switch import DIGEST_QUEUE_MAX, DIGEST_QUEUE_MIN, digest_queue_size

    # finsy's default of 50 digests dropped most of a 50,000-host cold start (bench/scale)
    assert digest_queue_size(65536) == 65536
    assert digest_queue_size(None) == pc.LEARNED_SOURCES_TABLE_SIZE  # no stated size: the shipped tables'
    assert digest_queue_size(131072) == DIGEST_QUEUE_MAX  # bounded
    assert digest_queue_size(10) == DIGEST_QUEUE_MIN


async def _stream(q: asyncio.Queue[Any]) -> Any:
    while True:
        yield await q.get()


async def test_gathered_lists_take_what_waits_up_to_the_list_size() -> None:
    """Hosts that come together are learned in one write: the lists already waiting are
    gathered, up to `learning.digest_list_size` hosts a batch."""
    from supergw_controller.southbound.switch import gather_lists

    q: asyncio.Queue[Any] = asyncio.Queue()
    for i in range(5):
        q.put_nowait(Digest([{"host": i}]))
    batches = gather_lists(_stream(q), 3, 0.05, 100)
    loop = asyncio.get_running_loop()
    started = loop.time()
    first = await anext(batches)
    full_after = loop.time() - started
    second = await anext(batches)
    short_after = loop.time() - started
    assert [[d[0]["host"] for d in b] for b in (first, second)] == [[0, 1, 2], [3, 4]]
    assert full_after < 0.04 <= short_after  # a full batch leaves at once, a short one after the wait
    await batches.aclose()


async def test_a_lone_host_waits_the_digest_timeout_at_most() -> None:
    """A host that comes alone is learned `learning.digest_timeout_ms` after its digest, not
    at the switch's pace (a PI-based switch sweeps its lists every 100 ms at the least); a
    digest that comes within the wait joins it, one that comes after it is the next batch's."""
    from supergw_controller.southbound.switch import gather_lists

    q: asyncio.Queue[Any] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    batches = gather_lists(_stream(q), 256, 0.05, 100)
    q.put_nowait(Digest([{"host": 1}]))
    loop.call_later(0.02, q.put_nowait, Digest([{"host": 2}]))
    loop.call_later(0.3, q.put_nowait, Digest([{"host": 3}]))
    started = loop.time()
    first = await anext(batches)
    waited = loop.time() - started
    assert [d[0]["host"] for d in first] == [1, 2] and 0.04 <= waited < 0.2
    second = await anext(batches)
    assert [d[0]["host"] for d in second] == [3]
    await batches.aclose()


async def test_gathered_lists_are_learned_in_one_call_and_each_acked(sb: tuple[Southbound, RecordingSession]) -> None:
    s, session = sb
    listener = Listener()
    s.listen(listener)
    one = {pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int("02:00:00:00:00:01"), pc.DIGEST_LEARN_DIGEST_PORT: 1,
           pc.DIGEST_LEARN_DIGEST_SRC_IP: ent.ip_int("10.0.0.11")}
    two = {pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int("02:00:00:00:00:02"), pc.DIGEST_LEARN_DIGEST_PORT: 2,
           pc.DIGEST_LEARN_DIGEST_SRC_IP: 0}
    await s.on_digests([Digest([one]), Digest([two])])
    assert listener.calls == [("seen", [HostSeen("02:00:00:00:00:01", 1, "10.0.0.11"), HostSeen("02:00:00:00:00:02", 2, None)])]
    assert session.sent == ["ack", "ack"]


async def test_a_pump_with_two_in_flight_works_on_the_next_item_while_one_waits() -> None:
    """Digest lists are learned two at a time: the second starts while the first waits for its
    write; every item is handled once, a failing one is counted and the others go on."""
    from supergw_controller.southbound.switch import pump_stream

    started: list[int] = []
    release = asyncio.Event()

    async def items() -> Any:
        for i in range(5):
            yield i

    async def handle(i: int) -> None:
        started.append(i)
        if i == 0:
            await release.wait()  # the first write is slow ...
        if i == 3:
            raise ValueError("a malformed list")

    rejected: dict[str, int] = {}
    task = asyncio.create_task(pump_stream(items(), handle, "digest", rejected, in_flight=2))
    for _ in range(50):
        await asyncio.sleep(0)
    assert started == [0, 1, 2, 3, 4][: len(started)] and started[:2] == [0, 1]  # ... the next ones meanwhile
    assert 0 in started and 4 in started  # one slot stays with item 0, the other works through the rest
    release.set()
    await task
    assert sorted(started) == [0, 1, 2, 3, 4] and rejected == {"digest": 1}


class QueuedSwitch:
    """finsy's Switch as `_on_primary` uses it: a digest queue exists only once its reader
    started (finsy drops a digest list that finds none), tasks run on the loop."""

    def __init__(self) -> None:
        self.queues: dict[str, asyncio.Queue[Any]] = {}
        self.dropped: list[Any] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def _read(self, name: str) -> Any:
        q: asyncio.Queue[Any] = asyncio.Queue(10)
        self.queues[name] = q
        try:
            while True:
                yield await q.get()
        finally:
            del self.queues[name]

    def read_digests(self, digest_id: str, *, queue_size: int = 50) -> Any:
        return self._read(digest_id)

    def read_idle_timeouts(self) -> Any:
        return self._read("idle")

    def read_packets(self) -> Any:
        return self._read("packets")

    def deliver(self, name: str, item: Any) -> None:
        q = self.queues.get(name)
        if q is None:
            self.dropped.append(item)  # what finsy does ("digest ignored")
        else:
            q.put_nowait(item)

    def create_task(self, coro: Any, name: str = "") -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self.tasks.append(task)
        return task


async def test_digests_that_come_during_the_reconcile_are_learned_after_it(tmp_path: Path) -> None:
    """The switch sends a digest once: one arriving while a new primary reconciles must wait
    in its queue, not be dropped, and be learned only once the reconcile rebuilt the table."""
    s = Southbound(make_config(tmp_path), session=RecordingSession())
    sw = QueuedSwitch()
    events: list[str] = []
    reconcile_done = asyncio.Event()

    class Slow(Listener):
        async def primary(self) -> None:
            events.append("reconcile started")
            sw.deliver(pc.DIGEST_LEARN_DIGEST, Digest([{pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int("02:00:00:00:00:07"),
                                                        pc.DIGEST_LEARN_DIGEST_PORT: 1,
                                                        pc.DIGEST_LEARN_DIGEST_SRC_IP: ent.ip_int("10.0.0.7")}]))
            await reconcile_done.wait()
            events.append("reconcile done")

        async def hosts_seen(self, hosts: list[HostSeen]) -> None:
            events.append(f"learned {hosts[0].mac}")

    s.listen(Slow())
    primary = asyncio.create_task(s._on_primary(None, sw))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    assert events == ["reconcile started"] and sw.dropped == []  # queued, not learned yet
    reconcile_done.set()
    await primary
    for _ in range(100):  # a lone host is learned learning.digest_timeout_ms (2) after its digest
        if len(events) == 3:
            break
        await asyncio.sleep(0.005)
    assert events == ["reconcile started", "reconcile done", "learned 02:00:00:00:00:07"]
    for t in sw.tasks:
        t.cancel()
