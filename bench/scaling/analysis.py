"""The pure part of bench/scaling: the zero-loss search and the redistribution time.

No clock, no I/O: the benchmark hands in a probe (offered rate -> loss ratio) or the
snapshots it took, so both are unit-tested with made-up numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

ZERO_LOSS = 1e-4  # "zero loss" = at most 0.01 % of the frames sent
BALANCED = 1.10  # max/mean gateway CPU at which a cluster counts as evenly loaded


@dataclass(frozen=True)
class Probe:
    rate_pps: float
    loss: float

    @property
    def passed(self) -> bool:
        return self.loss <= ZERO_LOSS


@dataclass(frozen=True)
class SearchResult:
    rate_pps: float  # the highest rate that passed; 0.0 when none did
    probes: tuple[Probe, ...]
    at_ceiling: bool  # the ceiling itself passed: the true rate may be higher


def zero_loss_rate(
    probe: Callable[[float], float],
    start_pps: float,
    ceiling_pps: float,
    *,
    resolution: float = 0.05,
    max_probes: int = 10,
) -> SearchResult:
    """Highest offered rate whose loss is <= ZERO_LOSS (RFC 2544 style).

    Doubles from `start_pps` until a probe loses frames (or `ceiling_pps` passes), then
    bisects between the best passing and the lowest failing rate until they are within
    `resolution` (relative) of each other or `max_probes` probes were spent.
    """
    if not (0 < start_pps <= ceiling_pps and math.isfinite(ceiling_pps)):
        raise ValueError(f"need 0 < start_pps <= ceiling_pps (finite), got {start_pps}, {ceiling_pps}")
    if not 0 < resolution < 1 or max_probes < 1:
        raise ValueError(f"need 0 < resolution < 1 and max_probes >= 1, got {resolution}, {max_probes}")
    probes: list[Probe] = []

    def run(rate: float) -> bool:
        loss = probe(rate)
        if not (math.isfinite(loss) and 0.0 <= loss <= 1.0):
            raise ValueError(f"probe at {rate:.0f} pps returned loss {loss!r}, not a ratio in [0, 1]")
        probes.append(Probe(rate, loss))
        return probes[-1].passed

    good, bad = 0.0, math.inf
    rate = start_pps
    while len(probes) < max_probes:
        if run(rate):
            good = rate
            if rate >= ceiling_pps:
                return SearchResult(good, tuple(probes), at_ceiling=True)
            rate = min(2 * rate, ceiling_pps)
        else:
            bad = rate
            break
    while len(probes) < max_probes and bad - good > resolution * bad:
        rate = (good + bad) / 2 if good > 0 else bad / 2
        if run(rate):
            good = rate
        else:
            bad = rate
    return SearchResult(good, tuple(probes), at_ceiling=False)


@dataclass(frozen=True)
class Snapshot:
    """One second of the redistribution run."""

    t_s: float  # since the offered load started
    offered_pps: float  # both directions
    delivered_pps: float
    loss: float  # lost / (received + lost) in this second, both directions
    gateway_cpu: Mapping[str, float] = field(default_factory=dict)  # % of a core, per gateway
    sites: Mapping[str, Sequence[str]] = field(default_factory=dict)  # site -> its gateways' names


def cpu_spread(s: Snapshot) -> float:
    """The worst site's max/mean gateway CPU (1.0 when a site's gateways are idle)."""
    worst = 1.0
    groups = s.sites.values() if s.sites else [list(s.gateway_cpu)]
    for names in groups:
        values = [s.gateway_cpu[n] for n in names if n in s.gateway_cpu]
        if not values:
            continue
        mean = sum(values) / len(values)
        if mean > 0:
            worst = max(worst, max(values) / mean)
    return worst


def settled(s: Snapshot) -> bool:
    return s.loss <= ZERO_LOSS and cpu_spread(s) <= BALANCED


def redistribution_s(snapshots: Sequence[Snapshot], min_tail: int = 3) -> float | None:
    """Time from the start until loss stays at zero and every site's gateway CPU stays within
    max/mean <= BALANCED to the end of the run; None if that never holds for the last
    `min_tail` snapshots (the run ended before it settled)."""
    ordered = sorted(snapshots, key=lambda s: s.t_s)
    first = len(ordered)
    while first > 0 and settled(ordered[first - 1]):
        first -= 1
    if len(ordered) - first < min_tail:
        return None
    # the end of the first settled snapshot: an upper bound, never flattering
    return ordered[first].t_s
