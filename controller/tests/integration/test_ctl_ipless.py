"""A host whose first frame has no IPv4 source still gets its IP learned (real switch).

The switch digests a (MAC, port) only while `learned_sources` misses, and a digest of a
non-IP frame carries `src_ip` = 0. The controller therefore installs `mac_table` for such
a digest but not `learned_sources`, so the host's next frame with an IPv4 source is
digested too and completes learning (`learned_sources` + `host_ips`): a gateway's ARP for
the host is then answered by the switch. A host that never sends an IPv4 source is learned
without one after `learning.ip_wait_s`, after which its frames produce no more digests.

Switch state is read over P4Runtime (Read needs no arbitration) as well as over REST.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from finsy import P4TableEntry
from finsy.p4schema import P4Schema
from finsy.proto import p4r, p4r_grpc

from sgwctl_harness import Controller, Heartbeats, Setup, TopologySpec, neighbour_mac
from sgwctl_topo import REMOTE_IP, Endpoint, Topology
from topologies.paths import P4INFO

from supergw_proto import p4constants as pc
from supergw_proto.api import HostView
from supergw_controller.southbound import entities as ent

IP_WAIT_S = 4.0
TOPOLOGY = TopologySpec(tag="i", index=50, hosts=2, gateways=1, prefix="sgw-cf")
API_PORT = 18750
ETHERTYPE_LOCAL_EXPERIMENTAL = 0x88B5  # IEEE 802 local experimental: no IPv4 source


@pytest.fixture(scope="module")
def ctl(setup: Setup) -> Iterator[Controller]:
    c = setup.controller("i-ctl", api_port=API_PORT, learning={"ip_wait_s": IP_WAIT_S})
    with Heartbeats([c], ["g1"]):
        c.start()
        yield c
    c.stop()


class SwitchReader:
    """P4Runtime Read of the host tables, decoded with the P4Info."""

    def __init__(self, topo: Topology) -> None:
        self.schema = P4Schema(P4INFO)
        self.device_id = topo.device_id
        self.channel = grpc.insecure_channel(topo.grpc_addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)

    def entries(self, table: str) -> list[P4TableEntry]:
        req = p4r.ReadRequest(device_id=self.device_id, entities=[P4TableEntry(table).encode(self.schema)])
        out = []
        for resp in self.stub.Read(req, timeout=5):
            out += [P4TableEntry.decode(e, self.schema) for e in resp.entities]
        return out

    def learned(self) -> set[tuple[str, int]]:
        return {
            (ent.mac_str(int(dict(e.match or {})["src_mac"])), int(dict(e.match or {})["port"]))
            for e in self.entries(pc.TABLE_LEARNED_SOURCES)
        }

    def mac_table(self) -> dict[str, int]:
        return {
            ent.mac_str(int(dict(e.match or {})["dst_mac"])): int(e.action.args["port"])  # type: ignore[union-attr]
            for e in self.entries(pc.TABLE_MAC_TABLE)
        }

    def host_ips(self) -> dict[str, str]:
        return {
            ent.ip_str(int(dict(e.match or {})["target_ip"])): ent.mac_str(int(e.action.args["host_mac"]))  # type: ignore[union-attr]
            for e in self.entries(pc.TABLE_HOST_IPS)
        }


@pytest.fixture(scope="module")
def switch(setup: Setup) -> Iterator[SwitchReader]:
    r = SwitchReader(setup.topo)
    yield r
    r.channel.close()


def non_ip_sender(ep: Endpoint, count: int = 1, gap: float = 0.0) -> subprocess.Popen[bytes]:
    """Start broadcasting `count` raw frames of a non-IP ethertype, `gap` s apart, from the
    endpoint's eth0 (AF_PACKET: no IP stack involved)."""
    code = (
        "import socket, time\n"
        "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
        "s.bind(('eth0', 0))\n"
        f"frame = b'\\xff' * 6 + bytes.fromhex('{ep.mac.replace(':', '')}') + "
        f"({ETHERTYPE_LOCAL_EXPERIMENTAL}).to_bytes(2, 'big') + b'supergw-no-ip'.ljust(46, b'\\0')\n"
        f"for i in range({count}):\n"
        "    s.send(frame)\n"
        f"    time.sleep({gap})\n"
    )
    return subprocess.Popen(["ip", "netns", "exec", ep.ns, sys.executable, "-c", code])


