"""Injecting and undoing each fault kind of bench/chaos/schedule.py on the running two-site
emulation (topologies.site.Site does the process work and records every restart in the
state file, so `make stop` stops what the run restarted)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from bench.chaos.schedule import Fault
from bench.probes import inject, restore
from supergw_proto.rest import ApiError, ControllerClient
from topologies import iproute
from topologies.emulation import Emulation
from topologies.poll import Timeout
from topologies.site import Site, SiteError


class FaultError(RuntimeError):
    """The fault could not be injected or undone (its target is not there, a restart failed)."""


@dataclass
class Outcome:
    """What one fault did: its resolved target and anything worth a line in the report;
    `skipped` when this machine cannot inject it (the reason in `detail`)."""
    target: str
    detail: str = ""
    skipped: bool = False


NO_NETEM = "this kernel has no sch_netem (CONFIG_NET_SCH_NETEM)"


class Driver:
    def __init__(self, emu: Emulation) -> None:
        self.a, self.b = emu.sites[0], emu.sites[1]
        topo = self.a.topo
        if topo.partner_site is None:
            raise FaultError("bench/chaos needs the two-site emulation")
        self.wan_ns = topo.partner_site.wan_netns
        self.wan_ports = [s.topo.wan_port(g) for s in (self.a, self.b) for g in s.topo.gateways]
        self._netem: bool | None = None
        # Which gateway a gateway fault hits (the run aims them at gateways that carry a flow);
        # the scheduled target without one.
        self.aim: Callable[[Fault], str] = lambda fault: fault.target

    def netem(self) -> bool:
        """Whether tc's netem qdisc works here (probed once on a WAN port, then removed)."""
        if self._netem is None:
            port = self.wan_ports[0]
            probe = ["tc", "qdisc", "replace", "dev", port, "root", "netem", "loss", "0%"]
            self._netem = iproute.run(probe, self.wan_ns, check=False).returncode == 0
            if self._netem:
                iproute.run(["tc", "qdisc", "del", "dev", port, "root"], self.wan_ns, check=False)
        return self._netem

    def site(self, letter: str) -> Site:
        return self.a if letter == "a" else self.b

    def leader(self) -> str:
        try:
            return self.a.agreed_leader(timeout=10, primary=True)
        except Timeout as exc:
            raise FaultError(f"no agreed leader at site A to fault: {exc}") from None

    def replica(self, target: str) -> str:
        """"leader", "backup<i>" (the i-th backup by name) or a replica's name."""
        if target == "leader":
            return self.leader()
        if target.startswith("backup"):
            leader = self.leader()
            backups = sorted(n for n in self.a.topo.controller.replica_names() if n != leader)
            return backups[int(target[len("backup"):]) % len(backups)]
        return target

    def leader_api(self, site: Site) -> ControllerClient:
        return site.api(self.leader()) if site.topo.replicated else site.api()

    def run(self, fault: Fault, stop: threading.Event, injected: Callable[[str], None]) -> Outcome:
        """Inject `fault`, call `injected(target)`, wait its duration (or until `stop`), undo it."""
        site = self.site(fault.site)
        kind = fault.kind

        def wait() -> None:
            stop.wait(fault.duration_s)

        try:
            gw = self.aim(fault) if fault.group == "gateway" else fault.target
            if kind in ("gateway_freeze", "gateway_kill", "gateway_link"):
                how = kind.removeprefix("gateway_")
                pids = [] if how == "link" else site.gateway_pids(gw)
                inject(site, how, gw, pids)
                injected(gw)
                wait()
                restore(site, how, gw, pids)
                return Outcome(gw)
            if kind == "gateway_restart":
                inject(site, "kill", gw, site.gateway_pids(gw))
                injected(gw)
                site.restart_gateway(gw)
                return Outcome(gw)
            if kind == "charon_restart":
                injected(gw)
                site.restart_charon(gw)
                return Outcome(gw)
            if kind == "agent_kill":
                site.kill_agent(gw)
                injected(gw)
                wait()
                site.start_agent(gw)
                return Outcome(gw)
            if kind == "agent_crashloop":
                return self._crashloop(site, gw, fault, stop, injected)
            if kind == "controller_restart":
                site.kill_controller()
                injected(f"{site.prefix} controller")
                wait()
                site.restart_controller()  # returns once its API answers; raises when it does not start
                return Outcome(f"{site.prefix} controller")
            if kind in ("leader_kill", "backup_kill"):
                name = self.replica(fault.target)
                self.a.kill_controller(name)
                injected(name)
                wait()
                self.a.restart_controller(name, wait=False)
                return Outcome(name)
            if kind == "leader_freeze":
                name = self.leader()
                pid = self.a.running(self.a.slot(name).process).pid
                os.kill(pid, signal.SIGSTOP)
                injected(name)
                wait()
                os.kill(pid, signal.SIGCONT)
                return Outcome(name)
            if kind == "etcd_kill":
                self.a.kill_etcd(fault.target)
                injected(fault.target)
                wait()
                self.a.start_etcd(fault.target)
                return Outcome(fault.target)
            if kind == "etcd_partition":
                self.a.cut_etcd(fault.target)
                injected(fault.target)
                try:
                    wait()
                finally:
                    self.a.heal_etcd(fault.target)
                return Outcome(fault.target)
            if kind == "switch_restart":
                injected(site.prefix)
                site.restart_switch()
                return Outcome(f"{site.prefix} switch")
            if kind in ("wan_loss", "wan_delay") and not self.netem():
                if kind == "wan_delay":
                    return Outcome("wan", f"not injected: {NO_NETEM}", skipped=True)
                return self._iptables_loss(fault, wait, injected)
            if kind in ("wan_loss", "wan_delay"):
                netem = (["loss", f"{fault.param:g}%"] if kind == "wan_loss"
                         else ["delay", f"{fault.param:g}ms", f"{fault.param / 10:g}ms"])
                for port in self.wan_ports:
                    iproute.run(["tc", "qdisc", "replace", "dev", port, "root", "netem", *netem], self.wan_ns)
                injected("wan")
                try:
                    wait()
                finally:
                    for port in self.wan_ports:
                        iproute.run(["tc", "qdisc", "del", "dev", port, "root"], self.wan_ns, check=False)
                return Outcome("wan", " ".join(netem))
            if kind == "rebalance_storm":
                injected(site.prefix)
                return self._storm(site, fault)
        except (SiteError, OSError, ApiError, Timeout, iproute.NetworkError, subprocess.TimeoutExpired) as exc:
            raise FaultError(f"{fault.describe()}: {exc}") from exc
        raise FaultError(f"unknown fault kind {kind!r}")

    def _iptables_loss(self, fault: Fault, wait: Callable[[], None], injected: Callable[[str], None]) -> Outcome:
        """WAN loss without netem: every gateway drops that share of what it sends on its WAN
        interface (iptables' statistic match), so each packet crossing the WAN is lost with
        that probability, as on a lossy wire."""
        rule = ["-o", "wan0", "-m", "statistic", "--mode", "random", "--probability", f"{fault.param / 100:.3f}",
                "-j", "DROP"]
        spaces = [s.topo.ns(g.name) for s in (self.a, self.b) for g in s.topo.gateways]
        try:
            for ns in spaces:
                iproute.run(["iptables", "-I", "OUTPUT", *rule], ns)
            injected("wan")
            wait()
        finally:
            for ns in spaces:
                while iproute.run(["iptables", "-D", "OUTPUT", *rule], ns, check=False).returncode == 0:
                    pass
        return Outcome("wan", f"loss {fault.param:g}% by iptables statistic on every gateway's wan0 ({NO_NETEM})")

    def _crashloop(self, site: Site, gw: str, fault: Fault, stop: threading.Event,
                   injected: Callable[[str], None]) -> Outcome:
        rng = random.Random(fault.seq)  # the kill spacing is part of the replayable schedule
        site.kill_agent(gw)
        injected(gw)
        kills = 1
        remaining = fault.duration_s
        while remaining > 0 and not stop.is_set():
            site.start_agent(gw)
            up = rng.uniform(1.0, 2.0)
            if stop.wait(min(up, remaining)) or up >= remaining:
                break
            site.kill_agent(gw)
            kills += 1
            remaining -= up
        else:
            site.start_agent(gw)
        return Outcome(gw, f"{kills} agent kills")

    def _storm(self, site: Site, fault: Fault) -> Outcome:
        return Outcome(site.prefix, storm(self.leader_api(site), random.Random(fault.seq), int(fault.param)))


def storm(api: ControllerClient, rng: random.Random, moves: int) -> str:
    """`moves` operator moves of random unpinned buckets to random alive, undrained gateways,
    then a rebalance. A refusal (the replica stopped leading meanwhile: 503 naming the
    leader) is counted, not a failure: refusing is what a backup must do."""
    gws = [g.name for g in api.gateways() if g.state == "alive" and not g.drained]
    free = [b.bucket for b in api.buckets() if b.pinned is None]
    moved = refused = 0
    for _ in range(moves):
        try:
            api.move(rng.choice(free), rng.choice(gws))
            moved += 1
        except ApiError:
            refused += 1
    try:
        rebalance = f"rebalance {len(api.rebalance().moves)} moves"
    except ApiError as exc:
        rebalance = f"rebalance refused ({exc.status})"
    return f"{moved} moves, {refused} refused, {rebalance}"
