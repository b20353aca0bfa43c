"""Pair beacons: the agents of two paired gateways (gateway i of site A and gateway i of site B)
tell each other, through their IPsec tunnel, that they can carry traffic.

Each agent sends a small authenticated datagram every heartbeat interval (its controller's:
`set_timing`, from the answer to its reports) from its LAN address to its partner's LAN
address. Each beacon declares that interval, and the partner is judged by it: silent for
more than `missed` of its own declared intervals (or of ours, whichever is longer), so the
two sites agree even when their controllers' timings differ, and a beacon from an agent
not yet told its timing is late by its own clock, not missing. Both addresses are inside the tunnel's traffic selectors, so a
beacon that arrives proves the partner's agent runs and the SA carries packets end to end:
with kernel-libipsec a frozen or killed charon stops ESP, with kernel XFRM a frozen agent
stops the beacons, and a dead WAN stops both. A beacon also says what its sender knows of
itself (charon stopped, LAN interface down). The partner counts as down after `missed`
intervals without an acceptable beacon, or when it says it cannot carry traffic; the agent
then sets FLAG_PARTNER_DOWN in its heartbeats (sent at once, not at the next beat) and its
own controller stops using this gateway, as it does for a down tunnel: traffic sent here
would reach a partner its own site no longer uses.

Wire format, HMAC, replay and skew checks are `supergw_proto.beats` (magic "SGPB"), keyed by a per-pair secret. The socket is read before every verdict, so a
stalled agent that resumes does not judge its partner silent on beacons it has not read.
"""

from __future__ import annotations

import fcntl
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable

from supergw_proto.beats import FLAG_CHARON_DOWN, FLAG_LAN_DOWN, MAX_DATAGRAM, PAIR_MAGIC, BadHeartbeat, Freshness, decode, encode
from supergw_proto.reports import PartnerState

log = logging.getLogger(__name__)

_SIOCGIFFLAGS = 0x8913
_IFF_UP, _IFF_RUNNING = 0x1, 0x40
_LOG_EVERY_S = 10.0


