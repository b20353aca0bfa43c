"""How many IKE exchanges credential caching would have needed: Shue et al. §IV-B, Fig. 6.

Input is a trace of connections: per client (its identity, or its outer address), when each
connection started and ended and how many bytes it carried, and whether it began with a full
IKE exchange. The supergw agents write such a trace (one JSON line per finished IKE SA,
`sessions.SessionRecord`); `read_charon_log` rebuilds one from a strongSwan charon log.

Definitions (what the numbers count):

- an **IKE exchange** is a full IKE_SA_INIT + IKE_AUTH: new Diffie-Hellman, new signatures,
  a new IKE SA. IKE and CHILD SA rekeys (CREATE_CHILD_SA) are not counted;
- **actual** = the connections of the trace that began with one (`full_exchange`): in a
  supergw session log, one per IKE SA established (a reauthentication is a new one);
- **needed(strategy, L)** replays each client's connections in order of their start. A
  full exchange creates a cache entry (its time t0, used time 0, used bytes 0); every
  connection adds its duration and bytes to the entry it used. Connection c resumes from the
  entry (no exchange) when

    clocked      c.start - t0 < L             (wall clock since the last exchange)
    established  used time  < L               (time connected since the last exchange)
    data         used bytes < L               (bytes carried since the last exchange)

  and otherwise needs an exchange, which starts a new entry. The first connection of a
  client always needs one. The check happens when a client connects; a connection that
  outlives its lifetime is not interrupted (the paper's reading).
- **clocked+reauth(L)** is what the gateway's clocked mapping (charon reauth_time = L)
  costs on the same trace: as clocked, plus one reauthentication for every L that a
  connection stays up past t0 (charon reauthenticates a connected client at t0 + L).

Established and data are enforced by the agent exactly as replayed here (an absent client's
SA is ended once its budget is spent, so its next connection authenticates again).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from supergw_gateway.errors import GatewayError
from supergw_gateway.ra.sessions import SessionRecord

Strategy = Literal["clocked", "established", "data"]
Key = Literal["identity", "address"]
TIME_LIFETIMES_S = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400)
DATA_LIFETIMES_B = (10**5, 10**6, 5 * 10**6, 10**7, 2 * 10**7, 5 * 10**7, 10**8, 10**9)


class TraceError(GatewayError):
    """A trace file that cannot be read as connections; the message names file and line."""


@dataclass(frozen=True)
class Connection:
    client: str
    start: float
    end: float
    bytes: int
    full_exchange: bool = True

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


def by_client(conns: Iterable[Connection]) -> dict[str, list[Connection]]:
    out: dict[str, list[Connection]] = defaultdict(list)
    for c in conns:
        out[c.client].append(c)
    for lst in out.values():
        lst.sort(key=lambda c: (c.start, c.end))
    return dict(out)


def actual(conns: Iterable[Connection]) -> int:
    return sum(1 for c in conns if c.full_exchange)


def needed(conns: Iterable[Connection], strategy: Strategy, lifetime: float) -> int:
    """Full exchanges the trace needs with a cache of this strategy and lifetime (module doc)."""
    if lifetime <= 0:
        raise ValueError(f"lifetime must be positive, got {lifetime}")
    count = 0
    for lst in by_client(conns).values():
        t0: float | None = None
        used_t = used_b = 0.0
        for c in lst:
            if t0 is None:
                resume = False
            elif strategy == "clocked":
                resume = c.start - t0 < lifetime
            elif strategy == "established":
                resume = used_t < lifetime
            else:
                resume = used_b < lifetime
            if not resume:
                count += 1
                t0, used_t, used_b = c.start, 0.0, 0.0
            used_t += c.duration
            used_b += c.bytes
    return count


def needed_clocked_reauth(conns: Iterable[Connection], lifetime: float) -> int:
    """Clocked, plus charon's reauthentication of a client still connected at t0 + L."""
    if lifetime <= 0:
        raise ValueError(f"lifetime must be positive, got {lifetime}")
    count = 0
    for lst in by_client(conns).values():
        t0: float | None = None
        for c in lst:
            if t0 is None or c.start - t0 >= lifetime:
                count += 1
                t0 = c.start
            while t0 + lifetime < c.end:
                count += 1
                t0 += lifetime
    return count


@dataclass(frozen=True)
class Row:
    lifetime: float
    needed: dict[str, int]


@dataclass(frozen=True)
class Analysis:
    connections: int
    clients: int
    actual: int
    time_rows: list[Row]  # clocked, clocked+reauth, established per time lifetime (s)
    data_rows: list[Row]  # data per byte lifetime
    bytes_known: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "connections": self.connections, "clients": self.clients, "actual": self.actual,
            "bytes_known": self.bytes_known,
            "time": [{"lifetime_s": r.lifetime, **r.needed} for r in self.time_rows],
            "data": [{"lifetime_bytes": r.lifetime, **r.needed} for r in self.data_rows],
        }


