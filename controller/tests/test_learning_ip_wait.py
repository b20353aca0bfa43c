"""Learning waits for a host's IPv4 source: the state machine of `HostTable` and how the
Dispatcher drives it (digests, the periodic sweep, gateway ARP misses).

A digest with `src_ip` = 0 (the host's frame had no IPv4 source) installs `mac_table`
only, so that the switch keeps digesting the host until a frame with an IP comes; after
`learning.ip_wait_s` the host is learned without an IP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from finsy import P4PacketOut

from supergw_proto import p4constants as pc
from supergw_controller.config import ConfigError, PortRoleName
from supergw_controller.compose import ControllerCore
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.learning import ARP_REPLY, ARP_REQUEST, HostTable, arp_probe, parse_arp
from supergw_controller.pending_asks import PendingAsks
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import LearnedSource, Op

from corekit import Clock, RecordingSession, host_updates, make_config, ops

MAC = "02:00:00:00:00:01"
MAC2 = "02:00:00:00:00:02"
WAIT = 30.0


def table() -> HostTable:
    return HostTable({1, 2}, "10.0.0.1", ip_wait_s=WAIT)


def test_ipless_digest_forwards_but_keeps_the_switch_digesting() -> None:
    t = table()
    assert ops(t.learn(MAC, 1, None, 0.0)) == [(Op.INSERT, pc.TABLE_MAC_TABLE)]
    h = t.get(MAC)
    assert h is not None and not h.learned and h.ips == set()
    # More IP-less digests before ip_wait_s: nothing to write, still waiting.
    assert t.learn(MAC, 1, None, 1.0) == []
    assert t.learn(MAC, 1, "0.0.0.0", WAIT - 0.1) == []
    assert not h.learned
    # The first digest with an IP completes learning.
    done = t.learn(MAC, 1, "10.0.0.11", WAIT - 0.05)
    assert ops(done) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES), (Op.INSERT, pc.TABLE_HOST_IPS)]
    assert host_updates(done, 1_000_000_000)[0].entity.idle_timeout_ns == 1_000_000_000  # as the southbound writes it
    assert h.learned and h.ips == {"10.0.0.11"}
    assert t.mac_of_ip("10.0.0.11") == MAC
    assert t.sweep(WAIT * 10) == ([], [])  # nothing left waiting


def test_ip_g_in_a_digest_counts_as_no_ip() -> None:
    t = table()
    t.learn(MAC, 1, None, 0.0)
    assert t.learn(MAC, 1, "10.0.0.1", 1.0) == []
    assert not t.get(MAC).learned  # type: ignore[union-attr]


def test_ipless_host_is_learned_without_ip_after_ip_wait() -> None:
    t = table()
    t.learn(MAC, 1, None, 0.0)
    assert t.learn(MAC, 1, None, WAIT - 0.01) == []
    late = t.learn(MAC, 1, None, WAIT)
    assert ops(late) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)]
    h = t.get(MAC)
    assert h is not None and h.learned and h.ips == set()
    # A later digest (the switch lost the entry) with an IP still teaches it.
    again = t.learn(MAC, 1, "10.0.0.11", WAIT + 5)
    assert ops(again) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES), (Op.INSERT, pc.TABLE_HOST_IPS)]
    assert t.mac_of_ip("10.0.0.11") == MAC


def test_sweep_learns_silent_waiting_hosts_and_retries_after_a_failed_write() -> None:
    t = table()
    t.learn(MAC, 1, None, 0.0)
    t.learn(MAC2, 2, None, 10.0)
    assert t.sweep(WAIT - 1) == ([], [])
    macs, ups = t.sweep(WAIT)
    assert macs == [MAC] and ops(ups) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)]
    assert ups[0].entry == LearnedSource(MAC, 1)
    assert dict(host_updates(ups)[0].entity.match) == {"src_mac": ent.mac_int(MAC), "port": 1}
    t.unlearn(macs)  # the write failed
    assert t.sweep(WAIT)[0] == [MAC]
    assert t.sweep(WAIT + 10)[0] == [MAC2]
    assert all(h.learned for h in t.hosts())


def test_ip_change_replaces_the_old_host_ip() -> None:
    t = table()
    t.learn(MAC, 1, "10.0.0.11", 0.0)
    # learned_sources went missing on the switch and the host now uses another address
    ups = t.learn(MAC, 1, "10.0.0.12", 5.0)
    assert ops(ups) == [
        (Op.INSERT, pc.TABLE_LEARNED_SOURCES),
        (Op.DELETE, pc.TABLE_HOST_IPS),
        (Op.INSERT, pc.TABLE_HOST_IPS),
    ]
    assert dict(host_updates(ups)[1].entity.match) == {"target_ip": ent.ip_int("10.0.0.11")}
    assert t.mac_of_ip("10.0.0.11") is None and t.mac_of_ip("10.0.0.12") == MAC
    assert t.get(MAC).ips == {"10.0.0.12"}  # type: ignore[union-attr]
    # the same IP again changes nothing in host_ips
    assert ops(t.learn(MAC, 1, "10.0.0.12", 6.0)) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)]


def test_ip_change_of_an_adopted_waiting_host() -> None:
    """After a controller restart a host with mac_table + host_ips but no learned_sources
    is waiting; its next digest's IP replaces the adopted one."""
    t = table()
    fixes = t.adopt(ent.held_hosts([], [ent.mac_entry(MAC, 1)], [ent.host_ip("10.0.0.11", MAC)]), 100.0)
    assert fixes == []
    h = t.get(MAC)
    assert h is not None and not h.learned and h.ips == {"10.0.0.11"}
    ups = t.learn(MAC, 1, "10.0.0.12", 101.0)
    assert ops(ups) == [
        (Op.INSERT, pc.TABLE_LEARNED_SOURCES),
        (Op.DELETE, pc.TABLE_HOST_IPS),
        (Op.INSERT, pc.TABLE_HOST_IPS),
    ]
    assert t.mac_of_ip("10.0.0.11") is None and t.mac_of_ip("10.0.0.12") == MAC and h.learned


