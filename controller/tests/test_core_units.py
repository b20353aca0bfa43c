"""Pure parts of the core: registry liveness, learning, assignment, reconcile diff, rates."""

from __future__ import annotations

from pathlib import Path

import pytest
from finsy import P4TableEntry
from finsy.p4schema import P4Schema

from supergw_proto import p4constants as pc
from supergw_controller.assignment import fill_missing, weighted_round_robin
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.errors import InvalidArgument, UnknownGateway
from supergw_controller.events import EventRing
from supergw_controller.gateways import GatewayRegistry
from supergw_controller.learning import ARP_REPLY, ARP_REQUEST, HostTable, arp_reply, parse_arp
from supergw_controller.rebalancer import GatewayState
from supergw_proto.reports import GatewayReport
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import Op
from supergw_controller.southbound.reconcile import diff_entries

from corekit import P4INFO, host_updates, make_config, ops


@pytest.fixture(scope="module")
def schema() -> P4Schema:
    return P4Schema(P4INFO)


# -- gateway registry


def test_registry_heartbeats_and_grace(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)  # dead after 3 x 100 ms, grace 2 s
    reg = GatewayRegistry(cfg, now=100.0, startup_grace_s=2.0)
    assert reg.tick(100.9) == []  # within grace, nobody has posted yet
    reg.heartbeat("g1", 101.0)
    # g1 posted, so from now on its own heartbeats judge it; g2 still has its grace.
    assert [t.gateway for t in reg.tick(101.5)] == ["g1"]
    assert [t.gateway for t in reg.tick(102.1)] == ["g2"]


def test_registry_death_and_recovery(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    reg = GatewayRegistry(cfg, now=0.0, startup_grace_s=0.5)
    for t in (0.1, 0.2, 0.3):
        reg.heartbeat("g1", t)
        reg.heartbeat("g2", t)
    assert reg.tick(0.55) == []
    reg.heartbeat("g1", 0.6)
    died = reg.tick(0.65)
    assert [(t.gateway, t.died) for t in died] == [("g2", True)]
    assert reg.get("g2").state is GatewayState.DEAD
    assert reg.get("g3").state is GatewayState.ALIVE  # heartbeat: false
    back = reg.heartbeat("g2", 0.7)
    assert back is not None and not back.died
    assert reg.get("g2").state is GatewayState.RECOVERING
    reg.refilled("g2")
    assert reg.get("g2").state is GatewayState.ALIVE


def test_takeover_grace_only_for_the_unheard(tmp_path: Path) -> None:
    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=5.0)
    reg.heartbeat("g1", 10.0)  # the backup hears g1 ...
    reg.heartbeat("g2", 10.0)
    reg.tick(10.05)
    reg.restart_grace(10.1)  # ... becomes primary; g1 keeps beating, g2 just stopped
    reg.heartbeat("g1", 10.3)
    died = reg.tick(10.45)
    assert [t.gateway for t in died] == ["g2"]  # no 5 s grace for a gateway heard until now


def test_registry_grace_does_not_revive_the_dead(tmp_path: Path) -> None:
    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=0.2)
    died = reg.tick(0.3)
    assert {t.gateway for t in died} == {"g1", "g2"}
    reg.restart_grace(1.0)
    assert reg.tick(1.05) == []
    assert reg.get("g1").dead


def test_registry_port_down_kills_even_without_heartbeats(tmp_path: Path) -> None:
    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=10)
    t = reg.set_port_state(13, False, 1.0)
    assert t is not None and t.died and t.why == "port down"
    assert reg.get("g3").state is GatewayState.DEAD
    t = reg.set_port_state(13, True, 2.0)
    assert t is not None and not t.died
    assert reg.set_port_state(1, False, 2.0) is None  # a host port


def test_registry_report_counts_as_heartbeat_and_cpu(tmp_path: Path) -> None:
    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=0.1)
    rep = GatewayReport(
        gateway="g1", timestamp=1.0, backend="libipsec", cpu_percent=42.0, softirq_percent=1, charon_cpu_percent=3,
        tunnel_bytes_in=1, tunnel_bytes_out=2, tunnel_packets_in=3, tunnel_packets_out=4,
    )  # fmt: skip
    reg.report(rep, 0.05)
    assert reg.get("g1").reported_cpu == pytest.approx(0.42)
    reg.report(rep.model_copy(update={"cpu_cores": 2.0}), 0.05)
    assert reg.get("g1").reported_cpu == pytest.approx(0.21)  # 42 % of one core is 21 % of a 2-core box
    assert reg.report_age("g1", 0.15) == pytest.approx(0.1)
    assert "g1" not in {t.gateway for t in reg.tick(0.3)}


