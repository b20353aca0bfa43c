"""Hosts learned from IPv6 traffic (`learn_ip6_digest_t`, docs/pipeline-contract.md): every
address of a host gets `learned_ip6s` (its own idle timeout) and `host_ip6s`; an IPv6 address
completes a host that waits for an IPv4 source; ageing, moves, adoption after a restart; a
gateway's punted Neighbor Solicitation answered from what the controller knows; REST shows it."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

from finsy import P4PacketOut
from scapy.layers.inet6 import IPv6, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr
from scapy.layers.l2 import Ether

from supergw_proto import p4constants as pc
from supergw_controller.learning import HostTable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import (
    HeldHosts,
    HostIp6,
    HostSeen,
    HostWrite,
    Ip6Idle,
    Ip6Seen,
    LearnedIp6,
    LearnedSource,
    Op,
    PacketIn,
)

from corekit import Clock, make_config, ops, running_core

MAC, MAC2 = "02:00:00:00:00:01", "02:00:00:00:00:02"
LL, GUA = "fe80::1ff:fe00:1", "fd00:60::1ff:fe00:1"
IP6 = {"link_local": "fe80::1", "global": "fd00:60::1"}


def table() -> HostTable:
    return HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0, gateway_ip6s=frozenset({"fe80::1", "fd00:60::1"}))


def test_each_address_is_learned_and_completes_a_waiting_host() -> None:
    t = table()
    t.learn(MAC, 1, None, 0.0)  # its first frame was IPv6: waiting for an IPv4 source
    h = t.get(MAC)
    assert h is not None and not h.learned
    w = t.learn_ip6(MAC, 1, LL, 0.1)
    assert ops(w) == [(Op.INSERT, pc.TABLE_LEARNED_IP6S), (Op.INSERT, pc.TABLE_HOST_IP6S),
                      (Op.INSERT, pc.TABLE_LEARNED_SOURCES)]
    assert h.learned and h.ip6s == {LL}
    assert ops(t.learn_ip6(MAC, 1, GUA, 0.2)) == [(Op.INSERT, pc.TABLE_LEARNED_IP6S), (Op.INSERT, pc.TABLE_HOST_IP6S)]
    assert h.ip6s == {LL, GUA} and t.mac_of_ip6(GUA) == MAC


def test_a_digest_for_an_unknown_mac_learns_the_mac_too() -> None:
    t = table()
    w = t.learn_ip6(MAC, 2, GUA, 0.0)
    assert ops(w) == [(Op.INSERT, pc.TABLE_MAC_TABLE), (Op.INSERT, pc.TABLE_LEARNED_IP6S),
                      (Op.INSERT, pc.TABLE_HOST_IP6S), (Op.INSERT, pc.TABLE_LEARNED_SOURCES)]
    h = t.get(MAC)
    assert h is not None and h.port == 2 and h.learned


def test_gateway_multicast_unspecified_and_non_host_ports_are_not_learned() -> None:
    t = table()
    for mac, port, ip6 in [(MAC, 1, "fe80::1"), (MAC, 1, "fd00:60::1"), (MAC, 1, "ff02::1"), (MAC, 1, "::"),
                           (MAC, 11, GUA), ("03:00:00:00:00:01", 1, GUA)]:
        assert t.learn_ip6(mac, port, ip6, 0.0) == [], (mac, port, ip6)
    assert len(t) == 0


def test_addresses_are_written_as_ipaddress_writes_them() -> None:
    """The C library's text of an address (the fast path of digests and learning) is
    ipaddress's: zero runs, ties, single zero groups, IPv4 tails, random addresses."""
    import random

    from supergw_controller.southbound.domain import ip6_text

    rng = random.Random(29)
    samples = ["::", "::1", "1::", "1:0:0:2:0:0:0:3", "1:0:0:2:0:0:3:4", "1:0:2:3:4:5:6:7", "::ffff:10.0.0.1",
               "::10.0.0.1", "64:ff9b::10.0.0.1", "ff02::1:ff00:1", "fe80::1ff:fe00:1", "2001:db8::ffff:0:1"]
    samples += [str(ipaddress.IPv6Address(rng.getrandbits(128) & rng.choice([(1 << 128) - 1, 0xFFFF << 64 | 0xFFFF])))
                for _ in range(2000)]
    for text in samples:
        addr = ipaddress.IPv6Address(text)
        assert ip6_text(addr.packed) == str(addr), text
        assert ent.ip6_str(int(addr)) == str(addr), text
    t = table()
    # a host's address in any spelling is learned as ipaddress writes it
    writes = t.learn_ip6(MAC, 1, "FD00:0060:0000::01FF:FE00:0001", 0.0)
    assert HostWrite(Op.INSERT, HostIp6(GUA, MAC)) in writes and t.mac_of_ip6(GUA) == MAC


