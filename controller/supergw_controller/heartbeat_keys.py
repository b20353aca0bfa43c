"""Each gateway's UDP heartbeat key (its agent secret), re-read when its file is rotated.

Like the REST tokens (`api.auth`), the keys follow the secret files: when one changes
(inode, mtime or size) every file is read again. Unlike a REST token, the previous key of a
gateway whose secret changed keeps authenticating heartbeats for `overlap_s`: the agent's
copy of the secret lives on another host and is rotated there a little earlier or later,
and a beat refused meanwhile would count as silence (three of them: a false failover). The
overlap is bounded so that a secret rotated away because it leaked stops working soon. A
file that cannot be used leaves the last good keys in force and logs why, once per change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from supergw_controller.config import Config, ConfigError
from supergw_controller.secretfiles import stamps

log = logging.getLogger(__name__)

# Stat the secret files at most this often (a flood wakes the receiver continuously).
CHECK_EVERY_S = 0.5


def heartbeat_keys(config: Config) -> dict[str, bytes]:
    """HMAC key of each agent's UDP heartbeats: that gateway's agent secret, nothing else."""
    keys: dict[str, bytes] = {}
    for g in config.gateways:
        if not g.heartbeat:
            continue
        try:
            keys[g.name] = config.agent_secret(g.name).encode()
        except ConfigError as exc:
            log.error("gateway %s: UDP heartbeats will be rejected: %s", g.name, exc)
    return keys


@dataclass(frozen=True)
class Previous:
    key: bytes
    until: float  # monotonic


class HeartbeatKeys:
    """The keys in force: `current` per gateway, and `previous` while its overlap lasts."""

    def __init__(
        self,
        keys: Mapping[str, bytes],
        config: Config | None = None,
        *,
        overlap_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = dict(keys)
        self._previous: dict[str, Previous] = {}
        self._config = config
        self._files = tuple(config.secret_files()) if config is not None else ()
        self._stamps = stamps(self._files)
        self._overlap_s = overlap_s
        self._clock = clock
        self._checked = clock()
        self.rotations = 0  # keys replaced since start
        self.previous_key_beats = 0  # beats authenticated by a previous key during its overlap

    @classmethod
    def from_config(cls, config: Config, clock: Callable[[], float] = time.monotonic) -> HeartbeatKeys:
        return cls(heartbeat_keys(config), config, overlap_s=config.heartbeats.key_overlap_s, clock=clock)

    def __contains__(self, gateway: str) -> bool:
        return gateway in self._keys

    def current(self, gateway: str) -> bytes | None:
        return self._keys.get(gateway)

    def previous(self, gateway: str) -> bytes | None:
        """The key `gateway` had before its last rotation, while the overlap lasts."""
        prev = self._previous.get(gateway)
        if prev is None:
            return None
        if self._clock() >= prev.until:
            del self._previous[gateway]
            log.warning("gateway %s: its previous heartbeat key is no longer accepted (overlap of %gs over)",
                        gateway, self._overlap_s)
            return None
        return prev.key

    def refresh(self) -> None:
        """Re-read the secret files if one changed (checked at most every CHECK_EVERY_S)."""
        now = self._clock()
        if not self._files or now - self._checked < CHECK_EVERY_S:
            return
        self._checked = now
        fresh = stamps(self._files)
        if fresh == self._stamps or self._config is None:
            return
        self._stamps = fresh  # one attempt (and one error) per change
        try:
            config = self._config.with_secrets_reread()
        except ConfigError as exc:
            log.error("heartbeat keys NOT reloaded, the keys read before stay in force: %s "
                      "(fix the file; it is read again when it changes)", exc)
            return
        keys = heartbeat_keys(config)
        for name, key in keys.items():
            old = self._keys.get(name)
            if old is not None and old != key:
                self.rotations += 1
                if self._overlap_s > 0:
                    self._previous[name] = Previous(old, now + self._overlap_s)
                log.warning("gateway %s: heartbeat key rotated; the previous key is accepted for %gs more "
                            "(heartbeats.key_overlap_s) while its agent picks up the new one", name, self._overlap_s)
        self._config, self._keys = config, keys