def send_non_ip(ep: Endpoint, count: int = 1, gap: float = 0.0) -> None:
    proc = non_ip_sender(ep, count, gap)
    assert proc.wait(timeout=30 + count * gap) == 0


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def host_view(ctl: Controller, mac: str) -> HostView | None:
    return next((h for h in ctl.client.hosts() if h.mac == mac), None)


def test_non_ip_first_frame_then_ipv4_learns_the_ip(setup: Setup, ctl: Controller, switch: SwitchReader) -> None:
    h1, g1 = setup.topo.endpoints["h1"], setup.topo.endpoints["g1"]
    send_non_ip(h1)
    wait_for("mac_table entry of h1", lambda: switch.mac_table().get(h1.mac) == h1.port)
    # Forwarding works at once, but learning waits for an IPv4 source.
    assert (h1.mac, h1.port) not in switch.learned()
    assert h1.ip not in switch.host_ips()
    hv = host_view(ctl, h1.mac)
    assert hv is not None and hv.ip is None and hv.learned is False

    # Now h1 talks IPv4: its ARP for IP_G (sender IP = h1.ip) and pings through its gateway.
    assert h1.ping(REMOTE_IP, count=2, interval=0.1)[1] == 2
    wait_for("host_ips entry of h1", lambda: switch.host_ips().get(h1.ip) == h1.mac)
    assert (h1.mac, h1.port) in switch.learned()
    hv = host_view(ctl, h1.mac)
    assert hv is not None and hv.ip == h1.ip and hv.learned is True

    # The gateway's ARP for h1 is answered by the switch from host_ips.
    g1.exec("ip", "neigh", "flush", "dev", "eth0")
    g1.ping(h1.ip, count=1, interval=0.2)
    assert neighbour_mac(g1, h1.ip) == h1.mac


def test_non_ip_host_is_learned_without_ip_after_ip_wait(setup: Setup, ctl: Controller, switch: SwitchReader) -> None:
    h2 = setup.topo.endpoints["h2"]
    d0 = ctl.client.status().digests_total
    t0 = time.monotonic()
    # IP-less frames 50 ms apart for 2 s (< ip_wait_s): each is digested while waiting.
    sender = non_ip_sender(h2, count=40, gap=0.05)
    try:
        wait_for("mac_table entry of h2", lambda: switch.mac_table().get(h2.mac) == h2.port)
        time.sleep(0.5)
        assert (h2.mac, h2.port) not in switch.learned()
        assert time.monotonic() - t0 < IP_WAIT_S, "too slow to see the waiting state; raise IP_WAIT_S"
        assert ctl.client.status().digests_total - d0 >= 5, "IP-less frames stopped producing digests"
        hv = host_view(ctl, h2.mac)
        assert hv is not None and hv.ip is None and hv.learned is False
    finally:
        sender.wait(timeout=30)
    # After ip_wait_s the controller learns it anyway (the sweep, even while it is silent) ...
    wait_for("learned_sources entry of h2", lambda: (h2.mac, h2.port) in switch.learned(), timeout=IP_WAIT_S + 5)
    assert time.monotonic() - t0 >= IP_WAIT_S - 0.5
    hv = host_view(ctl, h2.mac)
    assert hv is not None and hv.ip is None and hv.learned is True
    # ... and from then on its frames cost no digests.
    d1 = ctl.client.status().digests_total
    send_non_ip(h2, count=10, gap=0.03)
    time.sleep(0.3)
    assert ctl.client.status().digests_total == d1


def test_gateway_arp_miss_for_an_unknown_ip_is_counted(setup: Setup, ctl: Controller) -> None:
    g1 = setup.topo.endpoints["g1"]
    before = ctl.client.status().arp_misses_unknown_total
    g1.ping("10.0.0.99", count=1, interval=0.2)  # nobody has this address
    wait_for("an unknown-IP ARP miss", lambda: ctl.client.status().arp_misses_unknown_total > before)
    assert neighbour_mac(g1, "10.0.0.99") is None

