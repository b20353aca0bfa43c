"""What the REST layer hands the core besides request bodies (responses: `supergw_proto.api`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from supergw_proto.reports import AgentOrders


class OperatorAction(BaseModel):
    """An admin's call through the REST API, for the event log (kind "operator")."""

    model_config = ConfigDict(frozen=True)

    who: str  # the operator token's name, never the token
    action: str  # drain, undrain, weight, pin, unpin, move, rebalance
    gateway: str | None = None  # the gateway acted on (event src)
    bucket: int | None = None
    target: str | None = None  # the destination gateway of a pin/move (event dst)
    outcome: str = "ok"  # "ok", "ok: <what>" or "refused: <why>" (event detail)


class BucketTraffic(NamedTuple):
    """A bucket carrying traffic, as `/metrics` shows it (a tuple of plain values: after its
    first young collection the collector no longer tracks it)."""

    bucket: int
    gateway: str | None
    pps: float
    bps: float


@dataclass(frozen=True)
class OrdersAnswer:
    """The answer to an agent's long-poll for its orders: the generation in force and its orders."""

    generation: int
    orders: AgentOrders