def test_registry_errors(tmp_path: Path) -> None:
    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=1)
    with pytest.raises(UnknownGateway):
        reg.get("nope")
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InvalidArgument):
            reg.set_weight("g1", bad)
    reg.set_weight("g1", 3.5)
    assert reg.get("g1").weight == 3.5


# -- learning


def test_learn_new_host_and_ip(schema: P4Schema) -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0)
    ups = t.learn("02:00:00:00:00:01", 1, "10.0.0.11", 0.0)
    assert ops(ups) == [
        (Op.INSERT, pc.TABLE_LEARNED_SOURCES),
        (Op.INSERT, pc.TABLE_MAC_TABLE),
        (Op.INSERT, pc.TABLE_HOST_IPS),
    ]
    entities = host_updates(ups, 5_000_000_000)  # as the southbound writes them
    assert entities[0].entity.idle_timeout_ns == 5_000_000_000
    for u in entities:
        u.entity.entity().encode(schema)  # every entity fits the P4Info
    assert t.mac_of_ip("10.0.0.11") == "02:00:00:00:00:01"
    # same host again: only the learned_sources entry is rewritten (it went missing)
    again = t.learn("02:00:00:00:00:01", 1, "10.0.0.11", 1.0)
    assert ops(again) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)]


def test_learn_move_and_ip_takeover() -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0)
    t.learn("02:00:00:00:00:01", 1, "10.0.0.11", 0.0)
    moved = t.learn("02:00:00:00:00:01", 2, None, 1.0)
    assert ops(moved) == [
        (Op.DELETE, pc.TABLE_LEARNED_SOURCES),
        (Op.INSERT, pc.TABLE_LEARNED_SOURCES),
        (Op.MODIFY, pc.TABLE_MAC_TABLE),
    ]
    t.learn("02:00:00:00:00:02", 1, None, 1.0)
    take = t.learn("02:00:00:00:00:02", 1, "10.0.0.11", 2.0)
    assert ops(take)[-1] == (Op.MODIFY, pc.TABLE_HOST_IPS)
    assert t.mac_of_ip("10.0.0.11") == "02:00:00:00:00:02"
    assert t.get("02:00:00:00:00:01").ips == set()  # type: ignore[union-attr]


def test_learn_ignores_gateway_ports_multicast_and_ip_g() -> None:
    t = HostTable({1}, "10.0.0.1", ip_wait_s=30.0)
    assert t.learn("02:00:00:00:00:01", 11, "10.0.0.5", 0) == []
    assert t.learn("01:00:5e:00:00:01", 1, None, 0) == []
    ups = t.learn("02:00:00:00:00:01", 1, "10.0.0.1", 0)
    assert pc.TABLE_HOST_IPS not in [table for _, table in ops(ups)]


def test_expire_deletes_everything_of_the_host() -> None:
    t = HostTable({1}, "10.0.0.1", ip_wait_s=30.0)
    t.learn("02:00:00:00:00:01", 1, "10.0.0.11", 0)
    ups = t.expire("02:00:00:00:00:01", 1)
    assert sorted(ops(ups)) == sorted(
        [(Op.DELETE, pc.TABLE_LEARNED_SOURCES), (Op.DELETE, pc.TABLE_MAC_TABLE), (Op.DELETE, pc.TABLE_HOST_IPS)]
    )
    assert len(t) == 0 and t.mac_of_ip("10.0.0.11") is None


def test_adopt_switch_state() -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0)
    learned = [ent.learned("02:00:00:00:00:01", 1, 1), ent.learned("02:00:00:00:00:09", 11, 1)]
    macs = [ent.mac_entry("02:00:00:00:00:01", 2)]
    ips = [ent.host_ip("10.0.0.11", "02:00:00:00:00:01")]
    fixes = t.adopt(ent.held_hosts(learned, macs, ips), 0.0)  # as the southbound reads them
    assert sorted(ops(fixes)) == [
        (Op.MODIFY, pc.TABLE_MAC_TABLE),  # mac_table disagreed with learned_sources
        (Op.DELETE, pc.TABLE_LEARNED_SOURCES),  # on a gateway port
    ]
    assert t.mac_of_ip("10.0.0.11") == "02:00:00:00:00:01"
    assert t.get("02:00:00:00:00:01").port == 1  # type: ignore[union-attr]


