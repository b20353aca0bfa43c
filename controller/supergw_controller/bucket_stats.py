"""Per-bucket load from the `bucket_counter` direct counter: totals and rates."""

from __future__ import annotations

from collections.abc import Mapping

from supergw_controller.rebalancer import BucketRate


class BucketStats:
    """Turns successive counter reads into packet/byte rates per bucket.

    A counter that went backwards (entry re-inserted, switch restarted) restarts its
    rate from the new reading instead of producing a negative rate.
    """

    def __init__(self) -> None:
        self.totals: dict[int, tuple[int, int]] = {}
        self.rates: dict[int, BucketRate] = {}
        self._last_read: float | None = None

    def update(self, now: float, samples: Mapping[int, tuple[int, int]]) -> None:
        if self._last_read is not None and now > self._last_read:
            dt = now - self._last_read
            rates: dict[int, BucketRate] = {}
            for b, (pkts, byts) in samples.items():
                prev = self.totals.get(b)
                if prev is None or pkts < prev[0] or byts < prev[1]:
                    continue
                dp, db = pkts - prev[0], byts - prev[1]
                if dp or db:
                    rates[b] = BucketRate(pps=dp / dt, bps=db / dt)
            self.rates = rates
        self.totals = dict(samples)
        self._last_read = now
