"""An IPv6 outer between two super gateways (issue 20, item 3: "configurable, IPv6 outer
between sites"): the two-site topology with `wan.subnet6`, N = 2 pairs and 2 hosts per
site, so every IKE and CHILD SA runs between the gateways' IPv6 WAN addresses; hosts on
either side reach each other over IPv4 and IPv6 inside it.

Checked: each member's IKE SA is ESTABLISHED between its own and its partner's IPv6 twin
(VICI), the pings of both inner families in both directions lose nothing, every IKE and
ESP frame on the shared WAN while they run is IPv6 (a capture on every WAN port: not one
IPv4 one), and the CHILD SAs counted the pings. Needs root, the built switch, strongSwan
and tcpdump; about 20 s here.
"""

from __future__ import annotations

import ipaddress
import subprocess
import time
from pathlib import Path

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.utils import PcapReader

from supergw_gateway.config import load_config
from supergw_gateway.runtime import Gateway
from supergw_gateway.tunnel import conn_name
from topologies.emulation import Emulation
from topologies.model import Topology
from topologies.schema import TWO_SITE_TOPOLOGY
from topologies.site import Site
from topologies.tests.emulation import EMULATION_MARKS, booted, captured, ping_counts

pytestmark = EMULATION_MARKS

WAN6 = ipaddress.IPv6Network("fd00:198:51:100::/64")
ROUTE_WAIT_S = 25.0  # the hosts' IPv6 default route comes from the controller's RAs (<= 16 s apart at first)
PINGS = 10


def _in(ns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=60, check=False)


def _child_packets(site: Site) -> dict[str, tuple[str, str, int]]:
    """gateway -> (its IKE SA's local and remote address, packets its installed CHILD SAs counted in + out)."""
    out = {}
    for g in site.topo.gateways:
        cfg = load_config(site.gateway_config(g.name))
        with Gateway(cfg).vici() as v:
            sas = [sa for sa in v.list_sas() if sa.name == conn_name(cfg) and sa.state == "ESTABLISHED"]
        assert len(sas) == 1, f"{g.name}: {len(sas)} established IKE SAs of {conn_name(cfg)}"
        children = [c for c in sas[0].children if c.state == "INSTALLED"]
        assert children, f"{g.name}: no installed CHILD SA"
        out[g.name] = (sas[0].local, sas[0].remote, sum(c.packets_in + c.packets_out for c in children))
    return out


def _wait_route6(topo: Topology, host: str) -> None:
    ns, deadline, route = topo.ns(host), time.monotonic() + ROUTE_WAIT_S, ""
    while time.monotonic() < deadline:
        route = _in(ns, "ip", "-6", "route", "show", "default").stdout
        if "proto ra" in route:
            return
        time.sleep(0.5)
    raise AssertionError(f"{host}: no IPv6 default route from the RAs within {ROUTE_WAIT_S:.0f} s: {route!r}")


def _announce(site: Site, host: str, addr: str) -> None:
    """`host` sends one IPv6 packet from `addr` (to its own gateway address), so that its switch
    learns the address and answers the gateways' Neighbor Solicitations for it. Without it a
    gateway cannot resolve an address its host never sent from: the switch punts the NS
    (GATEWAY_ND_MISS) and the controller ignores an address it does not know, as it does a
    gateway's ARP for an unknown IPv4 address (controller/README.md, "IPv6 learning")."""
    gua = str(site.topo.lan.gateway_ip6)
    _in(site.topo.ns(host), "ping", "-6", "-n", "-c", "1", "-W", "1", "-I", addr, gua)
    mac = next(h.mac for h in site.topo.hosts if h.name == host)
    deadline = time.monotonic() + 5
    while addr not in next((h.ipv6 for h in site.api().hosts() if h.mac == mac), []):
        assert time.monotonic() < deadline, f"{site.prefix} did not learn {host}'s {addr} from its packet"
        time.sleep(0.2)


def _outer_families(pcap: Path) -> tuple[int, int]:
    """(IPv4, IPv6) frames in the capture of IKE and ESP on the WAN."""
    v4 = v6 = 0
    with PcapReader(str(pcap)) as frames:
        for frame in frames:
            if IPv6 in frame:
                v6 += 1
            elif IP in frame:
                v4 += 1
    return v4, v6


def test_ipv6_outer_carries_ipv4_and_ipv6_inside(tmp_path: Path) -> None:
    emu = Emulation.from_file(TWO_SITE_TOPOLOGY, changes={
        "gateways": 2, "hosts_per_site": 2, "simulated_hosts": None,
        "wan": {"netns": "sgw-wan", "subnet": "198.51.100.0/24", "subnet6": str(WAN6)}})
    with booted(emu):  # `up` checked every host reaches the other site over IPv4 already
        a, b = emu.sites
        before = {s.prefix: _child_packets(s) for s in (a, b)}
        for site in (a, b):
            for g in site.topo.gateways:
                local, remote, _ = before[site.prefix][g.name]
                want = (str(site.topo.outer(g.wan_ip)), str(site.topo.outer(g.peer.wan_ip)))
                assert (local, remote) == want and ipaddress.ip_address(local) in WAN6, (
                    f"{g.name}'s IKE SA runs between {local} and {remote}, not the IPv6 twins {want}")
        pairs = [(a, a.topo.hosts[0], b.topo.hosts[0]), (b, b.topo.hosts[1], a.topo.hosts[1])]
        for site, src, dst in pairs:
            _wait_route6(site.topo, src.name)
            other = b if site is a else a
            _announce(other, dst.name, str(other.topo.lan6(dst.ip)))
        pcap = tmp_path / "wan.pcap"
        assert emu.spec.shared_wan is not None
        with captured(emu.spec.shared_wan, "any", pcap, "udp port 500 or udp port 4500 or ip proto 50 or ip6 proto 50"):
            for site, src, dst in pairs:
                for addr in (str(dst.ip), str(site.topo.remote6(dst.ip))):
                    ping = _in(site.topo.ns(src.name), "ping", "-n", "-c", str(PINGS), "-i", "0.05", "-W", "2", addr)
                    sent, got = ping_counts(ping.stdout)
                    assert got == sent == PINGS, f"{src.name} -> {dst.name} {addr}: {got}/{sent}\n{ping.stdout}"
        after = {s.prefix: _child_packets(s) for s in (a, b)}
    v4, v6 = _outer_families(pcap)
    counted = sum(after[p][g][2] - before[p][g][2] for p in after for g in after[p])
    print(f"IPv6 outer: {v6} IKE/ESP frames over IPv6 and {v4} over IPv4 on the WAN ports; "
          f"the CHILD SAs counted {counted} more packets")
    assert v4 == 0, f"{v4} IKE/ESP frames crossed the WAN over IPv4"
    # 4 flows x PINGS requests and replies, each one ESP packet across the WAN (captured on the
    # port it enters the bridge by and on the one it leaves by), counted by the sending and the
    # receiving CHILD SA
    assert v6 >= 4 * PINGS * 2, f"only {v6} IKE/ESP frames over IPv6 on the WAN"
    assert counted >= 4 * PINGS * 2 * 2, f"the CHILD SAs counted only {counted} packets for {4 * PINGS} pings"
