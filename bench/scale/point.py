"""One point (N gateways, H hosts) on a booted site, phase after phase, each failure recorded
with the phase it happened in. A phase that raised stops the point (the site may be in any
state; the next point starts from a fresh controller); a measurement that failed (a probe that
did not recover) is recorded and the point goes on."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.scale import costs, faults, learning, rest
from bench.scale.rest import Latency
from bench.scale.plan import Point
from bench.scale.site import ScaleSite


@dataclass(frozen=True)
class Settings:
    quick: bool
    steady_s: float
    rest_calls: int
    dashboard_rounds: int
    ctl_runs: int
    report_interval_s: float
    rebalance_at: int  # gateway count whose points also run a rebalance round
    learn_timeout_s: float


@dataclass
class PointResult:
    switch: str
    point: Point
    cleared: dict[str, int] = field(default_factory=dict)
    learning: learning.LearningRun | None = None
    steady: costs.Steady | None = None
    rest: list[Latency] = field(default_factory=list)
    dashboard: Latency | None = None
    ctl: Latency | None = None
    failover: faults.FailoverRun | None = None
    rebalance: faults.RebalanceRun | None = None
    restart: faults.RestartRun | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.switch} {self.point.label}"

    def key(self) -> dict[str, Any]:
        return {"switch": self.switch, "gateways": self.point.gateways, "hosts": self.point.hosts}


def run(site: ScaleSite, switch: str, point: Point, index: int, s: Settings, say: Callable[[str], None]) -> PointResult:
    res = PointResult(switch, point)
    broken: list[str] = []  # a phase that raised: the site may be in any state, the point stops

    def phase(name: str, fn: Callable[[], None]) -> bool:
        if broken:
            return False
        say(f"   {res.label}: {name}")
        try:
            fn()
            return True
        except Exception as exc:  # noqa: BLE001 - recorded with its phase; the point goes on to the report
            broken.append(name)
            res.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            say(f"   {res.label}: {name} FAILED: {exc}\n{traceback.format_exc(limit=4)}")
            return False

    def fresh() -> None:
        res.cleared = site.fresh_controller()

    def learn() -> None:
        res.learning = learning.learn(site, point.hosts, index, say, s.learn_timeout_s)
        lr = res.learning
        say(f"     learned {lr.v4.learned}/{point.hosts} IPv4 and {lr.v6.learned} IPv6 in {lr.v4.span_s or 0:.2f} s: "
            f"{lr.v4.hosts_per_s or 0:,.0f} hosts/s, p99 {1000 * (lr.v4.latency(99) or 0):.0f} ms per host")
        faults.wake_probe_host(site)

    def steady() -> None:
        res.steady = costs.measure(site, s.steady_s, s.report_interval_s)
        say(f"     at rest: controller {100 * res.steady.controller_cpu:.1f} % CPU, "
            f"{res.steady.controller_rss / 2**20:.0f} MB; switch {100 * res.steady.switch_cpu:.1f} % CPU")

    def api() -> None:
        hosts = site.hosts
        some_ip = None
        if hosts is not None:
            page = site.api.hosts_page()
            some_ip = page.hosts[len(page.hosts) // 2].ip if page.hosts else None
        res.rest = rest.latencies(site, s.rest_calls, some_ip)
        res.dashboard = rest.dashboard_refresh(site, s.dashboard_rounds)
        res.ctl = rest.supergwctl_hosts(site, s.ctl_runs, say)
        worst = max(res.rest, key=lambda r: r.q(99) or 0.0)
        say(f"     REST: worst p99 {worst.q(99) or 0:.1f} ms ({worst.endpoint}); dashboard refresh p99 "
            f"{res.dashboard.q(99) or 0:.0f} ms; supergwctl hosts p99 {res.ctl.q(99) or 0:.0f} ms")

    def failover() -> None:
        res.failover = faults.failover(site)
        f = res.failover
        if not f.flow.recovered:
            res.errors.append(f"failover: the probe through {f.victim} did not recover: {f.flow.problem}")
        say(f"     failover of {f.victim} ({f.buckets} buckets): verdict {f.verdict_ms or 0:.0f} ms, write "
            f"{f.write_ms or 0:.1f} ms after it ({f.moved} moved); the probe's gap {f.flow.gap_ms:.0f} ms")

    def rebalance() -> None:
        res.rebalance = faults.rebalance(site, senders=2000, rate_pps=2000.0)
        r = res.rebalance
        say(f"     rebalance round: {r.moves} moves, plan {r.plan_ms or 0:.1f} ms, write {r.write_ms or 0:.1f} ms")

    def restart() -> None:
        res.restart = faults.restart(site, point.hosts, probe_s=max(15.0, 10.0 + point.hosts / 2000))
        r = res.restart
        say(f"     controller restart: adopted {point.hosts} hosts in {r.adopt_s:.1f} s; {r.flow.lost} probes lost")

    phase("fresh controller", fresh)
    phase("learning", learn)
    phase("at rest", steady)
    phase("REST", api)
    phase("failover", failover)
    if point.gateways == s.rebalance_at:
        phase("rebalance", rebalance)
    phase("controller restart", restart)
    return res
