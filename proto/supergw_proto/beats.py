"""UDP heartbeats and pair beacons: the wire format the agents send and the controller and agents check.

A heartbeat is one datagram, sent every ``timing.heartbeat_interval_ms`` by a dedicated
thread of the gateway agent to the controller's API address and port (UDP; the REST API
is TCP on the same number). It is authenticated with HMAC-SHA256 keyed by that gateway's
agent secret, the same secret its REST calls carry as a bearer token, so a heartbeat
proves what a REST heartbeat proved and nothing needs a second credential.

Layout (network byte order)::

    magic "SGHB" | version u8 | flags u8 | name length u8 | 0 u8
    | epoch u64 | seq u64 | sent_ns u64 | [version 2: interval_ms u32]
    | name (UTF-8) | HMAC-SHA256 (32 bytes, over all before)

Version 2 adds `interval_ms`: how often its sender sends these datagrams now. The agents
take their interval from their controller (`reports.AgentTiming`, in the reply to every
report), and the receiver judges silence by the interval the datagram declares when that
is longer than its own: a sender on another cadence is late by its own clock, not dead,
so a mis-set or not yet told agent cannot cause a spurious failover, and the receiver says
so (controller: an error naming both intervals). Pair beacons agree the same way: each
agent judges its partner by the interval the partner's beacons declare. Version 1 (no
interval) is still accepted from older agents and judged by the receiver's own interval.

The same layout with magic "SGPB" is the *pair beacon* that the agents of two paired gateways
(gateway i of site A and gateway i of site B) send each other through their IPsec tunnel,
keyed by a per-pair secret and named by the sender: a beacon that arrives proves that the
partner's agent runs and that the SA carries traffic end to end. Flags say what the sender
knows about itself (charon stopped, LAN interface down) and, in a heartbeat, that its
partner is down; a pair beacon's FLAG_PARTNER_DOWN is ignored (no verdict feeds back into
the beacons, so two gateways can never hold each other down).

`epoch` is the agent's start time (ns) and `seq` counts its beats: the receiver accepts
only a (epoch, seq) greater than the last one it accepted for that gateway, so a
recorded datagram cannot be replayed while the controller runs. `sent_ns` (the agent's
wall clock) must be within ``max_skew_s`` of ours, which bounds what a replay can do
after a controller restart, when the receiver has no memory yet.

Why not the HTTP heartbeat: on a loaded two-core machine a Python HTTP round trip every
100 ms through uvicorn is late often enough that a short dead-after either fails over
live gateways or has to be so long that a frozen gateway costs seconds. A datagram from
its own thread costs microseconds, and the receiver drains the socket before every
verdict, so a stalled controller loop can delay a failover but never cause one.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

MAGIC = b"SGHB"
PAIR_MAGIC = b"SGPB"
VERSION = 2  # what encode() sends when it declares an interval; version 1 is still accepted
_HEADER = struct.Struct("!4sBBBxQQQ")
_INTERVAL = struct.Struct("!I")  # version 2
MAC_LEN = 32
MAX_NAME = 64
MAX_DATAGRAM = _HEADER.size + _INTERVAL.size + MAX_NAME + MAC_LEN

# The agent sees its charon stopped (SIGSTOP) or gone: the gateway carries no traffic
# although its agent still beats. The receiver treats it as dead at once.
FLAG_CHARON_DOWN = 0x01
# The agent's partner gateway (the other end of its tunnel, at the partner site) sent no
# authenticated beacon through the tunnel lately, or says it cannot carry traffic: traffic
# sent to this gateway would be lost beyond it. The receiver treats it like a down tunnel.
FLAG_PARTNER_DOWN = 0x02
# The sender's LAN interface is down: it cannot deliver what arrives through its tunnel.
FLAG_LAN_DOWN = 0x04
_KNOWN_FLAGS = FLAG_CHARON_DOWN | FLAG_PARTNER_DOWN | FLAG_LAN_DOWN

DEFAULT_MAX_SKEW_S = 30.0


class BadHeartbeat(ValueError):
    """A datagram that is not an acceptable heartbeat; `reason` is the counter label."""

    def __init__(self, reason: str, detail: str, gateway: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.gateway = gateway


@dataclass(frozen=True)
class Beat:
    gateway: str
    epoch: int
    seq: int
    sent_ns: int
    flags: int
    interval_ms: int | None = None  # the sender's interval (version 2); None: not said (version 1)

    @property
    def charon_down(self) -> bool:
        return bool(self.flags & FLAG_CHARON_DOWN)

    @property
    def partner_down(self) -> bool:
        return bool(self.flags & FLAG_PARTNER_DOWN)

    @property
    def lan_down(self) -> bool:
        return bool(self.flags & FLAG_LAN_DOWN)


def encode(gateway: str, key: bytes, epoch: int, seq: int, sent_ns: int, flags: int = 0,
           magic: bytes = MAGIC, interval_ms: int | None = None) -> bytes:
    """One datagram: a heartbeat (`MAGIC`) or a pair beacon (`PAIR_MAGIC`); version 2 when
    it declares the sender's `interval_ms`, else version 1."""
    name = gateway.encode()
    if not 0 < len(name) <= MAX_NAME:
        raise ValueError(f"gateway name must be 1..{MAX_NAME} bytes, got {len(name)}")
    if magic not in (MAGIC, PAIR_MAGIC):
        raise ValueError(f"magic must be {MAGIC!r} or {PAIR_MAGIC!r}, got {magic!r}")
    if interval_ms is None:
        body = _HEADER.pack(magic, 1, flags, len(name), epoch, seq, sent_ns) + name
    else:
        if not 0 < interval_ms < 1 << 32:
            raise ValueError(f"interval_ms must be 1..{(1 << 32) - 1}, got {interval_ms}")
        body = _HEADER.pack(magic, VERSION, flags, len(name), epoch, seq, sent_ns) + _INTERVAL.pack(interval_ms) + name
    return body + hmac.new(key, body, hashlib.sha256).digest()


