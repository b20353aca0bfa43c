"""Prometheus exposition of the controller, one registry per app instance.

The core keeps its own counters (StatusView) and views; at scrape time the /metrics
route takes a snapshot of them and this module renders it. A custom collector turns the
snapshot into metric families, so nothing here is global and two apps in one process
(tests) never share series.

Per-bucket series are only emitted for buckets that carry traffic (pps or bps > 0):
K = 4096 idle buckets would otherwise be 8192 useless series.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from supergw_controller.views import BucketTraffic
from supergw_proto.api import (
    GatewayView,
    RemoteAccessStatus,
    ReplicationGatewayView,
    ReplicationStatus,
    StatusView,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Snapshot:
    status: StatusView | None = None
    gateways: Sequence[GatewayView] = field(default_factory=tuple)
    buckets: Sequence[BucketTraffic] = field(default_factory=tuple)  # those carrying traffic
    asyncio_tasks: int | None = None  # tasks alive in the controller's event loop at scrape time


class _SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        yield from _gateway_families(snap.gateways)
        yield from _bucket_families(snap.buckets)
        if snap.status is not None:
            yield from _status_families(snap.status)
        if snap.asyncio_tasks is not None:
            # A long run (bench/chaos) watches this for leaked tasks, as it watches RSS and fds.
            yield GaugeMetricFamily("supergw_asyncio_tasks", "asyncio tasks alive in the controller's event loop",
                                    value=float(snap.asyncio_tasks))


def _gateway_families(gateways: Sequence[GatewayView]) -> Iterator[Metric]:
    up = GaugeMetricFamily("supergw_gateway_up", "1 if the gateway is alive (heartbeats and port)", labels=["gateway"])
    drained = GaugeMetricFamily("supergw_gateway_drained", "1 if the operator drained the gateway", labels=["gateway"])
    load = GaugeMetricFamily(
        "supergw_gateway_load", "cost of the gateway's buckets in the last round (rebalancer units)", labels=["gateway"]
    )
    weight = GaugeMetricFamily("supergw_gateway_weight", "capacity weight", labels=["gateway"])
    nbuckets = GaugeMetricFamily("supergw_gateway_buckets", "buckets assigned to the gateway", labels=["gateway"])
    cpu = GaugeMetricFamily(
        "supergw_gateway_cpu_percent", "the gateway's own CPU busy (100 = one core), from its last report", labels=["gateway"]
    )
    hb = GaugeMetricFamily(
        "supergw_gateway_heartbeat_age_seconds", "seconds since the last heartbeat", labels=["gateway"]
    )
    tunnel = GaugeMetricFamily(
        "supergw_gateway_tunnel_up",
        "1 if the gateway's last report shows an installed CHILD SA (0: it gets no traffic)",
        labels=["gateway"],
    )
    partner = GaugeMetricFamily(
        "supergw_gateway_partner_up",
        "1 if the gateway's partner at the partner site is up (pair beacons through the tunnel; 0: it gets no traffic)",
        labels=["gateway"],
    )
    clients = GaugeMetricFamily(
        "supergw_gateway_clients",
        "remote-access clients (IKE SAs) the gateway's last report lists (only with remote_access)",
        labels=["gateway"],
    )
    for g in gateways:
        up.add_metric([g.name], 1.0 if g.alive else 0.0)
        if g.clients is not None:
            clients.add_metric([g.name], float(g.clients))
        drained.add_metric([g.name], 1.0 if g.drained else 0.0)
        load.add_metric([g.name], g.load)
        weight.add_metric([g.name], g.weight)
        nbuckets.add_metric([g.name], float(g.buckets))
        if g.last_report is not None:
            cpu.add_metric([g.name], g.last_report.cpu_percent)
        if g.heartbeat_age_s is not None:
            hb.add_metric([g.name], g.heartbeat_age_s)
        if g.tunnel_up is not None:
            tunnel.add_metric([g.name], 1.0 if g.tunnel_up else 0.0)
        if g.partner_up is not None:
            partner.add_metric([g.name], 1.0 if g.partner_up else 0.0)
    yield from (up, drained, load, weight, nbuckets, cpu, hb, tunnel, partner, clients)


def _bucket_families(buckets: Sequence[BucketTraffic]) -> Iterator[Metric]:
    pps = GaugeMetricFamily(
        "supergw_bucket_packets_per_second", "per-bucket packet rate (direct counter)", labels=["bucket", "gateway"]
    )
    bps = GaugeMetricFamily(
        "supergw_bucket_bytes_per_second", "per-bucket byte rate (direct counter)", labels=["bucket", "gateway"]
    )
    for b in buckets:
        if b.pps > 0 or b.bps > 0:
            labels = [str(b.bucket), b.gateway or ""]
            pps.add_metric(labels, b.pps)
            bps.add_metric(labels, b.bps)
    yield from (pps, bps)


def _status_families(s: StatusView) -> Iterator[Metric]:
    moves = CounterMetricFamily("supergw_bucket_moves", "bucket moves written, by reason", labels=["reason"])
    for reason, n in sorted(s.moves_total.items()):
        moves.add_metric([reason], float(n))
    yield moves
    rejected = CounterMetricFamily(
        "supergw_heartbeats_rejected", "UDP heartbeats refused (forged, replayed, malformed ...), by reason", labels=["reason"]
    )
    for reason, n in sorted(s.heartbeats_rejected.items()):
        rejected.add_metric([reason], float(n))
    yield rejected
    dropped = CounterMetricFamily(
        "supergw_switch_stream_rejected", "switch stream items dropped as malformed, by stream", labels=["stream"]
    )
    for stream, n in sorted(s.switch_stream_rejected.items()):
        dropped.add_metric([stream], float(n))
    yield dropped
    counters = {
        "supergw_failovers": ("gateway failovers (all buckets of a dead gateway moved)", s.failovers_total),
        "supergw_p4runtime_errors": ("failed P4Runtime writes/reads", s.p4rt_errors_total),
        "supergw_digests": ("learning digests received", s.digests_total),
        "supergw_packet_ins": ("packet-ins received", s.packet_ins_total),
        "supergw_switch_reconnects": ("P4Runtime reconnects", s.reconnects_total),
        "supergw_gateway_reports": ("gateway load reports accepted", s.reports_total),
        "supergw_gateway_heartbeats": ("gateway heartbeats accepted", s.heartbeats_total),
        "supergw_gateway_arp_misses_unknown": (
            "gateway ARP requests for an IP no learned host has (unanswered)",
            s.arp_misses_unknown_total,
        ),
        "supergw_hosts_refused": ("new hosts refused: the switch's host tables were full", s.hosts_refused_total),
        "supergw_host_ip6s_refused": (
            "new host IPv6 addresses refused: the switch's IPv6 tables were full",
            s.host_ip6s_refused_total,
        ),
    }
    for name, (doc, value) in counters.items():
        yield CounterMetricFamily(name, doc, value=float(value))
    gauges: dict[str, tuple[str, float]] = {
        "supergw_switch_connected": ("1 if the P4Runtime channel is up", 1.0 if s.connected else 0.0),
        "supergw_controller_primary": ("1 if this controller is the primary", 1.0 if s.role == "primary" else 0.0),
        "supergw_switch_reconciled": (
            "1 if primary and the switch holds this controller's tables (reconciled after the connect)",
            1.0 if s.reconciled else 0.0,
        ),
        "supergw_imbalance_ratio": ("max/mean weight-normalised gateway load", s.imbalance),
        "supergw_gateways_alive": ("alive gateways", float(s.gateways_alive)),
        "supergw_gateways_total": ("configured gateways", float(s.gateways_total)),
        "supergw_buckets": ("K, buckets in the dispatch table", float(s.buckets)),
        "supergw_buckets_unassigned": ("buckets with no gateway", float(s.buckets_unassigned)),
        "supergw_hosts": ("learned hosts", float(s.hosts)),
        "supergw_host_ip6s": ("learned host IPv6 addresses", float(s.host_ip6s)),
        "supergw_uptime_seconds": ("seconds since the controller started", s.uptime_s),
    }
    for name, (doc, level) in gauges.items():
        yield GaugeMetricFamily(name, doc, value=level)
    for name, doc, cap in (
        ("supergw_host_capacity", "hosts the switch's host tables hold", s.host_capacity),
        ("supergw_host_ip6_capacity", "host IPv6 addresses the switch's tables hold", s.host_ip6_capacity),
    ):
        if cap is not None:
            yield GaugeMetricFamily(name, doc, value=float(cap))
    if s.remote_access is not None:
        yield from _remote_access_families(s.remote_access)
    if s.replication is not None:
        yield from _replication_families(s.replication)


def _remote_access_families(ra: RemoteAccessStatus) -> Iterator[Metric]:
    yield GaugeMetricFamily("supergw_client_pins", "client_pins entries the outside switch holds", value=float(ra.pins))
    yield GaugeMetricFamily("supergw_clients", "remote-access clients (IKE SAs) the gateways report", value=float(ra.clients))
    yield GaugeMetricFamily("supergw_client_pins_refused", "clients without a pin: client_pins is full",
                            value=float(ra.pins_refused))
    yield GaugeMetricFamily(
        "supergw_outside_switch_ready", "1 if primary and reconciled on the outside switch", value=1.0 if ra.outside_ready else 0.0
    )
    yield CounterMetricFamily("supergw_client_pins_installed", "client pins written (new or moved)", value=float(ra.pins_installed_total))
    yield CounterMetricFamily("supergw_client_pins_removed", "client pins deleted", value=float(ra.pins_removed_total))
    yield CounterMetricFamily(
        "supergw_remote_access_sync_errors", "failed syncs of the remote-access tables (retried)", value=float(ra.sync_errors_total)
    )
    refused = GaugeMetricFamily(
        "supergw_gateway_remote_access_refused", "1 if the gateway's remote_access claim is refused (see /status)", labels=["gateway"]
    )
    for gw in sorted(ra.refused):
        refused.add_metric([gw], 1.0)
    yield refused


def _replication_families(r: ReplicationStatus) -> Iterator[Metric]:
    yield CounterMetricFamily("supergw_takeovers", "dead gateways whose remote-access SAs their backup took over",
                              value=float(r.takeovers_total))
    yield GaugeMetricFamily("supergw_replication_generation", "the replication orders generation in force",
                            value=float(r.generation))
    per_gateway: dict[str, tuple[str, Callable[[ReplicationGatewayView], float | int | None]]] = {
        "supergw_replication_lag_ms": ("last state change -> the backup had it, ms (the gateway's last report)",
                                       lambda g: g.lag_ms_last),
        "supergw_replication_lag_max_ms": ("the largest replication lag between the gateway's last two reports, ms",
                                           lambda g: g.lag_ms_max),
        "supergw_replication_own_sas": ("the gateway's own remote-access IKE SAs whose state it replicates",
                                        lambda g: g.own_sas),
        "supergw_replicated_sas": ("of those, how many its backup has acknowledged", lambda g: g.replicated_sas),
        "supergw_held_sas": ("IKE SAs the gateway holds copies of for the gateway it protects", lambda g: g.held_sas),
        "supergw_gateway_fenced": ("1 if the gateway's switch ports are fenced (its SAs were taken over)",
                                   lambda g: 1.0 if g.fenced else 0.0),
    }
    for name, (doc, value) in per_gateway.items():
        fam = GaugeMetricFamily(name, doc, labels=["gateway"])
        for g in r.gateways:
            v = value(g)
            if v is not None:
                fam.add_metric([g.gateway], float(v))
        yield fam
    foreign = GaugeMetricFamily(
        "supergw_foreign_sas", "taken-over SAs a gateway holds that still carry another gateway's SPI label or range",
        labels=["gateway", "of"],
    )
    for g in r.gateways:
        for of, n in sorted(g.foreign_sas.items()):
            foreign.add_metric([g.gateway, of], float(n))
    yield foreign


class ControllerMetrics:
    """A private registry plus the snapshot collector that feeds it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._collector = _SnapshotCollector()
        self.registry.register(self._collector)
        self._rendering = threading.Lock()

    def update(self, snapshot: Snapshot) -> None:
        self._collector.snapshot = snapshot

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def render_from(self, snapshot: Snapshot) -> bytes:
        """`update` and `render` as one step, safe from several threads at once: a scrape
        renders in a worker thread (K = 4,096 buckets' series take 30-60 ms of pure Python,
        which on the event loop would hold every heartbeat and REST answer that long)."""
        with self._rendering:
            self.update(snapshot)
            return self.render()
