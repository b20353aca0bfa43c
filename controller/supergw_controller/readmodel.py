"""The read model: what the REST views show, read from the parts that own each fact.

Status, gateways, buckets, hosts, events and history. It writes nothing; every view is
built from the parts' public state (the switch session's role and counters, liveness's
registry and counters, placement's assignment and pins, the host table, the bucket
counters, the event log).
"""

from __future__ import annotations

import bisect
import ipaddress
import time
from collections import Counter
from collections.abc import Callable

from supergw_proto.api import (
    BucketView,
    ClientView,
    EventView,
    GatewayView,
    HistoryView,
    HostPage,
    HostQuery,
    HostView,
    StatusView,
)
from supergw_proto.bucket import vmac
from supergw_controller.bucket_list import BucketList
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.config import Config
from supergw_controller.eventlog import EventLog
from supergw_controller.history import GatewayNow
from supergw_controller.hosts import HostLearning
from supergw_controller.learning import Host
from supergw_controller.liveness import Liveness
from supergw_controller.placement import Placement
from supergw_controller.remote_access import RemoteAccess
from supergw_controller.southbound.session import Role
from supergw_controller.southbound.switch import Southbound
from supergw_controller.views import BucketTraffic


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
        # Every bucket's vmac, made once: the bucket and host views of a large site ask for thousands.
        self._vmacs = [vmac(config.vmac_base, b) for b in range(config.buckets)]
        self._bucket_list = BucketList(self._vmacs, placement, stats)

    async def status(self) -> StatusView:
        cfg = self._config
        sw, live, hosts = self._switch, self._liveness, self._hosts
        gateways = self._registry.all()
        return StatusView(
            role=sw.role.value,
            connected=sw.role is not Role.DISCONNECTED,
            reconciled=sw.role is Role.PRIMARY and self._placement.ready.is_set(),
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
            host_capacity=hosts.table.capacity.hosts,
            host_ip6s=hosts.table.ip6_count,
            host_ip6_capacity=hosts.table.capacity.ip6s,
            hosts_refused_total=hosts.table.refused_hosts.total,
            host_ip6s_refused_total=hosts.table.refused_ip6s.total,
            replication=None if self._ra is None else self._ra.replication_view(),
        )

    async def clients(self) -> list[ClientView]:
        """Remote-access clients of every gateway (empty without remote access)."""
        return [] if self._ra is None else self._ra.client_views()

    async def gateways(self) -> list[GatewayView]:
        held = Counter(self._placement.assignment.values())  # one pass over K, not one per gateway
        return [self.gateway_view(g.name, held) for g in self._registry.all()]

    async def gateway(self, name: str) -> GatewayView:
        return self.gateway_view(name)

    def gateway_view(self, name: str, held: Counter[str] | None = None) -> GatewayView:
        """`held`: buckets per gateway, when the caller counted them for many views."""
        g = self._registry.get(name)
        now = self._clock()
        if held is None:
            held = Counter(v for v in self._placement.assignment.values() if v == g.name)
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
            buckets=held[g.name],
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

    async def buckets_json(self, gateway: str | None = None) -> bytes:
        """`buckets()` (only `gateway`'s, if given) as the JSON body of `GET /buckets`,
        encoded once per change of what it shows (`bucket_list`)."""
        if gateway is not None:
            self._registry.get(gateway)  # UnknownGateway: the cache keeps a body per known name only
        return self._bucket_list.body(gateway)

    def bucket_traffic(self) -> list[BucketTraffic]:
        """The buckets carrying traffic, for `/metrics`: from the counters' rates (only buckets
        whose counters moved have one) and the map, without a `BucketView` per bucket (4096
        models per scrape were a third of its time and half of its young collections)."""
        held = self._placement.assignment
        return [BucketTraffic(b, held.get(b), r.pps, r.bps)
                for b, r in sorted(self._stats.rates.items()) if r.pps > 0 or r.bps > 0]

    async def bucket(self, bucket: int) -> BucketView:
        self._placement.check_bucket(bucket)
        return self.bucket_view(bucket)

    def bucket_view(self, b: int) -> BucketView:
        return BucketView.model_validate(self._bucket_list.row(b))

    async def hosts(self, query: HostQuery) -> HostPage:
        """One page of the hosts matching `query`, by MAC. Filters run over the host list
        (kept sorted by the table) without building a view per host, so a page of a site of
        50,000 hosts costs milliseconds; only the page's hosts become views."""
        table = self._hosts.table
        found = self._matching(query)
        start = 0 if query.after is None else bisect.bisect_right(found, query.after, key=lambda h: h.mac)
        page = found[start : start + query.limit]
        more = start + query.limit < len(found)
        now = self._clock()
        assignment = self._placement.assignment
        return HostPage(
            hosts=[self._host_view(h, assignment.get(h.bucket), now) for h in page],
            total=len(table),
            matched=len(found),
            next_after=page[-1].mac if more and page else None,
        )

    def _matching(self, q: HostQuery) -> list[Host]:
        """The hosts `q`'s filters select, in MAC order."""
        table = self._hosts.table
        if q.mac is not None or q.ip is not None:
            owner = None if q.ip is None else (table.mac_of_ip(q.ip) or table.mac_of_ip6(q.ip))
            if q.ip is not None and (owner is None or q.mac not in (None, owner)):
                return []
            one = table.get(q.mac if q.mac is not None else owner or "")
            hosts = [] if one is None else [one]
        else:
            hosts = table.hosts()
        if q.gateway is not None:
            assignment = self._placement.assignment
            held = {b for b, g in assignment.items() if g == q.gateway}
            hosts = [h for h in hosts if h.bucket in held]
        if q.bucket is not None:
            hosts = [h for h in hosts if h.bucket == q.bucket]
        if q.port is not None:
            hosts = [h for h in hosts if h.port == q.port]
        if q.learned is not None:
            hosts = [h for h in hosts if h.learned is q.learned]
        return hosts

    def _host_view(self, h: Host, gateway: str | None, now: float) -> HostView:
        return HostView(
            mac=h.mac,
            port=h.port,
            ip=min(h.ips) if h.ips else None,
            ipv6=sorted(h.ip6s, key=ipaddress.IPv6Address),
            bucket=h.bucket,
            vmac=self._vmacs[h.bucket] if 0 <= h.bucket < len(self._vmacs) else vmac(self._config.vmac_base, h.bucket),
            gateway=gateway,
            idle_s=max(0.0, now - h.seen),
            learned=h.learned,
        )

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
