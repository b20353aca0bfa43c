"""What gateway agents send to the controller.

Agents POST a `GatewayReport` every T_L (``timing.report_interval_ms``, default 500 ms)
and a `Heartbeat` every ``timing.heartbeat_interval_ms`` (default 100 ms). These models
are the request schemas of the REST API, so they are also the OpenAPI contract.
"""

from __future__ import annotations

from enum import StrEnum

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
    state: str = Field(min_length=1, max_length=64, description="e.g. ESTABLISHED, INSTALLED, CONNECTING")
    established_s: float = Field(ge=0, description="seconds since the SA was established")
    bytes_in: int = Field(ge=0)
    bytes_out: int = Field(ge=0)
    packets_in: int = Field(ge=0)
    packets_out: int = Field(ge=0)


class GatewayReport(BaseModel):
    """Load report of one gateway; counters are cumulative (the controller takes deltas)."""

    model_config = ConfigDict(extra="forbid")

    gateway: str = Field(min_length=1, max_length=64, description="gateway name as in the controller config")
    timestamp: float = Field(ge=0, description="UNIX time on the gateway when the report was taken")
    backend: IpsecBackend
    cpu_percent: float = Field(ge=0, description="whole-box CPU busy, 0..100 x cpu_cores")
    cpu_cores: float = Field(default=1.0, gt=0, le=4096, description="CPUs cpu_percent is measured over")
    softirq_percent: float = Field(ge=0)
    charon_cpu_percent: float = Field(ge=0)
    tunnel_bytes_in: int = Field(ge=0)
    tunnel_bytes_out: int = Field(ge=0)
    tunnel_packets_in: int = Field(ge=0)
    tunnel_packets_out: int = Field(ge=0)
    sas: list[SaState] = Field(default_factory=list, max_length=4096)


class Heartbeat(BaseModel):
    """Liveness beacon of one gateway."""

    model_config = ConfigDict(extra="forbid")

    gateway: str = Field(min_length=1, max_length=64)
    timestamp: float = Field(ge=0)
