"""The paper's Fig. 6 on this system: clients come and go on a seeded schedule, the gateways'
agents record every IKE SA in their session logs, and `supergw-ike-cache`'s analysis says how
many of those full exchanges each caching strategy would have needed.

Each client alternates connected (exponential, mean `on_mean_s`; a ping every 0.2 s to a LAN
host through its tunnel, so its sessions carry bytes) and gone (exponential, mean
`off_mean_s`), starting gone for a random part of one cycle so the clients do not move in step.
The gateways run the shipped caching strategy `none` (every connection a full exchange:
the trace the paper analysed); the analysis replays the recorded sessions with lifetimes
scaled to the run (the paper's 30 days and hours-long lifetimes do not fit a benchmark)."""

from __future__ import annotations

import ipaddress
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from supergw_gateway.errors import GatewayError
from supergw_gateway.ra.client import RemoteClient
from supergw_gateway.ra.ikecache import Analysis, Connection, TraceError, analyse, read_session_log
from topologies.poll import Timeout, wait_until
from topologies.site import Site

# Lifetimes for a run of minutes, in units of the mean connect-and-leave cycle.
LIFETIME_CYCLES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
DATA_LIFETIMES_B = (2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
PING_INTERVAL_S = 0.2
SESSION_LOG = "ra-sessions.jsonl"

# Shue et al. §IV-B on 30 days of a campus VPN's logs (wired / wireless), beside ours.
PAPER: list[dict[str, object]] = [
    {"strategy": "clocked", "lifetime": "8 h", "needed_of_actual": "< 50 %", "source": "Fig. 6"},
    {"strategy": "established", "lifetime": "2 h", "needed_of_actual": "< 20 %", "source": "§IV-B 2)"},
    {"strategy": "data", "lifetime": "20 MB (wireless), 50 MB (remote)", "needed_of_actual": "about 25 %",
     "source": "§IV-B 3)"},
]


@dataclass
class SessionRun:
    clients: int
    seconds: float
    on_mean_s: float
    off_mean_s: float
    connects: int = 0  # connections the workload asked for (each a full exchange under `none`)
    counted: int = 0  # IKE_AUTH requests the clients' own charons counted over the run
    connect_failures: list[str] = field(default_factory=list)
    recorded: int = 0  # sessions the gateways' logs hold from the run
    analysis: Analysis | None = None
    lifetimes_s: list[float] = field(default_factory=list)
    trace: list[Connection] = field(default_factory=list)  # the recorded sessions the analysis replays


def session_logs(site: Site) -> list[Path]:
    return [site.paths.gateways / g.name / SESSION_LOG for g in site.topo.gateways]


def recorded_since(logs: Sequence[Path], t0: float) -> list[Connection]:
    """The sessions of every gateway's log that began at or after t0 (a log that is not there
    yet holds none)."""
    out: list[Connection] = []
    for p in logs:
        if p.exists():
            out += [c for c in read_session_log(p) if c.start >= t0]
    return out


def ike_auths(c: RemoteClient) -> int:
    """The client's IKE_AUTH requests so far (its `counters` plugin); 0 when it cannot say."""
    try:
        return c.ike_auths()
    except (GatewayError, OSError):
        return 0


class Presence:
    """One client's seeded schedule (the same seed and name, the same durations): gone at first
    for a random part of one cycle, then present (exponential, mean `on_mean_s`) and gone
    (mean `off_mean_s`) in turn; each duration cut at `until` (monotonic)."""

    def __init__(self, seed: int, name: str, on_mean_s: float, off_mean_s: float, until: float) -> None:
        self.rng = random.Random(f"{seed}/{name}")
        self.on_mean_s, self.off_mean_s, self.until = on_mean_s, off_mean_s, until

    def _left(self) -> float:
        return max(0.0, self.until - time.monotonic())

    def first_absence(self) -> float:
        return min(self.rng.uniform(0, self.on_mean_s + self.off_mean_s), self._left())

    def present(self) -> float:
        return min(self.rng.expovariate(1 / self.on_mean_s), max(0.5, self._left()))

    def absent(self) -> float:
        return min(self.rng.expovariate(1 / self.off_mean_s), self._left())


def _client_loop(c: RemoteClient, target: ipaddress.IPv4Address, seed: int, until: float,
                 run: SessionRun, lock: threading.Lock) -> None:
    when = Presence(seed, c.cfg.name, run.on_mean_s, run.off_mean_s, until)
    time.sleep(when.first_absence())
    while time.monotonic() < until:
        with lock:
            run.connects += 1
        try:
            c.connect(timeout_s=30)
        except GatewayError as exc:
            with lock:
                run.connect_failures.append(f"{c.cfg.name}: {exc}")
            return
        on = when.present()
        try:
            c.ping(target, count=max(1, int(on / PING_INTERVAL_S)), interval=PING_INTERVAL_S)
        except GatewayError:
            pass  # the ping only carries bytes; a lost ping is not what this part measures
        c.disconnect()
        time.sleep(when.absent())


def run_fleet(fleet: Sequence[RemoteClient], seconds: float,
              client: Callable[[RemoteClient, float, threading.Lock], None]) -> int:
    """`client(c, until, lock)` for every client of `fleet` at once (one thread each) for
    `seconds`; returns the IKE_AUTH requests the clients counted meanwhile."""
    auths = {c.cfg.name: ike_auths(c) for c in fleet}
    until = time.monotonic() + seconds
    lock = threading.Lock()
    threads = [threading.Thread(target=client, args=(c, until, lock), daemon=True) for c in fleet]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(ike_auths(c) - auths[c.cfg.name] for c in fleet)


def session_workload(site: Site, fleet: Sequence[RemoteClient], target: ipaddress.IPv4Address, seconds: float,
                     seed: int, on_mean_s: float, off_mean_s: float, settle_s: float = 30.0) -> SessionRun:
    """Run the schedule on every client of `fleet` (all disconnected first), then analyse the
    sessions the gateways recorded. Raises TraceError when a session log cannot be read."""
    run = SessionRun(len(fleet), seconds, on_mean_s, off_mean_s)
    for c in fleet:
        if c.state() is not None:
            c.disconnect()
    t0 = time.time()
    run.counted = run_fleet(fleet, seconds, lambda c, until, lock: _client_loop(c, target, seed, until, run, lock))
    logs = session_logs(site)
    # A session is written when its IKE SA is gone, at the agent's next event or poll.
    def all_recorded() -> tuple[bool, str]:
        n = len(recorded_since(logs, t0))  # every log read once per poll
        return n >= run.connects - len(run.connect_failures), f"{n} of {run.connects} sessions recorded"
    try:
        wait_until(all_recorded, settle_s, "the gateways' session logs")
    except Timeout:
        pass  # the report counts what is missing (sessions_unrecorded)
    conns = recorded_since(logs, t0)
    run.recorded = len(conns)
    run.trace = conns
    cycle = on_mean_s + off_mean_s
    run.lifetimes_s = [round(k * cycle, 1) for k in LIFETIME_CYCLES]
    run.analysis = analyse(conns, run.lifetimes_s, DATA_LIFETIMES_B)
    return run


__all__ = ["PAPER", "Presence", "SessionRun", "run_fleet", "TraceError", "ike_auths", "session_workload", "recorded_since", "session_logs"]
