"""Fig. 5's pure part: one snapshot a second of the redistribution run, its two criteria (the
paper's: delivered throughput reaches the offered load; ours: loaded buckets spread as evenly
as whole buckets allow) and which moves make a run invalid.

No clock, no I/O: the benchmark hands in the snapshots it took (unit-tested with made-up ones).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from bench.scaling.analysis import ZERO_LOSS, best_imbalance, imbalance

# Within this fraction of the offered load, a second "delivers the offered load": 1-s windows
# of a paced generator and a receiver counting what arrived shift a few frames either way.
REACHED_FRACTION = 0.99


@dataclass(frozen=True)
class MoveRecord:
    """One bucket move of a controller's event log, as the run saw it."""

    t_s: float  # since the load started (the event's time on the controller's clock)
    site: str
    bucket: int
    src: str | None
    dst: str | None
    reason: str  # the controller's MoveReason value: paper-rebalance, rebalance, failover, drain, ...
    loaded: bool  # the bucket carries a simulated host

    def describe(self) -> str:
        return (f"t={self.t_s:.1f}s site {self.site} bucket {self.bucket} {self.src} -> {self.dst} ({self.reason}"
                f"{', loaded' if self.loaded else ', idle'})")


@dataclass(frozen=True)
class Snapshot:
    """One second of the redistribution run."""

    t_s: float  # since the offered load started, at the end of this second
    offered_pps: float  # both directions
    delivered_pps: float
    loss: float  # lost / (received + lost) in this second, both directions
    gateway_cpu: Mapping[str, float] = field(default_factory=dict)  # % of a core, per gateway (its cgroup)
    sites: Mapping[str, Sequence[str]] = field(default_factory=dict)  # site -> its gateways' names
    # per gateway: buckets carrying simulated hosts that it owns (the controller's bucket map)
    loaded_buckets: Mapping[str, int] = field(default_factory=dict)
    moves: tuple[MoveRecord, ...] = ()  # the moves the controllers logged in this second
    events: tuple[str, ...] = ()  # the controllers' other events in this second (a gateway declared dead and why)


def _site_groups(s: Snapshot, per_gateway: Mapping[str, float]) -> list[list[float]]:
    groups = s.sites.values() if s.sites else [list(per_gateway)]
    return [[per_gateway[n] for n in names if n in per_gateway] for names in groups]


def cpu_spread(s: Snapshot) -> float:
    """The worst site's max/mean gateway CPU (1.0 when a site's gateways are idle)."""
    return max([imbalance(v) for v in _site_groups(s, s.gateway_cpu) if v], default=1.0)


def bucket_spread(s: Snapshot) -> tuple[float, float]:
    """(max/mean of loaded buckets per gateway, the best reachable) at the site whose spread is
    furthest above its best; (inf, 1.0) when the snapshot has no controller view."""
    groups = _site_groups(s, {g: float(v) for g, v in s.loaded_buckets.items()})
    worst: tuple[float, float] = (math.inf, 1.0)
    for values in groups:
        if not values:
            return worst
        pair = (imbalance(values), best_imbalance(round(sum(values)), len(values)))
        if worst[0] == math.inf or pair[0] - pair[1] > worst[0] - worst[1]:
            worst = pair
    return worst


def settled(s: Snapshot) -> bool:
    """Ours: no loss, and at every site the loaded buckets are spread as evenly as whole
    buckets allow (no gateway holds more than ceil(B/N) of the B loaded buckets)."""
    spread, best = bucket_spread(s)
    return s.loss <= ZERO_LOSS and spread <= best + 1e-9


def delivers_offered(s: Snapshot) -> bool:
    """The paper's: this second delivered the offered load (within REACHED_FRACTION)."""
    return s.offered_pps > 0 and s.delivered_pps >= REACHED_FRACTION * s.offered_pps


def _from_then_on(snapshots: Sequence[Snapshot], holds: Callable[[Snapshot], bool], min_tail: int) -> float | None:
    ordered = sorted(snapshots, key=lambda s: s.t_s)
    first = len(ordered)
    while first > 0 and holds(ordered[first - 1]):
        first -= 1
    if len(ordered) - first < min_tail:
        return None
    return ordered[first].t_s  # the end of the first second that holds: an upper bound, never flattering


def redistribution_s(snapshots: Sequence[Snapshot], min_tail: int = 3) -> float | None:
    """Ours (bucket spread): from the start (every flow on gateway 1) until the run is
    `settled` and stays so to its end; None if the last `min_tail` seconds are not all settled."""
    return _from_then_on(snapshots, settled, min_tail)


def offered_reached_s(snapshots: Sequence[Snapshot], min_tail: int = 3) -> float | None:
    """The paper's (Fig. 5: "the throughput reaches its maximum ..., exactly the same as the
    offered traffic"): from the start until every second delivers the offered load to the run's
    end; None if the last `min_tail` seconds do not."""
    return _from_then_on(snapshots, delivers_offered, min_tail)


def invalid_moves(snapshots: Sequence[Snapshot], allowed: Collection[str]) -> list[MoveRecord]:
    """Moves during the run whose reason is not the policy's own (`allowed`): a failover,
    drain, refill, pin or operator move means something other than the policy moved load, and
    the run does not measure the policy."""
    return [m for s in snapshots for m in s.moves if m.reason not in allowed]