def test_arp_parse_and_reply() -> None:
    from scapy.layers.l2 import ARP, Ether

    req = bytes(
        Ether(src="52:54:00:00:01:01", dst="ff:ff:ff:ff:ff:ff")
        / ARP(op=1, hwsrc="52:54:00:00:01:01", psrc="10.0.0.2", pdst="10.0.0.11")
    )
    arp = parse_arp(req)
    assert arp is not None and arp.op == ARP_REQUEST and arp.target_ip == "10.0.0.11"
    rep = Ether(arp_reply(arp, "02:00:00:00:00:01"))
    assert len(bytes(rep)) == 60
    assert rep.dst == "52:54:00:00:01:01" and rep.src == "02:00:00:00:00:01"
    a = rep[ARP]
    assert (a.op, a.hwsrc, a.psrc, a.hwdst, a.pdst) == (ARP_REPLY, "02:00:00:00:00:01", "10.0.0.11", "52:54:00:00:01:01", "10.0.0.2")
    assert parse_arp(req[:30]) is None
    assert parse_arp(bytes(Ether(type=0x0800) / (b"\x00" * 40))) is None
    bad = bytearray(req)
    bad[21] = 9  # opcode 9
    assert parse_arp(bytes(bad)) is None


# -- assignment


def test_weighted_round_robin_shares_and_interleaves() -> None:
    a = weighted_round_robin(range(12), {"a": 1, "b": 2})
    counts = {g: sum(1 for v in a.values() if v == g) for g in "ab"}
    assert counts == {"a": 4, "b": 8}
    assert [a[i] for i in range(3)] == ["b", "a", "b"]
    assert weighted_round_robin(range(4), {}) == {}


def test_fill_missing_keeps_existing_and_fills_to_share() -> None:
    cur = {0: "a", 1: "a", 2: "a", 3: "a", 99: "a"}
    out = fill_missing(8, cur, {"a": 1, "b": 1})
    assert {b: out[b] for b in range(4)} == {0: "a", 1: "a", 2: "a", 3: "a"}
    assert 99 not in out
    assert [out[b] for b in range(4, 8)] == ["b"] * 4


def test_fill_missing_without_period_interleaves_every_bucket() -> None:
    out = fill_missing(4096, {}, {"gw1": 1, "gw2": 1, "gw3": 1})
    assert [out[b] for b in (0, 1, 2)] == ["gw1", "gw2", "gw3"]
    # The paper's §4.3 hosts under identity (buckets 0x000, 0x100 ... 0xf00) land on all three.
    assert {out[b] for b in range(0, 4096, 256)} == {"gw1", "gw2", "gw3"}


def test_fill_missing_with_period_repeats_the_partition_of_the_classes() -> None:
    # The clustering paper's §4.3 hosts under identity, K = 4096: buckets 0x000, 0x100 ... 0xf00.
    # With period 256 they are all class 0, so all start on the first gateway, as in the paper.
    weights = {"gw1": 1.0, "gw2": 1.0, "gw3": 1.0}
    out = fill_missing(4096, {}, weights, period=256)
    assert {out[b] for b in range(0, 4096, 256)} == {"gw1"}
    assert all(out[b] == out[b % 256] for b in range(4096))
    assert [out[b] for b in (0, 1, 2)] == ["gw1", "gw2", "gw3"]  # the classes interleave
    counts = sorted(sum(1 for v in out.values() if v == g) for g in weights)
    assert counts == [85 * 16, 85 * 16, 86 * 16]  # an equal partition, as Algorithm 1 asks
    # Weights still set the shares; a period >= K is no period.
    heavy = fill_missing(64, {}, {"a": 1.0, "b": 3.0}, period=8)
    assert sum(1 for v in heavy.values() if v == "b") == 48
    assert fill_missing(64, {}, weights, period=64) == fill_missing(64, {}, weights)


def test_fill_missing_with_period_keeps_what_is_assigned() -> None:
    cur = {0: "gw2", 256: "gw2"}
    out = fill_missing(1024, cur, {"gw1": 1.0, "gw2": 1.0}, period=256)
    assert out[0] == out[256] == "gw2"
    missing_owner = {out[b] for b in (512, 768)}  # class 0's missing buckets go together
    assert len(missing_owner) == 1
    assert len(out) == 1024


