"""What gateway agents send to the controller, and the timing the controller tells them.

Agents POST a `GatewayReport` every T_L (``timing.report_interval_ms``, default 500 ms)
and send a heartbeat every ``timing.heartbeat_interval_ms`` (default 100 ms; UDP, see
`beats.py`, or the REST `Heartbeat`). Both intervals are the controller's: it answers every
report and REST heartbeat with its `AgentTiming` in the `Supergw-Timing` header, and the
agent adopts it at once; the same answers carry the controller's `AgentOrders` for that
gateway (`Supergw-Orders`: e.g. redirect its remote-access clients while drained). A heartbeat says whether charon runs and whether
the gateway's partner at the partner site is up; the report says the same with detail. These models are the request schemas of the
REST API, so they are also the OpenAPI contract. `tunnel_up` is the one reading of a
report's SAs that both the agent's /health and the controller's failover use.
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from supergw_proto.jsontypes import Int
from supergw_proto.replication import ReplicationOrders, ReplicationState


# The controller's defaults (`timing:` in its config), and what an agent uses until its
# controller has told it otherwise.
DEFAULT_HEARTBEAT_INTERVAL_MS = 100
DEFAULT_MISSED_HEARTBEATS = 3
DEFAULT_REPORT_INTERVAL_MS = 500
# Gateway liveness in the switch (supergw_proto.liveness): a frame every 5 ms, and a gateway
# silent for 25 ms (five frames) has its buckets sent to its backup by the switch itself.
DEFAULT_LAN_LIVENESS_INTERVAL_MS = 5
DEFAULT_LAN_LIVENESS_TIMEOUT_MS = 25
TIMING_HEADER = "Supergw-Timing"


class AgentTiming(BaseModel):
    """The timing a controller judges its agents by, sent to them as compact JSON in the
    `Supergw-Timing` header of its answer to every report and REST heartbeat. Unknown keys
    are ignored, so a newer controller may say more."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    heartbeat_interval_ms: int = Field(default=DEFAULT_HEARTBEAT_INTERVAL_MS, gt=0, lt=1 << 32)
    missed_heartbeats: int = Field(default=DEFAULT_MISSED_HEARTBEATS, ge=1)
    report_interval_ms: int = Field(default=DEFAULT_REPORT_INTERVAL_MS, gt=0)
    # How often the agent sends its liveness frame out of its LAN port; 0: not at all.
    lan_liveness_interval_ms: int = Field(default=DEFAULT_LAN_LIVENESS_INTERVAL_MS, ge=0, le=1000)

    @property
    def dead_after_s(self) -> float:
        return self.heartbeat_interval_ms * self.missed_heartbeats / 1000.0

    def header(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_header(cls, value: str) -> AgentTiming:
        """Parse the header; ValueError (pydantic's) naming what is wrong."""
        return cls.model_validate_json(value)

    def describe(self) -> str:
        liveness = (f"liveness frames every {self.lan_liveness_interval_ms} ms" if self.lan_liveness_interval_ms
                    else "no liveness frames")
        return (f"heartbeats every {self.heartbeat_interval_ms} ms (dead after {self.missed_heartbeats} missed), "
                f"reports every {self.report_interval_ms} ms, {liveness}")


ORDERS_HEADER = "Supergw-Orders"
# The orders generation in force, on each answer to the long-poll `GET /gateways/{name}/orders`
# (also when the orders carry no `replication`): the agent's next `after`.
ORDERS_GENERATION_HEADER = "Supergw-Orders-Generation"


class AgentOrders(BaseModel):
    """What a controller asks of one gateway's agent now, as compact JSON in the
    `Supergw-Orders` header of its answer to that gateway's reports and REST heartbeats (a
    level, not an event: said in every answer while it holds, absent when nothing is asked).
    Unknown keys are ignored, so a newer controller may ask more.

    `redirect_to`: send every remote-access client this gateway holds an RFC 5685 REDIRECT
    to that address (the controller's IP_P) — said while the gateway is drained and the
    outside switch no longer sends new clients to it (no bucket, no pin), so each client's
    new IKE_SA_INIT lands on another gateway.

    `replication`: who backs up this gateway's state, whose state it holds, whom it takes
    over and whether it is fenced (`supergw_proto.replication`); None: replication is off."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    redirect_to: ipaddress.IPv4Address | None = None
    replication: ReplicationOrders | None = None

    @property
    def empty(self) -> bool:
        return self.redirect_to is None and self.replication is None

    def header(self) -> str:
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_header(cls, value: str | None) -> AgentOrders:
        """Parse the header (None: no orders); ValueError (pydantic's) naming what is wrong."""
        return cls() if value is None else cls.model_validate_json(value)


# What an agent sends is validated strictly (`strict=True` below): JSON `true` is no number
# and `1` no boolean, so a broken agent is refused, not misread. An address or an enum is
# still taken from its string, the only form JSON has.
IPv4 = Annotated[ipaddress.IPv4Address, Field(strict=False)]
SENT = ConfigDict(extra="forbid", strict=True)


# `pool` in remote_access: a network; host bits set are cleared as `ip route` does. The pattern
# tells a client (and a schema-driven fuzzer) what a network looks like.
CIDR_PATTERN = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$"


def _network(value: object) -> object:
    if isinstance(value, str):
        return ipaddress.IPv4Network(value, strict=False)
    if not isinstance(value, ipaddress.IPv4Network):
        raise PydanticCustomError("ip_v4_network", "Input is not a valid IPv4 network")
    return value


IPv4Net = Annotated[
    ipaddress.IPv4Network, Field(strict=False, json_schema_extra={"pattern": CIDR_PATTERN}), BeforeValidator(_network)
]


class IpsecBackend(StrEnum):
    """How the gateway does ESP."""

    XFRM = "xfrm"
    LIBIPSEC = "libipsec"
    XFRM_UML = "xfrm_uml"


class SaState(BaseModel):
    """One IKE/CHILD SA as strongSwan reports it over VICI."""

    model_config = SENT

    name: str = Field(min_length=1, max_length=128)
    kind: Literal["ike", "child"] | None = Field(
        default=None, description="IKE SA or CHILD SA (None from older agents: judged by state)"
    )
    state: str = Field(min_length=1, max_length=64, description="e.g. ESTABLISHED, INSTALLED, CONNECTING")
    established_s: float = Field(ge=0, description="seconds since the SA was established")
    bytes_in: Int = Field(ge=0)
    bytes_out: Int = Field(ge=0)
    packets_in: Int = Field(ge=0)
    packets_out: Int = Field(ge=0)


class PartnerState(BaseModel):
    """What a gateway's agent knows of its partner (gateway i of the partner site) from the
    authenticated pair beacons the two agents exchange through their tunnel."""

    model_config = SENT

    name: str = Field(min_length=1, max_length=64, description="the partner gateway's name")
    up: bool | None = Field(
        description="True: beacons arrive and the partner can carry traffic; False: down (see why); "
        "None: no beacon yet since the agent started (within its start-up grace)"
    )
    why: str | None = Field(default=None, max_length=256, description="why the partner counts as down")
    last_beacon_age_s: float | None = Field(default=None, ge=0, description="None: never heard from")
    beacons_sent: Int = Field(default=0, ge=0)
    beacons_received: Int = Field(default=0, ge=0)
    beacons_rejected: dict[str, Int] = Field(default_factory=dict, max_length=16,
                                             description="rejected datagrams by reason (bad_mac, replayed, stale, ...)")


class TuningState(BaseModel):
    """What the gateway's tuning profile (the tuning paper's knobs) did at its last `up`;
    the agent's /health lists each knob, its previous value and every refusal's reason."""

    model_config = SENT

    enabled: bool = Field(description="the gateway's config asks for the profile")
    groups: list[str] = Field(default_factory=list, max_length=16, description="knob groups applied")
    applied: Int = Field(ge=0, description="knobs this gateway changed (restored by its `down`)")
    refused: Int = Field(ge=0, description="knobs its devices, namespace or kernel cannot take")
    failed: Int = Field(ge=0, description="knobs whose write failed")
IKE_SPI_PATTERN = r"^[0-9a-f]{16}$"


class ClientSession(BaseModel):
    """One remote-access client's IKE SA at a gateway, as the gateway's agent knows it (VICI
    events and polls). The controller pins `remote_host` to the gateway while it is listed."""

    model_config = SENT

    ike_id: Int = Field(ge=0, description="charon's unique id of the IKE SA now (a rekey gives a new one)")
    identity: str = Field(max_length=255, description="the client's authenticated identity (its certificate's)")
    remote_host: IPv4 = Field(description="the client's outer address now (MOBIKE may change it)")
    remote_port: Int = Field(ge=0, le=65535)
    initiator_spi: str = Field(pattern=IKE_SPI_PATTERN, description="IKE SPIs now, hex as charon prints them")
    responder_spi: str = Field(pattern=IKE_SPI_PATTERN)
    vips: list[IPv4] = Field(default_factory=list, max_length=8, description="inner addresses")
    established_at: float = Field(ge=0, description="UNIX time of the IKE_AUTH that made the session")
    bytes_in: Int = Field(ge=0, description="ESP payload bytes from the client since then, all CHILD SAs")
    bytes_out: Int = Field(ge=0)
    present: bool = Field(description="inbound ESP within the gateway's idle time (else: absent, its SA cached)")
    present_s: float = Field(ge=0, description="seconds the client was present since the IKE_AUTH")
    ike_rekeys: Int = Field(default=0, ge=0)
    esp_renewed: bool | None = Field(
        default=None,
        description=("every CHILD SA carrying its ESP has an inbound SPI in this gateway's range (made or rekeyed "
                     "here): the outbound sequence numbers are this gateway's own. False: one was taken over from "
                     "another gateway and is not rekeyed yet, ESP sent on it now would be a replay to the client, so "
                     "the LAN sends its return traffic here only once it is renewed. None: not said (an older agent, "
                     "or not polled yet)"))


class RemoteAccessInfo(BaseModel):
    """What the outside switch needs from a gateway with remote access (static, from its config)."""

    model_config = SENT

    public_address: IPv4
    pool: IPv4Net
    esp_spi_min: Int = Field(ge=0x100, le=0xFFFFFFFF)
    esp_spi_max: Int = Field(ge=0x100, le=0xFFFFFFFF)
    ike_spi_label: Int = Field(ge=0, lt=1 << 64, description="responder IKE SPI bits under the mask (host order)")
    ike_spi_mask: Int = Field(ge=0, lt=1 << 64)
    caching: Literal["none", "clocked", "established", "data"]


class GatewayReport(BaseModel):
    """Load report of one gateway; counters are cumulative (the controller takes deltas)."""

    model_config = SENT

    gateway: str = Field(min_length=1, max_length=64, description="gateway name as in the controller config")
    timestamp: float = Field(ge=0, description="UNIX time on the gateway when the report was taken")
    backend: IpsecBackend = Field(strict=False)
    cpu_percent: float = Field(ge=0, description="the gateway's own CPU busy, 0..100 x cpu_cores")
    cpu_cores: float = Field(
        default=1.0, gt=0, le=4096, description="the CPU capacity the gateway may use (its cgroup quota, or the CPUs)"
    )
    cpu_scope: Literal["processes", "cgroup", "guest"] | None = Field(
        default=None,
        description=(
            "what cpu_percent counts: its processes (charon with libipsec's ESP threads, the agent; a UML "
            "guest under a quota: the guest's host processes, and its charon and softirq are not sampled), its "
            "cgroup, or the UML guest's whole /proc/stat "
            "(None: an older agent, whole box)"
        ),
    )
    softirq_percent: float = Field(ge=0)
    charon_cpu_percent: float = Field(ge=0)
    tunnel_bytes_in: Int = Field(ge=0)
    tunnel_bytes_out: Int = Field(ge=0)
    tunnel_packets_in: Int = Field(ge=0)
    tunnel_packets_out: Int = Field(ge=0)
    sas: list[SaState] = Field(default_factory=list, max_length=4096)
    sa_error: str | None = Field(
        default=None, max_length=512, description="set when the agent could not read its SAs: `sas` means nothing"
    )
    partner: PartnerState | None = Field(
        default=None, description="its partner gateway's liveness (pair beacons); None: no partner configured"
    )
    tuning: TuningState | None = Field(default=None, description="its tuning profile; None: an older agent")
    remote_access: RemoteAccessInfo | None = Field(
        default=None, description="None: no remote-access clients at this gateway (or an older agent)"
    )
    clients: list[ClientSession] | None = Field(
        default=None, max_length=16384,
        description="remote-access clients whose IKE SA the gateway holds; None: no remote access or an older agent",
    )
    replication: ReplicationState | None = Field(
        default=None, description="its state replication (remote-access takeover); None: off or an older agent"
    )


class Heartbeat(BaseModel):
    """Liveness beacon of one gateway."""

    model_config = SENT

    gateway: str = Field(min_length=1, max_length=64)
    timestamp: float = Field(ge=0)
    charon_down: bool | None = Field(default=None, description="as the UDP heartbeat's flag; None: not said")
    partner_down: bool | None = Field(default=None, description="as the UDP heartbeat's flag; None: not said")


# A CHILD SA in these states has its ESP SAs installed (REKEYING: the old one still
# carries traffic until the new one is INSTALLED).
CHILD_SA_UP_STATES = frozenset({"INSTALLED", "UPDATING", "REKEYING"})


def tunnel_up(report: GatewayReport) -> bool | None:
    """True when some CHILD SA is installed; None when the agent could not read its SAs."""
    if report.sa_error is not None:
        return None
    return any(s.kind != "ike" and s.state in CHILD_SA_UP_STATES for s in report.sas)
