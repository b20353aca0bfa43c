"""What a backup replica refuses: admin writes go to the leader.

A backup answers an admin write with 503 (`NotLeader`, a `NotPrimary`) naming the leader
replica and its API address, so an operator or script knows where to send it. Reads,
agents' reports and heartbeats are every replica's (each judges liveness itself, so a
backup that takes over knows who is alive). The check is placement's write permission
(`compose.WritePermission.require_leader`): nothing here restates the core's methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from supergw_controller.errors import NotPrimary
from supergw_controller.ha.view import HaView, leader_label


class NotLeader(NotPrimary):
    """This replica is a backup: admin writes go to the leader (HTTP 503)."""


class ReplicaLike(Protocol):
    name: str

    @property
    def leading(self) -> bool: ...
    def view(self) -> HaView: ...


def leader_check(replica: ReplicaLike) -> Callable[[str], None]:
    """Raises `NotLeader` for write `what` ("drain gateways", ...) unless `replica` leads."""

    def check(what: str) -> None:
        if not replica.leading:
            raise NotLeader(
                f"replica {replica.name} is a backup and does not {what}; "
                f"the leader is {leader_label(replica.view())}: send admin requests there"
            )

    return check