def test_the_learn_digest_sent_before_the_ipv6_one_wrote_learned_sources_does_not_write_it_again() -> None:
    """A dual-stack host's first frames bring a learn digest and an IPv6 one; when the IPv6
    one is learned first it writes learned_sources, and the learn digest (sent before that
    entry was in) adds only the host's IP: an INSERT of learned_sources again would be refused
    by the switch (ALREADY_EXISTS) and cost a second write. Any later learn digest means the
    entry is missing, and it is written again, as it is after a failed IPv6 write."""
    for wait in (30.0, 0.0):
        t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=wait)
        first = t.learn_ip6(MAC, 1, GUA, 0.0)
        assert (Op.INSERT, pc.TABLE_LEARNED_SOURCES) in ops(first)
        assert ops(t.learn(MAC, 1, "10.0.0.11", 0.1)) == [(Op.INSERT, pc.TABLE_HOST_IPS)], wait
        assert ops(t.learn(MAC, 1, "10.0.0.11", 0.2)) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)], wait
    # a host already learned by its IPv4 source: every learn digest rewrites learned_sources
    t = table()
    t.learn(MAC, 1, "10.0.0.11", 0.0)
    t.learn_ip6(MAC, 1, GUA, 0.1)
    assert ops(t.learn(MAC, 1, "10.0.0.11", 0.2)) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)]
    # the IPv6 digest's write failed: the next learn digest writes learned_sources
    t = table()
    t.learn_ip6(MAC, 1, GUA, 0.0)
    t.forget_in_flight(MAC)
    assert ops(t.learn(MAC, 1, "10.0.0.11", 0.1)) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES), (Op.INSERT, pc.TABLE_HOST_IPS)]


def test_a_failed_ipv6_write_leaves_learned_sources_to_the_next_learn_digest(tmp_path: Path) -> None:
    async def scenario() -> None:
        core, session = await running_core(make_config(tmp_path, gateway_ip6=IP6), Clock())
        session.fail = True
        await core.ip6s_seen([Ip6Seen(MAC, 1, GUA)])
        session.fail = False
        await core.hosts_seen([HostSeen(MAC, 1, "10.0.0.11")])
        assert (Op.INSERT, pc.TABLE_LEARNED_SOURCES) in [(u.op, u.entity.table_id) for u in session.batches[-1]]

    asyncio.run(scenario())


def test_an_address_moving_to_another_host_is_rewritten() -> None:
    t = table()
    t.learn(MAC, 1, "10.0.0.11", 0.0)
    t.learn(MAC2, 2, "10.0.0.12", 0.0)
    t.learn_ip6(MAC, 1, GUA, 0.0)
    w = t.learn_ip6(MAC2, 2, GUA, 1.0)
    assert w == [
        *[x for x in w if x.entry == LearnedIp6(GUA, MAC)],
        *[x for x in w if x.entry == HostIp6(GUA, MAC2)],
        *[x for x in w if x.entry == LearnedIp6(GUA, MAC2)],
    ]
    assert [x.op for x in w] == [Op.DELETE, Op.MODIFY, Op.INSERT]
    h1, h2 = t.get(MAC), t.get(MAC2)
    assert h1 is not None and h2 is not None and h1.ip6s == set() and h2.ip6s == {GUA}


