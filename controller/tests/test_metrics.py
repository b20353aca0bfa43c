"""Prometheus exposition: parsed back with prometheus_client's own text parser."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from supergw_controller.api import create_app
from supergw_controller.metrics import ControllerMetrics, Snapshot
from supergw_controller.views import BucketTraffic
from supergw_proto.api import GatewayView, StatusView

from corekit import Clock, LoopTicks, make_config, running_core


def status(**kw: object) -> StatusView:
    base: dict[str, object] = dict(
        role="primary", connected=True, switch_address="127.0.0.1:9559", device_id=1, election_id="0:1",
        pipeline_cookie=None, buckets=4, gateway_ip="10.0.0.1", vmac_base="02:5e:00:00:00:00", uptime_s=3.0,
        gateways_alive=1, gateways_total=2, buckets_unassigned=0, hosts=2, imbalance=1.25,
        moves_total={"failover": 4, "rebalance": 7}, failovers_total=1, digests_total=2, packet_ins_total=3,
        p4rt_errors_total=5, reconnects_total=0, reports_total=9, heartbeats_total=90, arp_misses_unknown_total=6,
    )
    base.update(kw)
    return StatusView.model_validate(base)


def gateway(name: str, alive: bool, load: float) -> GatewayView:
    return GatewayView(name=name, port=11, mac="02:00:00:00:01:01", weight=1.0, state="alive" if alive else "dead",
                       drained=False, alive=alive, port_up=None, buckets=2, load=load, heartbeat_age_s=0.1,
                       report_age_s=None, last_report=None)


def bucket(b: int, gw: str | None, pps: float) -> BucketTraffic:
    return BucketTraffic(bucket=b, gateway=gw, pps=pps, bps=pps * 64)


def samples(metrics: ControllerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(metrics.render().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exposition_has_every_family() -> None:
    m = ControllerMetrics()
    m.update(Snapshot(status(), [gateway("gw1", True, 120.0), gateway("gw2", False, 0.0)],
                      [bucket(0, "gw1", 100.0), bucket(1, "gw1", 0.0), bucket(2, None, 0.0), bucket(3, "gw1", 20.0)]))
    s = samples(m)
    assert s[("supergw_gateway_up", (("gateway", "gw1"),))] == 1.0
    assert s[("supergw_gateway_up", (("gateway", "gw2"),))] == 0.0
    assert s[("supergw_gateway_load", (("gateway", "gw1"),))] == 120.0
    assert s[("supergw_bucket_packets_per_second", (("bucket", "0"), ("gateway", "gw1")))] == 100.0
    assert s[("supergw_bucket_bytes_per_second", (("bucket", "3"), ("gateway", "gw1")))] == 20.0 * 64
    assert not any(k[0] == "supergw_bucket_packets_per_second" and ("bucket", "1") in k[1] for k in s)  # idle: no series
    assert s[("supergw_bucket_moves_total", (("reason", "failover"),))] == 4.0
    assert s[("supergw_bucket_moves_total", (("reason", "rebalance"),))] == 7.0
    assert s[("supergw_failovers_total", ())] == 1.0
    assert s[("supergw_p4runtime_errors_total", ())] == 5.0
    assert s[("supergw_gateway_arp_misses_unknown_total", ())] == 6.0
    assert s[("supergw_imbalance_ratio", ())] == 1.25
    assert s[("supergw_controller_primary", ())] == 1.0
    assert s[("supergw_switch_reconciled", ())] == 0.0, "primary, but status() here does not say reconciled"


def test_registries_are_per_instance() -> None:
    a, b = ControllerMetrics(), ControllerMetrics()
    a.update(Snapshot(status(p4rt_errors_total=1)))
    b.update(Snapshot(status(p4rt_errors_total=2)))
    assert samples(a)[("supergw_p4runtime_errors_total", ())] == 1.0
    assert samples(b)[("supergw_p4runtime_errors_total", ())] == 2.0


def test_empty_snapshot_renders() -> None:
    m = ControllerMetrics()
    assert b"supergw_gateway_up" in m.render()  # HELP/TYPE lines, no samples


def test_asyncio_tasks_gauge_only_when_sampled() -> None:
    m = ControllerMetrics()
    m.update(Snapshot(status(), asyncio_tasks=17))
    assert samples(m)[("supergw_asyncio_tasks", ())] == 17.0
    m.update(Snapshot(status()))
    assert not any(k[0] == "supergw_asyncio_tasks" for k in samples(m))


async def test_bucket_series_are_the_bucket_views_carrying_traffic(tmp_path: Path) -> None:
    """/metrics reads the counters' rates and the map, not `BucketView`s: the same buckets, gateways and rates."""
    core, _ = await running_core(make_config(tmp_path), Clock())
    core.stats.update(1.0, {b: (0, 0) for b in range(16)})
    core.stats.update(3.0, {b: (b % 3, 100 * (b % 3)) for b in range(16)})  # a third of them idle
    await core.move(4, "g3")
    views = await core.buckets()
    want = {(str(v.bucket), v.gateway or ""): (v.pps, v.bps) for v in views if v.pps > 0 or v.bps > 0}
    assert len(want) == 10 and ("4", "g3") in want
    app = create_app(core, core.config)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sgw") as client:
        r = await client.get("/metrics")
    assert r.status_code == 200
    got: dict[tuple[str, str], list[float]] = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            if s.name in ("supergw_bucket_packets_per_second", "supergw_bucket_bytes_per_second"):
                got.setdefault((s.labels["bucket"], s.labels["gateway"]), []).append(s.value)
    assert {k: tuple(v) for k, v in got.items()} == want


async def test_a_scrape_renders_while_the_event_loop_goes_on() -> None:
    """K = 4,096 buckets' series take tens of milliseconds of pure Python to render: on the
    event loop, every heartbeat and REST answer would wait that long."""
    from supergw_controller.api.routers.ops import exposition

    class Core:
        async def status(self) -> StatusView:
            return status()

        async def gateways(self) -> list[GatewayView]:
            return [gateway(f"gw{i}", True, 1.0) for i in range(32)]

        async def bucket_traffic(self) -> list[BucketTraffic]:
            return [bucket(b, f"gw{b % 32}", 100.0) for b in range(4096)]

    m = ControllerMetrics()
    seen: list[int] = []
    render = m.render
    ticks = LoopTicks()

    def watched() -> bytes:
        seen.append(ticks.count)
        out = render()
        seen.append(ticks.count)
        return out

    m.render = watched  # type: ignore[method-assign]
    try:
        text = await exposition(Core(), m)  # type: ignore[arg-type]
    finally:
        ticks.stop()
    assert b'supergw_bucket_packets_per_second{bucket="4095",gateway="gw31"} 100.0' in text
    assert seen[1] > seen[0], "the event loop stood still while the metrics rendered"
