"""The pure parts of bench/ha: reading the controllers' log times, choosing the probe and the
gateway to freeze, counting the buckets a takeover rewrote, reading ping's summary."""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import Counter
from dataclasses import dataclass

from topologies.model import Topology

_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")


def log_time(text: str, needle: str, after: float = 0.0) -> float | None:
    """UNIX time of the first controller log line (`ts=...Z ...`, logsetup.py) containing
    `needle` logged at or after `after`."""
    for line in text.splitlines():
        if needle in line and line.startswith("ts="):
            stamp = line[3 : line.index(" ")] if " " in line else line[3:]
            try:
                t = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()
            except ValueError:
                continue
            if t >= after:
                return t
    return None


@dataclass(frozen=True)
class ProbePlan:
    host: str  # the LAN host that pings
    serving: str  # the gateway its bucket points at (left alone)
    frozen: str  # the gateway frozen at the kill: the new leader must fail it over
    remote: str
    remote_ip: str


def plan_probe(topo: Topology, served: dict[str, str], buckets: dict[int, str | None], trial: int) -> ProbePlan | None:
    """A host the controller has learned, a gateway holding buckets that does not serve it
    (the most loaded), and a remote host whose return path avoids that gateway's peer; the
    hosts take turns. None when no combination exists."""
    held = Counter(g for g in buckets.values() if g)
    hosts = [h for h in topo.hosts if str(h.ip) in served]
    for k in range(len(hosts)):
        host = hosts[(trial + k) % len(hosts)]
        serving = served[str(host.ip)]
        for gw in sorted((g for g in topo.gateways if g.name != serving and held[g.name]), key=lambda g: -held[g.name]):
            remote = next((r for r in topo.remote.hosts if r.via != gw.peer.name), None)
            if remote is not None:
                return ProbePlan(host.name, serving, gw.name, remote.name, str(remote.ip))
    return None


def rewritten(before: dict[int, str | None], after: dict[int, str | None], frozen: str) -> int:
    """Buckets whose gateway changed although they did not have to (they were not the frozen gateway's)."""
    return sum(1 for b, g in before.items() if g != frozen and after.get(b) != g)


def ping_summary(out: str) -> tuple[int, int]:
    """(transmitted, received) from ping's summary line."""
    m = _SUMMARY.search(out)
    if m is None:
        raise ValueError(f"ping output without a summary: {out[-300:]!r}")
    return int(m.group(1)), int(m.group(2))


def median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None
