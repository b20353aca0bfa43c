"""The pure parts of bench/ha: reading the controllers' log times, choosing the probe and the
gateway to freeze, counting the buckets a takeover rewrote. (The probe itself is read by
bench/gaps.py, like every gap of the benchmarks.)"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from supergw_proto.api import HostView
from topologies.model import RemoteHostSpec, Topology


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
    serving: str  # the gateway its bucket points at: its probe must enter it
    frozen: str  # the gateway frozen at the kill: the new leader must fail it over
    remote: str
    remote_ip: str
    bucket: int | None = None  # the host's bucket, when the plan rests on it (it must stay on `frozen`)


def _remote(topo: Topology, avoid_peer_of: str, unrecoverable: bool) -> RemoteHostSpec | None:
    """A remote host whose return path avoids the gateway's peer; `unrecoverable`: one whose
    return path crosses it (no LAN-side failover restores that path: testing the benchmark)."""
    peer = next(g.peer.name for g in topo.gateways if g.name == avoid_peer_of)
    return next((r for r in topo.remote.hosts if (r.via == peer) == unrecoverable), None)


def plan_probe(topo: Topology, served: dict[str, str], buckets: dict[int, str | None], trial: int,
               unrecoverable: bool = False) -> ProbePlan | None:
    """A host the controller has learned, a gateway holding buckets that does not serve it
    (the most loaded), and a remote host whose return path avoids that gateway's peer; the
    hosts take turns. None when no combination exists."""
    held = Counter(g for g in buckets.values() if g)
    hosts = [h for h in topo.hosts if str(h.ip) in served]
    for k in range(len(hosts)):
        host = hosts[(trial + k) % len(hosts)]
        serving = served[str(host.ip)]
        for gw in sorted((g for g in topo.gateways if g.name != serving and held[g.name]), key=lambda g: -held[g.name]):
            remote = _remote(topo, gw.name, unrecoverable)
            if remote is not None:
                return ProbePlan(host.name, serving, gw.name, remote.name, str(remote.ip))
    return None


def plan_own_probe(topo: Topology, hosts: Sequence[HostView], buckets: dict[int, str | None], trial: int,
                   unrecoverable: bool = False) -> ProbePlan | None:
    """A learned LAN host whose bucket the switch sends to gateway G (the bucket map, and the
    host view agreeing with it), G to freeze, and a remote host whose return path avoids G's
    peer: the probe's own gateway is frozen, so the new leader must fail the probe over. The
    hosts take turns; None when no host qualifies."""
    by_ip = {h.ip: h for h in hosts if h.ip}
    names = {g.name for g in topo.gateways}
    ours = [(t, by_ip[str(t.ip)]) for t in topo.hosts if str(t.ip) in by_ip]
    for k in range(len(ours)):
        host, view = ours[(trial + k) % len(ours)]
        gw = buckets.get(view.bucket)
        if gw is None or gw != view.gateway or gw not in names:
            continue
        remote = _remote(topo, gw, unrecoverable)
        if remote is not None:
            return ProbePlan(host.name, gw, gw, remote.name, str(remote.ip), view.bucket)
    return None


def rewritten(before: dict[int, str | None], after: dict[int, str | None], frozen: str) -> int:
    """Buckets whose gateway changed although they did not have to (they were not the frozen gateway's)."""
    return sum(1 for b, g in before.items() if g != frozen and after.get(b) != g)


def median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None