def test_ip_taken_over_from_another_host_is_not_deleted() -> None:
    t = table()
    t.learn(MAC, 1, "10.0.0.11", 0.0)
    t.learn(MAC2, 2, "10.0.0.11", 1.0)  # MAC2 took the address over
    ups = t.learn(MAC, 1, "10.0.0.12", 2.0)
    assert (Op.DELETE, pc.TABLE_HOST_IPS) not in ops(ups)
    assert t.mac_of_ip("10.0.0.11") == MAC2 and t.mac_of_ip("10.0.0.12") == MAC


def test_waiting_host_that_moves_keeps_waiting() -> None:
    t = table()
    t.learn(MAC, 1, None, 0.0)
    assert ops(t.learn(MAC, 2, None, 1.0)) == [(Op.MODIFY, pc.TABLE_MAC_TABLE)]  # no learned_sources to delete
    assert t.get(MAC).port == 2 and not t.get(MAC).learned  # type: ignore[union-attr]
    done = t.learn(MAC, 2, "10.0.0.11", 2.0)
    assert ops(done) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES), (Op.INSERT, pc.TABLE_HOST_IPS)]
    assert done[0].entry == LearnedSource(MAC, 2)


def test_reinstall_of_a_waiting_host() -> None:
    t = table()
    t.learn(MAC, 1, None, 0.0)
    t.learn(MAC2, 2, "10.0.0.12", 0.0)
    assert sorted((op.name, table) for op, table in ops(t.reinstall())) == sorted(
        [("INSERT", pc.TABLE_LEARNED_SOURCES), ("INSERT", pc.TABLE_HOST_IPS)] + [("INSERT", pc.TABLE_MAC_TABLE)] * 2
    )


def test_ip_wait_zero_learns_on_the_first_digest() -> None:
    t = HostTable({1}, "10.0.0.1", ip_wait_s=0.0)
    assert ops(t.learn(MAC, 1, None, 0.0)) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES), (Op.INSERT, pc.TABLE_MAC_TABLE)]
    with pytest.raises(ValueError, match="ip_wait_s must be >= 0"):
        HostTable({1}, "10.0.0.1", ip_wait_s=-1.0)


def test_config_learning_ip_wait(tmp_path: Path) -> None:
    assert make_config(tmp_path).learning.ip_wait_s == 30.0
    assert make_config(tmp_path, learning={"ip_wait_s": 2.5}).learning.ip_wait_s == 2.5
    with pytest.raises(ConfigError, match=r"learning\.ip_wait_s: Input should be greater than or equal to 0"):
        make_config(tmp_path, learning={"ip_wait_s": -1})
    with pytest.raises(ConfigError, match=r"learning\.ip_wait: unknown key"):
        make_config(tmp_path, learning={"ip_wait": 1})


# -- the Dispatcher's side: digests, sweep, ARP misses


class Digest(list[dict[str, int]]):
    def ack(self) -> str:
        return "ack"