def analyse(conns: list[Connection], time_lifetimes: Iterable[float] = TIME_LIFETIMES_S,
            data_lifetimes: Iterable[float] = DATA_LIFETIMES_B, bytes_known: bool = True) -> Analysis:
    time_rows = [Row(L, {"clocked": needed(conns, "clocked", L),
                         "clocked+reauth": needed_clocked_reauth(conns, L),
                         "established": needed(conns, "established", L)}) for L in time_lifetimes]
    data_rows = [Row(B, {"data": needed(conns, "data", B)}) for B in data_lifetimes] if bytes_known else []
    return Analysis(len(conns), len(by_client(conns)), actual(conns), time_rows, data_rows, bytes_known)


# -- readers -------------------------------------------------------------------------------

def read_session_log(path: Path, key: Key = "identity") -> list[Connection]:
    """Connections from a supergw session log (JSON lines of `SessionRecord`)."""
    out: list[Connection] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the session log: {exc.strerror or exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = SessionRecord.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}:{n}: not JSON ({exc.msg}); a session log holds one JSON object per line") \
                from None
        except ValidationError as exc:
            what = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
            raise TraceError(f"{path}:{n}: not a session record: {what}") from None
        if rec.ended_at < rec.established_at:
            raise TraceError(f"{path}:{n}: ended_at {rec.ended_at} is before established_at {rec.established_at}")
        client = rec.identity if key == "identity" else str(rec.addresses[0] if rec.addresses else rec.remote_host)
        out.append(Connection(client, rec.established_at, rec.ended_at, rec.bytes_in + rec.bytes_out,
                              rec.full_exchange))
    return out


_STAMP = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})\s")
_PREFIX = re.compile(r"<(?P<name>[^|>]+)\|(?P<uid>\d+)>")
_ESTABLISHED = re.compile(r"IKE_SA (?P<name>\S+)\[(?P<uid>\d+)\] established between "
                          r"(?P<local>\S+)\[(?P<lid>[^\]]*)\]\.\.\.(?P<remote>[^\s\[]+)\[(?P<rid>[^\]]*)\]")
_REKEYED = re.compile(r"IKE_SA (?P<name>\S+)\[(?P<uid>\d+)\] rekeyed between")
_CLOSING = re.compile(r"closing CHILD_SA \S+ with SPIs \S+ \((?P<bin>\d+) bytes\) \S+ \((?P<bout>\d+) bytes\)")


def _stamp(text: str, year: int) -> float:
    if text[:4].isdigit():
        fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
        return datetime.strptime(text, fmt).timestamp()
    return datetime.strptime(f"{year} {text}", "%Y %b %d %H:%M:%S").timestamp()


@dataclass
class _LogSa:
    client: str
    address: str
    start: float
    last: float
    bytes: int = 0


def read_charon_log(path: Path, conn: str | None = None, key: Key = "identity",
                    year: int | None = None) -> list[Connection]:
    """Connections from a charon log with IKE SA names (filelog `ike_name = yes`) and
    timestamps (supergw's `%F %T` with ms, or syslog's `Mon DD HH:MM:SS` and `year`).

    Start: "IKE_SA n[i] established between ..."; a rekey ("IKE_SA n[j] rekeyed", logged by
    SA i) carries the connection on to SA j. End: the last line of the SA (a live SA ends at
    its last line so far). Bytes: the sum of its "closing CHILD_SA ... (N bytes)" lines, so
    CHILD SAs still up when the log ends are missing; `conn` keeps SAs of that connection only.
    """
    year = year if year is not None else datetime.now().year
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the charon log: {exc.strerror or exc}") from None
    sas: dict[tuple[str, int], _LogSa] = {}
    done: list[_LogSa] = []
    stamped = 0
    for n, line in enumerate(lines, 1):
        m = _STAMP.match(line)
        if m is None:
            continue
        stamped += 1
        try:
            t = _stamp(m.group("ts"), year)
        except ValueError:
            raise TraceError(f"{path}:{n}: unreadable timestamp {m.group('ts')!r}") from None
        p = _PREFIX.search(line)
        if p is None:
            continue
        sa_key = (p.group("name"), int(p.group("uid")))
        if (e := _ESTABLISHED.search(line)) is not None:
            if conn is None or e.group("name") == conn:
                new_key = (e.group("name"), int(e.group("uid")))
                if (old := sas.pop(new_key, None)) is not None:  # charon restarted: ids begin anew
                    done.append(old)
                sas[new_key] = _LogSa(e.group("rid"), e.group("remote"), t, t)
            continue
        sa = sas.get(sa_key)
        if sa is None:
            continue
        sa.last = t
        if (r := _REKEYED.search(line)) is not None:
            sas[(r.group("name"), int(r.group("uid")))] = sas.pop(sa_key)
        elif (c := _CLOSING.search(line)) is not None:
            sa.bytes += int(c.group("bin")) + int(c.group("bout"))
    if lines and not stamped:
        raise TraceError(f"{path}: no line starts with a timestamp: enable them in the filelog "
                         "(time_format = %F %T) or give a syslog file")
    done.extend(sas.values())
    return [Connection(s.client if key == "identity" else s.address, s.start, s.last, s.bytes) for s in done]