# -- reconcile


def test_diff_entries(schema: P4Schema) -> None:
    want = [ent.port_role(1, pc.PortRole.HOST), ent.port_role(2, pc.PortRole.HOST), ent.port_role(11, pc.PortRole.GATEWAY)]
    have = [
        P4TableEntry.decode(ent.port_role(1, pc.PortRole.HOST).encode(schema), schema),
        P4TableEntry.decode(ent.port_role(2, pc.PortRole.GATEWAY).encode(schema), schema),
        P4TableEntry.decode(ent.port_role(7, pc.PortRole.HOST).encode(schema), schema),
    ]
    ups = diff_entries(schema, want, have)
    got = sorted((u.op.name, dict(u.entity.match)["port"]) for u in ups)
    assert got == [("DELETE", 7), ("INSERT", 11), ("MODIFY", 2)]
    assert diff_entries(schema, want, want) == []


def test_diff_entries_idle_timeout(schema: P4Schema) -> None:
    a = ent.learned("02:00:00:00:00:01", 1, 10)
    b = P4TableEntry.decode(ent.learned("02:00:00:00:00:01", 1, 20).encode(schema), schema)
    assert [u.op for u in diff_entries(schema, [a], [b])] == [Op.MODIFY]


# -- counters and events


def test_bucket_stats_rates_and_reset() -> None:
    s = BucketStats()
    s.update(10.0, {0: (100, 10_000), 1: (5, 500)})
    assert s.rates == {}
    s.update(12.0, {0: (300, 30_000), 1: (5, 500)})
    assert s.rates[0].pps == pytest.approx(100) and s.rates[0].bps == pytest.approx(10_000)
    assert 1 not in s.rates
    s.update(13.0, {0: (10, 1000)})  # counter went back: no negative rate
    assert s.rates == {}


def test_event_ring() -> None:
    r = EventRing(size=3)
    for i in range(5):
        r.add(float(i), "move", "rebalance", bucket=i, src="a", dst="b")
    recent = r.recent(10)
    assert [e.bucket for e in recent] == [4, 3, 2]
    assert [e.bucket for e in r.recent(10, since_id=4)] == [4]


def test_reinstall_known_hosts() -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=0.0)
    t.learn("02:00:00:00:00:01", 1, "10.0.0.11", 0)
    t.learn("02:00:00:00:00:02", 2, None, 0)
    ups = t.reinstall()
    assert sorted((op.name, table) for op, table in ops(ups)) == sorted(
        [("INSERT", pc.TABLE_LEARNED_SOURCES)] * 2 + [("INSERT", pc.TABLE_MAC_TABLE)] * 2 + [("INSERT", pc.TABLE_HOST_IPS)]
    )


def test_parse_netlink_link_messages() -> None:
    import struct

    from supergw_controller.failover import parse_links

    def link(mtype: int, name: str, flags: int) -> bytes:
        attr_payload = name.encode() + b"\0"
        attr = struct.pack("=HH", 4 + len(attr_payload), 3) + attr_payload
        attr += b"\0" * (-len(attr) % 4)
        body = struct.pack("=BxHiII", 0, 1, 7, flags, 0) + attr
        return struct.pack("=IHHII", 16 + len(body), mtype, 0, 0, 0) + body

    done = struct.pack("=IHHII", 20, 3, 0, 0, 0) + b"\0\0\0\0"
    msgs, fin = parse_links(link(16, "p11", 0x1 | 0x40) + link(17, "p12", 0x1) + done)
    assert msgs == [(16, "p11", 0x41), (17, "p12", 0x1)] and fin
    assert parse_links(b"\x01\x00") == ([], False)


async def test_watchdog_defers_verdicts_after_a_stalled_loop() -> None:
    import asyncio
    import time as _time

    from supergw_controller.failover import watchdog

    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(_time.monotonic())

    task = asyncio.create_task(watchdog(0.02, tick))
    await asyncio.sleep(0.1)
    _time.sleep(0.2)  # stall the loop
    stall_end = _time.monotonic()
    await asyncio.sleep(0.1)
    task.cancel()
    after = [t for t in ticks if t >= stall_end]
    # The overdue tick right after the stall is skipped; the following ones run.
    assert after and after[0] - stall_end >= 0.015