@dataclass(frozen=True)
class Frame:
    """A datagram whose framing is sound, not yet authenticated: `gateway` is only claimed."""

    gateway: str
    version: int
    flags: int
    epoch: int
    seq: int
    sent_ns: int
    interval_ms: int | None
    data: bytes


def parse(data: bytes, magic: bytes = MAGIC) -> Frame:
    """The framing of one datagram of kind `magic`, no key needed (cheap: a receiver sorts
    datagrams by their claimed sender before it spends an HMAC on them)."""
    what = "heartbeat" if magic == MAGIC else "pair beacon"
    if len(data) < _HEADER.size + 1 + MAC_LEN:
        raise BadHeartbeat("malformed", f"{len(data)} bytes is too short for a {what}")
    got, version, flags, name_len, epoch, seq, sent_ns = _HEADER.unpack_from(data)
    if got != magic:
        raise BadHeartbeat("malformed", f"bad magic {got!r} (not a supergw {what})")
    if version not in (1, VERSION):
        raise BadHeartbeat("malformed", f"{what} version {version}, this side speaks 1 and {VERSION}")
    start = _HEADER.size + (_INTERVAL.size if version == VERSION else 0)
    if len(data) != start + name_len + MAC_LEN or name_len == 0:
        raise BadHeartbeat("malformed", f"length {len(data)} does not match name length {name_len}")
    interval_ms = _INTERVAL.unpack_from(data, _HEADER.size)[0] if version == VERSION else None
    if interval_ms == 0:
        raise BadHeartbeat("malformed", f"{what} declares an interval of 0 ms")
    raw = data[start : start + name_len]
    try:
        name = raw.decode()
    except UnicodeDecodeError:
        raise BadHeartbeat("malformed", "gateway name is not UTF-8") from None
    return Frame(name, version, flags, epoch, seq, sent_ns, interval_ms, data)


def authenticate(frame: Frame, key: bytes, magic: bytes = MAGIC) -> Beat:
    """The Beat of `frame` if its HMAC is `key`'s, else BadHeartbeat("bad_mac")."""
    name, data = frame.gateway, frame.data
    if not hmac.compare_digest(data[-MAC_LEN:], hmac.digest(key, data[:-MAC_LEN], hashlib.sha256)):
        secret = "this gateway's agent secret" if magic == MAGIC else "the pair's secret"
        raise BadHeartbeat(
            "bad_mac",
            f"bad HMAC for gateway {name!r}: the sender's key is not {secret} (or the datagram was forged)",
            name,
        )
    if frame.flags & ~_KNOWN_FLAGS:
        raise BadHeartbeat("malformed", f"unknown flags {frame.flags:#x} from gateway {name!r}", name)
    return Beat(name, frame.epoch, frame.seq, frame.sent_ns, frame.flags, frame.interval_ms)


def unknown_gateway(name: str, magic: bytes = MAGIC) -> BadHeartbeat:
    known = "is not configured (or has no agent secret)" if magic == MAGIC else "is not this gateway's partner"
    return BadHeartbeat("unknown_gateway", f"gateway {name!r} {known}", name)


def decode(data: bytes, keys: Mapping[str, bytes], magic: bytes = MAGIC) -> Beat:
    """Parse and authenticate one datagram of kind `magic` (no replay check: see `Freshness`)."""
    frame = parse(data, magic)
    key = keys.get(frame.gateway)
    if key is None:
        raise unknown_gateway(frame.gateway, magic)
    return authenticate(frame, key, magic)


@dataclass
class Freshness:
    """Replay and clock-skew checks: (epoch, seq) strictly increasing per gateway."""

    max_skew_s: float = DEFAULT_MAX_SKEW_S
    last: dict[str, tuple[int, int]] = field(default_factory=dict)

    def check(self, beat: Beat, wall_ns: int) -> None:
        skew = abs(wall_ns - beat.sent_ns) / 1e9
        if skew > self.max_skew_s:
            raise BadHeartbeat(
                "stale",
                f"gateway {beat.gateway!r}: sent {skew:.1f}s away from our clock (limit {self.max_skew_s:g}s): "
                "a replay, or the clocks are not synchronised (run NTP)",
                beat.gateway,
            )
        prev = self.last.get(beat.gateway)
        if prev is not None and (beat.epoch, beat.seq) <= prev:
            raise BadHeartbeat(
                "replayed",
                f"gateway {beat.gateway!r}: beat {beat.epoch}/{beat.seq} is not newer than {prev[0]}/{prev[1]} (replayed or reordered)",
                beat.gateway,
            )
        self.last[beat.gateway] = (beat.epoch, beat.seq)
