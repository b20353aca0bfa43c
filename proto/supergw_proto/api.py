"""The REST API's contract: request bodies and response models (the OpenAPI schemas).

The controller serves them and every client (the typed client, benchmarks, tests, the
operator CLI) reads them from here.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from supergw_proto.addresses import normalise_mac
from supergw_proto.reports import GatewayReport

MarkerKind = Literal["gateway_dead", "gateway_recovering", "moves"]


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class GatewayView(_View):
    name: str
    port: int
    mac: str
    weight: float
    state: str  # rebalancer.GatewayState value: alive | recovering | drained | withheld | dead
    drained: bool  # operator intent (a drained gateway may also be dead)
    alive: bool  # heartbeats current and port not down
    port_up: bool | None  # None when no port monitor watches it
    buckets: int  # buckets currently assigned to it
    load: float  # cost of its buckets in the last rebalance round (rebalancer.bucket_cost units)
    heartbeat_age_s: float | None  # None = never heard from
    # False: its last report showed no installed CHILD SA, so it gets no traffic; None: not known yet
    tunnel_up: bool | None = None
    # False: its partner gateway at the partner site is down (pair beacons through the tunnel
    # stopped, or the partner cannot carry traffic); None: its agent has no partner configured
    partner_up: bool | None = None
    unhealthy: str | None = None  # why it is dead although its agent talks (port, charon, tunnel, partner)
    report_age_s: float | None
    last_report: GatewayReport | None
    # remote-access clients whose IKE SA it holds, from its last report; None: no remote access
    clients: int | None = None
    # remote-access takeover (None: no remote access, or takeover off)
    backup: str | None = None  # the gateway its orders say holds copies of its SAs
    replicated_sas: int | None = None  # of its own SAs, how many its backup acknowledged (its last report)
    replication_lag_ms: float | None = None  # its last state change -> its backup had it (its last report)
    fenced: bool | None = None  # its switch ports are fenced: its remote-access SAs were taken over
    taken_over_by: str | None = None  # the gateway holding its taken-over SAs
    withheld: str | None = None  # why it does not serve although alive (a takeover holds its SAs)


class BucketView(_View):
    bucket: int
    vmac: str
    gateway: str | None  # None = unassigned (traffic to it is dropped BUCKET_UNASSIGNED)
    pinned: str | None
    packets: int  # bucket_counter totals as last read
    bytes: int
    pps: float  # rate over the last counter poll
    bps: float  # BYTES per second


class HostView(_View):
    mac: str
    port: int
    ip: str | None
    ipv6: list[str] = []  # its IPv6 addresses (link-local and global) learned from its frames, sorted
    bucket: int
    vmac: str
    gateway: str | None
    idle_s: float  # since the host was learned or last refreshed
    # False while the host waits for an IPv4 source (forwarded, learned_sources not yet
    # installed, see learning.ip_wait_s)
    learned: bool = True


class HostPage(_View):
    """One page of `GET /hosts`: the hosts matching the filters, by MAC, after `after`."""

    hosts: list[HostView]
    total: int  # hosts the controller knows
    matched: int  # of those, how many match the filters (on every page, not only this one)
    # the MAC to pass as `after` for the next page; None: this is the last page
    next_after: str | None = None


HOSTS_PAGE_DEFAULT = 500  # hosts per page unless `limit` says otherwise
HOSTS_PAGE_MAX = 5000


def _ip_address(value: str) -> str:
    return str(ipaddress.ip_address(value))  # canonical form (IPv6 compressed), ValueError otherwise


MAC_PATTERN = r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"  # what a MAC query parameter takes
MacText = Annotated[str, AfterValidator(normalise_mac)]
IpText = Annotated[str, AfterValidator(_ip_address)]


class HostQuery(_View):
    """A page of hosts and its filters (`GET /hosts`; every filter optional, all must match).
    Pages follow MAC order: pass a page's `next_after` as `after` for the next one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int = Field(default=HOSTS_PAGE_DEFAULT, ge=1, le=HOSTS_PAGE_MAX)
    after: MacText | None = None  # hosts with a larger MAC
    gateway: str | None = None  # hosts whose bucket this gateway holds
    bucket: int | None = Field(default=None, ge=0)
    port: int | None = Field(default=None, ge=0, lt=1 << 16)
    ip: IpText | None = None  # the host with this IPv4 or IPv6 address
    mac: MacText | None = None
    learned: bool | None = None  # False: hosts still waiting for an IPv4 source

    def params(self) -> dict[str, str]:
        """The query string of `GET /hosts` for this query (defaults left out)."""
        out: dict[str, str] = {}
        for name, value in self.model_dump(exclude_defaults=True).items():
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


