"""Gateways' questions for host addresses nobody had taught the controller yet.

A gateway asks (ARP request, Neighbor Solicitation) for a host the moment it has a packet
for it, which for a host's first flow is within milliseconds of the host's own first frame:
the learn digest for that frame is still on its way to the controller. Unanswered, the
gateway asks again only after its retransmit timer (Linux: 1 s) and holds the packet until
then. So each unanswered question is kept for a few seconds and answered as soon as the
address's owner is learned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Linux gives up on an address after 3 probes, 1 s apart.
KEEP_S = 3.0
# Questions kept at most (each is one punted frame): a flood of asks for addresses nobody
# has must not grow the controller without bound.
LIMIT = 4096


@dataclass(frozen=True)
class Ask:
    port: int  # the gateway's switch port
    answer: Callable[[str], bytes]  # the answering frame, given the owner's MAC
    at: float


class PendingAsks:
    def __init__(self, keep_s: float = KEEP_S, limit: int = LIMIT) -> None:
        self._keep_s = keep_s
        self._limit = limit
        self._asks: dict[str, dict[int, Ask]] = {}  # address -> gateway port -> its latest ask
        self._count = 0
        self._expired_at = float("-inf")
        self.dropped_total = 0  # asks not kept: the limit was reached

    def __bool__(self) -> bool:
        return bool(self._asks)

    def __len__(self) -> int:
        return self._count

    def add(self, address: str, port: int, answer: Callable[[str], bytes], now: float) -> None:
        """Keep a gateway's unanswered ask (its latest per gateway port and address)."""
        by_port = self._asks.get(address)
        new = by_port is None or port not in by_port
        if new and self._count >= self._limit:
            # Full: sweep out what expired, at most every tenth of a second (a flood of asks
            # must not cost a sweep each).
            if now - self._expired_at >= 0.1:
                self._expire(now)
            if self._count >= self._limit:
                self.dropped_total += 1
                return
        self._asks.setdefault(address, {})[port] = Ask(port, answer, now)
        if new:
            self._count += 1

    def take(self, address: str, now: float) -> list[Ask]:
        """The asks for `address` still worth answering; they are forgotten."""
        by_port = self._asks.pop(address, None)
        if by_port is None:
            return []
        self._count -= len(by_port)
        return [a for a in by_port.values() if now - a.at <= self._keep_s]

    def _expire(self, now: float) -> None:
        self._expired_at = now
        self._asks = {
            address: kept
            for address, by_port in self._asks.items()
            if (kept := {p: a for p, a in by_port.items() if now - a.at <= self._keep_s})
        }
        self._count = sum(len(by_port) for by_port in self._asks.values())
