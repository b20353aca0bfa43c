"""Replicated controllers (`make run HA=1`: three replicas on a three-member etcd cluster) at
scale: what the site's state costs etcd, and a leader takeover with every host learned.

The scale site is booted with three replicas; its hosts learned (a cold start, as in the
points); etcd's database size and its write rate (revisions per second: every put, delete and
transaction that changed something) at rest and while learning, from `etcdctl endpoint status`;
then the leader's process is SIGKILLed under a 10 ms ping, and the takeover is the time from
the kill to a replica being primary on the switch and holding every host (it adopted the
switch's host tables, as a restart does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from bench.probes import BenchError
from bench.scale import faults, plan
from bench.scale.results import HaResult
from bench.scale.site import ScaleSite
from bench.gaps import FlowGap
from bench.probes import GOAL_MS, ping_probe, read_probe
from supergw_proto.rest import ApiError
from topologies.emulation import Emulation
from topologies.etcd_auth import EtcdPki, etcdctl
from topologies.ha import etcd_endpoints
from topologies.poll import Timeout, wait_until

Say = Callable[[str], None]


def etcd_status(site: ScaleSite) -> tuple[int, int]:
    """(largest member database in bytes, the cluster's revision)."""
    out = etcdctl(EtcdPki(site.site.paths.pki), etcd_endpoints(site.topo), "endpoint", "status", "-w", "json")
    members = json.loads(out)
    size = max(int(m["Status"]["dbSize"]) for m in members)
    revision = max(int(m["Status"]["header"]["revision"]) for m in members)
    return size, revision


def leader_holding(site: ScaleSite, hosts: int, exclude: str | None = None) -> tuple[bool, str]:
    for name in site.topo.controller.replica_names():
        if name == exclude:
            continue
        try:
            st = site.site.api(name).status()
        except ApiError:
            continue
        if st.reconciled and st.hosts >= hosts:
            return True, f"{name} primary with {st.hosts} hosts"
    return False, f"no replica primary with {hosts} hosts yet"


def measure(gateways: int, hosts: int, switch: str, workdir: Path, say: Say) -> HaResult:
    emu = Emulation.from_file(plan.write_topology(gateways, switch, workdir), replicas=3, say=lambda m: say("  " + m))
    if not emu.up():
        emu.down(quiet=True)
        return HaResult(hosts, None, None, None, None, note=f"(HA site did not come up: "
                                                           f"{', '.join(emu.state.failed_stages())})")
    try:
        site = ScaleSite(emu, say)
        size0, rev0 = etcd_status(site)
        t0 = time.monotonic()
        site.start_hosts(hosts, 0)
        try:
            wait_until(lambda: leader_holding(site, hosts), 60 + hosts / 500, f"the leader holding {hosts} hosts")
        except Timeout as exc:
            raise BenchError(str(exc)) from None
        learned_s = time.monotonic() - t0
        size1, rev1 = etcd_status(site)
        time.sleep(10)
        size2, rev2 = etcd_status(site)
        say(f"   etcd: {size2} B; {(rev1 - rev0) / learned_s:.1f} writes/s while learning, {(rev2 - rev1) / 10:.1f} at rest")
        leader = site.site.agreed_leader(primary=True)
        ns, dst, _ = faults.probe_pair(site)
        probe = ping_probe(ns, dst, count=3000)
        try:
            time.sleep(1.0)
            t_kill = site.site.kill_controller(leader)
            k0 = time.monotonic()
            try:
                wait_until(lambda: leader_holding(site, hosts, exclude=leader), 25, "a new leader holding every host",
                           interval=0.05)
            except Timeout as exc:
                raise BenchError(str(exc)) from None
            takeover = time.monotonic() - k0
            out, _ = probe.communicate(timeout=90)  # 3,000 pings: 30 s and ping's own pacing on a loaded machine
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait()
        flow: FlowGap = read_probe(f"{site.topo.hosts[0].name} -> {dst} across the takeover", out, t_kill, GOAL_MS / 1000)
        say(f"   takeover {takeover:.2f} s after the leader's SIGKILL; {flow.lost} probes lost")
        return HaResult(hosts, takeover, flow.lost, size2, (rev2 - rev1) / 10,
                        note=f"(N = {gateways}; etcd {(rev1 - rev0) / learned_s:.1f} writes/s while learning; "
                             f"database {size0} B before the hosts)")
    finally:
        emu.down(quiet=True)
