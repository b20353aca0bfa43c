"""`rebalancer.policy: paper` against the real switch: the agents are told T_L, a round of
Algorithm 5 moves the hot gateway's own buckets to its ring successor only (never a pinned
one), and the traffic follows.

Topology: 2 hosts (ports 1, 2) and 3 stand-in gateways (ports 11-13; plain namespaces that
own 192.0.2.1 on lo). Heartbeats come from a stand-in agent; each gateway's load is the CPU
of the report the test posts for it, as a real agent would every T_L.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from sgwctl_harness import Controller, Heartbeats, Setup, TopologySpec, owner, pings_seen_by, two_hosts_on
from supergw_proto.reports import TIMING_HEADER, AgentTiming, GatewayReport, IpsecBackend, SaState
from supergw_proto.rest import API_PREFIX

K = 16
GATEWAYS = ["g1", "g2", "g3"]
TOPOLOGY = TopologySpec(tag="pp", index=14, hosts=2, gateways=3)


@pytest.fixture(scope="module")
def ctl(setup: Setup) -> Iterator[Controller]:
    # T_M of an hour: rounds only when the test asks (POST /rebalance runs one round now);
    # |W| = K: a migrating gateway hands over every bucket it may.
    paper = {"interval_s": 3600, "move_size": K, "seed": 1}
    c = setup.controller("pp-ctl", api_port=18751, rebalancer={"policy": "paper", "paper": paper})
    with Heartbeats([c], GATEWAYS):
        c.start()
        yield c
    c.stop()


def report(ctl: Controller, gateway: str, cpu_percent: float) -> httpx.Response:
    """The report an agent would post: its CPU load and an installed CHILD SA (a tunnel up)."""
    sa = SaState(name="net", kind="child", state="INSTALLED", established_s=10.0,
                 bytes_in=0, bytes_out=0, packets_in=0, packets_out=0)
    rep = GatewayReport(gateway=gateway, timestamp=time.time(), backend=IpsecBackend.LIBIPSEC,
                        cpu_percent=cpu_percent, cpu_cores=1.0, softirq_percent=0.0, charon_cpu_percent=cpu_percent,
                        tunnel_bytes_in=0, tunnel_bytes_out=0, tunnel_packets_in=0, tunnel_packets_out=0, sas=[sa])
    return ctl.agent(gateway).call("POST", f"{API_PREFIX}/gateways/{gateway}/report",
                                   json_body=rep.model_dump(mode="json"))


def test_agents_are_told_to_report_every_t_l(ctl: Controller) -> None:
    told = AgentTiming.from_header(report(ctl, "g1", 10.0).headers[TIMING_HEADER])
    assert told.report_interval_ms == 1330  # the paper's T_L, not timing.report_interval_ms


def test_a_round_moves_the_hot_gateways_own_buckets_to_its_successor(setup: Setup, ctl: Controller) -> None:
    h1, h2, _, b2 = two_hosts_on(setup, ctl, K, "g2")
    ctl.client.pin(b2, "g2")
    try:
        g2_before = {v.bucket for v in ctl.client.buckets() if v.gateway == "g2"}
        g1_before = {v.bucket for v in ctl.client.buckets() if v.gateway == "g1"}
        # g2 exceeds its successor g3 by 90 points; g1 is below g2, and g3 below g1, so the
        # coolest gateway (g3) gets load from its predecessor only
        for gateway, cpu in (("g1", 85.0), ("g2", 90.0), ("g3", 0.0)):
            report(ctl, gateway, cpu)
        plan = ctl.client.rebalance(dry_run=False)
        assert plan.moves, plan
        assert {(m.src, m.dst, m.reason) for m in plan.moves} == {("g2", "g3", "paper-rebalance")}, plan
        assert {m.bucket for m in plan.moves} == g2_before - {b2}  # all it may hand over, not the pin
        assert {v.bucket for v in ctl.client.buckets() if v.gateway == "g1"} == g1_before
        assert owner(ctl, h1, K) == "g3" and owner(ctl, h2, K) == "g2"
        # the switch follows: h1's frames reach g3 now, pinned h2's still g2
        seen = pings_seen_by(setup, h1)
        assert seen["g3"] >= 10, seen
        seen = pings_seen_by(setup, h2)
        assert seen["g2"] >= 10, seen
        # level loads: no migration
        for gateway in GATEWAYS:
            report(ctl, gateway, 50.0)
        assert ctl.client.rebalance(dry_run=False).moves == []
    finally:
        ctl.client.unpin(b2)


def test_a_drained_gateway_is_not_in_the_ring(ctl: Controller) -> None:
    ctl.client.drain("g3")
    try:
        assert all(v.gateway != "g3" for v in ctl.client.buckets())
        # without g3 the ring is g1 -> g2 -> g1: hot g2's successor is g1
        for gateway, cpu in (("g1", 5.0), ("g2", 90.0), ("g3", 0.0)):
            report(ctl, gateway, cpu)
        plan = ctl.client.rebalance(dry_run=False)
        assert plan.moves and {(m.src, m.dst) for m in plan.moves} == {("g2", "g1")}, plan
    finally:
        ctl.client.undrain("g3")
