"""bench/scale's arithmetic, pure: learning from per-host times, percentiles, the linear cost
per host and whether a cost grows faster than linearly, and which part grows fastest."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation between ranks; None for no values."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass(frozen=True)
class Learning:
    """Learning of one point: from each host's first frame to its entries on the switch."""

    hosts: int  # hosts that sent a frame
    learned: int  # of those, how many the switch held by the end
    first_frame_s: float | None  # the first host's first frame (the clock of the inputs)
    last_entry_s: float | None  # the last learned host's entries first read on the switch
    latencies_s: list[float]  # per learned host: its entries first read - its first frame

    @property
    def missing(self) -> int:
        return self.hosts - self.learned

    @property
    def span_s(self) -> float | None:
        if self.first_frame_s is None or self.last_entry_s is None:
            return None
        return max(self.last_entry_s - self.first_frame_s, 1e-9)

    @property
    def hosts_per_s(self) -> float | None:
        """Hosts learned per second over the whole run: learned / (first frame -> last entry)."""
        span = self.span_s
        return None if span is None or not self.learned else self.learned / span

    def latency(self, q: float) -> float | None:
        return percentile(self.latencies_s, q)


def learning(first_frame: Mapping[str, float], on_switch: Mapping[str, float]) -> Learning:
    """`first_frame`: host -> when it sent its first frame; `on_switch`: host -> when its entries
    were first read from the switch (hosts not read: not learned). A host seen on the switch
    before its first frame (a clock error) counts 0 s, never negative."""
    latencies = [max(0.0, on_switch[h] - t) for h, t in first_frame.items() if h in on_switch]
    learned = [on_switch[h] for h in first_frame if h in on_switch]
    return Learning(
        hosts=len(first_frame),
        learned=len(learned),
        first_frame_s=min(first_frame.values()) if first_frame else None,
        last_entry_s=max(learned) if learned else None,
        latencies_s=latencies,
    )


@dataclass(frozen=True)
class Fit:
    """y = intercept + slope * x by least squares, and how far the points bend away from it."""

    slope: float
    intercept: float
    r2: float
    # slope of the last segment over slope of the first: > 1 bends up (superlinear), 1 is a line
    bend: float | None


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"a fit needs at least two (x, y) pairs, got {len(xs)} x and {len(ys)} y")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("every x is the same: no slope to fit")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    r2 = 1.0 if ss_tot == 0 else 1 - ss_res / ss_tot
    pts = sorted(zip(xs, ys))
    bend = None
    if n >= 3:
        first = (pts[1][1] - pts[0][1]) / (pts[1][0] - pts[0][0])
        last = (pts[-1][1] - pts[-2][1]) / (pts[-1][0] - pts[-2][0])
        bend = last / first if first > 0 else None
    return Fit(slope, intercept, r2, bend)


def growth_exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The slope of log y over log x (1: linear, 2: quadratic, 0: flat); None unless there are
    two points with positive x and y and two different x."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2 or len({p[0] for p in pts}) < 2:
        return None
    return linear_fit([p[0] for p in pts], [p[1] for p in pts]).slope


def fastest(exponents: Mapping[str, float | None]) -> tuple[str, float] | None:
    """The part whose cost grows fastest (largest growth exponent), or None."""
    known = [(name, e) for name, e in exponents.items() if e is not None]
    return max(known, key=lambda p: p[1]) if known else None
