"""A site's simulated hosts: supergw-hostsim started in `<prefix>-hsim` on its switch port, checked
(every simulated host resolved IP_G to a virtual MAC of the site), and its counters for `status`.
The program and its control API: topologies/hostsim/README.md; the client: hostsim_client.py."""

from __future__ import annotations

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
    return HostsimProcess.argv(network.SIM_IF, sock, str(topo.lan.gateway_ip), str(sim.first_ip), sim.first_mac,
                               sim.count, topo.lan.subnet.prefixlen, mac_step=sim.mac_step)


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
    """Every simulated host resolved IP_G, each to its own bucket's virtual MAC (the switch's ARP answer)."""
    client.wait_ready(READY_TIMEOUT_S)
    hosts = client.stats(hosts=True)["hosts"]
    wrong = [f"{h['ip']} got {h['gateway_mac']}, not {expected_gateway_mac(topo, h['mac'])}" for h in hosts
             if h["gateway_mac"] != expected_gateway_mac(topo, h["mac"])]
    if wrong:
        raise ComponentError(f"simulated hosts resolved IP_G to another MAC than their bucket's virtual MAC: "
                             f"{'; '.join(wrong[:3])}")
    vmacs = {h["gateway_mac"] for h in hosts}
    return f"{len(hosts)} hosts resolved IP_G ({len(vmacs)} virtual MACs), socket {client.path}"


def status_line(topo: Topology, paths: SitePaths) -> str:
    """One line of the site's hostsim totals for `status`."""
    sock = paths.hostsim_socket
    try:
        st = HostsimClient(sock, timeout=2).stats()
        ready = HostsimClient(sock, timeout=2).status()
    except HostsimError as exc:
        return f"simulated hosts {topo.prefix}: {exc}"
    t = st["totals"]
    return (f"simulated hosts {topo.prefix}: {ready['resolved']}/{ready['hosts']} resolved IP_G; tx {t['tx_packets']} pkts "
            f"rx {t['rx_packets']} pkts; test lost {t['lost']}; per host: "
            f"python -m topologies.hostsim_client {sock} --hosts")
