"""A point's operations under its full state: a gateway failover, a rebalance round and a
controller restart, each measured as its user meets it.

- Failover: the gateway serving the probe host (its bucket's, from the controller's host view,
  and checked: the probe's frames must enter that gateway) is frozen (SIGSTOP of its charon
  and agent) under a 10 ms ping to the remote host (bench/probes.py, read by bench/gaps.py).
  The controller's history markers give the verdict (`gateway_dead`, its time) and the write
  (`moves` of reason failover: the time of the record made after the last bucket was
  written, and how many); the probe gives the gap a host behind the gateway saw. Then SIGCONT
  and the gateway's weighted share back.
- Rebalance: with a slice of the hosts sending through every gateway (hostsim), a quarter of
  the gateways are drained and undrained (their buckets gone, the load on the others), then
  one round is asked for (`POST /rebalance`): its plan and write time (the controller's own
  `plan_ms`, `write_ms`) and its moves.
- Restart: the controller is stopped and started again (its process, as an upgrade does) under
  a long 10 ms probe; the time from the start to the controller primary and holding every
  host again (it adopts the switch's entries), and the probes lost.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import Any

from bench.gaps import FlowGap
from bench.probes import GOAL_MS, BenchError, fail_under_probe, ping_probe, read_probe
from bench.scale.site import ScaleSite
from supergw_proto.api import HostQuery
from supergw_proto.rest import ApiError
from topologies.poll import Timeout, wait_until

PROBE_INTERVAL_S = 0.01


def probe_pair(site: ScaleSite) -> tuple[str, str, str]:
    """(probe host's namespace, a remote host's address, the gateway that serves the probe host).
    The remote site is plain routed peers: the remote host is one whose replies do not come
    back through that gateway's peer (a LAN-side failover cannot restore that direction; the
    two-site topology measures it, bench/failover --two-site)."""
    host = site.topo.hosts[0]
    page = site.api.hosts_page(HostQuery(ip=str(host.ip)))
    if not page.hosts or page.hosts[0].gateway is None:
        raise BenchError(f"the controller has not learned {host.name} ({host.ip}) with a gateway")
    gateway = page.hosts[0].gateway
    peer = next(g.peer.name for g in site.topo.gateways if g.name == gateway)
    remote = next((r for r in site.topo.remote.hosts if r.via != peer), None)
    if remote is None:
        raise BenchError(f"every remote host returns through {peer}, the peer of {gateway}")
    return site.topo.ns(host.name), str(remote.ip), gateway


def wake_probe_host(site: ScaleSite) -> None:
    """One ping from the probe host, so the controller knows it (after a fresh controller)."""
    host, remote = site.topo.hosts[0], site.topo.remote.hosts[0]
    ns = site.topo.ns(host.name)

    def learned() -> tuple[bool, str]:
        ping_probe(ns, str(remote.ip), count=3).communicate(timeout=10)
        page = site.api.hosts_page(HostQuery(ip=str(host.ip)))
        return bool(page.hosts and page.hosts[0].gateway), f"{len(page.hosts)} hosts with {host.ip}"

    try:
        wait_until(learned, 30, f"{host.name} learned")
    except Timeout as exc:
        raise BenchError(str(exc)) from None


@dataclass
class FailoverRun:
    victim: str
    buckets: int  # buckets the victim held
    verdict_ms: float | None  # freeze -> gateway_dead marker
    write_ms: float | None  # gateway_dead -> its failover moves recorded (after the last write)
    moved: int  # buckets the failover moved
    flow: FlowGap
    refill_s: float | None

    def row(self) -> dict[str, Any]:
        return {"victim": self.victim, "buckets": self.buckets, "verdict_ms": _r(self.verdict_ms),
                "write_ms": _r(self.write_ms), "moved": self.moved, "gap_ms": self.flow.gap_ms, "lost": self.flow.lost,
                "recovered": self.flow.recovered, "refill_s": _r(self.refill_s)}


def _r(v: float | None, digits: int = 1) -> float | None:
    return None if v is None else round(v, digits)


def failover(site: ScaleSite) -> FailoverRun:
    ns, dst, victim = probe_pair(site)
    held = site.api.gateway(victim).buckets
    pids = site.site.gateway_pids(victim)
    flow, t_freeze = fail_under_probe(site.site, "freeze", victim, pids, ns, dst,
                                      f"{site.topo.hosts[0].name} -> {dst} through {victim}", timeout_s=60)
    dead, moves, moved = _failover_markers(site, victim, t_freeze)
    t_thaw = time.monotonic()
    site.site.signal_gateway(pids, signal.SIGCONT)
    refill: float | None = None
    try:
        site.site.wait_gateways(lambda g: g[victim].state == "alive" and g[victim].buckets >= held * 0.9,
                                f"{victim} back with its share", 120)
        refill = time.monotonic() - t_thaw
    except Timeout:
        pass
    return FailoverRun(victim, held, None if dead is None else 1000 * (dead - t_freeze),
                       None if dead is None or moves is None else 1000 * (moves - dead), moved, flow, refill)


def _failover_markers(site: ScaleSite, victim: str, since: float) -> tuple[float | None, float | None, int]:
    """(gateway_dead time, failover moves time, buckets moved) from the controller's history
    (markers come with the next 1 s sample)."""
    dead: float | None = None
    moves: float | None = None
    moved = 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for sample in site.api.history(since=since - 1, limit=60).samples:
            for m in sample.markers:
                if m.kind == "gateway_dead" and m.gateway == victim and m.ts >= since and dead is None:
                    dead = m.ts
                if m.kind == "moves" and m.reason == "failover" and dead is not None and m.ts >= dead:
                    moves, moved = max(moves or 0.0, m.ts), moved + m.count
        if dead is not None and moves is not None:
            break
        time.sleep(0.5)
    return dead, moves, moved


@dataclass
class RebalanceRun:
    gateways: int
    drained: int
    moves: int
    plan_ms: float | None
    write_ms: float | None
    dry_plan_ms: float | None
    ratio_before: float
    ratio_after: float

    def row(self) -> dict[str, Any]:
        return {"gateways": self.gateways, "drained_then_undrained": self.drained, "moves": self.moves,
                "plan_ms": _r(self.plan_ms, 2), "write_ms": _r(self.write_ms, 2), "dry_run_plan_ms": _r(self.dry_plan_ms, 2),
                "ratio_before": round(self.ratio_before, 2), "ratio_after": round(self.ratio_after, 2)}


def rebalance(site: ScaleSite, senders: int, rate_pps: float) -> RebalanceRun:
    hosts = site.hosts
    if hosts is None:
        raise BenchError("no simulated hosts to load the gateways with")
    step = max(1, hosts.count // senders)
    remote = str(site.topo.remote.hosts[0].ip)
    hosts.client.start(rate_pps=rate_pps, frame_bytes=256, duration_s=0, destinations=[remote],
                       hosts=list(range(0, hosts.count, step)))
    try:
        time.sleep(3.5)  # counters are read every second: every loaded bucket has a rate
        quarter = site.gateways[1: 1 + max(1, len(site.gateways) // 4)]
        for g in quarter:
            site.api.drain(g)
        for g in quarter:
            site.api.undrain(g)
        dry = site.api.rebalance(dry_run=True)
        done = site.api.rebalance()
    finally:
        hosts.client.stop()
    return RebalanceRun(len(site.gateways), len(quarter), len(done.moves), done.plan_ms, done.write_ms, dry.plan_ms,
                        done.ratio_before, done.ratio_after)


@dataclass
class RestartRun:
    hosts: int
    adopt_s: float  # controller started -> primary, holding every host
    flow: FlowGap

    def row(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "adopt_s": round(self.adopt_s, 2), "probes": self.flow.sent,
                "lost": self.flow.lost, "gap_ms": self.flow.gap_ms}


def restart(site: ScaleSite, hosts: int, probe_s: float) -> RestartRun:
    ns, dst, _gw = probe_pair(site)
    probe = ping_probe(ns, dst, count=int(probe_s / PROBE_INTERVAL_S))
    try:
        time.sleep(1.0)
        t_stop = time.time()
        rec = site.site.restart_controller(wait=False)
        t_start = time.monotonic()

        def adopted() -> tuple[bool, str]:
            try:
                st = site.api.status()
            except ApiError as exc:
                return False, str(exc)
            return st.reconciled and st.hosts >= hosts, f"role {st.role} (reconciled: {st.reconciled}), {st.hosts} hosts"

        try:
            wait_until(adopted, probe_s - 2, f"restarted controller holding {hosts} hosts", rec, interval=0.05)
        except Timeout as exc:
            raise BenchError(str(exc)) from None
        adopt = time.monotonic() - t_start
        # ping paces itself: on a loaded machine its count takes longer than count x interval
        out, _ = probe.communicate(timeout=2 * probe_s + 30)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    flow = read_probe(f"{site.topo.hosts[0].name} -> {dst} across the restart", out, t_stop, GOAL_MS / 1000)
    return RestartRun(hosts, adopt, flow)
