"""Learning against the real switch: digests fill host tables, idle hosts age out,
gateway ARP for a host is answered by the switch once the host is learned, and for an
unknown one the controller asks the hosts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sgwctl_harness import Controller, Heartbeats, Setup, TopologySpec, neighbour_mac
from sgwctl_topo import REMOTE_IP

AGEING_S = 1.5
TOPOLOGY = TopologySpec(tag="l", index=3, hosts=2, gateways=1)


@pytest.fixture(scope="module")
def ctl(setup: Setup) -> Iterator[Controller]:
    c = setup.controller("l-ctl", api_port=18731, timing={"ageing_s": AGEING_S})
    with Heartbeats([c], ["g1"]):
        c.start()
        yield c
    c.stop()


def host_macs(ctl: Controller) -> set[str]:
    return {h.mac for h in ctl.client.hosts()}


def test_gateway_arp_for_an_unknown_host_goes_to_the_controller_which_asks_the_hosts(
        setup: Setup, ctl: Controller) -> None:
    g1, h2 = setup.topo.endpoints["g1"], setup.topo.endpoints["h2"]
    before = ctl.client.status()
    assert h2.mac not in host_macs(ctl)
    g1.ping(h2.ip, count=1, interval=0.2)  # h2 has said nothing yet: the switch cannot answer
    after = ctl.client.status()
    assert after.packet_ins_total > before.packet_ins_total  # GATEWAY_ARP_MISS punted
    assert after.arp_misses_unknown_total > before.arp_misses_unknown_total
    # the controller asked the host ports (an RFC 5227 probe in g1's name): h2's answer is
    # learned like any frame, so g1's next ARP for it is answered by the switch
    deadline = time.monotonic() + 3
    while h2.mac not in host_macs(ctl):
        assert time.monotonic() < deadline, "the controller did not ask the hosts for an unknown address"
        time.sleep(0.1)
    deadline = time.monotonic() + 5
    while neighbour_mac(g1, h2.ip) != h2.mac:  # g1's ARP retries now get the switch's answer
        assert time.monotonic() < deadline, f"g1 never resolved {h2.ip}: {neighbour_mac(g1, h2.ip)}"
        g1.ping(h2.ip, count=1, interval=0.2)


def test_learned_host_is_answered_by_the_switch(setup: Setup, ctl: Controller) -> None:
    g1, h2 = setup.topo.endpoints["g1"], setup.topo.endpoints["h2"]
    assert h2.ping(REMOTE_IP, count=2, interval=0.1)[1] == 2  # learned with its IP
    assert h2.mac in host_macs(ctl)
    g1.exec("ip", "neigh", "flush", "dev", "eth0")
    g1.ping(h2.ip, count=1, interval=0.2)
    assert neighbour_mac(g1, h2.ip) == h2.mac


def test_idle_host_ages_out_and_comes_back(setup: Setup, ctl: Controller) -> None:
    h1 = setup.topo.endpoints["h1"]
    assert h1.ping(REMOTE_IP, count=2, interval=0.1)[1] == 2
    assert h1.mac in host_macs(ctl)
    deadline = time.monotonic() + AGEING_S + 5
    while h1.mac in host_macs(ctl):
        assert time.monotonic() < deadline, "idle host was not aged out"
        time.sleep(0.2)
    assert h1.ping(REMOTE_IP, count=2, interval=0.1)[1] == 2
    assert h1.mac in host_macs(ctl)
