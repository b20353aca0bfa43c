"""The two-site emulation with `gateway_backend: uml` (what bench/scaling boots): every gateway
a User-Mode Linux guest with kernel ESP, under a CPU quota. One pair, one host per site.

Checks that the guests hold the gateways' addresses (the namespaces' veths carry none), the
switch dispatches to each guest NIC's MAC (hosts reach the other site both ways through the
tunnel, and ESP, not the plaintext, crosses the WAN), and the agents report each guest's load
against its quota as the host measures it: near nothing when idle, and up at its quota while
a flood through it saturates it.

Needs root, the built switch and hostsim, strongSwan and user-mode-linux; run it under the
machine lock.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from topologies.emulation import Emulation
from topologies.hostsim_client import HostsimClient
from topologies.schema import TWO_SITE_TOPOLOGY
from topologies.site import Site
from topologies.tests.emulation import EMULATION_MARKS, all_alive, booted, captured, ping_counts, until

pytestmark = [*EMULATION_MARKS, pytest.mark.skipif(not Path("/usr/bin/linux.uml").exists(),
                                                   reason="user-mode-linux not installed")]
QUOTA = 20.0  # % of a core per gateway


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    changes = {"gateways": 1, "hosts_per_site": 1, "gateway_backend": "uml", "gateway_cpu_percent": QUOTA}
    with booted(Emulation.from_file(TWO_SITE_TOPOLOGY, changes=changes)) as emu:
        a, b = emu.sites
        yield a, b


def _ping(netns: str, dst: str, count: int) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, "ping", "-n", "-c", str(count), "-i", "0.2", "-W", "1", dst],
                          capture_output=True, text=True, check=False, timeout=count + 30).stdout


def test_guests_hold_the_addresses_and_hosts_reach_the_other_site_through_esp(sites: tuple[Site, Site],
                                                                              tmp_path: Path) -> None:
    a, b = sites
    for site in (a, b):
        gws = until(site, "the gateway alive with its tunnel up",
                    lambda g: all_alive(g) and all(x.tunnel_up is True for x in g.values()), 60)
        assert all(g.last_report is not None and g.last_report.backend == "xfrm_uml" for g in gws.values()), gws
        ns = site.topo.ns(site.topo.gateways[0].name)
        addrs = subprocess.run(["ip", "netns", "exec", ns, "ip", "-4", "-o", "addr"], capture_output=True, text=True,
                               check=True, timeout=10)
        assert "lan0" not in addrs.stdout and "wan0" not in addrs.stdout, addrs.stdout  # the guest's, not the namespace's
    wan_port = a.topo.wan_port(a.topo.gateways[0])
    with captured("sgw-wan", wan_port, tmp_path / "wan.pcap", "ip"):
        for src, dst in ((a, b), (b, a)):
            sent, got = ping_counts(_ping(src.topo.ns(src.topo.hosts[0].name), str(dst.topo.hosts[0].ip), 5))
            assert got == sent, f"{src.topo.hosts[0].name} -> {dst.topo.hosts[0].ip}: {got}/{sent} replies"
    protos = subprocess.run(["tcpdump", "-n", "-r", str(tmp_path / "wan.pcap")], capture_output=True, text=True,
                            timeout=30).stdout
    assert "ESP(spi=" in protos and "ICMP echo" not in protos, protos[-500:]


def test_the_agent_reports_the_guests_load_against_its_quota(sites: tuple[Site, Site]) -> None:
    a, b = sites

    def load() -> float:
        rep = next(iter(a.gateways().values())).last_report
        assert rep is not None and rep.cpu_cores == pytest.approx(QUOTA / 100) and rep.cpu_scope == "processes", rep
        return rep.cpu_percent / QUOTA

    time.sleep(2)
    idle = load()
    assert idle < 0.5, f"an idle guest reported {idle:.2f} of its quota"
    hsim_a, hsim_b = (HostsimClient(s.paths.hostsim_socket) for s in (a, b))
    b_hosts = [h["ip"] for h in hsim_b.stats(hosts=True)["hosts"]]
    hsim_a.reset()
    hsim_a.start(rate_pps=20_000, frame_bytes=1408, duration_s=6, destinations=b_hosts)  # far above what 20 % carries
    try:
        time.sleep(4)
        busy = load()
    finally:
        hsim_a.stop()
    assert busy > 0.8, f"a guest flooded past its quota reported only {busy:.2f} of it (idle: {idle:.2f})"
