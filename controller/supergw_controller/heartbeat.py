"""The controller's receiver of UDP heartbeats (the wire format is `supergw_proto.beats`).

It validates datagrams from a non-blocking socket bound to the API's address and port,
counts and logs every rejection, and hands the accepted beats to liveness.

A flood of forged, replayed or malformed datagrams must not delay a real gateway's beat.
The receiver reads the socket until it is empty at every wakeup (bounded only by a time
budget, `heartbeats.drain_budget_ms`, so the event loop keeps turning under a flood that
outruns it; liveness then defers silence verdicts, see `Liveness.tick`), and each datagram
passes the cheap checks before the HMAC is spent on it, in this order (the reason it is
counted under when refused):

1. a source address that is not *trusted* -- the source of some gateway's last valid beat,
   or inside some gateway's `heartbeat_from` -- has a token bucket
   (`heartbeats.untrusted_rate_per_s`, `untrusted_burst`); empty, the datagram is refused
   unread (`rate_limited`). A trusted source is never rate-limited: a flood from elsewhere
   cannot starve it, and one spoofing its address costs one HMAC per datagram, no more;
2. framing: size, magic, version, lengths (`malformed`);
3. the gateway it names has a key here (`unknown_gateway`);
4. its source address is in that gateway's `heartbeat_from`, when that is configured
   (`unknown_source`);
5. HMAC with the gateway's key, or with its previous key during a rotation's overlap
   (`bad_mac`), then freshness (`stale`, `replayed`).

A large receive buffer (`heartbeats.receive_buffer_bytes`) keeps the kernel from dropping
a real beat while a burst waits to be read.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from supergw_controller.config import HeartbeatsConfig
from supergw_controller.heartbeat_keys import HeartbeatKeys
from supergw_proto.beats import (
    DEFAULT_MAX_SKEW_S,
    MAX_DATAGRAM,
    BadHeartbeat,
    Beat,
    Freshness,
    authenticate,
    parse,
    unknown_gateway,
)

log = logging.getLogger(__name__)

# One log line per (source, reason) per this many seconds; every rejection is counted.
_LOG_EVERY_S = 10.0
# Bounds on per-source state, so datagrams from ever new addresses cannot grow it forever.
_MAX_SOURCES = 4096
# How often a drain looks at the clock (a time.monotonic() per datagram would cost more
# than the cheap checks).
_CLOCK_EVERY = 64

Network = IPv4Network | IPv6Network


@dataclass
class TokenBucket:
    tokens: float
    at: float

    def take(self, now: float, rate: float, burst: float) -> bool:
        self.tokens = min(burst, self.tokens + (now - self.at) * rate)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


def _address(ip: str) -> IPv4Address | IPv6Address | None:
    try:
        addr = ip_address(ip.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


class HeartbeatReceiver:
    """Validates datagrams from a non-blocking UDP socket; counts and logs every rejection.

    `drain()` reads everything queued. Liveness calls it when the socket is readable
    and again right before every liveness verdict, so a beat that reached this host is
    always seen before its gateway is judged silent.
    """

    def __init__(
        self,
        keys: Mapping[str, bytes] | HeartbeatKeys,
        *,
        sources: Mapping[str, Sequence[Network]] | None = None,
        limits: HeartbeatsConfig | None = None,
        max_skew_s: float = DEFAULT_MAX_SKEW_S,
        wallclock_ns: Callable[[], int] = time.time_ns,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys = keys if isinstance(keys, HeartbeatKeys) else HeartbeatKeys(keys)
        self._sources = {g: tuple(nets) for g, nets in (sources or {}).items() if nets}
        self._limits = limits if limits is not None else HeartbeatsConfig()
        self._fresh = Freshness(max_skew_s)
        self._wall_ns = wallclock_ns
        self._mono = monotonic
        self._logged: dict[tuple[str, str], float] = {}
        self._trusted: dict[str, str] = {}  # gateway -> source IP of its last valid beat
        self._trusted_ips: frozenset[str] = frozenset()  # the values of _trusted
        self._configured: dict[str, bool] = {}  # source IP -> inside some gateway's heartbeat_from
        self._buckets: dict[str, TokenBucket] = {}  # untrusted source IP -> its bucket
        self.sock: socket.socket | None = None
        self.receive_buffer = 0  # bytes the kernel granted (SO_RCVBUF as read back)
        self.accepted = 0
        self.rejected: dict[str, int] = {}
        # The last drain() stopped at its budget with datagrams still queued (a flood that
        # outruns us): a verdict of silence now could miss a good beat behind the forged ones.
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
        self.receive_buffer = self._grow_buffer(sock, self._limits.receive_buffer_bytes)
        self.sock = sock
        return sock

    @staticmethod
    def _grow_buffer(sock: socket.socket, want: int) -> int:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, want)
        got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2  # Linux reports it doubled
        if got < want:
            force = getattr(socket, "SO_RCVBUFFORCE", 33)
            try:  # beyond net.core.rmem_max: needs CAP_NET_ADMIN
                sock.setsockopt(socket.SOL_SOCKET, force, want)
                got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2
            except OSError:
                pass
        if got < want:
            log.warning(
                "heartbeat socket: receive buffer %d bytes, not the %d of heartbeats.receive_buffer_bytes "
                "(raise sysctl net.core.rmem_max, or give the controller CAP_NET_ADMIN): a flood fills it sooner",
                got, want,
            )
        return got

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _refuse(self, exc: BadHeartbeat, source: str, ip: str) -> None:
        self.rejected[exc.reason] = self.rejected.get(exc.reason, 0) + 1
        self._log(source, ip, exc)

    def accept(self, data: bytes, source: str, ip: str | None = None) -> Beat | None:
        """One datagram from `source` ("ip:port"): the Beat, or None (refused, counted, logged)."""
        src_ip = source.rpartition(":")[0] if ip is None else ip
        if not self._admit(src_ip):
            n = self.rejected["rate_limited"] = self.rejected.get("rate_limited", 0) + 1
            if n == 1 or self._log_due(src_ip, "rate_limited"):  # the message only when it is logged
                self._log(source, src_ip, BadHeartbeat(
                    "rate_limited",
                    f"more than {self._limits.untrusted_rate_per_s:g}/s (burst {self._limits.untrusted_burst}) "
                    f"datagrams from {src_ip}, which has sent no valid heartbeat: refused unread"))
            return None
        try:
            if len(data) > MAX_DATAGRAM:
                raise BadHeartbeat("malformed", f"{len(data)} bytes or more is too long for a heartbeat")
            frame = parse(data)
            name = frame.gateway
            key = self.keys.current(name)
            if key is None:
                raise unknown_gateway(name)
            nets = self._sources.get(name)
            if nets is not None and not self._inside(src_ip, nets):
                raise BadHeartbeat(
                    "unknown_source",
                    f"a heartbeat naming gateway {name!r} from {src_ip}, outside its heartbeat_from "
                    f"({', '.join(map(str, nets))})", name)
            try:
                beat = authenticate(frame, key)
            except BadHeartbeat as exc:
                old = self.keys.previous(name) if exc.reason == "bad_mac" else None
                if old is None:
                    raise
                beat = authenticate(frame, old)
                self.keys.previous_key_beats += 1
            self._fresh.check(beat, self._wall_ns())
        except BadHeartbeat as exc:
            self._refuse(exc, source, src_ip)
            return None
        self.accepted += 1
        if self._trusted.get(name) != src_ip:
            self._trusted[name] = src_ip
            self._trusted_ips = frozenset(self._trusted.values())
            self._buckets.pop(src_ip, None)
        return beat

    def _inside(self, ip: str, nets: tuple[Network, ...]) -> bool:
        addr = _address(ip)
        return addr is not None and any(addr in n for n in nets)

    def _admit(self, ip: str) -> bool:
        """Step 1 of the module doc, before anything else is spent on the datagram: False
        when `ip` is untrusted and has used up its bucket."""
        if ip in self._trusted_ips:
            return True
        configured = self._configured.get(ip)
        if configured is None:
            if len(self._configured) >= _MAX_SOURCES:
                self._configured.clear()
            configured = self._configured[ip] = any(self._inside(ip, nets) for nets in self._sources.values())
        if configured:
            return True
        now = self._mono()
        bucket = self._buckets.get(ip)
        if bucket is None:
            if len(self._buckets) >= _MAX_SOURCES:
                self._forget_idle_sources(now)
            bucket = self._buckets[ip] = TokenBucket(float(self._limits.untrusted_burst), now)
        return bucket.take(now, self._limits.untrusted_rate_per_s, self._limits.untrusted_burst)

    def _forget_idle_sources(self, now: float) -> None:
        """Buckets that have refilled carry no state worth keeping; if every one is busy
        (datagrams from thousands of addresses), start afresh."""
        limits = self._limits
        full = [ip for ip, b in self._buckets.items()
                if b.tokens + (now - b.at) * limits.untrusted_rate_per_s >= limits.untrusted_burst]
        for ip in full:
            del self._buckets[ip]
        if len(self._buckets) >= _MAX_SOURCES:
            self._buckets.clear()

    def drain(self, max_datagrams: int | None = None, budget_s: float | None = None) -> list[Beat]:
        """Everything queued, however much, unless reading it takes longer than `budget_s`
        (default `heartbeats.drain_budget_ms`) or `max_datagrams` are read: then `backlog`."""
        out: list[Beat] = []
        self.backlog = False
        if self.sock is None:
            return out
        self.keys.refresh()
        deadline = self._mono() + (self._limits.drain_budget_ms / 1000 if budget_s is None else budget_s)
        recvfrom, accept = self.sock.recvfrom, self.accept
        n = 0
        while True:
            try:
                data, addr = recvfrom(MAX_DATAGRAM + 1)
            except (BlockingIOError, InterruptedError):
                return out
            except OSError as exc:  # e.g. ICMP errors surfacing on the socket: not a beat
                log.debug("heartbeat socket: %s", exc)
                return out
            beat = accept(data, f"{addr[0]}:{addr[1]}", addr[0])
            if beat is not None:
                out.append(beat)
            n += 1
            if (max_datagrams is not None and n >= max_datagrams) or (n % _CLOCK_EVERY == 0 and self._mono() > deadline):
                self.backlog = True
                return out

    def _log_due(self, ip: str, reason: str) -> bool:
        last = self._logged.get((ip, reason))
        return last is None or self._mono() - last >= _LOG_EVERY_S

    def _log(self, source: str, ip: str, exc: BadHeartbeat) -> None:
        k = (ip, exc.reason)  # not the port: a flood from ever new ports must not flood the log
        if not self._log_due(ip, exc.reason):
            return
        self._logged[k] = self._mono()
        if len(self._logged) > _MAX_SOURCES:  # a flood from many sources must not grow this forever
            self._logged.clear()
        log.warning(
            "heartbeat from %s rejected (%s): %s [%d %s so far]",
            source, exc.reason, exc, self.rejected.get(exc.reason, 0), exc.reason,
        )
