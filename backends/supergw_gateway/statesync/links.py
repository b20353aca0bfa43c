"""The relay's three links: to this gateway's charon (UDP, its `ha` sync socket), to the
backup's agent (mutual TLS, this gateway's state out) and from the protected gateway's agent
(mutual TLS, its state in).

Frames on the TLS links: `length(4) kind(1) payload`. HELLO carries the sender's name;
RESET asks the receiver to forget what it holds from the sender (a full replay follows);
SYNC carries `seq(8)` and one sync message; ACK carries the seq of a SYNC the receiver has
handed to its charon. Nothing else is accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import cast

from supergw_gateway.nssocket import udp_in_netns

log = logging.getLogger(__name__)

HA_PORT = 4510  # fixed in strongSwan's ha plugin (ha_socket.c)
MAX_FRAME = 64 * 1024
# Charon reads its sync socket in one thread: a replay of thousands of messages at once would
# overflow the socket's buffer (a dropped sync message is a broken copy), so injections are
# paced. 20,000 a second replays 1,000 SAs (about 6 messages each) in 0.3 s.
INJECT_RATE = 20_000.0
INJECT_BURST = 256
# The most recent per-message lags a link keeps (`LinkStats.lags_ms`), for whoever reads
# their distribution (bench/replication drains them); older ones fall out.
LAG_SAMPLES = 16_384
CONNECT_RETRY_S = (0.1, 2.0)  # first and longest wait between connection attempts
STABLE_LINK_S = 5.0


class Kind(IntEnum):
    HELLO = 1
    RESET = 2
    SYNC = 3
    ACK = 4


class FrameError(ValueError):
    """A peer sent something that is not a frame of this protocol."""


def frame(kind: Kind, payload: bytes = b"") -> bytes:
    return struct.pack("!IB", len(payload), kind) + payload


async def read_frame(reader: asyncio.StreamReader) -> tuple[Kind, bytes]:
    head = await reader.readexactly(5)
    n, raw_kind = struct.unpack("!IB", head)
    if n > MAX_FRAME:
        raise FrameError(f"frame of {n} bytes (at most {MAX_FRAME})")
    try:
        kind = Kind(raw_kind)
    except ValueError:
        raise FrameError(f"unknown frame kind {raw_kind}") from None
    return kind, await reader.readexactly(n)


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    ca: Path

    def server(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.ca))
        ctx.load_cert_chain(str(self.cert), str(self.key))
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return ctx

    def client(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca))
        ctx.load_cert_chain(str(self.cert), str(self.key))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return ctx


def peer_name(writer: asyncio.StreamWriter) -> str | None:
    """The CN of the certificate the other end presented (verified against our CA)."""
    cert = writer.get_extra_info("peercert")
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class TokenBucket:
    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self._tokens, self._last = float(burst), time.monotonic()

    async def take(self) -> None:
        while True:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            await asyncio.sleep((1 - self._tokens) / self.rate)


class CharonLink(asyncio.DatagramProtocol):
    """The agent's end of charon's sync socket. Charon's socket is bound to `charon:4510`
    and connected to `agent:4510`, so this one is bound to `agent:4510` and connected back:
    each side hears only the other."""

    def __init__(self, on_message: Callable[[bytes], None]) -> None:
        self._on_message = on_message
        self._transport: asyncio.DatagramTransport | None = None
        self._bucket = TokenBucket(INJECT_RATE, INJECT_BURST)
        self.errors = 0
        self.last_error: str | None = None

    @classmethod
    async def open(cls, netns: str, agent: str, charon: str, on_message: Callable[[bytes], None]) -> CharonLink:
        """The socket lives in the gateway's namespace `netns` (where charon's sync socket,
        or the guest's management link, is), wherever this agent runs."""
        sock = udp_in_netns(netns, (agent, HA_PORT), (charon, HA_PORT))
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_datagram_endpoint(lambda: cls(on_message), sock=sock)
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self._on_message(data)

    def error_received(self, exc: Exception) -> None:
        # ECONNREFUSED: charon is not listening (restarting); its state comes back by replay.
        self.errors += 1
        self.last_error = f"charon sync socket: {exc}"

    async def inject(self, raw: bytes) -> None:
        await self._bucket.take()
        if self._transport is not None:
            self._transport.sendto(raw)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


