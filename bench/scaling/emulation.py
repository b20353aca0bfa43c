"""The two-site emulation as bench/scaling drives it: boot one (N, suite), offer load with the
sites' hostsims, read CPU, steer buckets through the controllers' REST APIs.

Everything here acts on the real system (`python -m topologies.run up|down`, the hostsim
control sockets, cgroups, /proc); the numbers are turned into results in `analysis.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from topologies import processes
from topologies.configs import REPO
from topologies.hostsim_client import HostsimClient, HostsimError, run_loss
from topologies.processes import RunState
from topologies.run import STATE
from topologies.twosite import load_two_site

WORK = REPO / ".run" / "bench-scaling"  # generated topology files (git-ignored with .run/)
CGROUP_CPU = Path("/sys/fs/cgroup/cpu")


class BenchError(RuntimeError):
    """The emulation could not be booted, driven or read; the message says what to do."""


def say(msg: str) -> None:
    print(f"[scaling {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Api:
    """One site's controller REST API (the operator token written by `up`)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/") + "/api/v1", token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise BenchError(f"{method} {self.url}{path}: HTTP {exc.code}: {exc.read()[:300]!r}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise BenchError(f"{method} {self.url}{path}: {exc} (is the controller running?)") from None
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.call("GET", path)


def proc_cpu_ns(pid: int) -> int:
    """CPU time of a process, all its threads, in ns (schedstat: clock ticks are too coarse
    for a gateway capped at a few % of a core); 0 when it is gone."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def group_pids(gateway: str) -> list[int]:
    """Processes in a gateway's CPU group (`sgw-gw-<name>`, backends/supergw_gateway/cgroup.py)."""
    try:
        return [int(p) for p in (CGROUP_CPU / f"sgw-gw-{gateway}" / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def machine_busy_ticks() -> tuple[int, int]:
    """(busy, total) ticks of the whole machine from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


class CpuMeter:
    """Per-gateway CPU (% of one core) and the machine's (% of one core, so 200 = both cores
    of this machine) between two `read()` calls."""

    def __init__(self, gateways: Sequence[str], others: dict[str, Callable[[], list[int]]]) -> None:
        self.gateways = list(gateways)
        self.others = others  # name -> pids, for the budget (hostsims, switches, controllers, agents)
        self._last = self._sample()

    def _sample(self) -> tuple[float, dict[str, int], int, int]:
        per = {g: sum(proc_cpu_ns(p) for p in group_pids(g)) for g in self.gateways}
        per |= {name: sum(proc_cpu_ns(p) for p in pids()) for name, pids in self.others.items()}
        busy, total = machine_busy_ticks()
        return time.monotonic(), per, busy, total

    def read(self) -> tuple[dict[str, float], float]:
        """(per gateway/other: % of a core, machine busy: % of one core) since the last read."""
        now = self._sample()
        t0, per0, busy0, total0 = self._last
        self._last = now
        dt = max(1e-3, now[0] - t0)
        per = {k: max(0.0, 100.0 * (v - per0.get(k, 0)) / 1e9 / dt) for k, v in now[1].items()}
        cores = os.cpu_count() or 1
        machine = 100.0 * cores * (now[2] - busy0) / max(1, now[3] - total0)
        return per, machine


@dataclass
class Site:
    name: str  # a / b
    prefix: str
    api: Api
    hostsim: HostsimClient
    gateways: list[str]
    host_ips: list[str]
    host_buckets: list[int]  # the bucket of each simulated host (from the virtual MAC it resolved)


@dataclass(frozen=True)
class ProbeResult:
    rate_pps: float  # offered per direction
    sent: int
    received: int
    loss: float  # both directions
    achieved_pps: float  # what the generators managed, per direction (min of the two)
    machine_cpu: float  # % of one core, whole machine, during the probe
    cpu: dict[str, float]  # per gateway and per other component, % of a core


def write_topology(base: Path, gateways: int, cpu_percent: float, esp: str | None, buckets: int) -> Path:
    """A copy of `base` with N, the CPU cap, K and the ESP suite set (the file `up` boots)."""
    data = yaml.safe_load(base.read_text())
    data["gateways"] = gateways
    data["gateway_cpu_percent"] = cpu_percent
    data["buckets"] = buckets
    if esp is not None:
        data["esp_proposals"] = [esp]
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"two-site-n{gateways}-{esp or 'default'}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    load_two_site(out)  # refuse a bad file before anything is built
    return out


def topology_run(command: str, topology: Path, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "topologies.run", command, "--topology", str(topology)],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


class Emulation:
    """One booted two-site system (N pairs, one ESP suite)."""

    def __init__(self, topology: Path) -> None:
        self.topology = topology
        self.ts, self.topos = load_two_site(topology)
        self.sites: list[Site] = []

    def up(self) -> None:
        say(f"booting {self.topology.name} ({self.ts.gateways} pair(s), cap {self.ts.gateway_cpu_percent} % per gateway)")
        started = time.monotonic()
        proc = topology_run("up", self.topology)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip()[-1500:]
            topology_run("down", self.topology)
            raise BenchError(f"`topologies.run up` failed (exit {proc.returncode}):\n{tail}")
        state = RunState.load(STATE)
        if state is None:
            raise BenchError(f"{STATE} missing after a successful `up`")
        for topo, spec in zip(self.topos, self.ts.sites):
            token = Path(state.info[f"{topo.prefix}.token_file"]).read_text().strip()
            api = Api(state.info[f"{topo.prefix}.url"], token)
            sock = REPO / ".run" / topo.prefix / "hostsim.sock"
            if not sock.exists():
                raise BenchError(f"{sock} missing: the topology runs no hostsim (simulated_hosts in {self.topology})")
            client = HostsimClient(sock)
            self.sites.append(Site(spec.name, topo.prefix, api, client, [g.name for g in topo.gateways], [], []))
        for site in self.sites:
            site.hostsim.wait_ready(timeout=30)
            hosts = site.hostsim.stats(hosts=True)["hosts"]
            site.host_ips = [h["ip"] for h in hosts]
            site.host_buckets = [int(str(h["gateway_mac"]).replace(":", ""), 16) & 0xFFFF for h in hosts]
        say(f"up in {time.monotonic() - started:.0f}s: {len(self.sites[0].host_ips)} simulated hosts per site")

    def down(self) -> None:
        proc = topology_run("down", self.topology)
        if proc.returncode != 0:
            say(f"WARNING: `down` exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-300:]}")

    @property
    def gateways(self) -> list[str]:
        return [g for s in self.sites for g in s.gateways]

    def component_pids(self) -> dict[str, Callable[[], list[int]]]:
        """Everything else the budget counts: processes of the run by name (both sites)."""
        def by(prefix: str) -> Callable[[], list[int]]:
            def pids() -> list[int]:
                state = RunState.load(STATE)
                recs = state.processes if state is not None else []
                return [r.pid for r in recs if r.name.startswith(prefix) and processes.alive(r)]
            return pids
        return {"switches": by("switch"), "controllers": by("controller"), "agents": by("agent"),
                "hostsims": by("hostsim")}

    def meter(self) -> CpuMeter:
        return CpuMeter(self.gateways, self.component_pids())

    # ------------------------------------------------------------------ traffic
    def start(self, rate_pps: float, frame_bytes: int, duration_s: float) -> None:
        a, b = self.sites
        for site in self.sites:
            site.hostsim.reset()
        a.hostsim.start(rate_pps=rate_pps, frame_bytes=frame_bytes, duration_s=duration_s, destinations=b.host_ips)
        b.hostsim.start(rate_pps=rate_pps, frame_bytes=frame_bytes, duration_s=duration_s, destinations=a.host_ips)

    def stop(self) -> None:
        for site in self.sites:
            try:
                site.hostsim.stop()
            except HostsimError:
                pass  # already done

    def probe(self, rate_pps: float, frame_bytes: int, duration_s: float) -> ProbeResult:
        """Offer `rate_pps` in each direction for `duration_s`; the exact loss of both runs."""
        a, b = self.sites
        meter = self.meter()
        self.start(rate_pps, frame_bytes, duration_s)
        time.sleep(duration_s)
        runs = [s.hostsim.wait_run_done(timeout=duration_s + 10) for s in self.sites]
        cpu, machine = meter.read()
        time.sleep(0.3)  # frames in flight land
        sa, sb = a.hostsim.stats(flows=True), b.hostsim.stats(flows=True)
        ab, ba = run_loss(sa, sb), run_loss(sb, sa)
        sent, received = ab.sent + ba.sent, ab.received + ba.received
        lost = ab.lost + ba.lost
        achieved = min(float(r.get("achieved_pps", 0.0)) for r in runs)
        return ProbeResult(rate_pps, sent, received, lost / sent if sent else 1.0, achieved, machine, cpu)

    # ------------------------------------------------------------------ buckets and controllers
    def flows_to(self, index: int) -> int:
        """Every bucket that carries a simulated host (every flow) of both sites onto gateway
        `index` (1-based) with operator moves; returns how many buckets that is per site (max)."""
        most = 0
        for site in self.sites:
            target = site.gateways[index - 1]
            hot = set(site.host_buckets)
            for bucket in site.api.get("/buckets"):
                if bucket["bucket"] in hot and bucket["gateway"] != target:
                    site.api.call("POST", f"/buckets/{bucket['bucket']}/move", {"gateway": target})
            wrong = [b["bucket"] for b in site.api.get("/buckets") if b["bucket"] in hot and b["gateway"] != target]
            if wrong:
                raise BenchError(f"site {site.name}: buckets {wrong[:8]} not on {target} after the moves")
            most = max(most, len(hot))
        return most

    def host_balance(self) -> dict[str, dict[str, int]]:
        """Simulated hosts per gateway at each site, from the controllers' bucket map now."""
        out: dict[str, dict[str, int]] = {}
        for site in self.sites:
            owner = {b["bucket"]: b["gateway"] for b in site.api.get("/buckets")}
            counts = {g: 0 for g in site.gateways}
            for b in site.host_buckets:
                counts[str(owner.get(b))] = counts.get(str(owner.get(b)), 0) + 1
            out[site.name] = counts
        return out

    def balanced(self, limit: float = 1.10) -> bool:
        """Every site's hosts spread over its gateways within max/mean <= `limit`."""
        for counts in self.host_balance().values():
            values = list(counts.values())
            if max(values) > limit * sum(values) / len(values):
                return False
        return True

    @staticmethod
    def bucket_counts(site: Site) -> dict[str, int]:
        return {g["name"]: int(g["buckets"]) for g in site.api.get("/gateways")}

    def failovers(self) -> int:
        return sum(int(s.api.get("/status")["failovers_total"]) for s in self.sites)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = {s.name: {g["name"]: g["state"] for g in s.api.get("/gateways")} for s in self.sites}
            if all(st == "alive" for d in last.values() for st in d.values()):
                return
            time.sleep(0.5)
        raise BenchError(f"gateways not all alive after {timeout:.0f}s: {last}")

    def set_policy(self, rebalancer: dict[str, Any]) -> None:
        """Restart both controllers with `rebalancer:` in their config (the switch keeps its
        state; the controller reconciles, so buckets stay where they are)."""
        state = RunState.load(STATE)
        if state is None:
            raise BenchError(f"{STATE} missing: is the emulation up?")
        for topo in self.topos:
            conf = Path(state.info[f"{topo.prefix}.controller_config"])
            data = yaml.safe_load(conf.read_text())
            data["rebalancer"] = rebalancer
            conf.write_text(yaml.safe_dump(data, sort_keys=False))
            rec = next((r for r in state.processes if r.name == "controller" and topo.prefix in r.log), None)
            if rec is None:
                raise BenchError(f"no controller of {topo.prefix} in {STATE}")
            processes.stop(rec)
            # rec.argv already carries `ip netns exec <switch namespace>`
            new = processes.start("controller", rec.argv, Path(rec.log), cwd=REPO)
            state.processes = [new if r is rec else r for r in state.processes]
            state.save(STATE)
        for site in self.sites:
            deadline = time.monotonic() + 30
            while True:
                try:
                    site.api.get("/status")
                    break
                except BenchError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        self.wait_healthy()
