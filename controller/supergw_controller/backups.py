"""Which gateway backs up which: the ring of the clustering paper's Algorithm 5.

Every gateway's backup is its successor in the ring of the config's `gateways:` order,
skipping gateways that cannot serve (dead, drained). One definition for every consumer:
the gateway that holds a gateway's IPsec state (remote-access takeover) and the gateway
the data plane fails a stale gateway's buckets over to are the same one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def ring_backups(order: Sequence[str], serving: Collection[str]) -> dict[str, str | None]:
    """For each gateway of `order`, the first gateway after it (wrapping around) that is in
    `serving` and is not itself; None when there is no such gateway. Gateways outside
    `serving` get a backup too: for a dead gateway it is who takes over."""
    if len(set(order)) != len(order):
        raise ValueError(f"gateway order has duplicates: {list(order)}")
    out: dict[str, str | None] = {}
    n = len(order)
    for i, name in enumerate(order):
        out[name] = next((order[(i + k) % n] for k in range(1, n) if order[(i + k) % n] in serving), None)
    return out
