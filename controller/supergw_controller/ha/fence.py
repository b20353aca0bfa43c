"""The local lease deadline that fences every write of a replica.

etcd deletes the leader key at the earliest TTL seconds after it *received* our last
successful keep-alive; we count from when we *sent* it, which is earlier, and stop a
margin before that. So a replica cut off from etcd stops writing before etcd can expire
its lease and let anyone else lead, whatever its gRPC stream to the switch still says.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from supergw_controller.errors import SwitchUnavailable


class Fenced(SwitchUnavailable):
    """This replica may not write: it is not the etcd leader, or its lease may have lapsed."""


class LeaseFence:
    def __init__(self, ttl_s: float, margin_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 <= margin_s < ttl_s:
            raise ValueError(f"fence margin {margin_s}s must be below the lease TTL {ttl_s}s")
        self.ttl_s = ttl_s
        self.margin_s = margin_s
        self._clock = clock
        self._until = float("-inf")
        self._term = 0
        self._why = "not the leader"

    def grant(self, term: int, sent_at: float) -> None:
        """The lease of leadership `term` is alive as of a request sent at `sent_at`."""
        if term != self._term:
            self._term = term
        self._until = max(self._until, sent_at + self.ttl_s - self.margin_s)

    def revoke(self, why: str) -> None:
        """Stop writing now (stepping down, lease or key lost)."""
        self._until = float("-inf")
        self._term = 0
        self._why = why

    @property
    def term(self) -> int:
        """The term writes are allowed for, or 0."""
        return self._term if self.valid() else 0

    def remaining(self) -> float:
        return self._until - self._clock()

    def valid(self) -> bool:
        return self._term > 0 and self._clock() < self._until

    def check(self) -> None:
        """Raise `Fenced` unless this replica may write right now."""
        if self._term == 0:
            raise Fenced(f"fenced: {self._why}")
        if self._clock() >= self._until:
            raise Fenced(
                f"fenced: the etcd lease of term {self._term} was last confirmed more than "
                f"{self.ttl_s - self.margin_s:.1f}s ago (etcd unreachable?); not writing"
            )
