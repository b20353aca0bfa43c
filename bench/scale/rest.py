"""The REST API as an operator meets it at a point's size: the time from sending a GET to
having the whole answer (this machine's client, over the management network), per endpoint;
the dashboard's refresh (the calls its 2 s poll makes, one after the other); and
`supergwctl hosts` as a process, from start to exit."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.scale import analysis
from bench.scale.site import ScaleSite
from topologies.paths import REPO

SUPERGWCTL = REPO / ".venv" / "bin" / "supergwctl"
# What the dashboard fetches every 2 s (controller/supergw_controller/static/index.html).
DASHBOARD = ("/api/v1/status", "/api/v1/gateways", "/api/v1/buckets", "/api/v1/events?limit=50",
             "/api/v1/hosts?limit=200", "/api/v1/history?limit=600")


@dataclass(frozen=True)
class Latency:
    endpoint: str
    samples_ms: list[float]
    bytes: int  # size of the last answer

    def q(self, pct: float) -> float | None:
        return analysis.percentile(self.samples_ms, pct)

    def row(self) -> dict[str, Any]:
        p50, p99 = self.q(50), self.q(99)
        return {"endpoint": self.endpoint, "p50_ms": None if p50 is None else round(p50, 1),
                "p99_ms": None if p99 is None else round(p99, 1), "max_ms": round(max(self.samples_ms), 1),
                "calls": len(self.samples_ms), "kbytes": round(self.bytes / 1024, 1)}


def endpoints(site: ScaleSite, some_ip: str | None) -> dict[str, str]:
    """Name -> path of every endpoint the issue lists, with the hosts paged and filtered."""
    gw = site.gateways[-1]
    out = {"status": "/api/v1/status", "gateways": "/api/v1/gateways", "buckets": "/api/v1/buckets",
           "hosts": "/api/v1/hosts", f"hosts?gateway={gw}": f"/api/v1/hosts?gateway={gw}&limit=100"}
    if some_ip is not None:
        out["hosts?ip=..."] = f"/api/v1/hosts?ip={some_ip}"
    return out


def timed_get(site: ScaleSite, path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    resp = site.api.request("GET", path)
    ms = 1000 * (time.perf_counter() - t0)
    if resp.status_code != 200:
        raise RuntimeError(f"GET {path}: HTTP {resp.status_code}: {resp.text[:200]}")
    return ms, len(resp.content)


def latencies(site: ScaleSite, calls: int, some_ip: str | None) -> list[Latency]:
    out = []
    for name, path in endpoints(site, some_ip).items():
        samples, size = [], 0
        for _ in range(calls):
            ms, size = timed_get(site, path)
            samples.append(ms)
        out.append(Latency(name, samples, size))
    return out


def dashboard_refresh(site: ScaleSite, rounds: int) -> Latency:
    samples, size = [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        size = sum(timed_get(site, path)[1] for path in DASHBOARD)
        samples.append(1000 * (time.perf_counter() - t0))
    return Latency("dashboard refresh (6 calls)", samples, size)


def supergwctl_hosts(site: ScaleSite, runs: int, say: Callable[[str], None]) -> Latency:
    """`supergwctl hosts` (its first page, the default) as a user runs it, start to exit."""
    env = {**os.environ, "SUPERGW_URL": site.topo.api_url(None), "SUPERGW_TOKEN_FILE": str(site.site.paths.token_file)}
    samples, size = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        ran = subprocess.run([str(SUPERGWCTL), "hosts"], capture_output=True, text=True, env=env, check=False)
        samples.append(1000 * (time.perf_counter() - t0))
        if ran.returncode != 0:
            say(f"     supergwctl hosts failed ({ran.returncode}): {ran.stderr.strip()[:300]}")
            raise RuntimeError(f"supergwctl hosts exited {ran.returncode}: {ran.stderr.strip()[:300]}")
        size = len(ran.stdout)
    return Latency("supergwctl hosts (process)", samples, size)
