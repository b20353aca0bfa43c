"""Request bodies of the operator routes (responses are the core's views)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WeightBody(_Body):
    weight: float = Field(gt=0, le=1e6, allow_inf_nan=False, description="relative capacity, > 0 (use drain for 0)")


class GatewayRef(_Body):
    gateway: str = Field(min_length=1, max_length=64, description="gateway name from the config")


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