def test_idle_address_and_idle_host_remove_the_entries() -> None:
    t = table()
    t.learn(MAC, 1, "10.0.0.11", 0.0)
    t.learn_ip6(MAC, 1, LL, 0.0)
    t.learn_ip6(MAC, 1, GUA, 0.0)
    assert ops(t.expire_ip6(LL, MAC)) == [(Op.DELETE, pc.TABLE_LEARNED_IP6S), (Op.DELETE, pc.TABLE_HOST_IP6S)]
    assert t.mac_of_ip6(LL) is None
    out = ops(t.expire(MAC, 1))  # the host itself ages out: its remaining address goes too
    assert (Op.DELETE, pc.TABLE_LEARNED_IP6S) in out and (Op.DELETE, pc.TABLE_HOST_IP6S) in out
    assert t.mac_of_ip6(GUA) is None


def test_adopt_keeps_consistent_addresses_and_repairs_the_rest() -> None:
    t = table()
    held = HeldHosts(
        learned=[LearnedSource(MAC, 1)], l2={MAC: 1}, ips={},
        learned_ip6s=[LearnedIp6(GUA, MAC), LearnedIp6(LL, MAC2)],  # MAC2 is not a host the switch holds
        ip6s={GUA: MAC, "fd00:60::99": MAC},  # fd00:60::99 has no learned_ip6s entry: it would never age
    )
    out = t.adopt(held, 0.0)
    h = t.get(MAC)
    assert h is not None and h.ip6s == {GUA}
    deleted = {(w.op, w.entry) for w in out}
    assert deleted == {(Op.DELETE, HostIp6("fd00:60::99", MAC)), (Op.DELETE, LearnedIp6(LL, MAC2))}
    reinstall = ops(t.reinstall())
    assert (Op.INSERT, pc.TABLE_LEARNED_IP6S) in reinstall and (Op.INSERT, pc.TABLE_HOST_IP6S) in reinstall


def test_entities_round_trip() -> None:
    e = ent.host_update(HostWrite(Op.INSERT, LearnedIp6(GUA, MAC)), 5_000_000_000).entity
    assert e.table_id == pc.TABLE_LEARNED_IP6S and e.idle_timeout_ns == 5_000_000_000
    assert dict(e.match or {}) == {"src_ip6": int(ipaddress.IPv6Address(GUA)), "src_mac": 0x020000000001}
    learned, owners = ent.held_ip6s([e], [ent.host_ip6(GUA, MAC)])
    assert learned == [LearnedIp6(GUA, MAC)] and owners == {GUA: MAC}
    seen = ent.seen_ip6s([{"src_mac": 0x020000000001, "port": 1, "src_ip6": int(ipaddress.IPv6Address(LL))}])
    assert seen == ([Ip6Seen(MAC, 1, LL)], [])
    # a misbehaving switch's item is dropped with the reason, the good one kept
    seen = ent.seen_ip6s([{"src_mac": 0x020000000001, "port": 1, "src_ip6": 1 << 128},
                          {"src_mac": 0x020000000001, "port": 1, "src_ip6": int(ipaddress.IPv6Address(LL))}])
    assert seen[0] == [Ip6Seen(MAC, 1, LL)] and len(seen[1]) == 1 and "src_ip6" in seen[1][0]


def _gateway_ns(target: str, src: str = "fd00:60::251") -> bytes:
    return bytes(Ether(dst="33:33:ff:00:00:01", src="52:54:00:00:01:01")
                 / IPv6(src=src, dst="ff02::1:ff00:1", hlim=255)
                 / ICMPv6ND_NS(tgt=target) / ICMPv6NDOptSrcLLAddr(lladdr="52:54:00:00:01:01"))


