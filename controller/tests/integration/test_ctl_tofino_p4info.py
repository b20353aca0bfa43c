"""The controller drives a real P4Runtime server through a Tofino-shaped P4Info.

No Tofino here, so BMv2 stands in: the controller gets p4src/tna/supergw.tofino-shape.p4info.txtpb
(the TNA program's objects with bf-p4c's "pipe." prefix and p4c's own IDs, none equal to
the v1model P4Info's) together with the v1model BMv2 JSON. It maps the names in one
place (southbound/p4names.py) and pushes that P4Info; PI binds every object to the JSON
by name. Any lookup left by a v1model ID would fail the write, the digest or the counter
read, so ARP answers, learning, dispatch, a bucket move and the bucket load must all
work, and the switch must hold the Tofino IDs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4i, p4r, p4r_grpc
from google.protobuf import text_format

from sgwctl_harness import (
    Controller,
    Heartbeats,
    Setup,
    TopologySpec,
    move_to_the_other,
    neighbour_mac,
    owner,
    pings_seen_by,
    vmac_of,
)
from supergw_proto import p4constants as pc
from supergw_proto.bucket import bucket_of

TOFINO = Path(__file__).resolve().parents[3] / "p4src" / "tna" / "supergw.tofino-shape.p4info.txtpb"
VMAC_BASE = "02:5e:00:00:00:00"
K = 16
TOPOLOGY = TopologySpec(tag="t", index=11, hosts=2, gateways=2)
EBPF = "the eBPF target serves only its built-in v1model P4Info (it refuses other IDs)"
pytestmark = pytest.mark.not_on("ebpf", EBPF)


@pytest.fixture(scope="module")
def ctl(setup: Setup) -> Iterator[Controller]:
    if setup.topo.switch != "bmv2":  # before starting a controller that cannot succeed
        pytest.skip(f"{setup.topo.switch}: {EBPF}")
    c = setup.controller("t-primary", api_port=18741, pipeline={"p4info": str(TOFINO)})
    with Heartbeats([c], ["g1", "g2"]):
        c.start()
        yield c
    c.stop()


def _switch_p4info(setup: Setup) -> p4i.P4Info:
    with grpc.insecure_channel(setup.topo.grpc_addr) as channel:
        reply = p4r_grpc.P4RuntimeStub(channel).GetForwardingPipelineConfig(
            p4r.GetForwardingPipelineConfigRequest(
                device_id=setup.topo.device_id,
                response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE,
            ),
            timeout=10,
        )
    info = p4i.P4Info()
    info.CopyFrom(reply.config.p4info)
    return info


def test_the_switch_holds_the_tofino_ids_under_the_controllers_names(setup: Setup, ctl: Controller) -> None:
    raw = p4i.P4Info()
    text_format.Parse(TOFINO.read_text(), raw)
    held = _switch_p4info(setup)
    want = {o.preamble.name.removeprefix("pipe."): o.preamble.id for o in [*raw.tables, *raw.digests, *raw.direct_counters]}
    got = {o.preamble.name: o.preamble.id for o in [*held.tables, *held.digests, *held.direct_counters]}
    assert got == want
    assert got[pc.TABLE_BUCKETS] != 0x02000004  # not the v1model ID


def test_arp_learning_and_dispatch(setup: Setup, ctl: Controller) -> None:
    for h in setup.topo.hosts():
        seen = pings_seen_by(setup, h)
        assert neighbour_mac(h, setup.topo.gateway_ip) == vmac_of(VMAC_BASE, bucket_of(h.mac, K))
        own = owner(ctl, h, K)
        assert seen[own] >= 10, seen
    hosts = {h.mac: h for h in ctl.client.hosts()}
    for h in setup.topo.hosts():
        assert hosts[h.mac].port == h.port and hosts[h.mac].ip == h.ip


def test_bucket_move_and_load(setup: Setup, ctl: Controller) -> None:
    h = setup.topo.endpoints["h1"]
    b, other = move_to_the_other(ctl, h, K)
    assert pings_seen_by(setup, h)[other] >= 10
    # bucket_counter (a direct counter read by its Tofino ID) shows the traffic; the
    # controller polls it every 0.5 s.
    before = ctl.client.bucket(b).packets
    assert pings_seen_by(setup, h)[other] >= 10
    deadline = time.monotonic() + 5
    while ctl.client.bucket(b).packets < before + 10:
        assert time.monotonic() < deadline, f"bucket {b}: counter did not grow past {before} + 10"
        time.sleep(0.1)
