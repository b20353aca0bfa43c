"""Refusals of a full switch table, counted and logged without flooding the log.

A table of the switch that is full (hosts, host IPv6 addresses, client pins) refuses the next
entry: the controller does not write it (the switch would refuse the write), counts it and says
so — the first at once, then at most one line per REFUSAL_LOG_EVERY_S with the count since.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

REFUSAL_LOG_EVERY_S = 10.0


class RefusalLog:
    """Refusals of one full table, logged without flooding the log: the first at once, then
    at most one line per REFUSAL_LOG_EVERY_S with the count since the last line."""

    def __init__(self, what: str, advice: str) -> None:
        self.total = 0
        self._what = what
        self._advice = advice
        self._logged_at: float | None = None
        self._since_logged = 0

    def refuse(self, item: str, held: int, capacity: int, now: float) -> None:
        self.total += 1
        self._since_logged += 1
        if self._logged_at is not None and now - self._logged_at < REFUSAL_LOG_EVERY_S:
            return
        log.warning(
            "%s full: the switch holds %d of %d; %s refused (%d in the last %.0f s, %d in all). %s",
            self._what, held, capacity, item, self._since_logged,
            0.0 if self._logged_at is None else now - self._logged_at, self.total, self._advice,
        )  # fmt: skip
        self._logged_at = now
        self._since_logged = 0
