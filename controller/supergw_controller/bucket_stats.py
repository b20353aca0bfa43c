"""Per-bucket load from the `bucket_counter` direct counter: totals and rates."""

from __future__ import annotations

from collections.abc import Mapping

from supergw_controller.rebalancer import BucketRate


class BucketStats:
    """Turns successive counter reads into packet/byte rates per bucket.

    A counter that went backwards (entry re-inserted, switch restarted) restarts its
    rate from the new reading instead of producing a negative rate.

    `update` is the only writer (`totals` and `rates` are read-only views); `generation`
    counts the updates that changed either, so a reader can tell in O(1) whether what it
    built from them is still current (`bucket_list.BucketList`).
    """

    def __init__(self) -> None:
        self._totals: dict[int, tuple[int, int]] = {}
        self._rates: dict[int, BucketRate] = {}
        self._last_read: float | None = None
        self.generation = 0

    @property
    def totals(self) -> Mapping[int, tuple[int, int]]:
        """bucket -> (packets, bytes) as last read."""
        return self._totals

    @property
    def rates(self) -> Mapping[int, BucketRate]:
        """bucket -> rate over the last poll; buckets without traffic are left out."""
        return self._rates

    def update(self, now: float, samples: Mapping[int, tuple[int, int]]) -> None:
        rates = self._rates
        if self._last_read is not None and now > self._last_read:
            dt = now - self._last_read
            rates = {}
            for b, (pkts, byts) in samples.items():
                prev = self._totals.get(b)
                if prev is None or pkts < prev[0] or byts < prev[1]:
                    continue
                dp, db = pkts - prev[0], byts - prev[1]
                if dp or db:
                    rates[b] = BucketRate(pps=dp / dt, bps=db / dt)
        totals = dict(samples)
        # Equal totals give empty rates, so on a quiet site this compares two dicts of
        # tuples and two empty dicts: a poll that changed nothing invalidates nothing.
        if totals != self._totals or rates != self._rates:
            self.generation += 1
        self._totals, self._rates = totals, rates
        self._last_read = now