class EventView(_View):
    id: int | None
    ts: float
    kind: str  # "move" | "client_pin" | "takeover" | "gateway" | "switch" | "operator"
    bucket: int | None
    src: str | None
    dst: str | None
    reason: str
    detail: str
    who: str | None = None  # operator token name (or agent:<gateway>) behind an operator action


class MoveView(_View):
    bucket: int
    src: str | None
    dst: str
    reason: str


class RebalanceView(_View):
    dry_run: bool
    applied: bool  # False for dry runs, and when the plan was empty
    moves: list[MoveView]
    load_before: dict[str, float]
    load_after: dict[str, float]
    ratio_before: float
    ratio_after: float
    warnings: list[str]
    plan_ms: float | None = None  # the controller's time to plan the round
    write_ms: float | None = None  # its time to write the moves to the switch (None: nothing written)


class StatusView(_View):
    role: str  # "primary" | "backup" | "disconnected"
    connected: bool
    # primary and the switch holds this controller's state (its tables were reconciled after
    # the connect): only then do hosts reach their gateways and moves take effect
    reconciled: bool = False
    switch_address: str
    device_id: int
    election_id: str  # "high:low"
    pipeline_cookie: int | None
    buckets: int  # K
    gateway_ip: str
    vmac_base: str
    uptime_s: float
    gateways_alive: int
    gateways_total: int
    buckets_unassigned: int
    hosts: int
    imbalance: float  # last measured max/mean
    moves_total: dict[str, int]  # by MoveReason value
    failovers_total: int
    digests_total: int
    packet_ins_total: int
    p4rt_errors_total: int  # failed writes/reads since start
    reconnects_total: int
    reports_total: int
    heartbeats_total: int
    # UDP heartbeats refused, by reason (malformed, unknown_gateway, bad_mac, replayed, stale)
    heartbeats_rejected: dict[str, int] = {}
    # gateway ARP misses (GATEWAY_ARP_MISS) for an IP no learned host has: unanswered
    arp_misses_unknown_total: int = 0
    # switch stream items dropped as malformed (a misbehaving switch), by stream: digest (items),
    # packet-in, idle timeout
    switch_stream_rejected: dict[str, int] = {}
    # remote access (None without it): the outside switch and its client pins
    remote_access: RemoteAccessStatus | None = None
    # what the switch's host tables hold (their P4Info sizes; None: not stated), and the new
    # hosts and IPv6 addresses refused because they were full (docs/DESIGN.md, "Sizing")
    host_capacity: int | None = None
    host_ip6s: int = 0  # IPv6 addresses learned (learned_ip6s / host_ip6s entries)
    host_ip6_capacity: int | None = None
    hosts_refused_total: int = 0
    host_ip6s_refused_total: int = 0
    # remote-access state replication and takeover (None without remote access)
    replication: ReplicationStatus | None = None


class RemoteAccessStatus(_View):
    public_ip: str  # IP_P
    outside_address: str  # the outside switch's P4Runtime server
    outside_role: str  # "primary" | "backup" | "disconnected"
    outside_ready: bool  # primary and reconciled
    clients: int  # IKE SAs the live gateways report
    pins: int  # client_pins entries the outside switch holds
    pins_installed_total: int  # pins written (new or moved) since start
    pins_removed_total: int
    sync_errors_total: int  # failed syncs of the remote-access tables (retried)
    # clients listed by live gateways that the full client_pins has no room for now (docs/DESIGN.md, "Sizing")
    pins_refused: int = 0
    refused: dict[str, str] = {}  # gateway -> why its remote_access is not used
    redirecting: list[str] = []  # drained gateways whose agents are told to redirect their clients (RFC 5685)


class ReplicationGatewayView(_View):
    """One gateway's replication: the orders in force and what its agent last reported."""

    gateway: str
    backup: str | None = Field(description="the gateway its orders say holds copies of its SAs")
    protects: str | None = Field(description="the gateway whose SAs its orders say it holds copies of")
    endpoint: str | None = Field(description="its agent's replication listener (None: it reports no replication)")
    applied_generation: int | None = Field(description="the orders generation its agent has applied (-1: none yet)")
    backup_connected: bool | None
    own_sas: int | None = Field(description="its own remote-access IKE SAs whose state it replicates")
    replicated_sas: int | None = Field(description="of those, how many its backup has acknowledged")
    held_sas: int | None = Field(description="IKE SAs it holds copies of for the gateway it protects")
    lag_ms_last: float | None = Field(description="last state change in its charon -> its backup had it, ms")
    lag_ms_max: float | None = Field(description="the largest lag since its previous report, ms")
    fenced: bool = Field(description="its switch ports are fenced (its SAs were taken over)")
    taken_over_by: str | None = Field(description="the gateway holding its taken-over SAs")
    taking_over: list[str] = Field(description="gateways whose SAs its orders say to take over")
    foreign_sas: dict[str, int] = Field(
        description="gateway -> taken-over SAs held here that still carry that gateway's SPI label or range")
    error: str | None = None


