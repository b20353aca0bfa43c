"""Namespaces, veths and bridges of a `Topology`, made and removed with iproute2.

Every veth is created directly inside its two namespaces (`ip link add A netns X type
veth peer name B netns Y`), so the root namespace only ever holds the one management
interface `<prefix>-m0`. Removing a namespace removes its veths, so teardown is
"delete every namespace we name, then the management interface", and is idempotent.
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Callable
from pathlib import Path

from topologies.model import Topology

Say = Callable[[str], None]

# TX checksum offload on a veth leaves checksums for the receiving NIC to fill in;
# frames redirected by XDP/tc bypass that, so hosts and gateways compute them in software.
_OFFLOADS_OFF = ("tx", "off", "tso", "off", "gso", "off")
# supergw-hostsim's veth: its end in `<prefix>-hsim`, and the switch's end (model.SimulatedHostsSpec).
SIM_IF = "hsim0"
SIM_SWITCH_IF = "sw-hsim"


class NetworkError(RuntimeError):
    """An iproute2 command failed while building the topology."""


def run(argv: list[str], netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    proc = subprocess.run(full, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise NetworkError(f"`{' '.join(full)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def link_exists(name: str, netns: str | None = None) -> bool:
    return run(["ip", "link", "show", "dev", name], netns, check=False).returncode == 0


def existing_namespaces(topo: Topology) -> list[str]:
    return [ns for ns in topo.namespaces() if netns_exists(ns)]


def _veth(a: str, a_ns: str | None, b: str, b_ns: str) -> None:
    a_where = ["netns", a_ns] if a_ns else []
    run(["ip", "link", "add", a, *a_where, "type", "veth", "peer", "name", b, "netns", b_ns])
    run(["ip", "link", "set", a, "up"], a_ns)
    run(["ip", "link", "set", b, "up"], b_ns)


def _addr(netns: str, dev: str, ip: object, prefixlen: int) -> None:
    run(["ip", "addr", "replace", f"{ip}/{prefixlen}", "dev", dev], netns)


def _bridge(netns: str, ports: list[str]) -> None:
    run(["ip", "link", "add", "br0", "type", "bridge"], netns)
    run(["ip", "link", "set", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0"], netns)
    for port in ports:
        run(["ip", "link", "set", port, "master", "br0"], netns)
    run(["ip", "link", "set", "br0", "up"], netns)


def _sysctls(netns: str, forward: bool) -> None:
    settings = {"net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.default.rp_filter": "0"}
    if forward:
        settings["net.ipv4.ip_forward"] = "1"
    for key, value in settings.items():
        run(["sysctl", "-q", "-w", f"{key}={value}"], netns)


def _offloads_off(netns: str, dev: str) -> None:
    run(["ethtool", "-K", dev, *_OFFLOADS_OFF], netns, check=False)


def switch_interfaces(topo: Topology) -> dict[int, str]:
    """P4 port number -> interface name inside the switch namespace."""
    ports = {h.port: f"sw-{h.name}" for h in topo.hosts}
    ports.update({g.port: f"sw-{g.name}" for g in topo.gateways})
    if topo.simulated_hosts is not None:
        ports[topo.simulated_hosts.port] = SIM_SWITCH_IF
    return dict(sorted(ports.items()))


def check_root_addresses(topo: Topology) -> None:
    """The management subnet gets an address in the root namespace: refuse to overlap one there."""
    out = run(["ip", "-4", "-o", "addr", "show"]).stdout
    for line in out.splitlines():
        fields = line.split()
        dev, cidr = fields[1], fields[3]
        if dev != topo.mgmt_root_if and ipaddress.IPv4Interface(cidr).network.overlaps(topo.mgmt.subnet):
            raise NetworkError(f"the management subnet {topo.mgmt.subnet} overlaps {cidr} on {dev} in the root "
                               "namespace; pick another mgmt.subnet in the topology file")


def build(topo: Topology, say: Say) -> None:
    """Create every namespace, link and address. The caller tears down on failure."""
    check_root_addresses(topo)
    lan_len = topo.lan.subnet.prefixlen
    for ns in topo.namespaces():
        run(["ip", "netns", "add", ns])
        run(["ip", "link", "set", "lo", "up"], ns)
        # IPv4-only emulation: without IPv6 a host's first frame is ARP or IPv4, which the
        # switch's learning digest carries the host's IP from (an ND frame would not).
        for scope in ("all", "default"):
            run(["sysctl", "-q", "-w", f"net.ipv6.conf.{scope}.disable_ipv6=1"], ns)
    sw, rlan, mgmt = topo.switch_ns, topo.ns("rlan"), topo.ns("mgmt")
    wan = topo.partner_site.wan_netns if topo.partner_site is not None else topo.ns("wan")
    say(f"namespaces: {len(topo.namespaces())} created ({topo.prefix}-*)")

    for h in topo.hosts:
        hns = topo.ns(h.name)
        _veth(f"sw-{h.name}", sw, "eth0", hns)
        run(["ip", "link", "set", "eth0", "address", h.mac], hns)
        _addr(hns, "eth0", h.ip, lan_len)
        run(["ip", "route", "replace", "default", "via", str(topo.lan.gateway_ip)], hns)
        _offloads_off(hns, "eth0")
    say(f"LAN hosts: {', '.join(h.name for h in topo.hosts)} on {topo.lan.subnet}, default via {topo.lan.gateway_ip}")
    if (sim := topo.simulated_hosts) is not None:
        # supergw-hostsim's port: the kernel of its namespace stays silent on it (no address, no
        # ARP, no IPv6), so every frame the switch sees comes from a simulated host.
        sns = topo.ns("hsim")
        _veth(SIM_SWITCH_IF, sw, SIM_IF, sns)
        run(["ip", "link", "set", SIM_IF, "arp", "off"], sns)
        _offloads_off(sns, SIM_IF)
        say(f"simulated hosts: {sim.count} ({sim.first_ip}.., {sim.first_mac}..) on switch port {sim.port} "
            f"({sns}/{SIM_IF})")

    wan_len, rlan_len, mgmt_len = topo.wan.subnet.prefixlen, topo.remote.subnet.prefixlen, topo.mgmt.subnet.prefixlen
    wan_ports, rlan_ports, mgmt_ports = [], [], []
    for g in topo.gateways:
        gns, pns = topo.ns(g.name), topo.ns(g.peer.name)
        _veth(f"sw-{g.name}", sw, "lan0", gns)
        run(["ip", "link", "set", "lan0", "address", g.mac], gns)
        _addr(gns, "lan0", g.lan_ip, lan_len)
        _offloads_off(gns, "lan0")
        _veth(topo.wan_port(g), wan, "wan0", gns)
        _addr(gns, "wan0", g.wan_ip, wan_len)
        _veth(g.name, mgmt, "mgmt0", gns)
        _addr(gns, "mgmt0", g.mgmt_ip, mgmt_len)
        _sysctls(gns, forward=True)
        mgmt_ports.append(g.name)
        if topo.partner_site is not None:
            wan_ports.append(topo.wan_port(g))
            continue  # the peer is the partner site's gateway, built by that site
        _veth(g.peer.name, wan, "wan0", pns)
        _addr(pns, "wan0", g.peer.wan_ip, wan_len)
        _veth(g.peer.name, rlan, "lan0", pns)
        _addr(pns, "lan0", g.peer.lan_ip, rlan_len)
        _sysctls(pns, forward=True)
        wan_ports += [g.name, g.peer.name]
        rlan_ports.append(g.peer.name)
    say(f"gateways: {', '.join(g.name for g in topo.gateways)}; peers on the WAN {topo.wan.subnet}")

    for r in topo.remote.hosts if topo.partner_site is None else []:
        rns = topo.ns(r.name)
        _veth(r.name, rlan, "eth0", rns)
        _addr(rns, "eth0", r.ip, rlan_len)
        via = next(g.peer.lan_ip for g in topo.gateways if g.peer.name == r.via)
        run(["ip", "route", "replace", "default", "via", str(via)], rns)
        rlan_ports.append(r.name)
    if topo.partner_site is None:
        say(f"remote site: {', '.join(r.name for r in topo.remote.hosts)} on {topo.remote.subnet}")

    _veth("sw", mgmt, "mgmt0", sw)
    _addr(sw, "mgmt0", topo.mgmt.controller_ip, mgmt_len)
    mgmt_ports.append("sw")
    if link_exists(topo.mgmt_root_if):
        run(["ip", "link", "del", topo.mgmt_root_if], check=False)
    _veth(topo.mgmt_root_if, None, "root", mgmt)
    _addr_root(topo.mgmt_root_if, topo.mgmt.host_ip, mgmt_len)
    mgmt_ports.append("root")
    if topo.partner_site is None:
        _bridge(wan, wan_ports)
        _bridge(rlan, rlan_ports)
    else:
        for port in wan_ports:  # the shared WAN's bridge
            run(["ip", "link", "set", port, "master", "br0"], wan)
    _bridge(mgmt, mgmt_ports)
    say(f"management network {topo.mgmt.subnet}: this machine {topo.mgmt.host_ip}, controller {topo.mgmt.controller_ip}")


def build_shared_wan(netns: str) -> None:
    """The WAN namespace two sites share: a bridge their gateways' WAN ports join."""
    run(["ip", "netns", "add", netns])
    run(["ip", "link", "set", "lo", "up"], netns)
    for scope in ("all", "default"):
        run(["sysctl", "-q", "-w", f"net.ipv6.conf.{scope}.disable_ipv6=1"], netns)
    _bridge(netns, [])


def _addr_root(dev: str, ip: object, prefixlen: int) -> None:
    run(["ip", "addr", "replace", f"{ip}/{prefixlen}", "dev", dev])


def teardown(topo: Topology) -> list[str]:
    """Delete our namespaces and the management interface; returns what was removed."""
    removed: list[str] = []
    for ns in topo.namespaces():
        if netns_exists(ns):
            run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    if link_exists(topo.mgmt_root_if):
        run(["ip", "link", "del", topo.mgmt_root_if], check=False)
        removed.append(topo.mgmt_root_if)
    return removed
