"""Fig. 4's yardstick: what a partition of hosts over gateway pairs predicts for T(N)/T(1),
and the deliberately skewed partition of its negative control. Pure.

Every simulated host offers the same load to its counterpart at the other site, and traffic
is bidirectional. Pair i (gateway i of site A and gateway i of site B) carries site A's hosts
whose buckets site A sends to its gateway i (A encrypts, B decrypts) and site B's hosts whose
buckets site B sends to its gateway i (B encrypts, A decrypts): both gateways of pair i do
the IPsec work of hosts_A(i) + hosts_B(i) hosts. With equal gateways, the pair with the most
hosts saturates first, so the cluster carries total/max of what one pair carries:
T(N)/T(1) = N x mean/max of the pairs' hosts (224/75 = 2.987 for the paper's 75/75/74).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def pair_hosts(site_a: Sequence[int], site_b: Sequence[int]) -> list[int]:
    """Hosts per pair: site A's gateway i's hosts plus site B's gateway i's (pair order)."""
    if len(site_a) != len(site_b) or not site_a:
        raise ValueError(f"both sites need the same number (>= 1) of gateways, got {len(site_a)} and {len(site_b)}")
    if any(h < 0 for h in [*site_a, *site_b]):
        raise ValueError(f"negative host counts: {list(site_a)}, {list(site_b)}")
    return [a + b for a, b in zip(site_a, site_b)]


def prediction(pairs: Sequence[int]) -> float:
    """T(N)/T(1) the partition predicts: N x mean/max of the pairs' hosts (= total/max)."""
    if not pairs or max(pairs) <= 0:
        raise ValueError(f"no hosts on any pair: {list(pairs)}")
    return sum(pairs) / max(pairs)


def site_counts(owner: Mapping[int, str | None], host_buckets: Sequence[int], gateways: Sequence[str]) -> list[int]:
    """Simulated hosts per gateway (in `gateways` order) from a bucket map: a host counts for the
    gateway owning its bucket; a host whose bucket has no known owner is refused (ValueError:
    the partition would be guessed)."""
    counts = dict.fromkeys(gateways, 0)
    for b in host_buckets:
        g = owner.get(b)
        if g not in counts:
            raise ValueError(f"bucket {b} (a simulated host's) is on {g!r}, not one of {list(gateways)}")
        counts[g] += 1
    return [counts[g] for g in gateways]


def skewed(buckets: Sequence[int], gateways: Sequence[str], heavy: float) -> dict[int, str]:
    """The negative control's partition of the loaded `buckets` (one host each): the first
    gateway holds `heavy` times its even share (rounded, at least one bucket left for each
    other gateway), the others share the rest in turn. Needs two gateways or more and
    heavy > 1 (an even share is no control)."""
    n, h = len(gateways), len(buckets)
    if n < 2 or not math.isfinite(heavy) or heavy <= 1.0 or h < n:
        raise ValueError(f"a skewed partition needs >= 2 gateways, heavy > 1 and a bucket per gateway "
                         f"(got {n} gateways, heavy {heavy}, {h} buckets)")
    first = min(h - (n - 1), max(math.ceil(h / n) + 1, round(heavy * h / n)))
    ordered = sorted(buckets)
    out = {b: gateways[0] for b in ordered[:first]}
    for i, b in enumerate(ordered[first:]):
        out[b] = gateways[1 + i % (n - 1)]
    return out
