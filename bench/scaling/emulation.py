"""The two-site emulation as bench/scaling drives it: boot one (N, suite), offer load with the
sites' hostsims, read CPU, set the gateways' CPU quotas, steer buckets and read the moves
through the controllers' REST APIs.

Everything here acts on the real system (the emulation engine, the hostsim control
sockets, cgroups, /proc); the numbers are turned into results by the figures' modules.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scaling.analysis import Counters, GatewayShare, gateway_shares
from bench.scaling.partition import site_counts
from bench.scaling.redistribution import MoveRecord
from supergw_gateway.cgroup import CpuGroup
from supergw_gateway.report import CLK_TCK, tasks_cpu_jiffies
from supergw_proto.rest import ApiError, ControllerClient
from topologies.emulation import Emulation, EmulationError
from topologies.hostsim_client import HostsimClient, HostsimError, run_loss
from topologies.poll import Timeout
from topologies.site import Site

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
# The controller reads bucket counters every second and agents report every 0.5 s (the shipped
# defaults): this long after traffic stops, both have counted all of it.
COUNTERS_SETTLE_S = 1.3
EVENTS_PAGE = 1000  # the REST API's largest page of events
# A gateway's quota is granted per this period. The kernel's default, 100 ms, runs a gateway at
# 10 % for 10 ms and stops it for 90: its input queue overflows long before it has used its
# quota (measured: one pair at 10 % lost frames from ~600 pps/dir on, at ~65 % of its quota).
# 20 ms (longer where the quota is under 5 %: the kernel grants 1 ms a period at the least).
QUOTA_PERIOD_US = 20_000
# ... and ahead of other work on this shared machine (the default weight is 1024, each process
# of the root group's as much): a separate gateway box's CPU is its own. The quota still caps it.
GATEWAY_SHARES = 16 * 1024
RT_PRIORITY = 10  # SCHED_FIFO priority of a gateway's processes with set_quota(realtime=True)


class BenchError(RuntimeError):
    """The emulation could not be booted, driven or read; the message says what to do."""


# What a boot of the run may fail with: the run records it and goes on with the next boot.
RUN_ERRORS = (BenchError, HostsimError, ApiError, OSError)


def say(msg: str) -> None:
    print(f"[scaling {time.strftime('%H:%M:%S')}] {msg}", flush=True)


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

    def _sample(self) -> tuple[float, dict[str, float], int, int]:
        # schedstat (ns): clock ticks are too coarse for a gateway capped at a few % of a core
        per = {g: tasks_cpu_jiffies(group_pids(g)) for g in self.gateways}
        per |= {name: tasks_cpu_jiffies(pids()) for name, pids in self.others.items()}
        busy, total = machine_busy_ticks()
        return time.monotonic(), per, busy, total

    def read(self) -> tuple[dict[str, float], float]:
        """(per gateway/other: % of a core, machine busy: % of one core) since the last read."""
        now = self._sample()
        t0, per0, busy0, total0 = self._last
        self._last = now
        dt = max(1e-3, now[0] - t0)
        per = {k: max(0.0, 100.0 * (v - per0.get(k, 0)) / CLK_TCK / dt) for k, v in now[1].items()}
        cores = os.cpu_count() or 1
        machine = 100.0 * cores * (now[2] - busy0) / max(1, now[3] - total0)
        return per, machine


@dataclass
class SiteLoad:
    """One site as the benchmark loads it: its controller, its hostsim, its simulated hosts."""

    name: str  # a / b
    site: Site
    hostsim: HostsimClient
    gateways: list[str]
    host_ips: list[str]
    host_buckets: list[int]  # the bucket of each simulated host (from the virtual MAC it resolved)

    @property
    def prefix(self) -> str:
        return self.site.prefix

    @property
    def api(self) -> ControllerClient:
        return self.site.api()


@dataclass(frozen=True)
class ProbeResult:
    rate_pps: float  # offered per direction
    duration_s: float
    sent: int
    received: int
    loss: float  # both directions
    achieved_pps: float  # what the generators managed, per direction (min of the two)
    machine_cpu: float  # % of one core, whole machine, during the probe
    cpu: dict[str, float]  # per gateway and per other component, % of a core
    sent_by_site: dict[str, int]  # frames each site's hostsim sent (its outgoing direction)
    # per gateway, when the probe was accounted: what it carried (controller's REST views)
    shares: dict[str, GatewayShare] | None = None


class LoadedEmulation:
    """One booted two-site system (N pairs, one ESP suite), from the engine."""

    def __init__(self, topology: Path, boot: dict[str, Any]) -> None:
        self.topology = topology
        self.emu = Emulation.from_file(topology, changes=boot)  # refuses bad values before anything is built
        self.sites: list[SiteLoad] = []
        self._quiet_since = 0.0  # monotonic time the last offered load ended

    def up(self) -> None:
        a = self.emu.spec.sites[0]
        say(f"booting {self.topology.name} ({len(a.gateways)} pair(s), {a.gateway_backend} gateways, CPU quota "
            f"{a.gateway_cpu_percent} % of a core each)")
        started = time.monotonic()
        try:
            ok = self.emu.up()
        except EmulationError as exc:
            raise BenchError(f"the two-site emulation could not be booted: {exc}") from None
        if not ok:
            failed = self.emu.state.failed_stages()
            self.emu.down(quiet=True)
            raise BenchError(f"the two-site emulation did not come up: {failed}")
        try:
            self._hostsims()
        except (BenchError, HostsimError, ApiError):
            self.emu.down(quiet=True)  # booted here: not left running for nobody
            raise
        say(f"up in {time.monotonic() - started:.0f}s: {len(self.sites[0].host_ips)} simulated hosts per site")

    def _hostsims(self) -> None:
        """Each site's hostsim client, once every simulated host resolved IP_G, and the hosts' buckets."""
        for site in self.emu.sites:
            sock = site.paths.hostsim_socket
            if site.topo.simulated_hosts is None or not sock.exists():
                raise BenchError(f"{sock} missing: the topology runs no hostsim (simulated_hosts in {self.topology})")
            name = site.topo.gateways[0].name[0]  # the site letter its node names start with
            self.sites.append(SiteLoad(name, site, HostsimClient(sock), [g.name for g in site.topo.gateways], [], []))
        for load in self.sites:
            load.hostsim.wait_ready(timeout=30)
            hosts = load.hostsim.stats(hosts=True)["hosts"]
            load.host_ips = [h["ip"] for h in hosts]
            load.host_buckets = [int(str(h["gateway_mac"]).replace(":", ""), 16) & 0xFFFF for h in hosts]

    def down(self) -> None:
        self.emu.down(quiet=True)

    @property
    def gateways(self) -> list[str]:
        return [g for s in self.sites for g in s.gateways]

    def component_pids(self) -> dict[str, Callable[[], list[int]]]:
        """Everything else the budget counts: processes of the run by name (both sites)."""
        def by(prefix: str) -> Callable[[], list[int]]:
            def pids() -> list[int]:
                return [r.pid for r in self.emu.state.running() if r.name.startswith(prefix)]
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
        self._quiet_since = time.monotonic()

    def probe(self, rate_pps: float, frame_bytes: int, duration_s: float, account: bool = False) -> ProbeResult:
        """Offer `rate_pps` in each direction for `duration_s`; the exact loss of both runs.
        `account`: also what each gateway carried (bucket counters and agents' reports through
        the controllers, read once they have counted the quiet before and after the probe)."""
        a, b = self.sites
        before: dict[str, Counters] = {}
        if account:
            time.sleep(max(0.0, self._quiet_since + COUNTERS_SETTLE_S - time.monotonic()))
            before = self.counters()
        meter = self.meter()
        self.start(rate_pps, frame_bytes, duration_s)
        time.sleep(duration_s)
        runs = [s.hostsim.wait_run_done(timeout=duration_s + 10) for s in self.sites]
        self._quiet_since = time.monotonic()
        ended = time.time()
        cpu, machine = meter.read()
        time.sleep(0.3)  # frames in flight land
        sa, sb = a.hostsim.stats(flows=True), b.hostsim.stats(flows=True)
        ab, ba = run_loss(sa, sb), run_loss(sb, sa)
        sent, received = ab.sent + ba.sent, ab.received + ba.received
        lost = ab.lost + ba.lost
        achieved = min(float(r.get("achieved_pps", 0.0)) for r in runs)
        shares: dict[str, GatewayShare] | None = None
        if account:
            time.sleep(max(0.0, self._quiet_since + COUNTERS_SETTLE_S - time.monotonic()))
            after = self.counters(reported_after=ended)
            shares = {}
            for name, site_before in before.items():
                try:
                    shares |= gateway_shares(site_before, after[name], duration_s)
                except ValueError as exc:
                    say(f"  site {name}: no per-gateway shares for this probe: {exc}")
        return ProbeResult(rate_pps, duration_s, sent, received, lost / sent if sent else 1.0, achieved, machine, cpu,
                           {a.name: ab.sent, b.name: ba.sent}, shares)

    def counters(self, reported_after: float | None = None, timeout: float = 5.0) -> dict[str, Counters]:
        """Each site's bucket counters, bucket owners and its agents' tunnel counters (ESP
        packets sent, received) from its controller; with `reported_after` (UNIX time), waits
        until every gateway's last report is newer than that."""
        deadline = time.monotonic() + timeout
        out: dict[str, Counters] = {}
        for site in self.sites:
            while True:
                views = site.api.gateways()
                stale = [g.name for g in views if reported_after is not None
                         and (g.last_report is None or g.last_report.timestamp < reported_after)]
                if not stale or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if stale:
                say(f"  site {site.name}: no report after the probe from {stale}: their tunnel counters may miss its end")
            buckets = site.api.buckets()
            out[site.name] = Counters(
                buckets={b.bucket: (b.packets, b.bytes) for b in buckets},
                owners={b.bucket: b.gateway for b in buckets},
                tunnels={g.name: (g.last_report.tunnel_packets_out, g.last_report.tunnel_packets_in)
                         for g in views if g.last_report is not None})
        return out

    # ------------------------------------------------------------------ each gateway's CPU quota
    def set_quota(self, percent: float, realtime: bool = False) -> None:
        """Every gateway's cgroup quota (`sgw-gw-<name>`, the one its `up` made) to `percent` of a
        core, granted per QUOTA_PERIOD_US with the weight GATEWAY_SHARES. `realtime`: instead, its
        processes run SCHED_FIFO (served the moment a frame arrives, ahead of all other work) on
        one CPU of their own choosing (`gateway_cpu`), within the group's real-time budget of
        `percent` per period there, which the kernel enforces per CPU."""
        cpus = sorted(os.sched_getaffinity(0))
        for g in self.gateways:
            group = CpuGroup(f"sgw-gw-{g}")
            if not group.pids():
                raise BenchError(f"cgroup {group.path} holds no process: gateway {g} is not running under a quota")
            # the kernel grants 1 ms a period at the least: a smaller quota needs a longer period
            period = max(QUOTA_PERIOD_US, math.ceil(1000 * 100 / percent))
            (group.path / "cpu.cfs_period_us").write_text(str(period))
            (group.path / "cpu.shares").write_text(str(GATEWAY_SHARES))
            group.set_quota(percent)
            if realtime:
                (group.path / "cpu.rt_period_us").write_text(str(period))
                (group.path / "cpu.rt_runtime_us").write_text(str(int(period * percent / 100)))
            policy = os.SCHED_FIFO if realtime else os.SCHED_OTHER
            param = os.sched_param(RT_PRIORITY if realtime else 0)
            where = {cpus[self.gateway_cpu(g) % len(cpus)]} if realtime else set(cpus)
            for pid in group.pids():
                for task in Path(f"/proc/{pid}/task").iterdir():
                    try:
                        os.sched_setaffinity(int(task.name), where)
                        os.sched_setscheduler(int(task.name), policy, param)
                    except ProcessLookupError:
                        pass  # gone meanwhile
            if not realtime:
                (group.path / "cpu.rt_runtime_us").write_text("0")

    def gateway_cpu(self, gateway: str) -> int:
        """The CPU index a real-time gateway runs on: the pairs alternate, and the two gateways
        of a pair (which carry the same frames) run on different CPUs."""
        for site_index, site in enumerate(self.sites):
            if gateway in site.gateways:
                return site.gateways.index(gateway) + site_index
        raise BenchError(f"no gateway {gateway!r}")

    # ------------------------------------------------------------------ buckets and controllers
    def flows_to(self, index: int) -> tuple[int, int]:
        """Every bucket that carries a simulated host (every flow) of both sites onto gateway
        `index` (1-based) with operator moves; returns how many buckets that is per site (max)
        and how many had to be moved (both sites: 0 when they all were there already)."""
        most = moved = 0
        for site in self.sites:
            target = site.gateways[index - 1]
            hot = set(site.host_buckets)
            for bucket in site.api.buckets():
                if bucket.bucket in hot and bucket.gateway != target:
                    site.api.move(bucket.bucket, target)
                    moved += 1
            wrong = [b.bucket for b in site.api.buckets() if b.bucket in hot and b.gateway != target]
            if wrong:
                raise BenchError(f"site {site.name}: buckets {wrong[:8]} not on {target} after the moves")
            most = max(most, len(hot))
        return most, moved

    def partition(self) -> dict[str, list[int]]:
        """Simulated hosts per gateway (in gateway order) at each site, from its controller's bucket map now."""
        out: dict[str, list[int]] = {}
        for site in self.sites:
            owner = {b.bucket: b.gateway for b in site.api.buckets()}
            try:
                out[site.name] = site_counts(owner, site.host_buckets, site.gateways)
            except ValueError as exc:
                raise BenchError(f"site {site.name}: {exc}") from None
        return out

    def loaded_buckets(self) -> dict[str, dict[str, int]]:
        """Buckets carrying simulated hosts per gateway at each site, from the controllers' map now."""
        return {name: loaded for name, (loaded, _) in self.bucket_state().items()}

    def bucket_state(self) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        """Per site, from its controller's bucket map now: loaded buckets per gateway, and the
        frames the switch has sent each gateway through the buckets it owns now (cumulative)."""
        out: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        for site in self.sites:
            view = site.api.buckets()
            owner = {b.bucket: b.gateway for b in view}
            counts = {g: 0 for g in site.gateways}
            for b in set(site.host_buckets):
                counts[str(owner.get(b))] = counts.get(str(owner.get(b)), 0) + 1
            frames = {g: 0 for g in site.gateways}
            for entry in view:
                if entry.gateway in frames:
                    frames[entry.gateway] += entry.packets
            out[site.name] = (counts, frames)
        return out

    def place(self, site: SiteLoad, wanted: dict[int, str]) -> int:
        """Operator moves until each bucket of `wanted` is on its gateway at `site`; how many it took."""
        moved = 0
        for bucket in site.api.buckets():
            target = wanted.get(bucket.bucket)
            if target is not None and bucket.gateway != target:
                site.api.move(bucket.bucket, target)
                moved += 1
        wrong = [b.bucket for b in site.api.buckets() if b.bucket in wanted and b.gateway != wanted[b.bucket]]
        if wrong:
            raise BenchError(f"site {site.name}: buckets {wrong[:8]} not where they were moved")
        return moved

    def event_marks(self) -> dict[str, int]:
        """Per site, the id of the newest event in its controller's log (0: none yet)."""
        return {s.name: max((e.id or 0 for e in s.api.events(limit=1)), default=0) for s in self.sites}

    def moves_since(self, marks: dict[str, int], t0_wall: float) -> tuple[list[MoveRecord], list[str]]:
        """Every bucket move the controllers logged after `marks` (advanced in place), oldest
        first, its time counted from `t0_wall` (UNIX time); and every other event of theirs
        (a gateway declared dead and why, an operator action, ...) as a line."""
        moves: list[MoveRecord] = []
        other: list[tuple[float, str]] = []
        for site in self.sites:
            loaded = set(site.host_buckets)
            while True:
                page = site.api.events(limit=EVENTS_PAGE, since_id=marks.get(site.name, 0))
                if not page:
                    break
                marks[site.name] = max(e.id or 0 for e in page)
                for e in page:
                    t = round(e.ts - t0_wall, 2)
                    if e.kind == "move" and e.bucket is not None:
                        moves.append(MoveRecord(t, site.name, e.bucket, e.src, e.dst, e.reason, e.bucket in loaded))
                    elif e.kind != "move":
                        other.append((t, f"t={t:.1f}s site {site.name} {e.kind} {e.src or e.dst or ''} {e.reason}: "
                                         f"{e.detail}".replace("  ", " ")))
                if len(page) < EVENTS_PAGE:
                    break
        return sorted(moves, key=lambda m: m.t_s), [line for _, line in sorted(other)]

    @staticmethod
    def bucket_counts(site: SiteLoad) -> dict[str, int]:
        return {g.name: g.buckets for g in site.api.gateways()}

    def failovers(self) -> int:
        return sum(s.api.status().failovers_total for s in self.sites)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        try:
            for s in self.sites:
                s.site.wait_gateways(lambda gws: all(g.state == "alive" for g in gws.values()), "gateways all alive",
                                     max(0.0, deadline - time.monotonic()))
        except Timeout as exc:
            raise BenchError(str(exc)) from None
