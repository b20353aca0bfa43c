"""This gateway's agent secret at one controller, followed in its file (rotation without restart).

The secret is the REST bearer token of the agent's reports and the HMAC key of its UDP
heartbeats. It is read again when its file changes (checked at most every CHECK_EVERY_S):
REST calls use the new secret at once, and for `overlap_s` after the change each heartbeat
goes out twice, keyed by the new secret and by the previous one (same sequence number, so
the controller accepts at most one of them). The controller's copy of the secret lives on
another host and is rotated there a little earlier or later; whichever side goes first, one
of the two datagrams carries a key the controller accepts, so no beat is lost to the
rotation (the controller keeps accepting the previous key for its own overlap too:
`heartbeats.key_overlap_s`). The overlap is bounded so that a leaked secret that was
rotated away stops being used soon. A file that cannot be used keeps the last good secret
in force and logs why, once per change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from supergw_gateway.errors import ConfigError

log = logging.getLogger(__name__)

CHECK_EVERY_S = 1.0


class RotatingSecret:
    def __init__(
        self,
        read: Callable[[], str | None],
        where: str,
        *,
        overlap_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        first = read()
        if first is None:
            raise ConfigError(f"{where}: no agent token (controller.token or token_file)")
        self._read, self.where = read, where
        self._overlap_s, self._clock = overlap_s, clock
        self._current = first
        self._previous: tuple[str, float] | None = None  # (secret, monotonic end of its overlap)
        self._checked = clock()
        self._failed: str | None = None
        self._lock = threading.Lock()  # the heartbeat thread and the event loop both refresh
        self.rotations = 0

    def current(self) -> str:
        self.refresh()
        return self._current

    def keys(self) -> list[bytes]:
        """The heartbeat keys in force: the current secret, then the previous one during the overlap."""
        self.refresh()
        prev = self._previous
        if prev is not None and self._clock() < prev[1]:
            return [self._current.encode(), prev[0].encode()]
        return [self._current.encode()]

    def refresh(self) -> None:
        now = self._clock()
        if now - self._checked < CHECK_EVERY_S:
            return
        with self._lock:
            if now - self._checked < CHECK_EVERY_S:
                return
            self._checked = now
            try:
                secret = self._read()
                if secret is None:
                    raise ConfigError(f"{self.where}: the agent token is gone from the config")
            except ConfigError as exc:
                if str(exc) != self._failed:
                    self._failed = str(exc)
                    log.error("agent token NOT reloaded, the one read before stays in force: %s "
                              "(fix the file; it is read again every %gs)", exc, CHECK_EVERY_S)
                return
            self._failed = None
            if secret == self._current:
                return
            self._previous = (self._current, now + self._overlap_s) if self._overlap_s > 0 else None
            self._current = secret
            self.rotations += 1
            log.warning("%s: agent token rotated; heartbeats carry the previous one too for %gs "
                        "(controller.key_overlap_s) while the controller picks up the new one", self.where, self._overlap_s)
