"""A site's namespaces, veths, bridges and addresses (`build`), the WAN several sites share
(`build_shared_wan`), and their removal (`teardown`).

The root namespace only ever holds each site's one management interface `<prefix>-m0`.
Removing a namespace removes its veths, so teardown is "delete every namespace we name,
then the management interfaces", and is idempotent.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from topologies import iproute
from topologies.iproute import NetworkError, addr, bridge, default_route, enslave, forwarding, offloads_off, run, veth
from topologies.model import EmulationSpec, Topology

Say = Callable[[str], None]

# supergw-hostsim's veth: its end in `<prefix>-hsim`, and the switch's end (model.SimulatedHostsSpec).
SIM_IF = "hsim0"
SIM_SWITCH_IF = "sw-hsim"


def switch_interfaces(topo: Topology) -> dict[int, str]:
    """P4 port number -> interface name inside the switch namespace."""
    ports = {h.port: f"sw-{h.name}" for h in topo.hosts}
    ports.update({g.port: f"sw-{g.name}" for g in topo.gateways})
    if topo.simulated_hosts is not None:
        ports[topo.simulated_hosts.port] = SIM_SWITCH_IF
    return dict(sorted(ports.items()))


# The outside switch's uplink (remote access): its end in `<prefix>-osw` and in the WAN namespace.
OUTSIDE_UPLINK_IF = "o-up"
OUTSIDE_WAN_PORT = "osw"
# The clients' router `<prefix>-cnet`: its WAN end, its WAN port, the clients' bridge.
ROUTER_WAN_PORT = "cnet"
CLIENT_BRIDGE = "br0"
CLIENT_IF = "eth0"


def outside_interfaces(topo: Topology) -> dict[int, str]:
    """The outside switch's P4 ports (remote access): the uplink, and each gateway's outside
    port (numbered as its LAN port) -> interface name inside `<prefix>-osw`."""
    if topo.remote_access is None:
        return {}
    ports = {topo.remote_access.outside.uplink_port: OUTSIDE_UPLINK_IF}
    ports.update({g.port: f"o-{g.name}" for g in topo.gateways})
    return dict(sorted(ports.items()))


def existing_namespaces(spec: EmulationSpec | Topology) -> list[str]:
    return [ns for ns in spec.namespaces() if iproute.netns_exists(ns)]


def check_root_addresses(topo: Topology) -> None:
    """The management subnet gets an address in the root namespace: refuse to overlap one there."""
    out = run(["ip", "-4", "-o", "addr", "show"]).stdout
    for line in out.splitlines():
        fields = line.split()
        dev, cidr = fields[1], fields[3]
        if dev != topo.mgmt_root_if and ipaddress.IPv4Interface(cidr).network.overlaps(topo.mgmt.subnet):
            raise NetworkError(f"the management subnet {topo.mgmt.subnet} overlaps {cidr} on {dev} in the root "
                               "namespace; pick another mgmt.subnet in the topology file")


def build_shared_wan(netns: str) -> None:
    """The WAN namespace several sites share: a bridge their gateways' WAN ports join."""
    iproute.add_netns(netns)
    bridge(netns, [])


def build(topo: Topology, say: Say) -> None:
    """Create every namespace, link and address of one site. The caller tears down on failure."""
    check_root_addresses(topo)
    for ns in topo.namespaces():
        iproute.add_netns(ns)
    sw, mgmt = topo.switch_ns, topo.ns("mgmt")
    say(f"namespaces: {len(topo.namespaces())} created ({topo.prefix}-*)")
    _lan(topo, sw)
    wan_ports, mgmt_ports = _gateways(topo, sw, mgmt)
    if topo.remote_access is not None:
        wan_ports += _outside(topo, mgmt)
        mgmt_ports.append(OUTSIDE_WAN_PORT)
        _clients(topo)
        say(f"remote access: outside switch in {topo.outside_ns}, {topo.remote_access.clients} client namespaces "
            f"behind {topo.ns('cnet')}")
    if topo.partner_site is None:
        _remote_site(topo, wan_ports)
    else:
        for port in wan_ports:  # the shared WAN's bridge
            enslave(topo.partner_site.wan_netns, port)
    mgmt_ports += _management(topo, sw, mgmt)
    bridge(mgmt, mgmt_ports)
    say(f"management network {topo.mgmt.subnet}: this machine {topo.mgmt.host_ip}, controller "
        + (", ".join(f"replica {n} {ip}" for n, ip in topo.replica_ips().items()) if topo.replicated
           else str(topo.mgmt.controller_ip)))


