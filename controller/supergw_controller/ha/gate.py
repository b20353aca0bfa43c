"""What the REST layer sees of a replica: every read as usual, admin writes only on the leader.

A backup answers an admin write with 503 (`NotLeader`, a `NotPrimary`) naming the leader
replica and its API address, so an operator or script knows where to send it. Agents'
reports and heartbeats are accepted by every replica (each judges liveness itself, so a
backup that takes over knows who is alive).
"""

from __future__ import annotations

from typing import Protocol

from supergw_controller.api.core import Core
from supergw_controller.errors import NotPrimary
from supergw_controller.ha.view import HaView, leader_label
from supergw_proto.api import HistoryView
from supergw_proto.reports import GatewayReport, Heartbeat
from supergw_controller.views import OperatorAction
from supergw_proto.api import BucketView, EventView, GatewayView, HostView, RebalanceView, StatusView


class NotLeader(NotPrimary):
    """This replica is a backup: admin writes go to the leader (HTTP 503)."""


class ReplicaLike(Protocol):
    name: str

    @property
    def leading(self) -> bool: ...
    def view(self) -> HaView: ...



class LeaderGate:
    """A `Core` that refuses admin writes unless this replica leads."""

    def __init__(self, core: Core, replica: ReplicaLike) -> None:
        self._core = core
        self._replica = replica

    def ha_status(self) -> HaView:
        return self._replica.view()

    def _leader_only(self, what: str) -> None:
        if not self._replica.leading:
            raise NotLeader(
                f"replica {self._replica.name} is a backup and does not {what}; "
                f"the leader is {leader_label(self._replica.view())}: send admin requests there"
            )

    # -- reads and agents: as the core answers them
    async def status(self) -> StatusView:
        # A replica's election id is its term's (none on a backup), not switch.election_id.
        s = await self._core.status()
        return s.model_copy(update={"election_id": self._replica.view().election_id})

    async def gateways(self) -> list[GatewayView]:
        return await self._core.gateways()

    async def gateway(self, name: str) -> GatewayView:
        return await self._core.gateway(name)

    async def buckets(self) -> list[BucketView]:
        return await self._core.buckets()

    async def bucket(self, bucket: int) -> BucketView:
        return await self._core.bucket(bucket)

    async def hosts(self) -> list[HostView]:
        return await self._core.hosts()

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        return await self._core.events(limit, since_id)

    async def history(self, since: float | None = None, limit: int = 600) -> HistoryView:
        return await self._core.history(since, limit)

    async def accept_report(self, report: GatewayReport) -> None:
        await self._core.accept_report(report)

    async def accept_heartbeat(self, hb: Heartbeat) -> None:
        await self._core.accept_heartbeat(hb)

    async def record_operator_action(self, action: OperatorAction) -> None:
        await self._core.record_operator_action(action)

    # -- admin writes: the leader's
    async def drain(self, name: str) -> GatewayView:
        self._leader_only("drain gateways")
        return await self._core.drain(name)

    async def undrain(self, name: str) -> GatewayView:
        self._leader_only("undrain gateways")
        return await self._core.undrain(name)

    async def set_weight(self, name: str, weight: float) -> GatewayView:
        self._leader_only("set weights")
        return await self._core.set_weight(name, weight)

    async def pin(self, bucket: int, gateway: str) -> BucketView:
        self._leader_only("pin buckets")
        return await self._core.pin(bucket, gateway)

    async def unpin(self, bucket: int) -> BucketView:
        self._leader_only("unpin buckets")
        return await self._core.unpin(bucket)

    async def move(self, bucket: int, gateway: str, reason: str = "operator") -> BucketView:
        self._leader_only("move buckets")
        return await self._core.move(bucket, gateway, reason)

    async def rebalance(self, dry_run: bool = False) -> RebalanceView:
        if not dry_run:
            self._leader_only("rebalance")
        return await self._core.rebalance(dry_run)