def link_running(ifname: str) -> bool | None:
    """Whether interface `ifname` (in this network namespace) is up with carrier; None: no such interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            raw = fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, struct.pack("16sH14x", ifname.encode()[:15], 0))
        except OSError:
            return None
    (flags,) = struct.unpack_from("H", raw, 16)
    return bool(flags & _IFF_UP) and bool(flags & _IFF_RUNNING)


Verdict = tuple[bool | None, str | None]


class PartnerMonitor:
    """Sends this gateway's beacons and judges the partner's, from a thread of its own.

    `own_flags()` says what this gateway knows of itself (FLAG_CHARON_DOWN, FLAG_LAN_DOWN);
    `on_change(up)` runs (in the monitor's thread) whenever the verdict changes.
    """

    def __init__(
        self,
        gateway: str,
        partner: str,
        key: bytes,
        local: tuple[str, int],
        remote: tuple[str, int],
        interval_s: float,
        missed: int,
        own_flags: Callable[[], int],
        on_change: Callable[[bool | None], None] | None = None,
        startup_grace_s: float = 10.0,
        max_skew_s: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        wallclock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.gateway, self.partner = gateway, partner
        self.local, self.remote = local, remote
        self.interval_s, self.missed = interval_s, missed
        self.grace_s = startup_grace_s
        self._key = key
        self._keys = {partner: key}
        self._own_flags = own_flags
        self._on_change = on_change
        self._mono, self._wall = monotonic, wallclock_ns
        self._fresh = Freshness(max_skew_s)
        self._lock = threading.RLock()
        self._epoch = wallclock_ns()
        self._seq = 0
        self._started = monotonic()
        self._last_rx: float | None = None
        self._partner_interval_s: float | None = None  # what the partner's last beacon declared
        self._partner_flags = 0
        self._verdict: Verdict = (None, None)
        self._logged: dict[str, float] = {}
        self.sock: socket.socket | None = None
        self.sock_error: str | None = None
        self.sent = 0
        self.send_failed = 0
        self.received = 0
        self.rejected: dict[str, int] = {}
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"partner-{partner}", daemon=True)

    # -- pure parts (no thread, no socket of their own)
    def set_timing(self, interval_s: float, missed: int) -> None:
        """The heartbeat timing the controller told the agent: beacons go at this interval,
        and the partner is down after `missed` of its intervals without one."""
        with self._lock:
            self.interval_s, self.missed = interval_s, missed

    @property
    def dead_after_s(self) -> float:
        """Silence longer than this is the partner's death: `missed` of its declared interval
        (when it declares one), never less than `missed` of ours."""
        with self._lock:
            return max(self.interval_s, self._partner_interval_s or 0.0) * self.missed

    def beacon(self) -> bytes:
        """This gateway's next beacon."""
        self._seq += 1
        return encode(self.gateway, self._key, self._epoch, self._seq, self._wall(), self._own_flags(),
                      magic=PAIR_MAGIC, interval_ms=max(1, round(self.interval_s * 1000)))

    def receive(self, data: bytes, source: str) -> bool:
        """One datagram from `source` ("ip:port"): True when it is an acceptable beacon of the partner."""
        with self._lock:
            try:
                if source.rsplit(":", 1)[0] != self.remote[0]:
                    raise BadHeartbeat("wrong_source", f"datagram from {source}, not from the partner's "
                                                       f"address {self.remote[0]}")
                beat = decode(data, self._keys, magic=PAIR_MAGIC)
                self._fresh.check(beat, self._wall())
            except BadHeartbeat as exc:
                self.rejected[exc.reason] = self.rejected.get(exc.reason, 0) + 1
                self._warn(f"rejected:{exc.reason}", f"pair beacon from {source} rejected ({exc.reason}): {exc} "
                                                     f"[{self.rejected[exc.reason]} so far]")
                return False
            self.received += 1
            self._last_rx = self._mono()
            self._partner_flags = beat.flags
            # A version 1 beacon (an older agent) declares nothing: judged by our interval.
            self._partner_interval_s = None if beat.interval_ms is None else beat.interval_ms / 1000.0
            return True

    def verdict(self, now: float | None = None) -> Verdict:
        """(up, why): up None before the first beacon within the start-up grace."""
        with self._lock:
            now = self._mono() if now is None else now
            if self._last_rx is None:
                waited = now - self._started
                if waited <= self.grace_s:
                    return None, f"no beacon from {self.partner} yet"
                why = f"no beacon from {self.partner} through the tunnel since the agent started {waited:.0f}s ago"
                if self.sock_error:
                    why += f" ({self.sock_error})"
                return False, why
            age = now - self._last_rx
            if age > self.dead_after_s:
                return False, f"no beacon through the tunnel for {1000 * age:.0f} ms"
            if self._partner_flags & FLAG_CHARON_DOWN:
                return False, f"{self.partner} reports its charon stopped"
            if self._partner_flags & FLAG_LAN_DOWN:
                return False, f"{self.partner} reports its LAN interface down"
            return True, None

    def down(self) -> bool:
        """Whether the partner is down now, judged after reading every queued beacon."""
        self.drain()
        return self.verdict()[0] is False

    def state(self) -> PartnerState:
        self.drain()
        with self._lock:
            now = self._mono()
            up, why = self.verdict(now)
            return PartnerState(
                name=self.partner, up=up, why=why[:256] if why and up is not True else None,
                last_beacon_age_s=None if self._last_rx is None else round(max(0.0, now - self._last_rx), 3),
                beacons_sent=self.sent, beacons_received=self.received, beacons_rejected=dict(self.rejected),
            )

    # -- the socket and the thread
    def open(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind(self.local)
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"pair beacon socket {self.local[0]}:{self.local[1]}: "
                                     f"{exc.strerror or exc}") from None
        sock.setblocking(False)
        self.sock = sock
        return sock

    def drain(self, max_datagrams: int = 256) -> None:
        """Read what is queued (bounded, so a flood cannot hold the caller)."""
        with self._lock:
            if self.sock is None:
                return
            for _ in range(max_datagrams):
                try:
                    data, addr = self.sock.recvfrom(MAX_DATAGRAM + 1)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:  # ICMP errors (port unreachable while the partner restarts)
                    log.debug("pair beacon socket: %s", exc)
                    return
                self.receive(data, f"{addr[0]}:{addr[1]}")

    def send(self) -> None:
        with self._lock:
            if self.sock is None:
                return
            try:
                self.sock.sendto(self.beacon(), self.remote)
                self.sent += 1
            except OSError as exc:
                self.send_failed += 1
                self.last_error = f"beacon to {self.remote[0]}:{self.remote[1]}: {exc}"
                self._warn(f"send:{exc.errno}", f"{self.last_error} (is the tunnel up? keeps trying every "
                                                f"{1000 * self.interval_s:.0f} ms)")

    def evaluate(self) -> None:
        """Judge now (after a drain) and tell `on_change` when the verdict changed."""
        self.drain()
        with self._lock:
            v = self.verdict()
            changed = v[0] != self._verdict[0]
            self._verdict = v
        if changed:
            if v[0] is False:
                log.warning("partner %s is down: %s", self.partner, v[1])
            elif v[0] is True:
                log.warning("partner %s is up: beacons arrive through the tunnel", self.partner)
            if self._on_change is not None:
                self._on_change(v[0])

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        with self._lock:
            if self.sock is not None:
                self.sock.close()
                self.sock = None

    def _run(self) -> None:
        next_send = next_bind = self._mono()
        while not self._stop.is_set():
            now = self._mono()
            if self.sock is None and now >= next_bind:
                try:
                    self.open()
                    self.sock_error = None
                except OSError as exc:
                    self.sock_error = str(exc)
                    self._warn("bind", f"{exc}; retrying every second")
                    next_bind = now + 1.0
            if now >= next_send:
                self.send()
                # A fixed cadence; after a long pause start afresh rather than burst.
                next_send = max(next_send + self.interval_s, now)
            self.evaluate()
            with self._lock:
                last = self._last_rx
            wake = next_send
            if last is not None and last + self.dead_after_s > now:
                wake = min(wake, last + self.dead_after_s + 0.001)  # judge the moment it becomes silent
            timeout = max(0.0, min(wake - self._mono(), self.interval_s))
            sock = self.sock
            if sock is None:
                self._stop.wait(timeout)
                continue
            try:
                select.select([sock], [], [], timeout)
            except (OSError, ValueError):  # closed by stop()
                return

    def _warn(self, key: str, msg: str) -> None:
        now = self._mono()
        last = self._logged.get(key)
        if last is not None and now - last < _LOG_EVERY_S:
            return
        self._logged[key] = now
        log.warning("%s", msg)
