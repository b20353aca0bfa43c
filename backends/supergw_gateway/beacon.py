"""The agent's UDP heartbeat: a thread of its own that sends one datagram per interval.

A thread (not an asyncio task) so that VICI queries, HTTP reports and CPU sampling on the
agent's event loop never delay a beat; it stops with the process, so a frozen or killed
agent goes silent as it should. Each beat says whether charon is running: a gateway whose
charon is stopped or gone carries no traffic even though its agent still talks, and the
controller fails it over on that beat instead of waiting for silence. Likewise a beat says
whether the gateway's partner at the partner site is down (`partner.py`); a change of
either is sent at once (`poke`), not at the next beat. The interval is the controller's
(`set_interval`, from the answer to the agent's reports) and every beat declares it, so a
controller judges a sender that has not adopted its timing yet by the sender's own cadence.
A key may be a `RotatingSecret`: its file is followed, and during a rotation's overlap each
beat goes out keyed by both the new and the previous secret (`agent_secret.py`).

The wire format and its HMAC are `supergw_proto.beats`, imported, never copied.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from supergw_proto.beats import FLAG_CHARON_DOWN, FLAG_PARTNER_DOWN, encode

from supergw_gateway.agent_secret import RotatingSecret

log = logging.getLogger(__name__)

_STOPPED_STATES = frozenset({"T", "t", "Z", "X", "x"})


def udp_target(url: str) -> tuple[str, int]:
    """The controller's heartbeat address: its API host and port number, over UDP."""
    parts = urlsplit(url)
    if parts.hostname is None:
        raise ValueError(f"controller URL {url!r} has no host")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def process_running(pid: int | None, proc: Path = Path("/proc")) -> bool:
    """False when `pid` is None, gone, stopped (SIGSTOP), or a zombie."""
    if pid is None:
        return False
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return bool(fields) and fields[0] not in _STOPPED_STATES


@dataclass
class SenderStats:
    sent: int = 0
    failed: int = 0
    charon_down_beats: int = 0
    partner_down_beats: int = 0
    last_error: str | None = None
    unresolved: list[str] = field(default_factory=list)


Key = bytes | RotatingSecret


def _keys(key: Key) -> list[bytes]:
    return [key] if isinstance(key, bytes) else key.keys()


class HeartbeatSender:
    """Sends `gateway`'s beats every `interval_s` to each controller of `keyed` ((URL, key)
    pairs: the key is this gateway's agent secret at that controller)."""

    def __init__(
        self,
        gateway: str,
        keyed: Sequence[tuple[str, Key]],
        interval_s: float,
        charon_running: Callable[[], bool | None],
        partner_down: Callable[[], bool] | None = None,
    ) -> None:
        self.gateway, self.interval_s = gateway, interval_s
        self.targets = [(*udp_target(u), key) for u, key in keyed]
        self.charon_running = charon_running
        self.partner_down = partner_down
        self.stats = SenderStats()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{gateway}", daemon=True)
        self._epoch = time.time_ns()
        self._seq = 0

    def start(self) -> None:
        self._thread.start()

    def set_interval(self, interval_s: float) -> None:
        """Beat every `interval_s` from now on (the next beat goes at once)."""
        if interval_s != self.interval_s:
            self.interval_s = interval_s
            self._wake.set()

    def poke(self) -> None:
        """Send the next beat now (a flag changed), then keep the cadence from there."""
        self._wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def beat(self, keys: Sequence[bytes]) -> list[bytes]:
        """The next datagram for each key (one sequence number for all of them)."""
        self._seq += 1
        flags = 0
        if self.charon_running() is False:
            flags |= FLAG_CHARON_DOWN
            self.stats.charon_down_beats += 1
        if self.partner_down is not None and self.partner_down():
            flags |= FLAG_PARTNER_DOWN
            self.stats.partner_down_beats += 1
        sent_ns = time.time_ns()
        interval_ms = max(1, round(self.interval_s * 1000))
        return [encode(self.gateway, key, self._epoch, self._seq, sent_ns, flags, interval_ms=interval_ms) for key in keys]

    def _resolve(self) -> list[tuple[int, tuple[str, int], Key]]:
        out: list[tuple[int, tuple[str, int], Key]] = []
        unresolved: list[str] = []
        for host, port, key in self.targets:
            try:
                info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
            except OSError as exc:
                unresolved.append(f"{host}:{port} ({exc})")
                continue
            out.append((info[0], (str(info[4][0]), int(info[4][1])), key))
        if unresolved != self.stats.unresolved and unresolved:
            log.warning("heartbeat: cannot resolve %s; retrying every second", ", ".join(unresolved))
        self.stats.unresolved = unresolved
        return out

    def _run(self) -> None:
        socks: dict[int, socket.socket] = {}
        try:
            addrs = self._resolve()
            resolved_at = time.monotonic()
            planned = time.monotonic()
            while not self._stop.is_set():
                if self.stats.unresolved and time.monotonic() - resolved_at >= 1.0:
                    addrs, resolved_at = self._resolve(), time.monotonic()
                sends = [(fam, addr, k) for fam, addr, key in addrs for k in _keys(key)]
                datagrams = self.beat([k for _, _, k in sends])
                for (fam, addr, _), data in zip(sends, datagrams):
                    try:
                        if fam not in socks:
                            socks[fam] = socket.socket(fam, socket.SOCK_DGRAM)
                        socks[fam].sendto(data, addr)
                        self.stats.sent += 1
                    except OSError as exc:
                        self.stats.failed += 1
                        msg = f"heartbeat to {addr[0]}:{addr[1]}: {exc}"
                        if msg != self.stats.last_error:
                            log.warning("%s (keeps trying every %.0f ms)", msg, self.interval_s * 1000)
                        self.stats.last_error = msg
                # A fixed cadence; after a long pause (a stopped process) start afresh
                # rather than fire the missed beats in a burst.
                planned += self.interval_s
                now = time.monotonic()
                if planned < now:
                    planned = now
                if self._wake.wait(planned - now):
                    self._wake.clear()
                    planned = time.monotonic()  # poked: beat now
        finally:
            for s in socks.values():
                s.close()