def test_core_learns_ages_answers_and_shows_ipv6(tmp_path: Path) -> None:
    async def body() -> None:
        core, session = await running_core(make_config(tmp_path, gateway_ip6=IP6), Clock())
        await core.ip6s_seen([Ip6Seen(MAC, 1, GUA)])
        written = [(u.op, u.entity.table_id) for b in session.batches for u in b]
        assert (Op.INSERT, pc.TABLE_HOST_IP6S) in written and (Op.INSERT, pc.TABLE_LEARNED_IP6S) in written
        hosts = (await core.hosts()).hosts
        assert [(h.mac, h.ipv6, h.learned) for h in hosts] == [(MAC, [GUA], True)]
        # a gateway's NS the switch punted (host_ip6s missed): answered from what we know
        await core.packet_in(PacketIn(pc.PuntReason.GATEWAY_ND_MISS, 11, _gateway_ns(GUA)))
        outs = [m for m in session.sent if isinstance(m, P4PacketOut)]
        assert len(outs) == 1 and outs[0].metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] == 11
        na = Ether(outs[0].payload)
        assert na[Ether].dst == "52:54:00:00:01:01" and na[Ether].src == MAC
        assert (na[IPv6].src, na[IPv6].dst, na[IPv6].hlim) == (GUA, "fd00:60::251", 255)
        assert (na[ICMPv6ND_NA].tgt, na[ICMPv6ND_NA].R, na[ICMPv6ND_NA].S, na[ICMPv6ND_NA].O) == (GUA, 0, 1, 1)
        assert na[ICMPv6NDOptDstLLAddr].lladdr == MAC
        # scapy recomputes the checksum of the same fields: ours is right
        check = na.copy()
        del check[ICMPv6ND_NA].cksum
        assert Ether(bytes(check))[ICMPv6ND_NA].cksum == na[ICMPv6ND_NA].cksum
        # unknown target: ignored and counted
        await core.packet_in(PacketIn(pc.PuntReason.GATEWAY_ND_MISS, 11, _gateway_ns("fd00:60::77")))
        assert core.hosts_learning.nd_misses_unknown_total == 1 and len(session.sent) == 1
        # the address idles out
        session.batches.clear()
        await core.ip6s_idle([Ip6Idle(GUA, MAC)])
        assert [(u.op, u.entity.table_id) for u in session.batches[0]] == [
            (Op.DELETE, pc.TABLE_LEARNED_IP6S), (Op.DELETE, pc.TABLE_HOST_IP6S)]
        assert (await core.hosts()).hosts[0].ipv6 == []

    asyncio.run(body())


def test_dad_solicitation_is_answered_to_all_nodes(tmp_path: Path) -> None:
    async def body() -> None:
        core, session = await running_core(make_config(tmp_path, gateway_ip6=IP6), Clock())
        await core.ip6s_seen([Ip6Seen(MAC, 1, GUA)])
        frame = bytes(Ether(src="52:54:00:00:01:01") / IPv6(src="::", dst="ff02::1:ff00:1", hlim=255) / ICMPv6ND_NS(tgt=GUA))
        await core.packet_in(PacketIn(pc.PuntReason.GATEWAY_ND_MISS, 11, frame))
        na = Ether(session.sent[-1].payload)
        assert na[IPv6].dst == "ff02::1" and na[Ether].dst == "33:33:00:00:00:01" and na[ICMPv6ND_NA].S == 0

    asyncio.run(body())


def test_a_solicitation_for_an_address_being_learned_is_answered_at_its_learning(tmp_path: Path) -> None:
    """The gateway's NS for a host's new address reached the controller before the address's
    learn digest: it is answered when the address is learned (not at the gateway's retry)."""
    async def body() -> None:
        core, session = await running_core(make_config(tmp_path, gateway_ip6=IP6), Clock())
        await core.packet_in(PacketIn(pc.PuntReason.GATEWAY_ND_MISS, 11, _gateway_ns(GUA)))
        assert not [m for m in session.sent if isinstance(m, P4PacketOut)]
        await core.ip6s_seen([Ip6Seen(MAC, 1, GUA)])
        [out] = [m for m in session.sent if isinstance(m, P4PacketOut)]
        na = Ether(out.payload)
        assert out.metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] == 11
        assert (na[ICMPv6ND_NA].tgt, na[ICMPv6NDOptDstLLAddr].lladdr, na[Ether].dst) == (GUA, MAC, "52:54:00:00:01:01")

    asyncio.run(body())
