"""The tuning paper's statistics: its stopping rule and 95 % intervals.

Iatrou et al. (§3.1) ran each netperf experiment for 10 s, "up to 12 iterations (minimum 4) to
reach a confidence level of 95 with a 3 % width of confidence interval": a measurement stops
once the 95 % interval of its mean is within +-1.5 % of the mean, or after 12 runs.

Intervals are Student's t for the mean of n runs (n <= 31 here, so the two-sided 97.5 %
quantiles are tabulated); a gain or a ratio between two configurations is the mean of the
per-round ratios of runs measured side by side in the same round (a drift of the machine
cancels within a round), with the t interval of that mean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95 % (0.975 quantile) of Student's t for 1..30 degrees of freedom.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z975 = 1.960


def t975(df: int) -> float:
    if df < 1:
        raise ValueError(f"a t interval needs 2 or more values (got {df + 1})")
    return T975[df - 1] if df <= len(T975) else Z975


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    @property
    def half_rel(self) -> float:
        """Half the interval's width as a fraction of the mean (inf without a mean)."""
        return (self.high - self.low) / 2 / abs(self.mean) if self.mean else math.inf

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high


def interval(values: Sequence[float]) -> Interval | None:
    """The mean of `values` with its 95 % t interval (None for fewer than 2 values)."""
    if len(values) < 2:
        return None
    m = statistics.fmean(values)
    h = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(m, m - h, m + h, len(values))


@dataclass(frozen=True)
class StoppingRule:
    """The paper's: at least `min_n` runs, at most `max_n`, done once the 95 % interval's
    half-width is within `rel` of the mean."""
    min_n: int = 4
    max_n: int = 12
    rel: float = 0.015

    def __post_init__(self) -> None:
        if not 2 <= self.min_n <= self.max_n or not 0 < self.rel < 1:
            raise ValueError(f"a stopping rule needs 2 <= min_n <= max_n and 0 < rel < 1 (got {self})")

    def converged(self, values: Sequence[float]) -> bool:
        ci = interval(values)
        return len(values) >= self.min_n and ci is not None and ci.half_rel <= self.rel

    def done(self, values: Sequence[float]) -> bool:
        return len(values) >= self.max_n or self.converged(values)


def paired_ratio(num: dict[int, float], den: dict[int, float]) -> Interval | None:
    """The mean of num[r] / den[r] over the rounds both were measured in, with its 95 % interval."""
    ratios = [num[r] / den[r] for r in sorted(num) if r in den and den[r] > 0]
    return interval(ratios)