class ReplicationStatus(_View):
    takeover: bool = Field(description="remote_access.takeover: dead gateways' SAs are taken over by their backups")
    generation: int = Field(description="the orders generation in force (bumped on any gateway's change)")
    takeovers_total: int = Field(description="dead gateways taken over since start")
    gateways: list[ReplicationGatewayView]


class ClientView(_View):
    """One remote-access client (an IKE SA) as its gateway reports it."""

    gateway: str
    identity: str
    remote_host: str  # outer address now
    remote_port: int
    vips: list[str]  # inner addresses from the gateway's pool
    established_at: float  # UNIX time of its IKE_AUTH
    present: bool  # inbound ESP within the gateway's idle time
    bytes_in: int
    bytes_out: int
    pinned: bool  # the outside switch pins its address to this gateway


# -- history (GET /history): one sample per second of what the core knew


class GatewaySample(_View):
    state: str = Field(description="alive | recovering | drained | withheld | dead (rebalancer.GatewayState)")
    buckets: int = Field(description="buckets assigned to the gateway")
    dispatch_pps: float = Field(description="packets/s the switch sent to it (bucket_counter of its buckets)")
    dispatch_bps: float = Field(description="BYTES/s the switch sent to it (bucket_counter of its buckets)")
    tunnel_in_bps: float | None = Field(
        description="BYTES/s into its tunnels (ESP decrypted), from the agent's last two reports; "
        "null without two reports or when the last one is stale"
    )
    tunnel_out_bps: float | None = Field(description="BYTES/s out of its tunnels (ESP sent); null as tunnel_in_bps")
    cpu_percent: float | None = Field(
        description="CPU busy from the agent's last report (100 = one core); null when stale or none yet"
    )


class HistoryMarker(_View):
    ts: float = Field(description="UNIX time of the event (for moves: of the first move in the interval)")
    kind: MarkerKind
    gateway: str | None = Field(description="the gateway for gateway_* markers; null for moves")
    reason: str = Field(description="for moves the MoveReason (failover, rebalance, drain, ...); else the event reason")
    count: int = Field(description="number of bucket moves (1 for gateway_* markers)")
    detail: str = ""


class HistorySample(_View):
    ts: float = Field(description="UNIX time the sample was taken")
    gateways: dict[str, GatewaySample]
    imbalance: float = Field(description="max/mean of the weighted gateway loads (1.0 = balanced)")
    markers: list[HistoryMarker] = Field(description="gateway state changes and bucket moves since the previous sample")


class HistoryView(_View):
    interval_s: float = Field(description="seconds between samples")
    capacity: int = Field(description="samples kept; older ones are dropped")
    truncated: bool = Field(description="true when more samples matched than `limit`: only the newest are returned")
    samples: list[HistorySample] = Field(description="oldest first")


# -- request bodies and health


class _Body(BaseModel):
    # strict: JSON `true` is no weight, `1` no gateway name (lax pydantic would take both)
    model_config = ConfigDict(extra="forbid", strict=True)


class WeightBody(_Body):
    weight: float = Field(gt=0, le=1e6, allow_inf_nan=False, description="relative capacity, > 0 (use drain for 0)")


class GatewayRef(_Body):
    gateway: str = Field(min_length=1, max_length=64, description="gateway name from the config")


# -- error bodies (every 4xx/5xx the API answers; the OpenAPI documents them per operation)


class ErrorBody(_View):
    """A refused request: 401, 403, 404, 409, 503 (and 422 from the core)."""

    detail: str = Field(description="what was wrong and, where it helps, what to do instead")


class FieldError(_View):
    field: str = Field(description="where: `body.weight`, `path.b`, `query.limit`, `body` (the whole body)")
    message: str
    type: str = Field(description="pydantic's error type, e.g. `greater_than`, `float_type`, `json_invalid`, `missing`")


class ValidationErrorBody(_View):
    """422: the request does not match the schema (or a value the core refuses)."""

    detail: str = Field(description="`<field>: <message>` for each error, joined by `; `")
    errors: list[FieldError] = Field(
        default_factory=list, description="one entry per error (empty when the core refused a value)"
    )


class Health(BaseModel):
    status: str
    role: str | None = None
    connected: bool | None = None
    detail: str | None = None


class HaWriteWindow(BaseModel):
    term: int
    writes: int
    first_sent: float
    last_answered: float


class HaHealth(BaseModel):
    replica: str
    role: str  # "leader" | "backup"
    term: int
    election_id: str  # "none" on a backup
    leader: str | None
    leader_api: str | None
    takeovers: int
    writes: list[HaWriteWindow] = []  # switch writes accepted, per term this replica led


class ReplicaHealth(Health):
    """`/healthz` of a controller that runs as one of several replicas (`ha:` in the config)."""

    ha: HaHealth