def _lan(topo: Topology, sw: str) -> None:
    """The namespace hosts and the simulated hosts' port, each on its switch port."""
    lan_len = topo.lan.subnet.prefixlen
    for h in topo.hosts:
        hns = topo.ns(h.name)
        veth(f"sw-{h.name}", sw, "eth0", hns, b_mac=h.mac)
        addr(hns, "eth0", h.ip, lan_len)
        default_route(hns, topo.lan.gateway_ip)
        offloads_off(hns, "eth0")
        if topo.dual_stack:
            # a stock host: its IPv6 default route (and a SLAAC address) come from the
            # controller's Router Advertisements; the twin address is for predictable pings
            iproute.ipv6_on(hns, "eth0")
            iproute.addr6(hns, "eth0", topo.lan6(h.ip))
    if (sim := topo.simulated_hosts) is not None:
        # supergw-hostsim's port: the kernel of its namespace stays silent on it (no address, no
        # ARP, no IPv6), so every frame the switch sees comes from a simulated host.
        sns = topo.ns("hsim")
        veth(SIM_SWITCH_IF, sw, SIM_IF, sns)
        run(["ip", "link", "set", SIM_IF, "arp", "off"], sns)
        offloads_off(sns, SIM_IF)


def _gateways(topo: Topology, sw: str, mgmt: str) -> tuple[list[str], list[str]]:
    """Each member gateway on its switch port, the WAN and the management network; returns
    (its WAN ports, its management bridge ports)."""
    lan_len, wan_len, mgmt_len = topo.lan.subnet.prefixlen, topo.wan.subnet.prefixlen, topo.mgmt.subnet.prefixlen
    wan = topo.partner_site.wan_netns if topo.partner_site is not None else topo.ns("wan")
    wan_ports, mgmt_ports = [], []
    # A UML gateway's guest puts its own NICs (raw sockets) on lan0 and wan0 and holds their
    # addresses: the namespace's kernel stays silent there (no address, no ARP), else both would
    # answer ARP for the gateway's addresses.
    uml = topo.gateway_backend == "uml"
    for g in topo.gateways:
        gns = topo.ns(g.name)
        veth(f"sw-{g.name}", sw, "lan0", gns, b_mac=g.mac)
        if uml:
            run(["ip", "link", "set", "lan0", "arp", "off"], gns)
        else:
            addr(gns, "lan0", g.lan_ip, lan_len)
        offloads_off(gns, "lan0")
        if topo.remote_access is not None:  # behind the outside switch, on its port g.port
            veth(f"o-{g.name}", topo.outside_ns, "wan0", gns, b_mac=topo.wan_mac(g))
            offloads_off(topo.outside_ns, f"o-{g.name}")
            # BMv2 reads and writes raw frames: a checksum left to an offload would leave it unset
            offloads_off(gns, "wan0")
        else:
            veth(topo.wan_port(g), wan, "wan0", gns)
            wan_ports.append(topo.wan_port(g))
        if uml:
            run(["ip", "link", "set", "wan0", "arp", "off"], gns)
            offloads_off(gns, "wan0")
        else:
            addr(gns, "wan0", g.wan_ip, wan_len)
        veth(g.name, mgmt, "mgmt0", gns)
        addr(gns, "mgmt0", g.mgmt_ip, mgmt_len)
        forwarding(gns)
        mgmt_ports.append(g.name)
    return wan_ports, mgmt_ports


def _outside(topo: Topology, mgmt: str) -> list[str]:
    """The outside switch's uplink to the WAN and its management link; the clients' router on
    the WAN. Returns the WAN ports."""
    assert topo.remote_access is not None
    ra, osw, cnet, wan = topo.remote_access, topo.outside_ns, topo.ns("cnet"), topo.ns("wan")
    veth(OUTSIDE_WAN_PORT, wan, OUTSIDE_UPLINK_IF, osw)
    offloads_off(osw, OUTSIDE_UPLINK_IF)
    veth(OUTSIDE_WAN_PORT, mgmt, "mgmt0", osw)
    addr(osw, "mgmt0", ra.outside.mgmt_ip, topo.mgmt.subnet.prefixlen)
    veth(ROUTER_WAN_PORT, wan, "wan0", cnet)
    addr(cnet, "wan0", ra.router_wan_ip, topo.wan.subnet.prefixlen)
    forwarding(cnet)
    # IP_P is on the WAN segment as far as the router knows: it ARPs for it, the outside switch answers.
    run(["ip", "route", "replace", f"{ra.public_ip}/32", "dev", "wan0"], cnet)
    # Like a real outside, which forwards only IP_P to the cluster: clients never reach the gateways'
    # own addresses (else MOBIKE path probing could move a client onto a gateway's WAN address,
    # which the gateway lists in ADDITIONAL_IP4_ADDRESS).
    run(["ip", "rule", "add", "from", str(ra.client_subnet), "to", str(topo.wan.subnet), "prohibit",
         "priority", "100"], cnet)
    return [OUTSIDE_WAN_PORT, ROUTER_WAN_PORT]


