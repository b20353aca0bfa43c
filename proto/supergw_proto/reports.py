"""What gateway agents send to the controller.

Agents POST a `GatewayReport` every T_L (``timing.report_interval_ms``, default 500 ms)
and send a heartbeat every ``timing.heartbeat_interval_ms`` (default 100 ms; UDP, see
`heartbeat.py`, or the REST `Heartbeat`). A heartbeat says whether charon runs and whether
the gateway's partner at the partner site is up; the report says the same with detail. These models are the request schemas of the
REST API, so they are also the OpenAPI contract. `tunnel_up` is the one reading of a
report's SAs that both the agent's /health and the controller's failover use.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class IpsecBackend(StrEnum):
    """How the gateway does ESP."""

    XFRM = "xfrm"
    LIBIPSEC = "libipsec"
    XFRM_UML = "xfrm_uml"


class SaState(BaseModel):
    """One IKE/CHILD SA as strongSwan reports it over VICI."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    kind: Literal["ike", "child"] | None = Field(
        default=None, description="IKE SA or CHILD SA (None from older agents: judged by state)"
    )
    state: str = Field(min_length=1, max_length=64, description="e.g. ESTABLISHED, INSTALLED, CONNECTING")
    established_s: float = Field(ge=0, description="seconds since the SA was established")
    bytes_in: int = Field(ge=0)
    bytes_out: int = Field(ge=0)
    packets_in: int = Field(ge=0)
    packets_out: int = Field(ge=0)


class PartnerState(BaseModel):
    """What a gateway's agent knows of its partner (gateway i of the partner site) from the
    authenticated pair beacons the two agents exchange through their tunnel."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="the partner gateway's name")
    up: bool | None = Field(
        description="True: beacons arrive and the partner can carry traffic; False: down (see why); "
        "None: no beacon yet since the agent started (within its start-up grace)"
    )
    why: str | None = Field(default=None, max_length=256, description="why the partner counts as down")
    last_beacon_age_s: float | None = Field(default=None, ge=0, description="None: never heard from")
    beacons_sent: int = Field(default=0, ge=0)
    beacons_received: int = Field(default=0, ge=0)
    beacons_rejected: dict[str, int] = Field(default_factory=dict, max_length=16,
                                             description="rejected datagrams by reason (bad_mac, replayed, stale, ...)")


class TuningState(BaseModel):
    """What the gateway's tuning profile (the tuning paper's knobs) did at its last `up`;
    the agent's /health lists each knob, its previous value and every refusal's reason."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(description="the gateway's config asks for the profile")
    groups: list[str] = Field(default_factory=list, max_length=16, description="knob groups applied")
    applied: int = Field(ge=0, description="knobs this gateway changed (restored by its `down`)")
    refused: int = Field(ge=0, description="knobs its devices, namespace or kernel cannot take")
    failed: int = Field(ge=0, description="knobs whose write failed")


class GatewayReport(BaseModel):
    """Load report of one gateway; counters are cumulative (the controller takes deltas)."""

    model_config = ConfigDict(extra="forbid")

    gateway: str = Field(min_length=1, max_length=64, description="gateway name as in the controller config")
    timestamp: float = Field(ge=0, description="UNIX time on the gateway when the report was taken")
    backend: IpsecBackend
    cpu_percent: float = Field(ge=0, description="the gateway's own CPU busy, 0..100 x cpu_cores")
    cpu_cores: float = Field(
        default=1.0, gt=0, le=4096, description="the CPU capacity the gateway may use (its cgroup quota, or the CPUs)"
    )
    cpu_scope: Literal["processes", "cgroup", "guest"] | None = Field(
        default=None,
        description=(
            "what cpu_percent counts: its processes (charon with libipsec's ESP threads, the agent), "
            "its cgroup, or the UML guest's whole /proc/stat (None: an older agent, whole box)"
        ),
    )
    softirq_percent: float = Field(ge=0)
    charon_cpu_percent: float = Field(ge=0)
    tunnel_bytes_in: int = Field(ge=0)
    tunnel_bytes_out: int = Field(ge=0)
    tunnel_packets_in: int = Field(ge=0)
    tunnel_packets_out: int = Field(ge=0)
    sas: list[SaState] = Field(default_factory=list, max_length=4096)
    sa_error: str | None = Field(
        default=None, max_length=512, description="set when the agent could not read its SAs: `sas` means nothing"
    )
    partner: PartnerState | None = Field(
        default=None, description="its partner gateway's liveness (pair beacons); None: no partner configured"
    )
    tuning: TuningState | None = Field(default=None, description="its tuning profile; None: an older agent")


class Heartbeat(BaseModel):
    """Liveness beacon of one gateway."""

    model_config = ConfigDict(extra="forbid")

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
