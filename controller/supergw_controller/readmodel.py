"""The read model: what the REST views show, read from the parts that own each fact.

Status, gateways, buckets, hosts, events and history. It writes nothing; every view is
built from the parts' public state (the switch session's role and counters, liveness's
registry and counters, placement's assignment and pins, the host table, the bucket
counters, the event log).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable

from supergw_proto.api import BucketView, ClientView, EventView, GatewayView, HistoryView, HostView, StatusView
from supergw_proto.bucket import bucket_of, vmac
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.config import Config
from supergw_controller.eventlog import EventLog
from supergw_controller.history import GatewayNow
from supergw_controller.hosts import HostLearning
from supergw_controller.liveness import Liveness
from supergw_controller.placement import Placement
from supergw_controller.remote_access import RemoteAccess
from supergw_controller.southbound.session import Role
from supergw_controller.southbound.switch import Southbound


class ReadModel:
    def __init__(
        self,
        config: Config,
        *,
        switch: Southbound,
        liveness: Liveness,
        placement: Placement,
        hosts: HostLearning,
        stats: BucketStats,
        events: EventLog,
        election_id: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        remote_access: RemoteAccess | None = None,
    ) -> None:
        self._config = config
        self._ra = remote_access
        self._switch = switch
        self._liveness = liveness
        self._registry = liveness.registry
        self._placement = placement
        self._hosts = hosts
        self._stats = stats
        self._log = events
        eid = config.switch.election_id
        # A replica's election id is its term's (none on a backup), not switch.election_id.
        self._election_id = election_id if election_id is not None else (lambda: f"{eid.high}:{eid.low}")
        self._clock = clock
        self._started = clock()

    async def status(self) -> StatusView:
        cfg = self._config
        sw, live, hosts = self._switch, self._liveness, self._hosts
        gateways = self._registry.all()
        return StatusView(
            role=sw.role.value,
            connected=sw.role is not Role.DISCONNECTED,
            switch_address=cfg.switch.address,
            device_id=cfg.switch.device_id,
            election_id=self._election_id(),
            pipeline_cookie=sw.cookie,
            buckets=cfg.buckets,
            gateway_ip=str(cfg.gateway_ip),
            vmac_base=cfg.vmac_base,
            uptime_s=self._clock() - self._started,
            gateways_alive=sum(1 for g in gateways if not g.dead),
            gateways_total=len(gateways),
            buckets_unassigned=cfg.buckets - len(self._placement.assignment),
            hosts=len(hosts.table),
            imbalance=self._placement.imbalance(),
            moves_total=dict(self._log.moves_total),
            failovers_total=self._log.failovers_total,
            digests_total=hosts.digests_total,
            packet_ins_total=hosts.packet_ins_total,
            p4rt_errors_total=sw.errors,
            reconnects_total=sw.reconnects,
            reports_total=live.reports_total,
            heartbeats_total=live.heartbeats_total,
            heartbeats_rejected=dict(live.receiver.rejected),
            arp_misses_unknown_total=hosts.arp_misses_unknown_total,
            switch_stream_rejected=dict(sw.stream_rejected),
            remote_access=None if self._ra is None else self._ra.status_view(),
            replication=None if self._ra is None else self._ra.replication_view(),
        )

    async def clients(self) -> list[ClientView]:
        """Remote-access clients of every gateway (empty without remote access)."""
        return [] if self._ra is None else self._ra.client_views()

    async def gateways(self) -> list[GatewayView]:
        return [self.gateway_view(g.name) for g in self._registry.all()]

    async def gateway(self, name: str) -> GatewayView:
        return self.gateway_view(name)

    def gateway_view(self, name: str) -> GatewayView:
        g = self._registry.get(name)
        now = self._clock()
        ra = self._ra
        rep = None if g.last_report is None else g.last_report.replication
        orders = None if ra is None else ra.orders(name).replication
        takeover = None if ra is None else ra.takeover
        return GatewayView(
            name=g.name,
            port=g.port,
            mac=g.mac,
            weight=g.weight,
            state=g.state.value,
            drained=g.drained,
            alive=not g.dead,
            port_up=g.port_up,
            buckets=sum(1 for v in self._placement.assignment.values() if v == g.name),
            load=g.load,
            heartbeat_age_s=self._registry.heartbeat_age(name, now),
            tunnel_up=g.tunnel_up,
            partner_up=g.partner_up,
            unhealthy=g.unhealthy_why(),
            report_age_s=self._registry.report_age(name, now),
            last_report=g.last_report,
            clients=None if ra is None else len(ra.book.clients(name)),
            backup=None if orders is None or orders.backup is None else orders.backup.name,
            replicated_sas=None if rep is None or takeover is None else rep.replicated_sas,
            replication_lag_ms=None if rep is None or takeover is None else rep.lag_ms_last,
            fenced=None if takeover is None else name in takeover.fenced(),
            taken_over_by=None if takeover is None else takeover.holders().get(name),
            withheld=g.withheld,
        )

    async def buckets(self) -> list[BucketView]:
        return [self.bucket_view(b) for b in range(self._config.buckets)]

    async def bucket(self, bucket: int) -> BucketView:
        self._placement.check_bucket(bucket)
        return self.bucket_view(bucket)

    def bucket_view(self, b: int) -> BucketView:
        pkts, byts = self._stats.totals.get(b, (0, 0))
        rate = self._stats.rates.get(b)
        return BucketView(
            bucket=b,
            vmac=vmac(self._config.vmac_base, b),
            gateway=self._placement.assignment.get(b),
            pinned=self._placement.pins.get(b),
            packets=pkts,
            bytes=byts,
            pps=rate.pps if rate else 0.0,
            bps=rate.bps if rate else 0.0,
        )

    async def hosts(self) -> list[HostView]:
        now = self._clock()
        k = self._config.buckets
        assignment = self._placement.assignment
        out = []
        for h in self._hosts.table.hosts():
            b = bucket_of(h.mac, k, self._config.dispatch.hash)
            out.append(
                HostView(
                    mac=h.mac,
                    port=h.port,
                    ip=sorted(h.ips)[0] if h.ips else None,
                    ipv6=sorted(h.ip6s, key=ipaddress.IPv6Address),
                    bucket=b,
                    vmac=vmac(self._config.vmac_base, b),
                    gateway=assignment.get(b),
                    idle_s=max(0.0, now - h.seen),
                    learned=h.learned,
                )
            )
        return out

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        return await self._log.events(limit, since_id)

    async def history(self, since: float | None = None, limit: int = 600) -> HistoryView:
        return self._log.history_since(since, limit)

    def gateways_now(self) -> list[GatewayNow]:
        """What a history sample records of each gateway."""
        now = self._clock()
        return [
            GatewayNow(g.name, g.state.value, g.last_report, self._registry.report_age(g.name, now))
            for g in self._registry.all()
        ]