def _clients(topo: Topology) -> None:
    """Each client's namespace on the router's client bridge; the client itself (strongSwan)
    puts its address and default route on its `eth0` (topologies/raclients.py)."""
    assert topo.remote_access is not None
    ra, cnet = topo.remote_access, topo.ns("cnet")
    names = ra.client_names()
    for name in names:
        veth(name, cnet, CLIENT_IF, topo.ns(name))
        offloads_off(topo.ns(name), CLIENT_IF)  # their frames cross the outside switch (BMv2: raw frames)
    bridge(cnet, names)
    addr(cnet, CLIENT_BRIDGE, ra.router_client_ip, ra.client_subnet.prefixlen)


def _remote_site(topo: Topology, wan_ports: list[str]) -> None:
    """The plain remote site of a site without a partner: peer gateways and remote hosts."""
    wan, rlan = topo.ns("wan"), topo.ns("rlan")
    wan_len, rlan_len = topo.wan.subnet.prefixlen, topo.remote.subnet.prefixlen
    rlan_ports = []
    for g in topo.gateways:
        pns = topo.ns(g.peer.name)
        veth(g.peer.name, wan, "wan0", pns)
        veth(g.peer.name, rlan, "lan0", pns)
        for dev, ip, length in (("wan0", g.peer.wan_ip, wan_len), ("lan0", g.peer.lan_ip, rlan_len)):
            if topo.gateway_backend == "uml":  # the guest holds the addresses (see _gateways)
                run(["ip", "link", "set", dev, "arp", "off"], pns)
                offloads_off(pns, dev)
            else:
                addr(pns, dev, ip, length)
        if topo.remote_access is not None:  # behind the outside switch (BMv2: raw frames)
            offloads_off(pns, "wan0")
        forwarding(pns)
        wan_ports.append(g.peer.name)
        rlan_ports.append(g.peer.name)
    for r in topo.remote.hosts:
        rns = topo.ns(r.name)
        veth(r.name, rlan, "eth0", rns)
        addr(rns, "eth0", r.ip, rlan_len)
        via = next(g.peer.lan_ip for g in topo.gateways if g.peer.name == r.via)
        default_route(rns, via)
        if topo.dual_stack:
            iproute.ipv6_on(rns, "eth0", accept_ra=False)
            iproute.addr6(rns, "eth0", topo.remote6(r.ip))
            iproute.default_route6(rns, topo.remote6(via))
        rlan_ports.append(r.name)
    bridge(wan, wan_ports)
    bridge(rlan, rlan_ports)


def _management(topo: Topology, sw: str, mgmt: str) -> list[str]:
    """The switch namespace, each controller replica's namespace and this machine on the
    management network; returns their bridge ports."""
    mgmt_len = topo.mgmt.subnet.prefixlen
    veth("sw", mgmt, "mgmt0", sw)
    addr(sw, "mgmt0", topo.mgmt.controller_ip, mgmt_len)
    ports = ["sw"]
    for name, ip in topo.replica_ips().items():
        veth(name, mgmt, "mgmt0", topo.ns(name))
        addr(topo.ns(name), "mgmt0", ip, mgmt_len)
        ports.append(name)
    iproute.del_link(topo.mgmt_root_if)
    veth(topo.mgmt_root_if, None, "root", mgmt)
    addr(None, topo.mgmt_root_if, topo.mgmt.host_ip, mgmt_len)
    ports.append("root")
    return ports


def teardown(spec: EmulationSpec) -> list[str]:
    """Delete every namespace of the plan and the management interfaces, and any replica
    namespace a site with fewer replicas does not name (a run whose state is lost); returns
    what was removed."""
    removed: list[str] = []
    for site in spec.sites:
        leftovers = [site.ns(f"c{i}") for i in range(1, 10)]
        for ns in dict.fromkeys([*site.namespaces(), *leftovers]):
            if iproute.del_netns(ns):
                removed.append(ns)
        if iproute.del_link(site.mgmt_root_if):
            removed.append(site.mgmt_root_if)
    if spec.shared_wan is not None and iproute.del_netns(spec.shared_wan):
        removed.append(spec.shared_wan)
    return removed
