"""What the benchmark reads beside the agents' own counters: CPU time of a process tree from the
scheduler, UDP receive drops of a gateway, the TCP bytes of an agent's replication connection,
and the SAs a charon holds (to check that a backup's copy is the primary's)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from supergw_gateway.executor import Executor, LocalExecutor
from supergw_gateway.ra.gateway import CONN
from supergw_gateway.runtime import Gateway


# ------------------------------------------------------------------------------------ CPU
def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def tree_seconds(pid: int | None) -> float:
    """Run time (scheduler nanoseconds) of every thread of `pid` and of its descendants: for a
    namespace gateway charon's threads, for a UML gateway the guest's host processes (its
    kernel with XFRM, charon and the rest of the guest). 0 when gone."""
    if pid is None:
        return 0.0
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        todo += _children(p)
    return total / 1e9


# ------------------------------------------------------------------------------------ UDP drops
def udp_in_errors(snmp: str) -> int:
    """InErrors of the `Udp:` lines of /proc/net/snmp (datagrams dropped at reception: a full
    socket buffer among them)."""
    rows = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        raise ValueError("no Udp: header and values in /proc/net/snmp")
    return int(dict(zip(rows[0], rows[1]))["InErrors"])


def udp_drops(gw: Gateway) -> int:
    """UDP datagrams dropped at reception where gateway `gw`'s sync socket ends are (its
    namespace; for UML also the guest): charon's sync socket, its agent's, IKE."""
    places: list[Executor] = [LocalExecutor(gw.cfg.netns)]
    if gw.cfg.backend.value == "uml":
        places.append(gw.executor())
    return sum(udp_in_errors(ex.run(["cat", "/proc/net/snmp"]).stdout) for ex in places)


# ------------------------------------------------------------------------------------ TCP bytes
@dataclass(frozen=True)
class Wire:
    """One TCP connection's payload bytes (TLS records: frames, TLS overhead and handshake)."""

    sent: int
    received: int
    segments: int


_SOCK = re.compile(r"(\S+):(\d+)\s+(\S+):(\d+)\s+users:\(\(\"[^\"]*\",pid=(\d+)")
_FIELD = re.compile(r"\b(bytes_sent|bytes_received|segs_out):(\d+)")


def parse_ss(text: str) -> dict[tuple[int, int, int], Wire]:
    """`ss -tinHp state established` -> (pid, peer port, local port) -> Wire."""
    out: dict[tuple[int, int, int], Wire] = {}
    key: tuple[int, int, int] | None = None
    for line in text.splitlines():
        if not line.startswith(("\t", " ")):
            m = _SOCK.search(line)
            key = (int(m.group(5)), int(m.group(4)), int(m.group(2))) if m else None
            continue
        if key is not None:
            f = {k: int(v) for k, v in _FIELD.findall(line)}
            out[key] = Wire(f.get("bytes_sent", 0), f.get("bytes_received", 0), f.get("segs_out", 0))
            key = None
    return out


def tcp_connections() -> dict[tuple[int, int, int], Wire]:
    """Established TCP connections of this namespace, by owning process and ports."""
    text = subprocess.run(["ss", "-tinHp", "state", "established"], capture_output=True, text=True, check=True,
                          timeout=30).stdout
    return parse_ss(text)


def wire_between(before: dict[tuple[int, int, int], Wire], after: dict[tuple[int, int, int], Wire], pid: int,
                 port: int) -> Wire:
    """What process `pid`'s connections to `port` carried between two readings (a connection
    that began meanwhile counts whole; one that ended meanwhile is not seen)."""
    sent = received = segs = 0
    for key, w in after.items():
        if key[0] == pid and key[1] == port:
            b = before.get(key, Wire(0, 0, 0))
            sent, received, segs = sent + w.sent - b.sent, received + w.received - b.received, segs + w.segments - b.segments
    return Wire(sent, received, segs)


# ------------------------------------------------------------------------------------ SAs
SaPrint = dict[tuple[str, str], frozenset[tuple[str, str]]]


def sa_print(gw: Gateway, state: str) -> SaPrint:
    """The remote-access IKE SAs in `state` (ESTABLISHED: a gateway's own, PASSIVE: held copies):
    (initiator SPI, responder SPI) -> its installed CHILD SAs' (inbound SPI, outbound SPI)."""
    out: SaPrint = {}
    with gw.vici() as v:
        entries = list(v.raw_sas(CONN))
    for entry in entries:
        for ike in entry.values():
            if ike.get("state") != state:
                continue
            children = frozenset((str(c.get("spi-in")), str(c.get("spi-out")))
                                 for c in ike.get("child-sas", {}).values() if c.get("state") == "INSTALLED")
            out[(str(ike.get("initiator-spi")), str(ike.get("responder-spi")))] = children
    return out


def print_difference(own: SaPrint, copy: SaPrint) -> str | None:
    """None when `copy` holds exactly `own`; else what differs, briefly."""
    missing = [k for k in own if k not in copy]
    extra = [k for k in copy if k not in own]
    children = [k for k in own if k in copy and own[k] != copy[k]]
    if not (missing or extra or children):
        return None
    return (f"{len(own)} own IKE SAs, {len(copy)} copies: {len(missing)} missing, {len(extra)} not the primary's, "
            f"{len(children)} with other CHILD SAs")
