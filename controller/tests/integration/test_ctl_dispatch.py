"""One controller against the real switch: ARP, dispatch, learning, moves, rebalance, failover.

Topology: 2 hosts (ports 1, 2) and 2 stand-in gateways (ports 11, 12; plain namespaces
that own 192.0.2.1 on lo). Hosts ping 192.0.2.1 via IP_G; which gateway namespace
receives the pings shows where the switch sent them.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sgwctl_harness import (
    Controller,
    Heartbeats,
    Setup,
    TopologySpec,
    move_to_the_other,
    neighbour_mac,
    owner,
    pings_seen_by,
    two_hosts_on,
    vmac_of,
)
from sgwctl_topo import REMOTE_IP, Endpoint
from supergw_proto.bucket import bucket_of
from supergw_proto.rest import ApiError

VMAC_BASE = "02:5e:00:00:00:00"
K = 16
TOPOLOGY = TopologySpec(tag="d", index=1, hosts=2, gateways=2)


@pytest.fixture(scope="module")
def ctl(setup: Setup) -> Iterator[Controller]:
    c = setup.controller("d-primary", api_port=18711, rebalancer={"refill_budget": 1})
    with Heartbeats([c], ["g1", "g2"]) as hb:
        c.start()
        c.heartbeats = hb  # type: ignore[attr-defined]
        yield c
    c.stop()


def test_hosts_get_their_vmac_and_reach_the_remote_site(setup: Setup, ctl: Controller) -> None:
    for h in setup.topo.hosts():
        sent, got = h.ping(REMOTE_IP, count=3, interval=0.1)
        assert got == sent == 3
        assert neighbour_mac(h, setup.topo.gateway_ip) == vmac_of(VMAC_BASE, bucket_of(h.mac, K))


def test_controller_learned_hosts_with_ips(setup: Setup, ctl: Controller) -> None:
    hosts = {h.mac: h for h in ctl.client.hosts()}
    for h in setup.topo.hosts():
        assert hosts[h.mac].port == h.port
        assert hosts[h.mac].ip == h.ip
        assert hosts[h.mac].gateway == owner(ctl, h, K)


def test_traffic_goes_to_the_gateway_owning_the_bucket(setup: Setup, ctl: Controller) -> None:
    for h in setup.topo.hosts():
        seen = pings_seen_by(setup, h)
        own = owner(ctl, h, K)
        assert seen[own] >= 10, seen
        assert all(v < 3 for g, v in seen.items() if g != own), seen


def test_operator_move_redirects_traffic(setup: Setup, ctl: Controller) -> None:
    h = setup.topo.endpoints["h1"]
    b, other = move_to_the_other(ctl, h, K)
    seen = pings_seen_by(setup, h)
    assert seen[other] >= 10, seen
    ev = ctl.client.events(limit=5)
    assert any(e.kind == "move" and e.bucket == b and e.dst == other for e in ev), ev


def test_load_skew_is_rebalanced(setup: Setup, ctl: Controller) -> None:
    h1, h2, b1, b2 = two_hosts_on(setup, ctl, K, "g1")
    # Both busy hosts on g1, g2 idle: max/mean = 2.
    procs = busy([h1, h2], 4)
    try:
        time.sleep(2.0)  # a few counter polls (every 0.5 s)
        plan = ctl.client.rebalance(dry_run=False)
    finally:
        for p in procs:
            p.wait(10)
    assert plan.ratio_before > 1.5, plan
    # "refill" if g2 is still recovering from an earlier (accidental) heartbeat gap.
    moved = [m for m in plan.moves if m.reason in ("rebalance", "refill")]
    assert len(moved) == 1 and moved[0].bucket in (b1, b2) and moved[0].dst == "g2", plan
    assert plan.ratio_after < 1.2
    assert {owner(ctl, h1, K), owner(ctl, h2, K)} == {"g1", "g2"}


def test_silenced_heartbeats_fail_the_gateway_over(setup: Setup, ctl: Controller) -> None:
    h = setup.topo.endpoints["h1"]
    victim = owner(ctl, h, K)
    survivor = "g2" if victim == "g1" else "g1"
    hb: Heartbeats = ctl.heartbeats  # type: ignore[attr-defined]
    t0 = time.monotonic()
    hb.silenced.add(victim)
    try:
        while ctl.client.gateway(victim).state != "dead":
            assert time.monotonic() - t0 < 4.0, "gateway not declared dead within 4 s"
            time.sleep(0.02)
        detected = time.monotonic() - t0
        buckets = ctl.bucket_of_gateway()
        assert victim not in buckets.values()
        assert set(buckets.values()) == {survivor}
        assert pings_seen_by(setup, h)[survivor] >= 10
        events = ctl.client.events(limit=100)
        failover = [e for e in events if e.kind == "move" and e.reason == "failover" and e.src == victim]
        assert failover, events
        assert detected < 2.5, f"failover took {detected:.2f}s (dead after 1 s of silence here)"
    finally:
        hb.silenced.discard(victim)
    deadline = time.monotonic() + 2
    while ctl.client.gateway(victim).state not in ("recovering", "alive"):
        assert time.monotonic() < deadline, "gateway did not come back after heartbeats resumed"
        time.sleep(0.05)


def busy(hosts: list[Endpoint], seconds: float) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            ["ip", "netns", "exec", h.ns, "ping", "-n", "-q", "-i", "0.005", "-w", str(seconds), REMOTE_IP],
            stdout=subprocess.DEVNULL,
        )
        for h in hosts
    ]


def test_recovered_gateway_is_refilled_by_the_rebalancer(setup: Setup, ctl: Controller) -> None:
    gws = {g.name: g for g in ctl.client.gateways()}
    back = [n for n, g in gws.items() if g.state == "recovering"]
    assert back, gws
    assert gws[back[0]].buckets == 0
    procs = busy(setup.topo.hosts(), 3)
    try:
        time.sleep(1.5)
        plan = ctl.client.rebalance(dry_run=False)
    finally:
        for p in procs:
            p.wait(10)
    # Idle buckets come back at once, up to its share (K/2, equal weights); busy ones at
    # refill_budget (1 here) per round, so exactly one of the two hosts' buckets moves.
    assert {(m.reason, m.dst) for m in plan.moves} == {("refill", back[0])}, plan
    busy_buckets = {bucket_of(h.mac, K) for h in setup.topo.hosts()}
    assert len([m for m in plan.moves if m.bucket in busy_buckets]) == 1, plan
    assert ctl.client.gateway(back[0]).buckets == len(plan.moves) == K // 2, plan
    time.sleep(1.2)  # counters show no traffic any more
    ctl.client.rebalance(dry_run=False)
    assert ctl.client.gateway(back[0]).state == "alive"


BMV2_ADMIN_DOWN = (
    "simple_switch_grpc stops receiving on every port once one of its own interfaces is set "
    "administratively down (seen with BMv2 1.15.5; one select thread receives for all its ports) "
    "and does not recover when the interface comes back up; "
    "a gateway's link loss (the [gateway] case) works"
)


@pytest.mark.parametrize(
    "side",
    [pytest.param("switch", marks=pytest.mark.not_on("bmv2", BMV2_ADMIN_DOWN)), "gateway"],
)
def test_port_down_fails_the_gateway_over(setup: Setup, ctl: Controller, side: str) -> None:
    """g2's link goes down: on the switch's side (p12 set down) or on the gateway's
    (its eth0 set down, so p12 loses carrier)."""
    # Bring every bucket to g2 first, then take g2's link down.
    for b in range(K):
        ctl.client.move(b, "g2")

    def link(state: str) -> None:
        if side == "switch":
            setup.topo.exec_sw("ip", "link", "set", "p12", state)
        else:
            setup.topo.endpoints["g2"].exec("ip", "link", "set", "eth0", state)

    link("down")
    try:
        t0 = time.monotonic()
        while ctl.client.gateway("g2").state != "dead":
            assert time.monotonic() - t0 < 2.0, "port down not noticed"
            time.sleep(0.02)
        assert ctl.client.gateway("g2").port_up is False
        assert set(ctl.bucket_of_gateway().values()) == {"g1"}
        assert pings_seen_by(setup, setup.topo.endpoints["h2"])["g1"] >= 10
    finally:
        link("up")
    t0 = time.monotonic()
    while ctl.client.gateway("g2").state == "dead":
        assert time.monotonic() - t0 < 3.0, "port up not noticed"
        time.sleep(0.05)


def test_metrics_and_dashboard_are_served_by_the_same_process(ctl: Controller) -> None:
    text = ctl.client.metrics()
    assert 'supergw_bucket_moves_total{reason="failover"}' in text, text[:2000]
    assert "supergw_controller_primary 1.0" in text and "supergw_switch_reconciled 1.0" in text
    assert ctl.client.request("GET", "/dashboard/").status_code == 200


def test_controller_log_is_quiet_and_structured(ctl: Controller) -> None:
    lines = [ln for ln in Path(ctl.log_path).read_text().splitlines() if ln.startswith("ts=")]
    assert lines and all(" level=" in ln and " msg=" in ln for ln in lines)
    assert not [ln for ln in lines if "level=error" in ln], [ln for ln in lines if "level=error" in ln]


def test_weight_through_the_typed_client(ctl: Controller) -> None:
    """PUT /gateways/{name}/weight as the operator CLI will send it: the view carries the new
    weight, a non-positive weight is refused with the API's own message, and nothing changed."""
    assert ctl.client.set_weight("g1", 2.0).weight == 2.0
    with pytest.raises(ApiError) as refused:
        ctl.client.set_weight("g1", 0)
    assert refused.value.status == 422 and "weight" in refused.value.detail, refused.value
    assert ctl.client.gateway("g1").weight == 2.0
    assert ctl.client.set_weight("g1", 1.0).weight == 1.0