def digest(mac: str, port: int, ip: str | None) -> Digest:
    return Digest([{"src_mac": ent.mac_int(mac), "port": port, "src_ip": ent.ip_int(ip) if ip else 0}])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def disp(tmp_path: Path, clock: Clock) -> tuple[ControllerCore, RecordingSession]:
    s = RecordingSession()
    return ControllerCore(make_config(tmp_path, learning={"ip_wait_s": 5}), None, clock=clock, session=s), s


async def test_dispatcher_learns_the_ip_from_a_later_digest(disp: tuple[ControllerCore, RecordingSession], clock: Clock) -> None:
    d, s = disp
    await d.switch.on_digest(digest(MAC, 1, None))
    assert [ops(b) for b in s.batches] == [[(Op.INSERT, pc.TABLE_MAC_TABLE)]]
    assert s.sent == ["ack"]
    [hv] = (await d.hosts()).hosts
    assert (hv.mac, hv.ip, hv.learned) == (MAC, None, False)
    clock.t += 1
    await d.switch.on_digest(digest(MAC, 1, "10.0.0.11"))
    assert ops(s.batches[-1]) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES), (Op.INSERT, pc.TABLE_HOST_IPS)]
    [hv] = (await d.hosts()).hosts
    assert (hv.ip, hv.learned) == ("10.0.0.11", True)
    assert (await d.status()).digests_total == 2


async def test_dispatcher_sweep_learns_waiting_hosts(disp: tuple[ControllerCore, RecordingSession], clock: Clock) -> None:
    d, s = disp
    await d.switch.on_digest(digest(MAC, 1, None))
    await d.hosts_learning.sweep()
    assert len(s.batches) == 1  # nothing before ip_wait_s
    clock.t += 5
    s.fail = True
    with pytest.raises(SwitchUnavailable):
        await d.hosts_learning.sweep()
    assert not d.hosts_learning.table.get(MAC).learned  # type: ignore[union-attr]
    s.fail = False
    await d.hosts_learning.sweep()
    assert ops(s.batches[-1]) == [(Op.INSERT, pc.TABLE_LEARNED_SOURCES)]
    assert (await d.hosts()).hosts[0].learned


class Pkt:
    """A gateway's ARP request the switch punted (`host_ips` missed)."""

    def __init__(self, target: str, sender_ip: str = "10.0.0.2") -> None:
        self.metadata = {
            pc.CTRL_HDR_PACKET_IN_REASON: int(pc.PuntReason.GATEWAY_ARP_MISS),
            pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11,
        }
        self.payload = arp_request(GW_MAC, sender_ip, target)


GW_MAC = "52:54:00:00:01:01"


async def test_a_gateway_arp_for_an_unknown_ip_asks_the_hosts(disp: tuple[ControllerCore, RecordingSession],
                                                              clock: Clock) -> None:
    """A host silent past its ageing is forgotten; a gateway's ARP never reaches hosts: the
    controller asks the host ports for the address (RFC 5227 probe), once a second at most."""
    d, s = disp
    await d.switch.on_digest(digest(MAC, 1, "10.0.0.11"))
    host_ports = sorted(d.config.ports_with_role(PortRoleName.HOST))
    assert host_ports
    await d.switch.on_packet_in(Pkt("10.0.0.99"))
    st = await d.status()
    assert st.arp_misses_unknown_total == 1 and st.packet_ins_total == 1
    probes = [m for m in s.sent if isinstance(m, P4PacketOut)]
    assert sorted(m.metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] for m in probes) == host_ports
    for m in probes:
        arp = parse_arp(m.payload)
        assert arp is not None and arp.op == ARP_REQUEST and m.payload[:6] == b"\xff" * 6
        # the gateway's MAC as sender, no sender address: the owner answers, nobody caches it
        assert (arp.sender_mac, arp.sender_ip, arp.target_ip) == (GW_MAC, "0.0.0.0", "10.0.0.99")
    assert d.hosts_learning.arp_solicits_total == 1
    await d.switch.on_packet_in(Pkt("10.0.0.99"))  # the gateway retries within the second: not again
    clock.t += 1.0
    await d.switch.on_packet_in(Pkt("10.0.0.99"))  # a second later: asked again
    assert d.hosts_learning.arp_solicits_total == 2
    assert len([m for m in s.sent if isinstance(m, P4PacketOut)]) == 2 * len(host_ports)
    await d.switch.on_packet_in(Pkt("10.0.0.1"))  # IP_G (punted without host_ips): never asked for
    await d.switch.on_packet_in(Pkt("10.0.0.98", sender_ip="10.0.0.98"))  # a gateway's gratuitous ARP: neither
    assert d.hosts_learning.arp_solicits_total == 2
    before = len(s.sent)
    await d.switch.on_packet_in(Pkt("10.0.0.11"))  # known: answered with a packet-out to the gateway
    assert (await d.status()).arp_misses_unknown_total == 5  # the known one is no miss
    [reply] = s.sent[before:]
    assert reply.metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] == 11


