"""When the controller moves its long-lived objects out of the garbage collector's scans.

The controller is one asyncio process. CPython 3.11's full (generation 2) collection walks
every GC-tracked object while the event loop stands still; with 50,000 hosts learned and an
hour of history at N = 32 that is ~490,000 objects, ~130-340 ms on the lab machine
(`bench.scale.gcpauses`), and Python starts one whenever the
objects that reached the old generation since the last one exceed 25 % of those that survived
it. A growing host table, a filling history ring or the churn of reports and counter polls
set one off again and again: every REST answer, heartbeat verdict and failover write waits.

`gc.freeze()` moves every tracked object into a permanent generation that no collection
scans. Done right after a full collection, it freezes only live objects (the collection just
removed the unreachable ones; the younger generations are empty). So after each full
collection (Python's own trigger, no collection of ours) this policy freezes its survivors
when they are many: `FREEZE_AT` objects or more that a full collection would walk again.
The next full collection walks only what was allocated since, so a full pause stays near
what walking `FREEZE_AT` objects costs (15-40 ms measured), whatever the site's size.

What it trades (controller/README.md, "Garbage collection"): a frozen object is still freed
by its reference count, but a frozen object that later becomes garbage inside a reference
cycle is never collected. Freezes are few (one per `FREEZE_AT` long-lived objects grown or
replaced), so that leak is bounded by what was alive in cycles at each freeze.

The collector's state is the one global here (it is the interpreter's); `installed()` adds
the callback for the time of the process's run, and removes it and thaws what it froze after.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

# Objects a full collection would walk again (its survivors, not frozen) before they are
# frozen: 15-35 ms of walking on the lab machine (~0.3-0.7 µs per object). Lower keeps full
# pauses shorter but freezes more often (each freeze is a chance to keep a cycle forever).
FREEZE_AT = 50_000
OLDEST = 2  # the generation a full collection collects


def should_freeze(survivors: int, freeze_at: int = FREEZE_AT) -> bool:
    """After a full collection left `survivors` unfrozen objects: freeze them?"""
    return survivors >= freeze_at


def _survivors() -> int:
    # After a full collection every survivor is in the oldest generation (the younger ones
    # were merged into it); the frozen ones are in none of them.
    return len(gc.get_objects(generation=OLDEST))


class GcPolicy:
    """Freezes the survivors of a full collection when they are `freeze_at` or more.

    `survivors` and `freeze` are the collector's (tests give their own)."""

    def __init__(
        self,
        *,
        freeze_at: int = FREEZE_AT,
        survivors: Callable[[], int] = _survivors,
        freeze: Callable[[], None] = gc.freeze,
    ) -> None:
        if freeze_at < 1:
            raise ValueError(f"freeze_at must be >= 1, got {freeze_at}")
        self.freeze_at = freeze_at
        self._survivors = survivors
        self._freeze = freeze
        self.freezes = 0
        self.frozen_objects = 0  # frozen by this policy (some may have been freed since)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """A `gc.callbacks` entry: after each full collection, decide."""
        if phase != "stop" or info.get("generation") != OLDEST:
            return
        survivors = self._survivors()
        if not should_freeze(survivors, self.freeze_at):
            return
        self._freeze()
        self.freezes += 1
        self.frozen_objects += survivors
        log.debug("gc: froze %d objects that survived a full collection (%d frozen in %d freezes)",
                  survivors, self.frozen_objects, self.freezes)

    @contextmanager
    def installed(self) -> Iterator[GcPolicy]:
        """The policy in `gc.callbacks` for the time of the block; after it, what was frozen
        is the collector's again (a test process that served goes on as it was)."""
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)
            if self.freezes:
                gc.unfreeze()
