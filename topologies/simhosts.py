"""A site's simulated hosts: supergw-hostsim started in `<prefix>-hsim` on its switch port, checked
(every simulated host resolved IP_G, and on a dual-stack LAN the gateway's link-local address, to
its bucket's virtual MAC), and its counters for `status`.
The program and its control API: topologies/hostsim/README.md; the client: hostsim_client.py."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path

from supergw_proto import bucket

from topologies import network, processes
from topologies.components import ComponentError
from topologies.hostsim_client import HOSTSIM_BIN, MAX_SOCKET_PATH, HostsimClient, HostsimError, HostsimProcess
from topologies.model import Topology
from topologies.paths import REPO, SitePaths
from topologies.poll import wait_until
from topologies.processes import ProcRecord

READY_TIMEOUT_S = 60.0  # BMv2 with its debug log took 14 s for 2 x 224 hosts here


def argv(topo: Topology, sock: Path) -> list[str]:
    sim = topo.simulated_hosts
    if sim is None:
        raise ValueError(f"{topo.prefix} has no simulated_hosts")
    # Dual stack: the hosts resolve the router's link-local address (the source of the
    # controller's Router Advertisements), and host k has its IPv4 address's twin, as the
    # namespace hosts have theirs.
    dual = (str(topo.lan.gateway_ll), str(topo.lan6(sim.first_ip))) if topo.dual_stack else None
    return HostsimProcess.argv(network.SIM_IF, sock, str(topo.lan.gateway_ip), str(sim.first_ip), sim.first_mac,
                               sim.count, topo.lan.subnet.prefixlen, mac_step=sim.mac_step, dual_stack=dual)


def ip6s(topo: Topology) -> list[ipaddress.IPv6Address]:
    """The simulated hosts' IPv6 addresses (dual stack): host k's IPv4 address's twin."""
    if topo.simulated_hosts is None:
        raise ValueError(f"{topo.prefix} has no simulated_hosts")
    return [topo.lan6(ip) for ip in topo.simulated_hosts.ips()]


def start(topo: Topology, paths: SitePaths, track: Callable[[ProcRecord], None]) -> HostsimClient:
    """Start the site's hostsim; `track` records it before the wait (so `make stop` finds it)."""
    if not HOSTSIM_BIN.is_file():
        raise ComponentError(f"simulated hosts: {HOSTSIM_BIN.relative_to(REPO)} is missing (build it with `make hostsim`)")
    sock = paths.hostsim_socket
    if len(str(sock).encode()) > MAX_SOCKET_PATH:
        raise ComponentError(f"simulated hosts: the control socket path {sock} is longer than a unix socket address "
                             f"holds ({MAX_SOCKET_PATH} bytes): run from a checkout with a shorter path")
    sock.parent.mkdir(parents=True, exist_ok=True)
    sock.unlink(missing_ok=True)
    rec = processes.start("hostsim", argv(topo, sock), paths.logs / "hostsim.log", netns=topo.ns("hsim"), cwd=REPO,
                          site=topo.prefix)
    track(rec)
    wait_until(lambda: (sock.exists(), f"{sock} not there yet"), 5, "hostsim control socket", rec)
    return HostsimClient(sock)


def expected_gateway_mac(topo: Topology, host_mac: str) -> str:
    """The switch answers a host's ARP for IP_G with vmac(bucket(host MAC)) (supergw_proto.bucket),
    with the site's dispatch hash."""
    return str(bucket.vmac(topo.lan.vmac_base, bucket.bucket_of(host_mac, topo.lan.buckets, topo.lan.dispatch.hash)))


def check_ready(topo: Topology, client: HostsimClient) -> str:
    """Every simulated host resolved IP_G (the switch's ARP answer) and, dual stack, the gateway's
    link-local address (its Neighbor Advertisement), each to its own bucket's virtual MAC."""
    client.wait_ready(READY_TIMEOUT_S)
    hosts = client.stats(hosts=True)["hosts"]
    keys = ("gateway_mac", "gateway_mac6") if topo.dual_stack else ("gateway_mac",)
    wrong = [f"{h['ip']} got {h[key]} ({key}), not {expected_gateway_mac(topo, h['mac'])}" for h in hosts for key in keys
             if h[key] != expected_gateway_mac(topo, h["mac"])]
    if wrong:
        raise ComponentError(f"simulated hosts resolved the gateway to another MAC than their bucket's virtual MAC: "
                             f"{'; '.join(wrong[:3])}")
    vmacs = {h["gateway_mac"] for h in hosts}
    six = f" and {topo.lan.gateway_ll}" if topo.dual_stack else ""
    return f"{len(hosts)} hosts resolved IP_G{six} ({len(vmacs)} virtual MACs), socket {client.path}"


def status_line(topo: Topology, paths: SitePaths) -> str:
    """One line of the site's hostsim totals for `status`."""
    sock = paths.hostsim_socket
    try:
        st = HostsimClient(sock, timeout=2).stats()
        ready = HostsimClient(sock, timeout=2).status()
    except HostsimError as exc:
        return f"simulated hosts {topo.prefix}: {exc}"
    t = st["totals"]
    six = f", {ready['resolved6']}/{ready['hosts']} {topo.lan.gateway_ll}" if topo.dual_stack and "resolved6" in ready else ""
    return (f"simulated hosts {topo.prefix}: {ready['resolved']}/{ready['hosts']} resolved IP_G{six}; tx {t['tx_packets']} pkts "
            f"rx {t['rx_packets']} pkts; test lost {t['lost']}; per host: "
            f"python -m topologies.hostsim_client {sock} --hosts")
