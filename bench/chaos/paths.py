"""Which gateway pairs each chaos flow crosses, over time.

A flow is a host of one site pinging a host of the other. Its request enters the super
gateway at its own site through the gateway its bucket is on (and leaves through that
gateway's partner at the other site); the answer enters at the other site through the
gateway the destination host's bucket is on (and leaves through its partner). So a flow
crosses at most two *pairs* (gateway i of site A with gateway i of site B), one per leg,
and a gateway fault touches it when it hits either gateway of one of those pairs: the
faulted gateway's own site fails it over, and the other site fails over its partner.

`PathBook` keeps, per flow, the pairs it crossed and since when, from the bucket maps the
run reads from both controllers every half second; the checker asks it which flows a fault
hit (bench/chaos/checker.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FlowRoute:
    """A flow's two legs: the site and bucket its request enters by, and those of its answer."""
    name: str
    src_site: str  # site prefix, e.g. "sgw-a"
    src_bucket: int
    dst_site: str
    dst_bucket: int


@dataclass
class PathBook:
    routes: Sequence[FlowRoute]
    pair_of: Mapping[str, int]  # gateway name (either site) -> its pair's index
    # flow -> [(since, pairs)], a new entry only when the pairs change
    history: dict[str, list[tuple[float, frozenset[int]]]] = field(default_factory=dict)
    legs: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # flow -> (request gw, answer gw)

    def observe(self, now: float, buckets: Mapping[str, Mapping[int, str | None]]) -> None:
        """The bucket maps read now (site prefix -> bucket -> gateway); a site missing from
        `buckets` (its leader did not answer) keeps that leg as it was."""
        for r in self.routes:
            old = self.legs.get(r.name, (None, None))
            req = buckets[r.src_site].get(r.src_bucket) if r.src_site in buckets else old[0]
            rep = buckets[r.dst_site].get(r.dst_bucket) if r.dst_site in buckets else old[1]
            self.legs[r.name] = (req, rep)
            pairs = frozenset(self.pair_of[g] for g in (req, rep) if g is not None and g in self.pair_of)
            hist = self.history.setdefault(r.name, [])
            if not hist or hist[-1][1] != pairs:
                hist.append((now, pairs))

    def pairs(self, flow: str, lo: float, hi: float) -> frozenset[int]:
        """Every pair the flow crossed at some time in [lo, hi] (what it crossed before the
        first observation is not known: nothing)."""
        hist = self.history.get(flow, [])
        out: set[int] = set()
        for i, (since, pairs) in enumerate(hist):
            until = hist[i + 1][0] if i + 1 < len(hist) else float("inf")
            if since <= hi and lo <= until:
                out |= pairs
        return frozenset(out)

    def carrying(self, site: str) -> set[str]:
        """The gateways of `site` (prefix) that carry a leg of some flow now."""
        out: set[str] = set()
        for r in self.routes:
            req, rep = self.legs.get(r.name, (None, None))
            if r.src_site == site and req is not None:
                out.add(req)
            if r.dst_site == site and rep is not None:
                out.add(rep)
        return out

    def pairs_now(self) -> set[int]:
        return {p for hist in self.history.values() if hist for p in hist[-1][1]}


def pair_index(gateways_by_site: Iterable[Sequence[str]]) -> dict[str, int]:
    """gateway name -> pair index (1-based position in its site's gateway list: gateway i of
    site A and gateway i of site B are a pair)."""
    return {name: i for names in gateways_by_site for i, name in enumerate(names, 1)}
