"""The pure part of bench/scaling both figures use: the zero-loss search, max/mean spreads,
and each gateway's share of a probe (Fig. 5's own criteria: redistribution.py; Fig. 4's
yardstick: partition.py).

No clock, no I/O: the benchmark hands in a probe (offered rate -> loss ratio) or the
counters it read, so everything is unit-tested with made-up numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

ZERO_LOSS = 1e-4  # "zero loss" = at most 0.01 % of the frames sent


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
    growth: float = 2.0,
) -> SearchResult:
    """Highest offered rate whose loss is <= ZERO_LOSS (RFC 2544 style).

    Multiplies the rate by `growth` from `start_pps` until a probe loses frames (or
    `ceiling_pps` passes), or divides it by `growth` while no rate has passed yet; then
    bisects between the best passing and the lowest failing rate until they are within
    `resolution` (relative) of each other or `max_probes` probes were spent. A start near the
    answer (an earlier trial's) with a small growth brackets it in few probes; the start only
    decides which rates are probed, never where the answer lies.
    """
    if not (0 < start_pps <= ceiling_pps and math.isfinite(ceiling_pps)):
        raise ValueError(f"need 0 < start_pps <= ceiling_pps (finite), got {start_pps}, {ceiling_pps}")
    if not 0 < resolution < 1 or max_probes < 1:
        raise ValueError(f"need 0 < resolution < 1 and max_probes >= 1, got {resolution}, {max_probes}")
    if not (math.isfinite(growth) and growth > 1.0):
        raise ValueError(f"need a finite growth > 1, got {growth}")
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
            rate = min(growth * rate, ceiling_pps)
        else:
            bad = rate
            break
    while len(probes) < max_probes and bad - good > resolution * bad:
        rate = (good + bad) / 2 if good > 0 else bad / growth
        if run(rate):
            good = rate
        else:
            bad = rate
    return SearchResult(good, tuple(probes), at_ceiling=False)


def imbalance(values: Sequence[float]) -> float:
    """max/mean (1.0 for no values or a mean of 0)."""
    if not values:
        return 1.0
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 0 else 1.0


def best_imbalance(loaded: int, gateways: int) -> float:
    """The lowest max/mean reachable with `loaded` equally loaded buckets over `gateways`: a
    bucket moves whole, so the fullest gateway holds ceil(B/N) of them against a mean of B/N
    (16 buckets over 3 gateways: 6 / 5.33 = 1.125). 1.0 without loaded buckets."""
    if gateways < 1 or loaded < 0:
        raise ValueError(f"need gateways >= 1 and loaded >= 0, got {gateways}, {loaded}")
    if loaded == 0:
        return 1.0
    return math.ceil(loaded / gateways) * gateways / loaded


@dataclass(frozen=True)
class Counters:
    """One site's cumulative counters at one instant, as its controller's REST API shows them."""

    buckets: Mapping[int, tuple[int, int]]  # bucket -> (packets, bytes) the switch sent to its gateway
    owners: Mapping[int, str | None]  # bucket -> its gateway now
    tunnels: Mapping[str, tuple[int, int]]  # gateway -> (ESP packets sent, ESP packets received), its agent's report


@dataclass(frozen=True)
class GatewayShare:
    """What one gateway carried between two `Counters`, per second."""

    dispatch_pps: float  # frames the switch sent it (the site's outgoing traffic it encrypts)
    dispatch_mbps: float
    esp_out_pps: float  # ESP packets it sent (its agent's tunnel counter)
    esp_in_pps: float  # ESP packets it received and decrypted


def gateway_shares(before: Counters, after: Counters, seconds: float) -> dict[str, GatewayShare]:
    """Each gateway's traffic between `before` and `after`: a bucket's frames count for the
    gateway that owns it at `after` (buckets stay put while the benchmark searches; a moved
    one is counted whole for its new owner). ValueError for counters that went backwards (a
    restarted agent or switch: the window means nothing) or a window of no time."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"a window of {seconds!r} s")
    frames: dict[str, tuple[int, int]] = {}
    for bucket, (packets, nbytes) in after.buckets.items():
        p0, b0 = before.buckets.get(bucket, (0, 0))
        if packets < p0 or nbytes < b0:
            raise ValueError(f"bucket {bucket}'s counter went back from {p0} to {packets} packets")
        owner = after.owners.get(bucket)
        if owner is None or (packets == p0 and nbytes == b0):
            continue
        fp, fb = frames.get(owner, (0, 0))
        frames[owner] = (fp + packets - p0, fb + nbytes - b0)
    out: dict[str, GatewayShare] = {}
    for gw in sorted(set(after.tunnels) | set(frames)):
        out_now, in_now = after.tunnels.get(gw, (0, 0))
        out_was, in_was = before.tunnels.get(gw, (out_now, in_now))
        if out_now < out_was or in_now < in_was:
            raise ValueError(f"{gw}'s tunnel counters went back ({out_was} -> {out_now} sent)")
        fp, fb = frames.get(gw, (0, 0))
        out[gw] = GatewayShare(fp / seconds, fb * 8 / seconds / 1e6, (out_now - out_was) / seconds,
                               (in_now - in_was) / seconds)
    return out


def spread_by_site(values: Mapping[str, float], sites: Mapping[str, Sequence[str]]) -> float:
    """The worst site's max/mean of `values` over its gateways (a gateway missing counts 0)."""
    return max((imbalance([values.get(g, 0.0) for g in names]) for names in sites.values() if names), default=1.0)
