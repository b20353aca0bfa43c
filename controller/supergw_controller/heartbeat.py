"""The controller's receiver of UDP heartbeats (the wire format is `supergw_proto.beats`).

It validates datagrams from a non-blocking socket bound to the API's address and port,
counts and logs every rejection, and hands the accepted beats to liveness.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping

from supergw_proto.beats import DEFAULT_MAX_SKEW_S, MAX_DATAGRAM, BadHeartbeat, Beat, Freshness, decode

log = logging.getLogger(__name__)

# One log line per (source, reason) per this many seconds; every rejection is counted.
_LOG_EVERY_S = 10.0


class HeartbeatReceiver:
    """Validates datagrams from a non-blocking UDP socket; counts and logs every rejection.

    `drain()` reads everything queued. Liveness calls it when the socket is readable
    and again right before every liveness verdict, so a beat that reached this host is
    always seen before its gateway is judged silent.
    """

    def __init__(
        self,
        keys: Mapping[str, bytes],
        *,
        max_skew_s: float = DEFAULT_MAX_SKEW_S,
        wallclock_ns: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = dict(keys)
        self._fresh = Freshness(max_skew_s)
        self._wall_ns = wallclock_ns
        self._mono = monotonic
        self._logged: dict[tuple[str, str], float] = {}
        self.sock: socket.socket | None = None
        self.accepted = 0
        self.rejected: dict[str, int] = {}
        # The last drain() stopped at its limit with datagrams still queued (a flood): a
        # verdict of silence now could miss a good beat behind the forged ones.
        self.backlog = False

    def open(self, host: str, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"heartbeat UDP {host}:{port}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        self.sock = sock
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def accept(self, data: bytes, source: str) -> Beat | None:
        """One datagram: the Beat, or None (rejected, counted, logged)."""
        try:
            beat = decode(data, self._keys)
            self._fresh.check(beat, self._wall_ns())
        except BadHeartbeat as exc:
            self.rejected[exc.reason] = self.rejected.get(exc.reason, 0) + 1
            self._log(source, exc)
            return None
        self.accepted += 1
        return beat

    def drain(self, max_datagrams: int = 4096) -> list[Beat]:
        """Everything queued, but at most `max_datagrams` (more than the socket buffer holds
        at once), so a flood of forged datagrams cannot hold the event loop forever."""
        out: list[Beat] = []
        self.backlog = False
        if self.sock is None:
            return out
        for _ in range(max_datagrams):
            try:
                data, addr = self.sock.recvfrom(MAX_DATAGRAM + 1)
            except (BlockingIOError, InterruptedError):
                return out
            except OSError as exc:  # e.g. ICMP errors surfacing on the socket: not a beat
                log.debug("heartbeat socket: %s", exc)
                return out
            beat = self.accept(data, f"{addr[0]}:{addr[1]}")
            if beat is not None:
                out.append(beat)
        self.backlog = True
        return out

    def _log(self, source: str, exc: BadHeartbeat) -> None:
        now = self._mono()
        k = (source, exc.reason)
        last = self._logged.get(k)
        if last is not None and now - last < _LOG_EVERY_S:
            return
        self._logged[k] = now
        if len(self._logged) > 4096:  # a flood from many sources must not grow this forever
            self._logged.clear()
        log.warning(
            "heartbeat from %s rejected (%s): %s [%d %s so far]",
            source, exc.reason, exc, self.rejected.get(exc.reason, 0), exc.reason,
        )
