"""A full host table: the host past the switch's sizes is a counted, logged refusal, never a
write (the switch would refuse it) nor a crash; room made by ageing is used again. The
sizes come from the P4Info the switch runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from finsy.p4schema import P4Schema
from finsy.proto import p4i
from google.protobuf import text_format

from supergw_controller.learning import HostTable
from supergw_controller.refusals import REFUSAL_LOG_EVERY_S
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import HostCapacity, HostIp6, HostSeen, Ip6Seen, LearnedSource, Op
from supergw_proto import p4constants as pc

from corekit import P4INFO, Clock, make_config, running_core


def table(hosts: int | None = 3, ip6s: int | None = 2) -> HostTable:
    return HostTable({1}, "10.0.0.1", ip_wait_s=0.0, capacity=HostCapacity(hosts, ip6s))


def mac(i: int) -> str:
    return f"02:00:00:00:00:{i:02x}"


def test_the_host_past_the_capacity_is_refused_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    t = table()
    for i in range(3):
        assert t.learn(mac(i), 1, f"10.0.0.{10 + i}", 1.0)
    with caplog.at_level(logging.WARNING, logger="supergw_controller.refusals"):
        assert t.learn(mac(9), 1, "10.0.0.99", 2.0) == []
        assert t.learn(mac(9), 1, "10.0.0.99", 3.0) == []  # its next digest: refused again, not logged again
        assert t.learn(mac(8), 1, "10.0.0.98", 2.0 + REFUSAL_LOG_EVERY_S) == []
    assert len(t) == 3 and t.get(mac(9)) is None and t.mac_of_ip("10.0.0.99") is None
    assert t.refused_hosts.total == 3
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "host table (learned_sources, mac_table, host_ips) full: the switch holds 3 of 3" in said[0]
    assert f"host {mac(9)} on port 1 refused" in said[0] and "Age hosts out sooner" in said[0]
    assert "(2 in the last 10 s, 3 in all)" in said[1]
    # A known host is still re-learned (its entries rewritten), not refused.
    assert t.learn(mac(1), 1, "10.0.0.11", 4.0)[0].entry == LearnedSource(mac(1), 1)
    # Ageing makes room.
    t.expire(mac(0), 1)
    assert [w.op for w in t.learn(mac(9), 1, "10.0.0.99", 5.0)] == [Op.INSERT, Op.INSERT, Op.INSERT]
    assert t.refused_hosts.total == 3


def test_ipv6_addresses_past_their_capacity_are_refused() -> None:
    t = table(hosts=10, ip6s=2)
    assert t.learn_ip6(mac(1), 1, "fd00::1", 1.0)
    assert t.learn_ip6(mac(1), 1, "fe80::1:1", 1.0)
    writes = t.learn_ip6(mac(2), 1, "fd00::2", 1.0)  # a new host: its MAC is learned, the address refused
    assert [type(w.entry).__name__ for w in writes] == ["LearnedSource", "L2Entry"]
    assert t.ip6_count == 2 and t.refused_ip6s.total == 1
    assert t.mac_of_ip6("fd00::2") is None and t.get(mac(2)) is not None  # the host yes, the address no
    # An address it already has is not a new one.
    assert t.learn_ip6(mac(1), 1, "fd00::1", 2.0) and t.refused_ip6s.total == 1
    t.expire_ip6("fd00::1", mac(1))
    assert any(w.entry == HostIp6("fd00::2", mac(2)) for w in t.learn_ip6(mac(2), 1, "fd00::2", 3.0))


def test_an_ipv6_digest_of_an_unknown_host_in_a_full_table_is_refused() -> None:
    t = table(hosts=1, ip6s=10)
    assert t.learn(mac(1), 1, "10.0.0.11", 1.0)
    assert t.learn_ip6(mac(2), 1, "fd00::2", 1.0) == []
    assert t.refused_hosts.total == 1 and t.ip6_count == 0


def test_no_stated_size_means_no_limit() -> None:
    t = table(hosts=None, ip6s=None)
    for i in range(50):
        assert t.learn(mac(i), 1, None, 1.0)
    assert len(t) == 50 and t.refused_hosts.total == 0


def test_capacity_comes_from_the_p4info() -> None:
    assert ent.host_capacity(P4Schema(P4INFO)) == HostCapacity(pc.LEARNED_SOURCES_TABLE_SIZE, pc.LEARNED_IP6S_TABLE_SIZE)
    assert pc.LEARNED_SOURCES_TABLE_SIZE >= 50_000 and pc.LEARNED_IP6S_TABLE_SIZE >= 100_000
    # The smallest of the three host tables bounds the hosts; a size of 0 (unstated) bounds nothing.
    info = p4i.P4Info()
    text_format.Parse(P4INFO.read_text(), info)
    for t in info.tables:
        if t.preamble.name.endswith(".mac_table"):
            t.size = 1000
        if t.preamble.name.endswith(".host_ip6s"):
            t.size = 0
    assert ent.host_capacity(P4Schema(info)) == HostCapacity(1000, None)


async def test_the_core_refuses_and_says_so_in_status_and_metrics(tmp_path: Path) -> None:
    core, sess = await running_core(make_config(tmp_path), Clock())
    core.hosts_learning.table.capacity = HostCapacity(2, 1)
    await core.hosts_seen([HostSeen(mac(i), 1, f"10.0.0.{10 + i}") for i in range(3)])
    await core.ip6s_seen([Ip6Seen(mac(0), 1, "fd00::10"), Ip6Seen(mac(1), 1, "fd00::11")])
    written = {(u.op, u.entity.table_id) for batch in sess.batches for u in batch}
    assert (Op.INSERT, pc.TABLE_HOST_IPS) in written
    hosts = [u for batch in sess.batches for u in batch if u.entity.table_id == pc.TABLE_MAC_TABLE]
    assert len(hosts) == 2  # the third host was never written
    st = await core.status()
    assert (st.hosts, st.host_capacity, st.hosts_refused_total) == (2, 2, 1)
    assert (st.host_ip6s, st.host_ip6_capacity, st.host_ip6s_refused_total) == (1, 1, 1)


async def test_becoming_primary_reads_the_capacity_of_the_switchs_p4info(tmp_path: Path) -> None:
    core, _sess = await running_core(make_config(tmp_path), Clock())
    assert core.hosts_learning.table.capacity == HostCapacity(None, None)  # no switch yet: nothing refused
    await core.primary()
    assert core.hosts_learning.table.capacity == HostCapacity(pc.LEARNED_SOURCES_TABLE_SIZE, pc.HOST_IP6S_TABLE_SIZE)
