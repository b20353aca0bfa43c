"""Read-only views the Dispatcher returns; also the REST response schemas."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from supergw_proto.reports import GatewayReport


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class GatewayView(_View):
    name: str
    port: int
    mac: str
    weight: float
    state: str  # rebalancer.GatewayState value: alive | recovering | drained | dead
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
    bucket: int
    vmac: str
    gateway: str | None
    idle_s: float  # since the host was learned or last refreshed
    # False while the host waits for an IPv4 source (forwarded, learned_sources not yet
    # installed, see learning.ip_wait_s)
    learned: bool = True


class EventView(_View):
    id: int | None
    ts: float
    kind: str  # "move" | "gateway" | "switch" | "operator"
    bucket: int | None
    src: str | None
    dst: str | None
    reason: str
    detail: str
    who: str | None = None  # operator token name (or agent:<gateway>) behind an operator action


class OperatorAction(_View):
    """An admin's call through the REST API, for the event log (kind "operator")."""

    who: str  # the operator token's name, never the token
    action: str  # drain, undrain, weight, pin, unpin, move, rebalance
    gateway: str | None = None  # the gateway acted on (event src)
    bucket: int | None = None
    target: str | None = None  # the destination gateway of a pin/move (event dst)
    outcome: str = "ok"  # "ok", "ok: <what>" or "refused: <why>" (event detail)


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


class StatusView(_View):
    role: str  # "primary" | "backup" | "disconnected"
    connected: bool
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
