"""What the switch did on its own: each gateway's `failover_frames` counter (frames of its
buckets the switch sent to its backup because the gateway's liveness frames had stopped,
docs/pipeline-contract.md "Gateway liveness"), read with the bucket counters, becomes an
event: one `gateway`/`stale` event per episode (the counter grows after a poll in which it
did not), so the event log shows when the data plane failed a gateway over, before or
without the controller's own verdict, and a soak can count the switch's spurious ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StaleEpisode:
    gateway: str
    frames: int  # sent to the backup since the last poll


class StaleWatch:
    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._growing: set[str] = set()
        self.episodes: dict[str, int] = {}  # gateway -> episodes since start (metrics)

    def update(self, counts: Mapping[str, int]) -> list[StaleEpisode]:
        """The counters as read now (gateway -> packets); the episodes that began since the
        last read. The first read only sets the baseline; a counter that went down (a new
        pipeline, a reset) starts a new baseline."""
        out: list[StaleEpisode] = []
        first = not self._last
        growing: set[str] = set()
        for gw, n in counts.items():
            before = self._last.get(gw)
            if before is not None and n > before:
                growing.add(gw)
                if gw not in self._growing:
                    self.episodes[gw] = self.episodes.get(gw, 0) + 1
                    out.append(StaleEpisode(gw, n - before))
        self._last = dict(counts)
        self._growing = growing
        return [] if first else out
