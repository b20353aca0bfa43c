"""How often a backup controller reads the switch's host tables back.

A backup mirrors what the switch holds for its API (it writes nothing). The bucket table is
4,096 entries at most and is read every counter poll; the host tables grow with the site
(65,536 hosts: three tables of that size, read and rebuilt), and reading them every second
would keep the backup, the switch's P4Runtime server and the channel busy for most of it.
So the next host read waits `DUTY` times as long as the last one took, and at least a poll
interval: a small site is mirrored every poll, a large one with at most 1/`DUTY` of the
time spent on it. A promoted backup reconciles by reading everything anyway.
"""

from __future__ import annotations

DUTY = 20.0


class MirrorPace:
    def __init__(self, poll_s: float, duty: float = DUTY) -> None:
        self._poll_s = poll_s
        self._duty = duty
        self._next = float("-inf")

    def due(self, now: float) -> bool:
        return now >= self._next

    def done(self, started: float, ended: float) -> None:
        """A read that ran from `started` to `ended` (a failed one too: it cost the same)."""
        self._next = ended + max(self._poll_s, self._duty * (ended - started))
