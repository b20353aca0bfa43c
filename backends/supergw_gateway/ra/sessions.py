"""Remote-access client sessions at one gateway: recorded from VICI, reported, logged, cached.

A session is one IKE SA of the remote-access connection, from the IKE_AUTH that made it to
its deletion; IKE rekeys (new SPIs, no authentication) continue it, a reauthentication is a
new session. Two sources feed `SessionTracker`:

- events, on a VICI session of their own (`EventListener`, a thread): `ike-updown`,
  `ike-rekey`, `ike-update` (MOBIKE), `child-updown`, `child-rekey`. They give exact
  up/down times and the final byte counters of CHILD SAs as they go, and they wake the agent
  so that the controller learns of a new client (and pins it) without waiting for a report
  period;
- a poll (`list-sas` of the connection, every report period): the live byte counters, the
  time since the last inbound ESP (presence), and a resynchronisation when events were lost
  (listener reconnecting, agent restarted): unknown SAs are adopted, SAs that vanished
  unseen are closed with end_reason "vanished".

Finished sessions are appended to a JSON-lines log (`SessionRecord`, one per line), which
`supergw-ike-cache` reads. `CacheEnforcer` ends the SAs of absent clients whose budget
(established time, bytes) is spent: the part of the credential cache strongSwan has no
setting for (ra/gateway.py).

Byte counts come from CHILD SA counters: ESP payload in and out. A rekeyed CHILD SA's bytes
after its `child-rekey` event (until it is deleted, usually milliseconds) are not counted.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import vici

from supergw_gateway.config import GatewayConfig
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.ra.config import CachePolicy
from supergw_gateway.statesync.ownership import SpiOwnership
from supergw_gateway.vici_client import ViciClient, decode
from supergw_proto.reports import ClientSession

log = logging.getLogger(__name__)

# A redirected client has built its new SA elsewhere and deleted this one well within this
# (charon itself deletes a redirected SA after its half_open_timeout, 30 s by default).
REDIRECT_GRACE_S = 35.0
EVENTS = ("ike-updown", "ike-rekey", "ike-update", "child-updown", "child-rekey")


class SessionRecord(ClientSession):
    """A finished session, one line of the session log."""

    v: Literal[1] = 1
    gateway: str
    ended_at: float
    end_reason: str
    addresses: list[str] = []
    full_exchange: bool = True  # it began with IKE_SA_INIT + IKE_AUTH (every session here does)


def _ike_of(msg: dict[str, Any], conn: str) -> dict[str, Any] | None:
    ike = msg.get(conn)
    return ike if isinstance(ike, dict) else None


def _int(d: dict[str, Any], k: str, default: int = 0) -> int:
    try:
        return int(d.get(k, default))
    except (TypeError, ValueError):
        return default


@dataclass
class _Live:
    ike_id: int
    identity: str
    remote_host: str
    remote_port: int
    initiator_spi: str
    responder_spi: str
    vips: list[str]
    established_at: float
    created: float  # agent time (wall) when the tracker first knew it
    addresses: list[str] = field(default_factory=list)
    child_bytes: dict[int, tuple[int, int]] = field(default_factory=dict)  # child uniqueid -> (in, out)
    present: bool = True
    present_s: float = 0.0
    last_poll: float | None = None
    ike_rekeys: int = 0
    esp_renewed: bool | None = None  # as the last poll saw its CHILD SAs (None: not polled yet)
    evicted: str | None = None
    # When charon began to delete it: a delete toward an absent client waits out the whole
    # retransmission budget before the SA (and its down event) goes, but it ended here.
    ending_at: float | None = None

    def bytes(self) -> tuple[int, int]:
        return sum(b[0] for b in self.child_bytes.values()), sum(b[1] for b in self.child_bytes.values())

    def update_from(self, ike: dict[str, Any]) -> None:
        host = ike.get("remote-host")
        if host:
            if host != self.remote_host or not self.addresses:
                self.addresses.append(host)
            self.remote_host = host
            self.remote_port = _int(ike, "remote-port", self.remote_port)
        self.initiator_spi = ike.get("initiator-spi", self.initiator_spi)
        self.responder_spi = ike.get("responder-spi", self.responder_spi)
        self.vips = list(ike.get("remote-vips", self.vips))

    def child(self, c: dict[str, Any]) -> None:
        uid = _int(c, "uniqueid", -1)
        if uid < 0:
            return
        old = self.child_bytes.get(uid, (0, 0))
        # Counters only grow; a stale report (event after poll) must not lower them.
        self.child_bytes[uid] = (max(old[0], _int(c, "bytes-in")), max(old[1], _int(c, "bytes-out")))

    def session(self) -> ClientSession:
        b_in, b_out = self.bytes()
        return ClientSession(
            ike_id=self.ike_id, identity=self.identity, remote_host=ipaddress.IPv4Address(self.remote_host),
            remote_port=self.remote_port, initiator_spi=self.initiator_spi, responder_spi=self.responder_spi,
            vips=[ipaddress.IPv4Address(v) for v in self.vips],
            established_at=self.established_at, bytes_in=b_in, bytes_out=b_out, present=self.present,
            present_s=round(self.present_s, 3), ike_rekeys=self.ike_rekeys, esp_renewed=self.esp_renewed,
        )

    def record(self, gateway: str, ended_at: float, reason: str) -> SessionRecord:
        return SessionRecord(**self.session().model_dump(), gateway=gateway, ended_at=ended_at,
                             end_reason=reason, addresses=self.addresses)


def _new_live(ike: dict[str, Any], now: float) -> _Live:
    live = _Live(
        ike_id=_int(ike, "uniqueid"), identity=ike.get("remote-id", ""), remote_host=ike.get("remote-host", "0.0.0.0"),
        remote_port=_int(ike, "remote-port"), initiator_spi=ike.get("initiator-spi", "0" * 16),
        responder_spi=ike.get("responder-spi", "0" * 16), vips=list(ike.get("remote-vips", [])),
        established_at=now - _int(ike, "established"), created=now,
    )
    live.update_from(ike)
    for c in ike.get("child-sas", {}).values():
        if isinstance(c, dict):
            live.child(c)
    return live


class SessionTracker:
    """Live sessions of connection `conn` and the finished ones not yet taken. Thread-safe."""

    def __init__(self, gateway: str, conn: str, idle_s: float, clock: Callable[[], float] = time.time,
                 ours: SpiOwnership | None = None) -> None:
        self.gateway, self.conn, self.idle_s, self.clock = gateway, conn, idle_s, clock
        self.ours = ours  # None: `esp_renewed` is not said
        self._live: dict[int, _Live] = {}
        self._finished: list[SessionRecord] = []
        self._lock = threading.Lock()

    def event(self, kind: str, msg: dict[str, Any]) -> bool:
        """Apply one decoded VICI event; True when the set of live sessions or an address changed."""
        ike = _ike_of(msg, self.conn)
        if ike is None:
            return False
        now = self.clock()
        with self._lock:
            if kind == "ike-updown":
                uid = _int(ike, "uniqueid")
                if msg.get("up") == "yes":
                    if uid not in self._live:
                        self._live[uid] = _new_live(ike, now)
                    return True
                return self._finish(uid, now, "deleted")
            if kind == "ike-rekey":
                old, new = ike.get("old", {}), ike.get("new", {})
                live = self._live.pop(_int(old, "uniqueid"), None)
                if live is None:
                    return False
                live.ike_id = _int(new, "uniqueid")
                live.ike_rekeys += 1
                live.update_from(new)
                self._live[live.ike_id] = live
                return True
            live = self._live.get(_int(ike, "uniqueid"))
            if live is None:
                return False
            if kind == "ike-update":
                before = live.remote_host
                live.update_from(ike)
                return live.remote_host != before
            for c in ike.get("child-sas", {}).values():
                if not isinstance(c, dict):
                    continue
                if kind == "child-rekey":
                    for part in ("old", "new"):
                        if isinstance(c.get(part), dict):
                            live.child(c[part])
                else:
                    live.child(c)
            return False

    def poll(self, listed: list[dict[str, Any]], listed_at: float) -> None:
        """Apply a list-sas reply (decoded entries) taken at `listed_at` (this tracker's clock)."""
        now = self.clock()
        seen: set[int] = set()
        with self._lock:
            for entry in listed:
                ike = _ike_of(entry, self.conn)
                if ike is None:
                    continue
                uid = _int(ike, "uniqueid")
                seen.add(uid)
                if ike.get("state") == "DELETING" and (leaving := self._live.get(uid)) is not None:
                    leaving.ending_at = leaving.ending_at or now
                if ike.get("state") not in ("ESTABLISHED", "REKEYING"):
                    continue  # being made, or leaving (its down/rekey event says so)
                live = self._live.get(uid)
                if live is None:
                    live = self._live[uid] = _new_live(ike, now)
                live.update_from(ike)
                uses = []
                children = [c for c in ike.get("child-sas", {}).values() if isinstance(c, dict)]
                for c in children:
                    live.child(c)
                    if "use-in" in c:
                        uses.append(_int(c, "use-in"))
                if self.ours is not None:
                    live.esp_renewed = not self.ours.foreign_children(children)
                # No inbound ESP yet: present while the SA is young (it has just been made).
                idle = min(uses) if uses else _int(ike, "established")
                present = idle < self.idle_s
                if live.last_poll is not None and present:
                    live.present_s += max(0.0, now - live.last_poll)
                live.present, live.last_poll = present, now
            for uid in [u for u, l in self._live.items() if u not in seen and l.created < listed_at]:
                self._finish(uid, now, "vanished (no down event seen)")

    def _finish(self, uid: int, now: float, reason: str) -> bool:
        live = self._live.pop(uid, None)
        if live is None:
            return False
        self._finished.append(live.record(self.gateway, live.ending_at or now, live.evicted or reason))
        return True

    def mark_evicted(self, uid: int, why: str) -> None:
        with self._lock:
            if (live := self._live.get(uid)) is not None:
                live.evicted = why

    def live(self) -> list[ClientSession]:
        with self._lock:
            return [l.session() for l in self._live.values()]

    def take_finished(self) -> list[SessionRecord]:
        with self._lock:
            out, self._finished = self._finished, []
            return out

    def put_back(self, records: list[SessionRecord]) -> None:
        """Records that could not be written: kept, first in line for the next try."""
        with self._lock:
            self._finished[:0] = records


def evictions(policy: CachePolicy, sessions: list[ClientSession]) -> list[tuple[int, str]]:
    """(ike_id, why) of the cached sessions the agent must end now: absent clients whose
    budget since their IKE_AUTH is spent. Present clients keep their SA (the paper checks the
    budget when a client comes back, not while it is connected)."""
    out: list[tuple[int, str]] = []
    for s in sessions:
        if s.present:
            continue
        if policy.strategy == "established" and policy.lifetime_s is not None and s.present_s >= policy.lifetime_s:
            out.append((s.ike_id, f"evicted: present {s.present_s:.0f}s >= established lifetime {policy.lifetime_s}s"))
        elif (policy.strategy == "data" and policy.lifetime_bytes is not None
              and s.bytes_in + s.bytes_out >= policy.lifetime_bytes):
            out.append((s.ike_id, f"evicted: {s.bytes_in + s.bytes_out} bytes >= data lifetime "
                                  f"{policy.lifetime_bytes} bytes"))
    return out


class SessionLog:
    """Finished sessions appended as JSON lines (one object per line, flushed each time).
    `esp_renewed` is a moment's routing fact, not the session's: the log leaves it out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, records: list[SessionRecord]) -> None:
        if not records:
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                for r in records:
                    f.write(r.model_dump_json(exclude={"esp_renewed"}) + "\n")


class EventListener:
    """A thread listening for VICI events on its own session; reconnects until stopped."""

    def __init__(self, connect: Callable[[], socket.socket], on_event: Callable[[str, dict[str, Any]], None],
                 name: str = "vici-events") -> None:
        self.connect, self.on_event = connect, on_event
        self.errors = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                sock = self.connect()
            except OSError as exc:
                self._failed(exc)
                self._stop.wait(backoff)
                backoff = min(5.0, backoff * 2)
                continue
            try:
                backoff = 0.2
                for kind, msg in vici.Session(sock).listen(list(EVENTS), timeout=0.5):
                    if self._stop.is_set():
                        break
                    if kind is None:
                        continue
                    name = kind.decode() if isinstance(kind, bytes) else str(kind)
                    self.on_event(name, decode(msg))
            except Exception as exc:  # charon restarted, socket closed: reconnect
                self._failed(exc)
                self._stop.wait(backoff)
            finally:
                sock.close()

    def _failed(self, exc: Exception) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.errors == 1 or self.errors % 50 == 0:
            log.warning("VICI event session: %s (reconnecting)", self.last_error)


class Redirects:
    """The clients this gateway has redirected (RFC 5685) while its controller asks it to:
    each IKE SA once; one still here `grace_s` after its redirect is named once (its client
    did not announce REDIRECT_SUPPORTED, or did not follow: it keeps its SA on this gateway
    until its own DPD or a reconnect)."""

    def __init__(self, grace_s: float = REDIRECT_GRACE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace_s, self.clock = grace_s, clock
        self.sent: dict[int, float] = {}  # IKE SA unique id -> when its redirect was sent
        self.sent_total = 0
        self.stayed: set[int] = set()

    def due(self, live: list[ClientSession]) -> list[ClientSession]:
        """Live sessions not yet redirected (and forget the ones that are gone)."""
        ids = {s.ike_id for s in live}
        self.sent = {u: t for u, t in self.sent.items() if u in ids}
        self.stayed &= ids
        return [s for s in live if s.ike_id not in self.sent]

    def done(self, ike_id: int) -> None:
        self.sent[ike_id] = self.clock()
        self.sent_total += 1

    def overdue(self, live: list[ClientSession]) -> list[ClientSession]:
        """Redirected sessions still here after the grace time, each returned once."""
        now = self.clock()
        out = [s for s in live if s.ike_id in self.sent and s.ike_id not in self.stayed
               and now - self.sent[s.ike_id] > self.grace_s]
        self.stayed.update(s.ike_id for s in out)
        return out

    def stop(self) -> None:
        """The controller no longer asks: a later order redirects everyone still here again."""
        self.sent.clear()
        self.stayed.clear()


class ClientMonitor:
    """What the agent runs for remote access: events + poll -> live clients, the session log,
    the cache's agent-enforced lifetimes, and redirects while the controller asks for them.
    `on_change` is called (from the event thread) when a client came, went or moved."""

    def __init__(self, gateway: str, conn: str, connect: Callable[[], socket.socket], policy: CachePolicy,
                 log_path: Path, on_change: Callable[[], None] = lambda: None, ours: SpiOwnership | None = None) -> None:
        self.policy, self.connect, self.on_change = policy, connect, on_change
        self.tracker = SessionTracker(gateway, conn, policy.idle_s, ours=ours)
        self.log = SessionLog(log_path)
        self.listener = EventListener(connect, self.handle_event, name=f"vici-events-{gateway}")
        self.evicted = 0
        self.log_error: str | None = None
        self.redirects = Redirects()
        self._vici: ViciClient | None = None

    def start(self) -> None:
        self.listener.start()

    def stop(self) -> None:
        self.listener.stop()
        if self._vici is not None:
            self._vici.close()
            self._vici = None

    def handle_event(self, kind: str, msg: dict[str, Any]) -> None:
        """One VICI event (the listener thread calls this)."""
        if self.tracker.event(kind, msg):
            self._write_finished()
            self.on_change()

    def _write_finished(self) -> None:
        """Append finished sessions to the log; on failure keep them for the next try."""
        records = self.tracker.take_finished()
        try:
            self.log.append(records)
        except OSError as exc:
            self.tracker.put_back(records)
            if self.log_error is None:
                log.warning("cannot write the session log %s (%d sessions kept, retrying): %s",
                            self.log.path, len(records), exc)
            self.log_error = f"{self.log.path}: {exc.strerror or exc}"
            return
        self.log_error = None

    def poll(self, redirect_to: ipaddress.IPv4Address | None = None) -> list[ClientSession]:
        """One poll: live clients after enforcing the cache, and with `redirect_to` every
        client not yet redirected is sent an RFC 5685 REDIRECT there (blocking; run it in a
        thread)."""
        try:
            if self._vici is None:
                self._vici = ViciClient(self.connect)
            listed_at = self.tracker.clock()
            listed = list(self._vici.raw_sas(self.tracker.conn))
            self.tracker.poll(listed, listed_at)
            for uid, why in evictions(self.policy, self.tracker.live()):
                log.warning("ending IKE SA %d of %s: %s", uid, self.tracker.conn, why)
                self.tracker.mark_evicted(uid, why)
                # timeout 0 with force: destroyed at once (a timeout would wait for the absent peer)
                self._vici.terminate(ike_id=uid, force=True, timeout_ms=0)
                self.evicted += 1
            if redirect_to is None:
                self.redirects.stop()
            else:
                self._redirect(self._vici, redirect_to)
        except Exception:
            if self._vici is not None:
                self._vici.close()
            self._vici = None
            raise
        finally:
            self._write_finished()
        return self.tracker.live()


    def _redirect(self, v: ViciClient, to: ipaddress.IPv4Address) -> None:
        live = self.tracker.live()
        due = self.redirects.due(live)
        for s in due:
            if v.redirect(s.ike_id, str(to)):
                self.redirects.done(s.ike_id)
        if due:
            log.warning("redirected %d remote-access clients to %s (the controller asks: this gateway is drained); "
                        "%d of %d redirected so far", len(due), to, len(self.redirects.sent), len(live))
        for s in self.redirects.overdue(live):
            log.warning("client %s (%s, IKE SA %d) is still here %.0fs after its redirect: it did not announce "
                        "REDIRECT_SUPPORTED or did not follow; it keeps its SA here", s.identity, s.remote_host,
                        s.ike_id, self.redirects.grace_s)


def monitor_for(cfg: GatewayConfig, connect: Callable[[], socket.socket],
                on_change: Callable[[], None] = lambda: None) -> ClientMonitor:
    ra = ra_gateway.require(cfg)
    path = ra.session_log or cfg.run_dir / "ra-sessions.jsonl"
    return ClientMonitor(cfg.name, ra_gateway.conn_name(cfg), connect, ra.caching, path, on_change,
                         ours=ra_gateway.spi_ownership(cfg))
