"""Repeated trials as a mean with its 95 % confidence interval (Student's t), and the interval
of a ratio of two such means. Pure; the benchmark's trials are its samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# t(0.975, df) for df = 1..30: the two-sided 95 % quantile of Student's t (standard tables).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    """Two-sided 95 % quantile of Student's t with `df` degrees of freedom (df >= 1); beyond
    30, 1.96 + 2.4/df, which is within 0.2 % of the exact value."""
    if df < 1:
        raise ValueError(f"Student's t needs df >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df


@dataclass(frozen=True)
class Interval:
    """A mean of `n` samples and its 95 % confidence interval; low = high = mean when n < 2
    (one sample says nothing about its spread: `known` is False)."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def known(self) -> bool:
        return self.n >= 2

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def describe(self, digits: int = 3) -> str:
        if not self.known:
            return f"{self.mean:.{digits}g} (1 trial: no interval)"
        return f"{self.mean:.{digits}g} [{self.low:.{digits}g}, {self.high:.{digits}g}] (95 %, {self.n} trials)"


def mean_interval(samples: Sequence[float]) -> Interval:
    """The mean of `samples` with its 95 % interval, mean ± t(0.975, n-1) · s/√n."""
    values = [float(x) for x in samples]
    if not values or not all(math.isfinite(x) for x in values):
        raise ValueError(f"need finite samples, got {values!r}")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Interval(mean, mean, mean, len(values))
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(mean, mean - half, mean + half, len(values))


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float]) -> Interval:
    """mean(numerator) / mean(denominator) with a 95 % interval by the delta method: the two
    relative standard errors add in quadrature, with t at the smaller sample's degrees of
    freedom (conservative). With fewer than two samples on either side: no interval."""
    num, den = mean_interval(numerator), mean_interval(denominator)
    if den.mean <= 0:
        raise ValueError(f"the denominator's mean is {den.mean}, not > 0")
    ratio = num.mean / den.mean
    n = min(num.n, den.n)
    if n < 2:
        return Interval(ratio, ratio, ratio, n)
    rel = [statistics.stdev(v) / math.sqrt(len(v)) / abs(m) if m else 0.0
           for v, m in ((list(numerator), num.mean), (list(denominator), den.mean))]
    half = t975(n - 1) * abs(ratio) * math.hypot(*rel)
    return Interval(ratio, ratio - half, ratio + half, n)
