"""The simulated hosts in the two-site emulation (issue 8, item 1): N = 2 pairs, 16 simulated hosts
per site (one supergw-hostsim per site on one switch port), real switches, controllers and IPsec
gateways. Every simulated host resolved IP_G to its own bucket's virtual MAC; a short
bidirectional run through the tunnels at a low rate loses nothing, and the per-host counters add
up to the totals. The two-site LANs are dual stack (issue 20): every simulated host also
resolved the router's link-local address through the switch's Neighbor Advertisement to the same
vmac, its controller learned its IPv6 address (REST), a bidirectional IPv6 run through the
tunnels loses nothing, and a namespace host of one site pings a simulated host of the other
over IPv6 (ICMPv6 echo answered by hostsim).

Needs root, the built switch and hostsim (make switch hostsim) and strongSwan; run it under
`flock /tmp/supergw-netns.lock`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from topologies import simhosts
from topologies.emulation import Emulation
from topologies.hostsim_client import HOSTSIM_BIN, HostsimClient, run_loss
from topologies.model import Topology
from topologies.schema import TWO_SITE_TOPOLOGY
from topologies.tests.emulation import EMULATION_MARKS, booted, run_topologies
from topologies.where import where_lines

pytestmark = [*EMULATION_MARKS,
              pytest.mark.skipif(not HOSTSIM_BIN.is_file(), reason="hostsim not built (make hostsim)")]

SIM_HOSTS = 16


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulation]:
    changes = {"gateways": 2, "hosts_per_site": 1, "simulated_hosts": {"count": SIM_HOSTS, "first_host": 100, "port": 200}}
    with booted(Emulation.from_file(TWO_SITE_TOPOLOGY, changes=changes)) as e:
        assert "ok: " in e.state.stages["simulated hosts"], e.state.stages
        assert any("hostsim_client" in line for line in where_lines(e))
        yield e
        status = run_topologies("status")
        assert f"{SIM_HOSTS}/{SIM_HOSTS} resolved IP_G, {SIM_HOSTS}/{SIM_HOSTS} fe80::1" in status.stdout, status.stdout


@pytest.fixture(scope="module")
def sites(emu: Emulation) -> list[tuple[Topology, HostsimClient]]:
    return [(s.topo, HostsimClient(s.paths.hostsim_socket)) for s in emu.sites]


def test_every_simulated_host_resolved_ip_g_to_its_buckets_vmac(sites: list[tuple[Topology, HostsimClient]]) -> None:
    for topo, client in sites:
        hello = client.hello()
        assert hello["hosts"] == SIM_HOSTS and hello["gateway_ip"] == str(topo.lan.gateway_ip)
        hosts = client.stats(hosts=True)["hosts"]
        assert [h["ip"] for h in hosts] == [str(ip) for ip in topo.simulated_hosts.ips()]  # type: ignore[union-attr]
        for h in hosts:
            assert h["gateway_mac"] == simhosts.expected_gateway_mac(topo, h["mac"]), h
        assert len({h["gateway_mac"] for h in hosts}) > 1, "16 hosts all in one bucket: the dispatch is not per host"


def _sum(hosts: list[dict[str, Any]], key: str) -> int:
    return sum(int(h[key]) for h in hosts)


def test_bidirectional_run_through_the_gateways_loses_nothing(sites: list[tuple[Topology, HostsimClient]]) -> None:
    (ta, a), (tb, b) = sites
    for c in (a, b):
        c.reset()
    to_b = [str(ip) for ip in tb.simulated_hosts.ips()]  # type: ignore[union-attr]
    to_a = [str(ip) for ip in ta.simulated_hosts.ips()]  # type: ignore[union-attr]
    a.start(rate_pps=200, frame_bytes=64, duration_s=3, destinations=to_b)
    b.start(rate_pps=200, frame_bytes=1408, duration_s=3, destinations=to_a)
    for c in (a, b):
        run = c.wait_run_done(timeout=10)
        assert run["state"] == "done" and run["send_errors"] == 0 and run["sent"] >= 550, run
    time.sleep(0.5)  # frames still in the tunnels
    sa, sb = a.stats(hosts=True, flows=True), b.stats(hosts=True, flows=True)
    for what, tx, rx in (("A -> B", sa, sb), ("B -> A", sb, sa)):
        loss = run_loss(tx, rx)
        assert loss.sent >= 550 and loss.lost == 0, f"{what}: {loss}"
        flows = [f for f in rx["flows_rx"] if f["run"] == tx["run"]["id"]]
        assert len(flows) == SIM_HOSTS and all(f["received"] > 0 and f["lost"] == 0 for f in flows), flows
        assert rx["totals"]["latency_us"]["max"] > 0 and rx["totals"]["malformed"] == 0
    for st in (sa, sb):
        hosts, t = st["hosts"], st["totals"]
        for key in ("tx_packets", "tx_bytes", "rx_packets", "rx_bytes"):
            assert _sum(hosts, key) == t[key], key
        assert all(h["tx_packets"] > 0 and h["rx_packets"] > 0 for h in hosts), hosts
        assert t["tx_packets"] >= t["test_tx_packets"] and t["rx_packets"] >= t["test_rx_packets"]


def test_every_simulated_host_resolved_the_routers_link_local_address_to_its_buckets_vmac(
        sites: list[tuple[Topology, HostsimClient]]) -> None:
    for topo, client in sites:
        assert topo.dual_stack and client.hello()["gateway_ip6"] == str(topo.lan.gateway_ll)
        hosts = client.stats(hosts=True)["hosts"]
        assert [h["ip6"] for h in hosts] == [str(ip) for ip in simhosts.ip6s(topo)]
        for h in hosts:
            # the switch's NA, not anything configured: the same vmac the ARP answer gave
            assert h["gateway_mac6"] == h["gateway_mac"] == simhosts.expected_gateway_mac(topo, h["mac"]), h


def test_each_controller_learned_its_simulated_hosts_ipv6_addresses(emu: Emulation) -> None:
    for site in emu.sites:
        want = dict(zip(site.topo.simulated_hosts.macs(), simhosts.ip6s(site.topo)))  # type: ignore[union-attr]
        seen = {h.mac: h.ipv6 for h in site.api().hosts()}
        missing = {mac: str(ip) for mac, ip in want.items() if str(ip) not in seen.get(mac, [])}
        assert not missing, f"{site.prefix}: IPv6 addresses the controller did not learn (REST /api/v1/hosts): {missing}"


def test_bidirectional_ipv6_run_through_the_gateways_loses_nothing(sites: list[tuple[Topology, HostsimClient]]) -> None:
    (ta, a), (tb, b) = sites
    for c in (a, b):
        c.reset()
    a.start(rate_pps=200, frame_bytes=128, duration_s=3, destinations=[str(ip) for ip in simhosts.ip6s(tb)])
    b.start(rate_pps=200, frame_bytes=1408, duration_s=3, destinations=[str(ip) for ip in simhosts.ip6s(ta)])
    for c in (a, b):
        run = c.wait_run_done(timeout=10)
        assert run["state"] == "done" and run["send_errors"] == 0 and run["sent"] >= 550, run
    time.sleep(0.5)  # frames still in the tunnels
    sa, sb = a.stats(hosts=True, flows=True), b.stats(hosts=True, flows=True)
    for what, tx, rx, dst in (("A -> B", sa, sb, tb), ("B -> A", sb, sa, ta)):
        loss = run_loss(tx, rx)
        assert loss.sent >= 550 and loss.lost == 0, f"{what}: {loss}"
        flows = [f for f in rx["flows_rx"] if f["run"] == tx["run"]["id"]]
        assert len(flows) == SIM_HOSTS and all(f["received"] > 0 and f["lost"] == 0 for f in flows), flows
        assert {f["dst"] for f in flows} == {str(ip) for ip in simhosts.ip6s(dst)}, flows
        assert rx["totals"]["malformed"] == 0


def test_a_namespace_host_pings_a_simulated_host_of_the_other_site_over_ipv6(
        sites: list[tuple[Topology, HostsimClient]]) -> None:
    (ta, _), (tb, b) = sites
    before = b.stats()["totals"]["icmpv6_replies_sent"]
    target = simhosts.ip6s(tb)[3]
    ping = subprocess.run(["ip", "netns", "exec", ta.ns(ta.hosts[0].name), "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2",
                           str(target)], capture_output=True, text=True, timeout=30, check=False)
    assert ping.returncode == 0, f"ping -6 {target} from {ta.hosts[0].name} failed:\n{ping.stdout}{ping.stderr}"
    assert b.stats()["totals"]["icmpv6_replies_sent"] >= before + 3