def test_arp_probe_frame() -> None:
    frame = arp_probe(GW_MAC, "10.0.0.99")
    arp = parse_arp(frame)
    assert len(frame) == 60 and arp is not None
    assert (arp.op, arp.sender_mac, arp.sender_ip, arp.target_mac, arp.target_ip, arp.eth_src) == (
        ARP_REQUEST, GW_MAC, "0.0.0.0", "00:00:00:00:00:00", "10.0.0.99", GW_MAC)


def arp_request(sender_mac: str, sender_ip: str, target_ip: str) -> bytes:
    import struct

    mac = bytes.fromhex(sender_mac.replace(":", ""))
    eth = b"\xff" * 6 + mac + struct.pack("!H", 0x0806)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, ARP_REQUEST) + mac + bytes(map(int, sender_ip.split(".")))
    arp += bytes(6) + bytes(map(int, target_ip.split(".")))
    return eth + arp + bytes(18)


async def test_a_gateway_asking_for_a_host_being_learned_is_answered_at_its_learning(
        disp: tuple[ControllerCore, RecordingSession], clock: Clock) -> None:
    """A new host's first frame and the gateway's ARP for it (the reply to that first frame)
    reach the controller together, the ARP first: it is answered as soon as the host is
    learned, not at the gateway's next retry a second later."""
    d, s = disp
    await d.switch.on_packet_in(Pkt("10.0.0.11"))
    before = len(s.sent)
    await d.switch.on_digest(digest(MAC, 1, "10.0.0.11"))
    [reply] = [m for m in s.sent[before:] if isinstance(m, P4PacketOut)]
    arp = parse_arp(reply.payload)
    assert reply.metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] == 11
    assert arp is not None and (arp.op, arp.sender_ip, arp.sender_mac, arp.target_mac) == (
        ARP_REPLY, "10.0.0.11", MAC, GW_MAC)
    assert d.hosts_learning.asks_answered_late_total == 1
    # answered once: the host's next digest (it moved ports) answers nobody
    before = len(s.sent)
    await d.switch.on_digest(digest(MAC, 2, "10.0.0.11"))
    assert not [m for m in s.sent[before:] if isinstance(m, P4PacketOut)]
    # an ask older than the gateway's own retries (it gave up) is not answered
    await d.switch.on_packet_in(Pkt("10.0.0.12"))
    clock.t += 10
    before = len(s.sent)
    await d.switch.on_digest(digest("02:00:00:00:00:12", 1, "10.0.0.12"))
    assert not [m for m in s.sent[before:] if isinstance(m, P4PacketOut)]


async def test_an_ask_is_not_answered_when_the_learning_write_fails(
        disp: tuple[ControllerCore, RecordingSession]) -> None:
    d, s = disp
    await d.switch.on_packet_in(Pkt("10.0.0.11"))
    before = len(s.sent)
    s.fail = True
    await d.switch.on_digest(digest(MAC, 1, "10.0.0.11"))
    s.fail = False
    assert not [m for m in s.sent[before:] if isinstance(m, P4PacketOut)]
    assert d.hosts_learning.asks_answered_late_total == 0


def test_pending_asks_are_bounded_and_expire() -> None:
    asks = PendingAsks(keep_s=3.0, limit=2)
    asks.add("10.0.0.1", 11, lambda mac: mac.encode(), now=0.0)
    asks.add("10.0.0.1", 11, lambda mac: b"latest", now=0.5)  # the same gateway again: replaced
    asks.add("10.0.0.2", 12, lambda mac: mac.encode(), now=1.0)
    asks.add("10.0.0.3", 11, lambda mac: mac.encode(), now=2.0)  # full: dropped
    assert (len(asks), asks.dropped_total) == (2, 1)
    [a] = asks.take("10.0.0.1", now=2.0)
    assert (a.port, a.answer("m")) == (11, b"latest") and asks.take("10.0.0.1", now=2.0) == []
    asks.add("10.0.0.3", 11, lambda mac: mac.encode(), now=5.0)
    asks.add("10.0.0.4", 11, lambda mac: mac.encode(), now=5.0)  # full, but 10.0.0.2 expired at 4.0: room
    assert (len(asks), asks.dropped_total) == (2, 1) and asks.take("10.0.0.2", now=5.0) == []
    assert len(asks.take("10.0.0.4", now=5.0)) == 1