@dataclass
class LinkStats:
    messages_out: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    bytes_in: int = 0
    lag_ms_last: float | None = None
    lag_ms_max: float | None = None
    lags_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LAG_SAMPLES))
    acked_seq: int = 0
    last_error: str | None = None


@dataclass
class _Outbox:
    queue: asyncio.Queue[tuple[bytes, float | None]] = field(default_factory=asyncio.Queue)


class BackupLink:
    """This gateway's state, out to its backup's agent. On every (re)connection: HELLO,
    RESET, the whole book (`replay()`), then every change as it comes. Acks measure the lag:
    a change's arrival from charon -> the backup's agent handed it to its charon."""

    def __init__(self, me: str, tls: ssl.SSLContext, replay: Callable[[], list[bytes]], stats: LinkStats) -> None:
        self._me, self._tls, self._replay, self.stats = me, tls, replay, stats
        self.peer: tuple[str, str] | None = None  # (name, endpoint)
        self.connected = False
        self._task: asyncio.Task[None] | None = None
        self._outbox: _Outbox | None = None
        self._sent_at: dict[int, float] = {}
        self._seq = 0

    def retarget(self, peer: tuple[str, str] | None) -> None:
        """Send to this peer from now on (None: nobody); a change reconnects and replays."""
        if peer == self.peer:
            return
        self.peer = peer
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.connected, self._outbox = False, None
        if peer is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(*peer), name=f"backup-{peer[0]}")

    def send(self, raw: bytes, arrived: float | None) -> None:
        """A change to send now (while connected; the replay of a new connection has it)."""
        if self._outbox is not None:
            self._outbox.queue.put_nowait((raw, arrived))

    async def close(self) -> None:
        self.retarget(None)

    async def _run(self, name: str, endpoint: str) -> None:
        wait = CONNECT_RETRY_S[0]
        host, _, port = endpoint.rpartition(":")
        while True:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host.strip("[]"), int(port), ssl=self._tls, server_hostname=name), 5)
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
                self.stats.last_error = f"backup {name} at {endpoint}: {type(exc).__name__}: {exc}"
                await asyncio.sleep(wait)
                wait = min(wait * 2, CONNECT_RETRY_S[1])
                continue
            began = time.monotonic()
            try:
                await self._session(name, reader, writer)
            except (OSError, asyncio.IncompleteReadError, FrameError, ssl.SSLError) as exc:
                self.stats.last_error = f"backup {name}: link lost: {type(exc).__name__}: {exc}"
            finally:
                self.connected, self._outbox = False, None
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            # A link that worked for a while is retried at once; one the peer ends at once (it
            # does not protect us: stale orders on one side) backs off.
            wait = CONNECT_RETRY_S[0] if time.monotonic() - began > STABLE_LINK_S else min(wait * 2, CONNECT_RETRY_S[1])
            await asyncio.sleep(wait)

    async def _session(self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        outbox = _Outbox()
        self._outbox = outbox  # from here every change is queued after the replay below
        self._sent_at.clear()
        writer.write(frame(Kind.HELLO, json.dumps({"from": self._me}).encode()))
        writer.write(frame(Kind.RESET))
        for raw in self._replay():
            writer.write(self._sync(raw, None))
        await writer.drain()
        self.connected = True
        self.stats.last_error = None
        log.info("replicating to %s: connected, full copy sent", name)
        acks = asyncio.get_running_loop().create_task(self._read_acks(reader))
        try:
            while True:
                get = asyncio.ensure_future(outbox.queue.get())
                done, _ = await asyncio.wait({get, acks}, return_when=asyncio.FIRST_COMPLETED)
                if acks in done:
                    get.cancel()
                    acks.result()  # raises what ended the link
                    raise asyncio.IncompleteReadError(b"", None)
                raw, arrived = get.result()
                writer.write(self._sync(raw, arrived))
                await writer.drain()
        finally:
            acks.cancel()

    def _sync(self, raw: bytes, arrived: float | None) -> bytes:
        self._seq += 1
        if arrived is not None:
            self._sent_at[self._seq] = arrived
        self.stats.messages_out += 1
        self.stats.bytes_out += len(raw)
        return frame(Kind.SYNC, struct.pack("!Q", self._seq) + raw)

    async def _read_acks(self, reader: asyncio.StreamReader) -> None:
        while True:
            kind, payload = await read_frame(reader)
            if kind is not Kind.ACK or len(payload) != 8:
                raise FrameError(f"backup sent {kind.name}, only ACK is expected")
            seq = struct.unpack("!Q", payload)[0]
            self.stats.acked_seq = max(self.stats.acked_seq, seq)
            arrived = self._sent_at.pop(seq, None)
            for old in [s for s in self._sent_at if s < seq]:
                self._sent_at.pop(old, None)
            if arrived is not None:
                lag = (time.monotonic() - arrived) * 1000
                self.stats.lag_ms_last = lag
                self.stats.lags_ms.append(lag)
                self.stats.lag_ms_max = lag if self.stats.lag_ms_max is None else max(self.stats.lag_ms_max, lag)

    @property
    def outstanding(self) -> int:
        """Messages sent and not acknowledged yet."""
        return max(0, self._seq - self.stats.acked_seq)


class HolderServer:
    """The protected gateway's state, in: mutual TLS, its certificate's CN must be the
    gateway this one protects now (`protects`). Each SYNC goes to `on_sync` (book it, hand
    it to charon), then is acknowledged; a RESET goes to `on_reset` (forget what it held)."""

    def __init__(self, tls: ssl.SSLContext, on_sync: Callable[[str, bytes], Awaitable[None]],
                 on_reset: Callable[[str], Awaitable[None]], stats: LinkStats) -> None:
        self._tls, self._on_sync, self._on_reset, self.stats = tls, on_sync, on_reset, stats
        self.protects: str | None = None
        self._server: asyncio.Server | None = None
        self._conns: dict[str, asyncio.StreamWriter] = {}
        self._refused_names: set[str | None] = set()
        self.refused = 0

    async def start(self, listen: str) -> str:
        host, _, port = listen.rpartition(":")
        self._server = await asyncio.start_server(self._serve, host.strip("[]"), int(port), ssl=self._tls)
        addr = self._server.sockets[0].getsockname()
        return f"{addr[0]}:{addr[1]}"

    def set_protects(self, name: str | None) -> None:
        """Accept state from `name` only; a connection from anyone else ends now."""
        self.protects = name
        for other in [n for n in self._conns if n != name]:
            self.drop(other)

    def drop(self, name: str) -> None:
        w = self._conns.pop(name, None)
        if w is not None:
            w.close()

    async def close(self) -> None:
        for name in list(self._conns):
            self.drop(name)
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        name = peer_name(writer)
        if name is None or name != self.protects:
            self.refused += 1
            if name not in self._refused_names:  # said once per peer, not at every retry
                self._refused_names.add(name)
                log.warning("replication: refused connections from %s (certificate CN %r): this gateway protects %s now",
                            writer.get_extra_info("peername")[0], name, self.protects or "nobody")
            writer.close()
            return
        self._refused_names.discard(name)
        self.drop(name)
        self._conns[name] = writer
        try:
            while self._conns.get(name) is writer:
                kind, payload = await read_frame(reader)
                if kind is Kind.HELLO:
                    continue
                if kind is Kind.RESET:
                    await self._on_reset(name)
                elif kind is Kind.SYNC and len(payload) > 8:
                    seq = struct.unpack("!Q", payload[:8])[0]
                    raw = payload[8:]
                    self.stats.messages_in += 1
                    self.stats.bytes_in += len(raw)
                    await self._on_sync(name, raw)
                    writer.write(frame(Kind.ACK, struct.pack("!Q", seq)))
                    await writer.drain()
                else:
                    raise FrameError(f"{name} sent {kind.name} ({len(payload)} bytes)")
        except (OSError, asyncio.IncompleteReadError, FrameError, ssl.SSLError) as exc:
            if self._conns.get(name) is writer:
                self.stats.last_error = f"from {name}: {type(exc).__name__}: {exc}"
        finally:
            if self._conns.get(name) is writer:
                del self._conns[name]
            writer.close()
