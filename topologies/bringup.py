"""One `up`: every stage of every site, each recorded ok/failed so the summary says exactly
what works.

Order: the shared WAN and each site's namespaces; every config (validated by its owner's
loader before anything starts); the switches; the gateways, responders first (the plain
peers of a site without a partner, then the sites that do not initiate), with each
member's agent; every tunnel; the controllers (one per site, or an etcd cluster and its
replicas); every agent alive at every controller; the simulated hosts; and every host
pinging through the super gateways. Gateways and agents come up before the controllers,
so a controller's first view already has every gateway heartbeating and its initial
bucket map spreads over all of them.
"""

from __future__ import annotations

import dataclasses
import functools
import subprocess
from collections.abc import Callable

from supergw_gateway.errors import GatewayError
from supergw_gateway.ra.client import RemoteClient
from topologies import api_tls, components, network, raclients, simhosts
from topologies.configs import GeneratedConfigs, Secrets, validate_with_owners, write_all
from topologies.model import EmulationSpec, GatewaySpec
from topologies.poll import wait_until
from topologies.site import Site
from topologies.state import StateFile

Say = Callable[[str], None]


class Bringup:
    def __init__(self, spec: EmulationSpec, sites: list[Site], run: StateFile, say: Say) -> None:
        self.spec, self.sites, self.run, self.say = spec, sites, run, say
        self.results: list[tuple[str, bool, str]] = []
        self.configs: dict[str, GeneratedConfigs] = {}

    # --- recording --------------------------------------------------------------------

    def record(self, stage: str, ok: bool, detail: str) -> None:
        self.results.append((stage, ok, detail))
        self.say(f"{'ok ' if ok else 'FAIL'} {stage}: {detail}")
        self.run.stage(stage, ok, detail)

    def stage(self, name: str, fn: Callable[[], str]) -> bool:
        try:
            detail = fn()
        except (OSError, subprocess.SubprocessError, ValueError, RuntimeError) as exc:
            self.record(name, False, str(exc) or type(exc).__name__)
            return False
        self.record(name, True, str(detail))
        return True

    def named(self, what: str, site: Site) -> str:
        """A per-site stage's name: `switch` with one site, `switch sgw-a` with several."""
        return f"{what} {site.prefix}" if self.spec.several else what

    # --- the stages -------------------------------------------------------------------

    def run_all(self) -> bool:
        self.run.save()
        sizes = ", ".join(f"{s.prefix}: {len(s.topo.hosts)} hosts, {len(s.topo.gateways)} gateways"
                          + (f", {s.topo.controller.replicas} controller replicas" if s.topo.replicated else "")
                          for s in self.sites)
        self.say(f"building {'sites' if self.spec.several else 'topology'} {sizes}"
                 + (f"; shared WAN in {self.spec.shared_wan}" if self.spec.shared_wan else ""))
        if self.spec.shared_wan is not None:
            network.build_shared_wan(self.spec.shared_wan)
        for site in self.sites:
            network.build(site.topo, self.say)
        if not self.write_configs():
            return self.finish()  # never start components on configs their owners reject
        switches = {s.prefix: self.stage(self.named("switch", s), functools.partial(self.start_switch, s))
                    for s in self.sites}
        for s in self.sites:
            if s.topo.remote_access is not None:
                switches[s.prefix] &= self.stage(self.named("outside switch", s), functools.partial(
                    components.start_outside_switch, s.topo, s.paths, self.run.track))
        # Behind an outside switch the gateways' IKE crosses it, and it forwards only once the
        # controller configured it: there the controllers start first (the gateways join them as
        # they come alive); elsewhere the gateways first, so the initial bucket map spreads over all.
        outside = any(s.topo.remote_access is not None for s in self.sites)
        controllers: list[bool] = []
        if outside:
            controllers = self.controllers_stage(switches)
        gateways_ok = all([self.stage(self.named("gateways", s), functools.partial(self.start_gateways, s))
                           for s in self.responders_first()])
        if gateways_ok:
            gateways_ok = self.stage("tunnels", self.tunnels)
        if not outside:
            controllers = self.controllers_stage(switches)
        if gateways_ok and all(controllers):
            self.stage("agents", self.agents)
            if any(s.topo.simulated_hosts is not None for s in self.sites):
                self.stage("simulated hosts", self.simulated_hosts)
            self.stage("end-to-end ping", self.ping)
            for s in self.sites:
                if s.topo.remote_access is not None:
                    self.remote_clients(s)
        else:
            self.record("agents", False, "skipped: needs the controllers and the gateways")
            self.record("end-to-end ping", False, "skipped: needs the controllers and the gateways")
        return self.finish()

    def controllers_stage(self, switches: dict[str, bool]) -> list[bool]:
        controllers = []
        for s in self.sites:
            if switches[s.prefix]:
                controllers.append(self.stage(self.named("controller", s), functools.partial(self.start_controllers, s)))
            else:
                self.record(self.named("controller", s), False, "skipped: the switch is not running")
                controllers.append(False)
        return controllers

    def finish(self) -> bool:
        self.run.state.phase = "up" if all(ok for _, ok, _ in self.results) else "degraded"
        self.run.save()
        return self.run.state.phase == "up"

    def write_configs(self) -> bool:
        """Every site's configs; one IKE PSK and one pair seed for every tunnel, API tokens per site."""
        first = Secrets.fresh(self.sites[0].topo.controller.psk_bytes)
        problems: list[str] = []
        for site in self.sites:
            sec = first if site is self.sites[0] else dataclasses.replace(
                Secrets.fresh(site.topo.controller.psk_bytes), psk=first.psk, pair_seed=first.pair_seed)
            gen = write_all(site.topo, site.paths, sec)
            self.configs[site.prefix] = gen
            problems += validate_with_owners(gen)
        where = self.sites[0].paths.config if not self.spec.several else self.sites[0].paths.root.parent / "<site>/config"
        problems = list(dict.fromkeys(problems))
        self.record("configs", not problems, "; ".join(problems) or f"written to {where}")
        return not problems

    def start_switch(self, site: Site) -> str:
        """Overridden by front ends that start the switch themselves (Mininet)."""
        site.paths.logs.mkdir(parents=True, exist_ok=True)
        rec = components.start_switch(site.topo, site.paths, self.run.track)
        return components.switch_detail(site.topo, rec.pid)

    def responders_first(self) -> list[Site]:
        return sorted(self.sites, key=lambda s: s.topo.partner_site is not None and s.topo.partner_site.initiate)

    def start_gateways(self, site: Site) -> str:
        """The site's plain peers (responders) first, then its members, each with its agent."""
        topo, gen, logs = site.topo, self.configs[site.prefix], site.paths.logs
        initiating = topo.partner_site is None or topo.partner_site.initiate
        order: list[tuple[str, GatewaySpec | None]] = [] if topo.partner_site is not None else \
            [(g.peer.name, None) for g in topo.gateways]
        order += [(g.name, g) for g in topo.gateways]
        out = []
        for name, member in order:
            towards = f" (initiating the tunnel to {member.peer.name})" if member is not None and initiating else ""
            self.say(f"     gateway {name}: starting charon{towards} ...")
            out.append(components.gateway_up(name, gen.gateways[name], logs).split(" (")[0])
            if (charon := components.charon_record(topo, name, gen.gateways[name], logs)) is not None:
                self.run.track(charon)
            if member is not None:
                self.run.track(components.start_agent(topo, member, gen.gateways[name], logs))
        return "; ".join(out)

    def tunnels(self) -> str:
        details = []
        for site in self.sites:
            for g in site.topo.gateways:
                detail = wait_until(functools.partial(components.tunnel_up, self.configs[site.prefix].gateways[g.name]),
                                    45, f"tunnel {g.name} <-> {g.peer.name}")
                if not self.spec.several:
                    details.append(f"{g.name}: {detail}")
            if self.spec.several:
                details.append(f"{site.prefix}: {len(site.topo.gateways)} ESTABLISHED")
        return "; ".join(details)

    def start_controllers(self, site: Site) -> str:
        site.paths.logs.mkdir(parents=True, exist_ok=True)
        return components.start_controllers(site.topo, site.paths, self.configs[site.prefix].controllers, self.run.track)

    def agents(self) -> str:
        """Every member's agent runs and every controller (each replica) counts every gateway alive."""
        what = "{}'s gateways reporting to its controller" if self.spec.several else "gateways reporting to the controller"
        return "; ".join(wait_until(functools.partial(self.agents_alive, site), 20, what.format(site.prefix))
                         for site in self.sites)

    def agents_alive(self, site: Site) -> tuple[bool, str]:
        token = self.configs[site.prefix].secrets.api_token
        names = {g.name for g in site.topo.gateways}
        dead = [f"agent-{n}" for n in sorted(names) if site.process(f"agent-{n}") is None]
        if dead:
            raise components.ComponentError(f"{', '.join(dead)} exited; see {site.paths.logs}/agent-*.log")
        details = []
        verify = api_tls.verify(site.topo, site.paths)
        for slot in site.topo.controllers():
            ok, detail = components.gateways_alive(slot.api_url, token, names, verify)
            label = f"{slot.replica}: " if slot.replica else ""
            if not ok:
                return False, label + detail
            details.append(label + detail)
        return True, "; ".join(details)

    def simulated_hosts(self) -> str:
        out = []
        for site in self.sites:
            if site.topo.simulated_hosts is not None:
                client = simhosts.start(site.topo, site.paths, self.run.track)
                out.append(f"{site.prefix}: {simhosts.check_ready(site.topo, client)}")
        return "; ".join(out)

    def remote_clients(self, site: Site) -> None:
        """Start every client's charon, connect them all at once, and check each reaches a LAN host."""
        fleet: list[RemoteClient] = []

        def start() -> str:
            try:
                started, secs = raclients.start(site.topo, site.paths, self.run.track)
            except GatewayError as exc:
                raise RuntimeError(str(exc)) from exc
            fleet.extend(started)
            return f"{len(started)} strongSwan clients started in {secs:.1f} s ({site.paths.clients}/<name>/)"

        def connect() -> str:
            res = raclients.connect(fleet)
            if res.failures:
                first = next(iter(res.failures.items()))
                raise RuntimeError(f"{len(res.failures)} of {len(fleet)} clients did not connect; "
                                   f"first: {first[0]}: {first[1]}")
            return f"{res.connected} clients connected at once to IP_P in {res.wall_s:.1f} s"

        def reach() -> str:
            targets = [h.ip for h in site.topo.hosts]
            failed = raclients.reach(fleet, targets)
            if failed:
                name, why = next(iter(failed.items()))
                raise RuntimeError(f"{len(failed)} of {len(fleet)} clients reach no LAN host; first: {name}: {why}")
            return f"every client pings a LAN host through its tunnel ({', '.join(str(t) for t in targets)})"

        if not site.topo.remote_access or not site.topo.remote_access.clients:
            return
        if self.stage(self.named("clients", site), start) and self.stage(self.named("clients connect", site), connect):
            self.stage(self.named("clients reach LAN", site), reach)

    def ping(self) -> str:
        """Every LAN host reaches a remote host, or a host of the partner site, through the super gateway(s)."""
        pairs: list[tuple[str, str, str, str]] = []  # (source name, its namespace, destination name, ip)
        facing = [s for s in self.sites if self.spec.partner(s.topo) is not None]
        announce_hosts(facing)
        for site in self.sites:
            topo, partner = site.topo, self.spec.partner(site.topo)
            remotes = [(h.name, str(h.ip)) for h in partner.hosts] if partner is not None else \
                [(r.name, str(r.ip)) for r in topo.remote.hosts]
            for i, h in enumerate(topo.hosts):
                dst, ip = remotes[i % len(remotes)]
                pairs.append((h.name, topo.ns(h.name), dst, ip))
        out = []
        for src, ns, dst, ip in pairs:
            detail = wait_until(functools.partial(components.ping, ns, ip), 30, f"ping {src} -> {dst} ({ip})")
            rtt = detail.split("=")[-1].split("/")[1] if "rtt" in detail else "?"
            out.append(f"{src}->{dst} {rtt} ms")
        return ", ".join(out)


def announce_hosts(sites: list[Site]) -> None:
    """Each host ARPs for its IP_G once, as a booting host does: a switch learns a host from its
    first frame, and a host that never sent one is unknown to it (traffic from the other site
    to it is dropped until then)."""
    probes = [subprocess.Popen(["ip", "netns", "exec", s.topo.ns(h.name), "ping", "-n", "-q", "-c", "1", "-W", "1",
                                str(s.topo.lan.gateway_ip)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for s in sites for h in s.topo.hosts]
    for probe in probes:
        probe.wait(timeout=10)
