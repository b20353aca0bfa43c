"""The history ring (history.py), its sampling by the real core, and GET /api/v1/history."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.compose import ControllerCore
from supergw_controller.config import Config
from supergw_controller.gateways import Transition
from supergw_controller.history import DEFAULT_CAPACITY, GatewayNow, History
from supergw_controller.rebalancer import BucketRate, Move, MoveReason
from supergw_proto.reports import GatewayReport, IpsecBackend

import corekit

TOKEN = "history-test-token"


def report(gw: str, ts: float, cpu: float, b_in: int, b_out: int) -> GatewayReport:
    return GatewayReport(
        gateway=gw,
        timestamp=ts,
        backend=IpsecBackend.LIBIPSEC,
        cpu_percent=cpu,
        softirq_percent=0,
        charon_cpu_percent=cpu,
        tunnel_bytes_in=b_in,
        tunnel_bytes_out=b_out,
        tunnel_packets_in=0,
        tunnel_packets_out=0,
    )


def make_config(tmp_path: Path) -> Config:
    """Two gateways without heartbeats, K = 8."""
    return corekit.make_config(
        tmp_path,
        switch={"address": "127.0.0.1:50799", "device_id": 799},
        buckets=8,
        api={"token": TOKEN},
        **corekit.TWO_QUIET,
    )


# -- the ring


def test_per_gateway_values_from_assignment_rates_and_reports() -> None:
    h = History(report_stale_s=2.0)
    gws = [GatewayNow("g1", "alive", report("g1", 10.0, 40.0, 1000, 2000), 0.1), GatewayNow("g2", "alive", None, None)]
    assignment = {0: "g1", 1: "g1", 2: "g2"}
    rates = {0: BucketRate(pps=10, bps=1000), 1: BucketRate(pps=5, bps=500), 2: BucketRate(pps=1, bps=64)}
    s1 = h.sample(100.0, gws, assignment, rates, 1.2)
    g1, g2 = s1.gateways["g1"], s1.gateways["g2"]
    assert (g1.buckets, g1.dispatch_pps, g1.dispatch_bps, g1.cpu_percent) == (2, 15, 1500, 40.0)
    assert g1.tunnel_in_bps is None  # one report: no rate yet
    assert (g2.buckets, g2.dispatch_bps, g2.cpu_percent, g2.tunnel_out_bps) == (1, 64, None, None)
    gws[0] = GatewayNow("g1", "alive", report("g1", 10.5, 50.0, 1500, 3000), 0.2)
    s2 = h.sample(101.0, gws, assignment, rates, 1.2)
    assert (s2.gateways["g1"].tunnel_in_bps, s2.gateways["g1"].tunnel_out_bps) == (1000.0, 2000.0)
    # No new report since: the rate stays; a stale report gives no CPU and no rate.
    assert h.sample(102.0, gws, assignment, rates, 1.0).gateways["g1"].tunnel_in_bps == 1000.0
    gws[0] = GatewayNow("g1", "dead", gws[0].report, 5.0)
    s4 = h.sample(103.0, gws, {}, {}, 1.0)
    assert (s4.gateways["g1"].cpu_percent, s4.gateways["g1"].tunnel_in_bps, s4.gateways["g1"].state) == (None, None, "dead")


def test_counters_that_go_backwards_give_no_rate() -> None:
    h = History()
    h.sample(1.0, [GatewayNow("g1", "alive", report("g1", 1.0, 1, 5000, 5000), 0.0)], {}, {}, 1.0)
    s = h.sample(2.0, [GatewayNow("g1", "alive", report("g1", 1.5, 1, 10, 10), 0.0)], {}, {}, 1.0)
    assert s.gateways["g1"].tunnel_in_bps is None


def test_markers_noted_between_samples() -> None:
    h = History()
    h.note_gateway(10.0, "g2", True, "heartbeats stopped")
    h.note_moves(10.1, {"failover": 4000})
    h.note_moves(10.3, {"failover": 96, "rebalance": 2})
    s = h.sample(11.0, [], {}, {}, 1.0)
    assert [(m.ts, m.kind, m.gateway, m.reason, m.count, m.detail) for m in s.markers] == [
        (10.0, "gateway_dead", "g2", "dead", 1, "heartbeats stopped"),
        (10.1, "moves", None, "failover", 4096, ""),
        (10.3, "moves", None, "rebalance", 2, ""),
    ]
    h.note_gateway(12.0, "g2", False, "heartbeat")
    assert [m.kind for m in h.sample(13.0, [], {}, {}, 1.0).markers] == ["gateway_recovering"]
    assert h.sample(14.0, [], {}, {}, 1.0).markers == []


def test_ring_is_bounded_and_since_returns_the_newest() -> None:
    h = History(capacity=5)
    for i in range(8):
        h.sample(float(i), [], {}, {}, 1.0)
    assert len(h) == 5
    v = h.since(None, 100)
    assert [s.ts for s in v.samples] == [3.0, 4.0, 5.0, 6.0, 7.0] and not v.truncated
    v = h.since(4.0, 100)
    assert [s.ts for s in v.samples] == [5.0, 6.0, 7.0]
    v = h.since(None, 2)
    assert [s.ts for s in v.samples] == [6.0, 7.0] and v.truncated
    assert h.since(7.0, 10).samples == []


@pytest.mark.parametrize("kw", [{"capacity": 0}, {"interval_s": 0.0}, {"interval_s": float("nan")}])
def test_bad_ring_parameters_are_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="history"):
        History(**kw)


# -- the real core samples what it knows; the API serves it


@pytest.fixture
def core(tmp_path: Path) -> ControllerCore:
    cfg = make_config(tmp_path)
    clock = [1000.0]
    wall = [1_700_000_000.0]
    session = corekit.RecordingSession()
    d = ControllerCore(cfg, None, clock=lambda: clock[0], wallclock=lambda: wall[0], session=session)
    asyncio.run(d.switch.set_buckets({b: ("g1" if b < 6 else "g2") for b in range(8)}))
    d.stats.update(1000.0, {b: (0, 0) for b in range(8)})
    d.stats.update(1001.0, {0: (100, 150_000), 6: (10, 1000)})
    d.registry.report(report("g1", 1.0, 30.0, 0, 0), 1000.5)
    d.sample_history()
    clock[0] += 1.0
    wall[0] += 1.0
    d.registry.report(report("g1", 2.0, 35.0, 4000, 8000), 1001.0)
    asyncio.run(d.switch.set_buckets({6: "g1"}))
    asyncio.run(d.eventlog.record_moves([Move(6, "g2", "g1", MoveReason.FAILOVER)]))
    # Not serving (never primary and reconciled): the gateway's death writes nothing.
    asyncio.run(d.placement.on_liveness([Transition("g2", True, "port down")]))
    assert len(session.batches) == 2  # the two set_buckets above, nothing else
    d.sample_history()
    return d


def test_dispatcher_samples_buckets_rates_reports_and_moves(core: ControllerCore) -> None:
    v = asyncio.run(core.history())
    assert [s.ts for s in v.samples] == [1_700_000_000.0, 1_700_000_001.0]
    first, second = v.samples
    assert (first.gateways["g1"].buckets, first.gateways["g2"].buckets) == (6, 2)
    assert first.gateways["g1"].dispatch_bps == 150_000.0 and first.gateways["g2"].dispatch_pps == 10.0
    assert first.gateways["g1"].cpu_percent == 30.0
    assert (second.gateways["g1"].buckets, second.gateways["g2"].buckets) == (7, 1)
    assert second.gateways["g1"].tunnel_out_bps == 8000.0
    assert [(m.kind, m.gateway, m.reason, m.count) for m in second.markers] == [
        ("gateway_dead", "g2", "dead", 1),
        ("moves", None, "failover", 1),
    ]


def test_history_route(core: ControllerCore, tmp_path: Path) -> None:
    client = TestClient(create_app(core, core.config))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = client.get(f"{API_PREFIX}/history", headers=auth)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["interval_s"] == 1.0 and body["capacity"] == DEFAULT_CAPACITY and len(body["samples"]) == 2
    r = client.get(f"{API_PREFIX}/history", params={"since": 1_700_000_000.0, "limit": 1}, headers=auth)
    assert [s["ts"] for s in r.json()["samples"]] == [1_700_000_001.0]
    assert client.get(f"{API_PREFIX}/history").status_code == 401


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "query.since"),
        ({"since": "-1"}, "query.since"),
        ({"since": "nan"}, "query.since"),
        ({"since": "inf"}, "query.since"),
        ({"limit": "0"}, "query.limit"),
        ({"limit": str(DEFAULT_CAPACITY + 1)}, "query.limit"),
        ({"limit": "ten"}, "query.limit"),
    ],
)
def test_history_route_bad_query_is_422(core: ControllerCore, params: dict[str, str], field: str) -> None:
    client = TestClient(create_app(core, core.config))
    r = client.get(f"{API_PREFIX}/history", params=params, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(field + ":"), r.json()


def test_history_is_in_the_openapi_schema(core: ControllerCore) -> None:
    doc = TestClient(create_app(core, core.config)).get("/openapi.json").json()
    op = doc["paths"][f"{API_PREFIX}/history"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"since", "limit"}
    assert "HistoryView" in doc["components"]["schemas"] and "HistoryMarker" in doc["components"]["schemas"]
