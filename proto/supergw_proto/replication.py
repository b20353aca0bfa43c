"""State replication between gateways (remote-access takeover): what the controller tells an
agent, and what the agent reports back.

Every gateway's remote-access IKE and CHILD SAs are held, while they live, by one other
gateway: its backup, the ring successor among the serving gateways
(`supergw_controller.backups.ring_backups`). The gateways' own charons produce the state
(strongSwan's `ha` plugin); their agents carry it between gateways over mutual TLS, never
through the controller. The controller only says who backs up whom, who takes over whom,
and who is fenced; it sees endpoints and counts, never keys.

Orders are a level (the whole current assignment, numbered by `generation`), carried in
`AgentOrders.replication` in the answer to every report and by the long-poll
`GET /api/v1/gateways/{name}/orders?after=N`, which answers as soon as the generation
passes N: a takeover order reaches the backup within one round trip of the verdict.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from supergw_proto.jsontypes import Int

GatewayName = Annotated[str, Field(min_length=1, max_length=64)]
# An agent's replication listener, "host:port" (IPv4 or [IPv6]).
Endpoint = Annotated[str, Field(min_length=3, max_length=64)]


class ReplicationPeer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: GatewayName
    endpoint: Endpoint = Field(description="its agent's replication listener, host:port")


class ReplicationOrders(BaseModel):
    """One gateway's replication assignment now. Unknown keys are ignored (a newer
    controller may say more)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    generation: int = Field(ge=0, description="bumped on every change of any gateway's orders")
    backup: ReplicationPeer | None = Field(
        default=None, description="who holds this gateway's state now: send it every change (None: nobody can)")
    protects: GatewayName | None = Field(
        default=None, description="whose state this gateway holds now: accept state only from its agent")
    take_over: tuple[GatewayName, ...] = Field(
        default=(), description="dead gateways whose state this gateway holds: activate it, it is this gateway's now")
    fenced: bool = Field(
        default=False,
        description=("this gateway was judged dead and its remote-access SAs taken over; its switch ports are "
                     "fenced: drop every remote-access SA and every held copy, then say `fence_cleared`"))


class ReplicationState(BaseModel):
    """What an agent says of its replication in every report (None: off, or an older agent)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    endpoint: Endpoint | None = Field(default=None, description="its replication listener, host:port")
    generation: Int = Field(default=-1, ge=-1, description="the orders generation it has applied (-1: none yet)")
    backup: GatewayName | None = None
    backup_connected: bool = False
    protects: GatewayName | None = None
    own_sas: Int = Field(default=0, ge=0, description="its own remote-access IKE SAs whose state it replicates")
    replicated_sas: Int = Field(default=0, ge=0, description="of those, how many its backup has acknowledged")
    held_sas: Int = Field(default=0, ge=0, description="IKE SAs it holds for `protects` (passive copies)")
    messages_out: Int = Field(default=0, ge=0)
    bytes_out: Int = Field(default=0, ge=0)
    messages_in: Int = Field(default=0, ge=0)
    bytes_in: Int = Field(default=0, ge=0)
    lag_ms_last: float | None = Field(
        default=None, ge=0,
        description="last state change in its charon -> its backup's agent acknowledged it into the backup's charon")
    lag_ms_max: float | None = Field(default=None, ge=0, description="the largest lag since the last report")
    taken_over: dict[GatewayName, Int] = Field(
        default_factory=dict, description="gateway -> IKE SAs this agent activated when it took that gateway over")
    foreign_sas: dict[GatewayName, Int] = Field(
        default_factory=dict,
        description=("gateway -> IKE SAs held here that still carry that gateway's IKE SPI label or ESP SPI range "
                     "(taken over, not rekeyed yet): the outside switch must keep steering those to this gateway"))
    unrenewed_children: dict[GatewayName, Int] = Field(
        default_factory=dict,
        description=("gateway -> CHILD SAs taken over from it whose outbound sequence numbers are not renewed yet "
                     "(their rekey is pending): ESP sent on them now would be dropped by the client as a replay, so "
                     "the LAN keeps that gateway's pool away from this one until this is 0 (absent clients of a "
                     "credential cache are not counted: nothing is sent to them); meanwhile each client listed with "
                     "`esp_renewed` gets a /32 route here of its own"))
    fence_cleared: Int | None = Field(
        default=None, ge=0, description="the generation whose fence order it has carried out (None: none)")
    error: str | None = Field(default=None, max_length=512)
