"""Who backs up whom, who takes over whom, who is fenced: every gateway's `ReplicationOrders`.

`ring_orders` is the pure part: the ring of `backups.ring_backups` over the config's
`gateways:` order among the gateways that serve (alive, not drained, not withheld after a
takeover, reporting a replication endpoint). Each serving gateway's `backup` is its ring
successor (name and endpoint) and it `protects` its ring predecessor; a gateway that holds a
dead gateway's state is told to `take_over` it; a taken-over gateway is `fenced`. A gateway
whose agent says nothing of replication (an older agent, or replication off at the gateway)
gets no orders at all (None), unless it is fenced or holds another's state.

`OrdersBoard` keeps the orders in force and their one global `generation`, bumped whenever
any gateway's orders change. It starts at the controller's start time in milliseconds, so a
restarted controller's generations are above its predecessor's (an agent that saw generation
N before the restart is answered at once, and a fence generation kept in the store stays
below every new one). Long-polls wait on it (`wait_past`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from supergw_controller.backups import ring_backups
from supergw_proto.replication import ReplicationOrders, ReplicationPeer


@dataclass(frozen=True)
class RingInput:
    """What the orders are computed from (each a fact some other part owns)."""

    order: Sequence[str]  # the config's gateways, in order
    serving: Collection[str]  # alive, not drained, not withheld, with a replication endpoint
    endpoints: Mapping[str, str]  # gateway -> its agent's replication listener, from its last report
    holders: Mapping[str, str]  # taken-over gateway -> the gateway that holds its state now
    fenced: Collection[str]
    replicating: Collection[str]  # gateways whose last report carries replication state


def ring_orders(inp: RingInput) -> dict[str, ReplicationOrders | None]:
    """Every gateway's orders, generation 0 (the board stamps its own)."""
    serving = [g for g in inp.order if g in set(inp.serving) and g in inp.endpoints]
    backups = ring_backups(inp.order, serving)
    protects = {b: g for g in serving if (b := backups[g]) is not None}
    held: dict[str, list[str]] = {}
    for dead, holder in inp.holders.items():
        held.setdefault(holder, []).append(dead)
    out: dict[str, ReplicationOrders | None] = {}
    for g in inp.order:
        takes = tuple(d for d in inp.order if d in held.get(g, ()))
        fenced = g in inp.fenced
        if g not in inp.replicating and not takes and not fenced:
            out[g] = None
            continue
        backup = backups[g] if g in serving else None
        out[g] = ReplicationOrders(
            generation=0,
            backup=None if backup is None else ReplicationPeer(name=backup, endpoint=inp.endpoints[backup]),
            protects=protects.get(g),
            take_over=takes,
            fenced=fenced,
        )
    return out


class OrdersBoard:
    def __init__(self, start_generation: int) -> None:
        if start_generation < 0:
            raise ValueError(f"a generation is >= 0, got {start_generation}")
        self._generation = start_generation
        self._orders: dict[str, ReplicationOrders | None] = {}
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def generation(self) -> int:
        return self._generation

    def publish(self, orders: Mapping[str, ReplicationOrders | None]) -> bool:
        """Put `orders` (generation 0) in force; True, and the generation bumped, when any
        gateway's orders differ from those in force."""
        if dict(orders) == self._orders:
            return False
        self._orders = dict(orders)
        self._generation += 1
        self._changed.set()
        self._changed = asyncio.Event()
        return True

    def orders(self, gateway: str) -> ReplicationOrders | None:
        """The gateway's orders in force, stamped with the current generation."""
        o = self._orders.get(gateway)
        return None if o is None else o.model_copy(update={"generation": self._generation})

    async def wait_past(self, after: int, timeout_s: float) -> None:
        """Return as soon as the generation is above `after`, or after `timeout_s`, or at once
        when the board is closed (the controller stops)."""
        if self._generation > after or self._closed or timeout_s <= 0:
            return
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout_s)

    def close(self) -> None:
        """The controller stops: every waiter answers now, and later ones at once."""
        self._closed = True
        self._changed.set()
