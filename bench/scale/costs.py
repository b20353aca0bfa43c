"""What a point costs at rest, its hosts learned: CPU of the controller, the switch and the
agents over a quiet window (the agents reporting and heartbeating at the shipped timing, the
controller polling counters, the switch scanning for idle hosts), and the controller's and
switch's resident memory."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.scale.procstat import ProcessGone, sample
from bench.scale.site import ScaleSite


@dataclass(frozen=True)
class Steady:
    window_s: float
    report_interval_s: float
    controller_cpu: float  # CPU seconds per second (1.0 = one core)
    switch_cpu: float
    agents_cpu: float  # all agents together
    controller_rss: int
    switch_rss: int
    agent_rss: int  # all agents together
    reports: int  # reports the controller accepted in the window
    heartbeats: int

    @property
    def cpu_per_report_round(self) -> float:
        """Controller CPU seconds per report round (every gateway reports once per T_L)."""
        rounds = self.window_s / self.report_interval_s
        return self.controller_cpu * self.window_s / rounds

    def row(self) -> dict[str, Any]:
        return {
            "window_s": round(self.window_s, 1), "controller_cpu_pct": round(100 * self.controller_cpu, 1),
            "switch_cpu_pct": round(100 * self.switch_cpu, 1), "agents_cpu_pct": round(100 * self.agents_cpu, 1),
            "controller_rss_mb": round(self.controller_rss / 2**20, 1), "switch_rss_mb": round(self.switch_rss / 2**20, 1),
            "agents_rss_mb": round(self.agent_rss / 2**20, 1),
            "cpu_ms_per_report_round": round(1000 * self.cpu_per_report_round, 2),
            "reports": self.reports, "heartbeats": self.heartbeats,
        }


def measure(site: ScaleSite, window_s: float, report_interval_s: float) -> Steady:
    ctl, sw = site.controller_pid(), site.switch_pid()
    agents = [site.pid(f"agent-{g}") for g in site.gateways]
    st0 = site.status()
    c0, s0 = sample(ctl), sample(sw)
    a0 = [sample(p) for p in agents]
    t0 = time.monotonic()
    time.sleep(window_s)
    span = time.monotonic() - t0
    c1, s1 = sample(ctl), sample(sw)
    a1: list[float] = []
    arss = 0
    for pid, before in zip(agents, a0):
        try:
            now = sample(pid)
        except ProcessGone:
            continue
        a1.append(now.cpu_s - before.cpu_s)
        arss += now.rss_bytes
    st1 = site.status()
    return Steady(
        window_s=span,
        report_interval_s=report_interval_s,
        controller_cpu=(c1.cpu_s - c0.cpu_s) / span,
        switch_cpu=(s1.cpu_s - s0.cpu_s) / span,
        agents_cpu=sum(a1) / span,
        controller_rss=c1.rss_bytes,
        switch_rss=s1.rss_bytes,
        agent_rss=arss,
        reports=st1.reports_total - st0.reports_total,
        heartbeats=st1.heartbeats_total - st0.heartbeats_total,
    )
