"""tests/nud.py, rootless: the NUD capture and neighbour-notification readers count what the
IPv6 integration test asserts on, and flag every way the router's entry could go wrong."""

from __future__ import annotations

from pathlib import Path

from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet
from scapy.utils import wrpcap

from topologies.tests.nud import HOUR_OF_PROBES, neigh_events, nud_sysctls, read_nd

ROUTER = "fe80::1"
VMAC = "02:5e:60:00:00:3a"
HOST_MAC = "02:60:00:00:00:11"
GW_MAC = "02:60:00:00:01:02"
HOST = "fd00:60::60:ff:fe00:11"


def _ns(eth_dst: str, ip_dst: str) -> Packet:
    return (Ether(src=HOST_MAC, dst=eth_dst) / IPv6(src=HOST, dst=ip_dst, hlim=255)
            / ICMPv6ND_NS(tgt=ROUTER) / ICMPv6NDOptSrcLLAddr(lladdr=HOST_MAC))


def _na(eth_src: str, tll: str, r: int = 1, s: int = 1) -> Packet:
    return (Ether(src=eth_src, dst=HOST_MAC) / IPv6(src=ROUTER, dst=HOST, hlim=255)
            / ICMPv6ND_NA(tgt=ROUTER, R=r, S=s, O=1) / ICMPv6NDOptDstLLAddr(lladdr=tll))


def test_an_hour_of_default_nud_is_about_a_hundred_probes() -> None:
    assert HOUR_OF_PROBES == 103  # 3600 s / (30 s reachable + 5 s delay)
    assert "net.ipv6.neigh.eth0.delay_first_probe_time=0" in nud_sysctls("eth0")


def test_probes_to_the_vmac_answered_with_the_vmac_are_clean(tmp_path: Path) -> None:
    pcap = tmp_path / "nd.pcap"
    wrpcap(str(pcap), [_ns(VMAC, ROUTER), _na(VMAC, VMAC)] * 3 + [_ns(VMAC, ROUTER)])
    nd = read_nd(pcap, ROUTER, VMAC)
    assert (nd.unicast_ns, nd.na_good, nd.multicast_ns) == (4, 3, 0)
    assert nd.problems() == []  # the last probe may still be unanswered
    assert nd.ns_sources == {HOST: 4}


def test_a_gateway_answer_a_resolution_or_unanswered_probes_are_problems(tmp_path: Path) -> None:
    pcap = tmp_path / "nd.pcap"
    frames = [_ns(VMAC, ROUTER), _na(GW_MAC, GW_MAC),  # a gateway answered with its own MAC
              _ns("33:33:ff:00:00:01", "ff02::1:ff00:1"),  # the host resolved the router afresh
              _ns(VMAC, ROUTER), _ns(VMAC, ROUTER),
              _na(VMAC, VMAC, r=0),  # the router flag missing
              _ns(GW_MAC, ROUTER)]  # a probe to a gateway's MAC
    wrpcap(str(pcap), frames)
    nd = read_nd(pcap, ROUTER, VMAC)
    assert (nd.unicast_ns, nd.na_good, nd.multicast_ns) == (3, 0, 1)
    problems = "\n".join(nd.problems())
    assert f"from {GW_MAC}, target link-layer {GW_MAC}" in problems
    assert "R=0" in problems
    assert "1 multicast NS" in problems
    assert f"to {GW_MAC} / {ROUTER}" in problems
    assert "3 NUD probes but only 0 answers" in problems


def test_nd_about_other_addresses_is_not_counted(tmp_path: Path) -> None:
    pcap = tmp_path / "nd.pcap"
    other = (Ether(src=HOST_MAC, dst=VMAC) / IPv6(src=HOST, dst="fe80::2", hlim=255) / ICMPv6ND_NS(tgt="fe80::2"))
    wrpcap(str(pcap), [other, Ether(src=HOST_MAC, dst=VMAC) / IPv6(src=HOST, dst="fd00:61::b")])
    nd = read_nd(pcap, ROUTER, VMAC)
    assert (nd.unicast_ns, nd.na_good, nd.multicast_ns, nd.na_bad, nd.other_ns) == (0, 0, 0, [], [])


def test_neighbour_notifications_are_read_per_address() -> None:
    text = "\n".join([
        f"{ROUTER} dev eth0 lladdr {VMAC.upper()} router REACHABLE",
        f"{ROUTER} dev eth0 lladdr {VMAC} router STALE",
        "fe80::2 dev eth0 lladdr 02:00:00:00:00:02 REACHABLE",
        f"{ROUTER} dev eth0 router FAILED",
        f"Deleted {ROUTER} dev eth0 lladdr {GW_MAC} router STALE",
        f"{ROUTER} lladdr {VMAC} router PROBE",  # `ip -6 neigh show ADDR dev IF` leaves out the device
    ])
    events = neigh_events(text, ROUTER)
    assert [(e.state, e.lladdr, e.router) for e in events] == [
        ("REACHABLE", VMAC, True), ("STALE", VMAC, True), ("FAILED", None, True), ("DELETED", GW_MAC, True),
        ("PROBE", VMAC, True)]
