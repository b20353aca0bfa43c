"""Two super gateways facing each other: site A and site B, each a switch running our pipeline,
its own controller and N gateways, gateway i of A paired with gateway i of B over a shared WAN.

The file (two-site.yaml) describes the pair; `site_topologies` derives one ordinary `Topology`
per site whose peers are the other site's gateways and whose remote hosts are the other site's
hosts (`Topology.partner_site`), so network.py, configs.py and components.py build each site
exactly as they build `make run`'s one site. `python -m topologies.run up --topology
topologies/two-site.yaml` dispatches here (`make run TOPO=two-site`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from topologies import bmv2, components, network, processes, run, simhosts
from topologies.components import ComponentError
from topologies.configs import REPO, GeneratedConfigs, Secrets, controller_url, validate_with_owners, write_all
from supergw_controller.config import DispatchConfig
from topologies.model import Mac, SwitchKind, SwitchSpec, Topology, TopologyError
from topologies.processes import RunState
from topologies.run import LOGS, RUN_DIR, STATE, say

TWO_SITE_TOPOLOGY = Path(__file__).resolve().parent / "two-site.yaml"
AGENT_PORT = run.AGENT_PORT
MAX_GATEWAYS = 4
# One switch port per namespace host, and the eBPF switch floods to at most 32 ports
# (RESOURCE_EXHAUSTED beyond): many hosts per side are `simulated_hosts`, all on one port.
MAX_HOSTS = 32
_SITE_RE = re.compile(r"^[a-z]$")
# A shared-WAN port is "<prefix>-<gateway>" (Topology.wan_port): 6 + 1 + 8 fits Linux's 15.
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{0,5}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SiteSpec(_Strict):
    name: str
    prefix: str
    lan: ipaddress.IPv4Network
    gateway_ip: ipaddress.IPv4Address
    vmac_base: Mac
    mac_base: Mac
    mgmt: ipaddress.IPv4Network
    initiate: bool
    api_port: int = Field(default=8080, gt=0, lt=65536)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SITE_RE.match(v):
            raise ValueError(f"{v!r}: a site name is one lowercase letter")
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not _PREFIX_RE.match(v):
            raise ValueError(f"{v!r}: a site prefix is 1-6 of [a-z0-9-] starting with a letter")
        return v


class WanNet(_Strict):
    netns: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    subnet: ipaddress.IPv4Network


class SimulatedHosts(_Strict):
    """Each site's simulated hosts: one supergw-hostsim on one switch port (topologies/hostsim).
    Host k of a site has LAN .(first_host + k) and MAC mac_base + (first_host + k) * mac_step (step 1:
    like the namespace hosts; 256: the paper's §4.3 hosts ..:18:00, ..:19:00, ...)."""

    count: int = Field(ge=1, le=250)
    first_host: int = Field(ge=2, le=250)
    port: int = Field(default=200, ge=1, le=510)
    mac_step: int = Field(default=1, ge=1, le=2**16)


class TwoSite(_Strict):
    kind: Literal["two-site"]
    gateways: int = Field(ge=1, le=MAX_GATEWAYS)
    hosts_per_site: int = Field(ge=1, le=MAX_HOSTS)
    first_host: int = Field(default=11, ge=2, le=249)  # host j: LAN .(first_host + j - 1), MAC mac_base + the same
    gateway_cpu_percent: float | None = Field(default=None, gt=0, le=6400)
    esp_proposals: list[str] | None = Field(default=None, min_length=1)  # both sites' tunnels; None: the default
    buckets: int = Field(default=256, ge=1, le=4096)
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)  # both controllers' `dispatch` section
    switch: SwitchSpec
    wan: WanNet
    sites: list[SiteSpec] = Field(min_length=2, max_length=2)
    psk_bytes: int = Field(default=24, ge=8, le=64)
    simulated_hosts: SimulatedHosts | None = None

    @model_validator(mode="after")
    def _checks(self) -> TwoSite:
        a, b = self.sites
        errors = []
        if a.name == b.name or a.prefix == b.prefix:
            errors.append("the two sites need different names and prefixes")
        if a.initiate == b.initiate:
            errors.append("exactly one site initiates the IKE SAs (sites[].initiate)")
        if a.lan.overlaps(b.lan) or a.mgmt.overlaps(b.mgmt):
            errors.append("the sites' lan (or mgmt) subnets overlap")
        if self.first_host + self.hosts_per_site - 1 > 250:
            errors.append(f"hosts .{self.first_host}-.{self.first_host + self.hosts_per_site - 1} run into the "
                          "gateways' LAN addresses (.251-.254): lower first_host or hosts_per_site")
        if (sim := self.simulated_hosts) is not None:
            last = sim.first_host + sim.count - 1
            if last > 250:
                errors.append(f"simulated hosts .{sim.first_host}-.{last} run into the gateways' LAN addresses "
                              "(.251-.254): lower simulated_hosts.first_host or count")
            if sim.first_host <= self.first_host + self.hosts_per_site - 1 and self.first_host <= last:
                errors.append(f"simulated hosts .{sim.first_host}-.{last} overlap the namespace hosts "
                              f".{self.first_host}-.{self.first_host + self.hosts_per_site - 1}")
            if sim.port <= self.hosts_per_site or sim.port > 250:
                errors.append(f"simulated_hosts.port {sim.port} is a namespace host's or a gateway's port "
                              f"(hosts 1-{self.hosts_per_site}, gateways 251-254)")
        if self.wan.subnet.num_addresses < 32:
            errors.append(f"wan.subnet {self.wan.subnet} is too small (needs .11-.24)")
        if errors:
            raise ValueError("; ".join(errors))
        return self


def is_two_site(path: Path) -> bool:
    """Whether `path` is a two-site file (`kind: two-site`); False for anything else, readable or not."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and data.get("kind") == "two-site"


def _mac_plus(base: str, n: int) -> str:
    value = int(base.replace(":", ""), 16) + n
    raw = f"{value:012x}"
    return ":".join(raw[i:i + 2] for i in range(0, 12, 2))


def _site_nodes(ts: TwoSite, idx: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(hosts, gateways) of site `idx` without their peers, addresses derived from the index."""
    s = ts.sites[idx]
    first = ts.first_host
    hosts = [{"name": f"{s.name}h{j}", "port": j, "ip": str(s.lan[first + j - 1]),
              "mac": _mac_plus(s.mac_base, first + j - 1)}
             for j in range(1, ts.hosts_per_site + 1)]
    gws = [{"name": f"{s.name}gw{i}", "port": 250 + i, "lan_ip": str(s.lan[250 + i]),
            "mac": _mac_plus(s.mac_base, 0x100 + i), "wan_ip": str(ts.wan.subnet[10 * idx + 10 + i]),
            "mgmt_ip": str(s.mgmt[10 + i])}
           for i in range(1, ts.gateways + 1)]
    return hosts, gws


def site_topology(ts: TwoSite, idx: int) -> Topology:
    """Site `idx` as an ordinary Topology whose remote side is the other site."""
    s, o = ts.sites[idx], ts.sites[1 - idx]
    hosts, gws = _site_nodes(ts, idx)
    o_hosts, o_gws = _site_nodes(ts, 1 - idx)
    for g, peer in zip(gws, o_gws):
        g["peer"] = {"name": peer["name"], "wan_ip": peer["wan_ip"], "lan_ip": peer["lan_ip"]}
    data = {
        "prefix": s.prefix,
        "switch": ts.switch.model_dump(),
        "lan": {"subnet": str(s.lan), "gateway_ip": str(s.gateway_ip), "vmac_base": s.vmac_base,
                "buckets": ts.buckets, "dispatch": ts.dispatch},
        "hosts": hosts,
        "gateways": gws,
        "wan": {"subnet": str(ts.wan.subnet)},
        "remote": {"subnet": str(o.lan),
                   "hosts": [{"name": h["name"], "ip": h["ip"], "via": o_gws[j % len(o_gws)]["name"]}
                             for j, h in enumerate(o_hosts)]},
        "mgmt": {"subnet": str(s.mgmt), "host_ip": str(s.mgmt[1]), "controller_ip": str(s.mgmt[2])},
        "controller": {"api_port": s.api_port, "psk_bytes": ts.psk_bytes},
        "gateway_cpu_percent": ts.gateway_cpu_percent,
        "esp_proposals": ts.esp_proposals,
        "partner_site": {"wan_netns": ts.wan.netns, "initiate": s.initiate},
    }
    if (sim := ts.simulated_hosts) is not None:
        data["simulated_hosts"] = {"count": sim.count, "port": sim.port, "first_ip": str(s.lan[sim.first_host]),
                                   "first_mac": _mac_plus(s.mac_base, sim.first_host * sim.mac_step),
                                   "mac_step": sim.mac_step}
    return Topology.model_validate(data)


def load_two_site(path: Path = TWO_SITE_TOPOLOGY, switch: SwitchKind | None = None,
                  gateways: int | None = None, hosts: int | None = None) -> tuple[TwoSite, list[Topology]]:
    """The file and its two site topologies; `switch`/`gateways`/`hosts` override the file's values."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read topology: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise TopologyError(f"{path}: the top level must be a mapping")
    if switch is not None and isinstance(data.get("switch"), dict):
        data["switch"] = {**data["switch"], "kind": switch}
    if gateways is not None:
        data["gateways"] = gateways
    if hosts is not None:
        data["hosts_per_site"] = hosts
    try:
        ts = TwoSite.model_validate(data)
        return ts, [site_topology(ts, 0), site_topology(ts, 1)]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "<top>"
            lines.append(f"  {loc}: {str(err['msg']).removeprefix('Value error, ')}")
        raise TopologyError(f"{path}: invalid two-site topology:\n" + "\n".join(lines)) from None


def site_dir(topo: Topology) -> Path:
    """Each site's configs, gateway state and controller database: .run/<prefix>/."""
    return RUN_DIR / topo.prefix


def site_logs(topo: Topology) -> Path:
    return LOGS / topo.prefix


class TwoSiteBringup(run.Bringup):
    """`make run`'s stages for both sites: responders' gateways before initiators', then both controllers."""

    def __init__(self, ts: TwoSite, sites: list[Topology], topo_path: Path) -> None:
        super().__init__(sites[0], topo_path)
        self.ts, self.sites = ts, sites
        self.state.info["kind"] = "two-site"

    def run(self) -> bool:
        ts, sites = self.ts, self.sites
        self.state.save(STATE)
        say(f"building two sites: {ts.gateways} gateway pair(s), {ts.hosts_per_site} hosts per site, "
            f"WAN {ts.wan.subnet} in {ts.wan.netns}")
        network.build_shared_wan(ts.wan.netns)
        for topo in sites:
            network.build(topo, say)
        base = Secrets.fresh(ts.psk_bytes)  # one PSK and pair seed for the pairs; each site its own API tokens
        gens: dict[str, GeneratedConfigs] = {}
        problems: list[str] = []
        for topo in sites:
            sec = base if topo is sites[0] else dataclasses.replace(Secrets.fresh(ts.psk_bytes), psk=base.psk,
                                                                      pair_seed=base.pair_seed)
            gen = write_all(topo, site_dir(topo), sec)
            gens[topo.prefix] = gen
            self.state.info.update({f"{topo.prefix}.controller_config": str(gen.controller),
                                    f"{topo.prefix}.token_file": str(gen.token_file),
                                    f"{topo.prefix}.url": controller_url(topo)})
            problems += validate_with_owners(gen)
        self.state.info.update({"controller_config": str(gens[sites[0].prefix].controller),
                                "token_file": str(gens[sites[0].prefix].token_file)})
        self.record("configs", not problems, "; ".join(problems) or f"written to {RUN_DIR}/<site>/config")
        if problems:
            return False
        switches = [self._stage(f"switch {t.prefix}", lambda t=t: self._site_switch(t)) for t in sites]  # type: ignore[misc]
        order = sorted(sites, key=lambda t: t.partner_site is not None and t.partner_site.initiate)
        gateways_ok = all([self._stage(f"gateways {t.prefix}", lambda t=t: self._site_gateways(t, gens[t.prefix]))  # type: ignore[misc]
                           for t in order])
        if gateways_ok:
            gateways_ok = self._stage("tunnels", lambda: self._pair_tunnels(gens))
        controllers = [ok and self._stage(f"controller {t.prefix}", lambda t=t: self._site_controller(t, gens[t.prefix]))  # type: ignore[misc]
                       for t, ok in zip(sites, switches)]
        if gateways_ok and all(controllers):
            self._stage("agents", lambda: self._site_agents(gens))
            if ts.simulated_hosts is not None:
                self._stage("simulated hosts", self._simulated_hosts)
            self._stage("end-to-end ping", self._pair_ping)
        else:
            self.record("agents", False, "skipped: needs both controllers and the gateways")
        self.state.phase = "up" if all(ok for _, ok, _ in self.results) else "degraded"
        self.state.save(STATE)
        return self.state.phase == "up"

    def _site_switch(self, topo: Topology) -> str:
        logs = site_logs(topo)
        logs.mkdir(parents=True, exist_ok=True)
        rec = components.start_switch(topo, logs, self.add)
        return f"{topo.switch.kind}, pid {rec.pid} in {topo.switch_ns}, P4Runtime on {topo.switch.grpc_addr}"

    def _site_controller(self, topo: Topology, gen: GeneratedConfigs) -> str:
        rec = components.start_controller(topo, gen, site_logs(topo), self.add)
        return f"pid {rec.pid}, API {controller_url(topo)}"

    def _site_gateways(self, topo: Topology, gen: GeneratedConfigs) -> str:
        out = []
        logs = site_logs(topo)
        for g in topo.gateways:
            initiating = topo.partner_site is not None and topo.partner_site.initiate
            say(f"     gateway {g.name}: starting charon{' (initiating the tunnel to ' + g.peer.name + ')' if initiating else ''} ...")
            out.append(components.gateway_up(g.name, gen.gateways[g.name], logs).split(" (")[0])
            if (charon := components.charon_record(g.name, gen.gateways[g.name], logs)) is not None:
                self.add(charon)
            self.add(components.start_agent(g.name, topo.ns(g.name), gen.gateways[g.name],
                                            f"{g.mgmt_ip}:{AGENT_PORT}", logs))
        return "; ".join(out)

    def _pair_tunnels(self, gens: dict[str, GeneratedConfigs]) -> str:
        details = []
        for topo in self.sites:
            for g in topo.gateways:
                cfg = gens[topo.prefix].gateways[g.name]
                components.wait_until(lambda cfg=cfg: components.tunnel_up(cfg), 45, f"tunnel {g.name} <-> {g.peer.name}")  # type: ignore[misc]
            details.append(f"{topo.prefix}: {len(topo.gateways)} ESTABLISHED")
        return "; ".join(details)

    def _site_agents(self, gens: dict[str, GeneratedConfigs]) -> str:
        out = []
        for topo in self.sites:
            url = f"{controller_url(topo)}/api/v1/gateways"
            token = gens[topo.prefix].secrets.api_token
            names = {g.name for g in topo.gateways}
            out.append(components.wait_until(lambda: components.gateways_alive(url, token, names), 20,
                                             f"{topo.prefix}'s gateways reporting to its controller"))
        return "; ".join(out)

    def _simulated_hosts(self) -> str:
        clients = [simhosts.start(t, RUN_DIR, site_logs(t), self.add) for t in self.sites]
        return "; ".join(f"{t.prefix}: {simhosts.check_ready(t, c)}" for t, c in zip(self.sites, clients))

    def _pair_ping(self) -> str:
        """Every host reaches a host of the other site through both super gateways."""
        announce_hosts(self.sites)
        out = []
        for topo, other in (self.sites, self.sites[::-1]):
            for j, src in enumerate(topo.hosts):
                dst = other.hosts[j % len(other.hosts)]
                detail = components.wait_until(lambda: components.ping(topo.ns(src.name), str(dst.ip)), 30,
                                               f"ping {src.name} -> {dst.name} ({dst.ip})")
                rtt = detail.split("=")[-1].split("/")[1] if "rtt" in detail else "?"
                out.append(f"{src.name}->{dst.name} {rtt} ms")
        return ", ".join(out)


def announce_hosts(sites: list[Topology]) -> None:
    """Each host ARPs for its IP_G once, as a booting host does: a switch learns a host from its
    first frame, and a host that never sent one is unknown to it (traffic from the other site
    to it is dropped until then)."""
    probes = [subprocess.Popen(["ip", "netns", "exec", t.ns(h.name), "ping", "-n", "-q", "-c", "1", "-W", "1",
                                str(t.lan.gateway_ip)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for t in sites for h in t.hosts]
    for probe in probes:
        probe.wait(timeout=10)


def print_where_to_look(ts: TwoSite, sites: list[Topology], state: RunState) -> None:
    print("Where to look:")
    for topo in sites:
        url = controller_url(topo)
        token_file = state.info.get(f"{topo.prefix}.token_file", str(site_dir(topo) / "config" / "api-token"))
        print(f"  site {topo.prefix}: controller {url}/api/v1   (OpenAPI {url}/docs, dashboard {url}/dashboard/, "
              f"metrics {url}/metrics)")
        print(f"               token {token_file}")
        print(f"               curl -H \"Authorization: Bearer $(cat {token_file})\" {url}/api/v1/gateways")
        print(f"               switch ({topo.switch.kind}) P4Runtime {topo.switch.grpc_addr} inside {topo.switch_ns}; "
              f"logs {site_logs(topo)}/")
    a, b = sites
    print(f"  host shell   ip netns exec {a.ns(a.hosts[0].name)} bash     (try: ping {b.hosts[0].ip})")
    print(f"  pairs        {', '.join(f'{g.name}<->{g.peer.name}' for g in a.gateways)} over {ts.wan.netns} "
          f"{ts.wan.subnet}; gateway CPU cap {ts.gateway_cpu_percent or 'none'} % of a core")
    if ts.simulated_hosts is not None:
        socks = " ".join(str(simhosts.socket_path(RUN_DIR, t).relative_to(REPO)) for t in sites)
        print(f"  sim. hosts   {ts.simulated_hosts.count} per site (supergw-hostsim, switch port {ts.simulated_hosts.port}); "
              f"counters: .venv/bin/python -m topologies.hostsim_client {socks} --hosts")
    print("  stop         make stop")


def _running(state: RunState | None) -> bool:
    return state is not None and any(processes.alive(p) for p in state.processes)


def cmd_up(ts: TwoSite, sites: list[Topology], topo_path: Path) -> int:
    if os.geteuid() != 0:
        print("make run needs root (namespaces, veths, eBPF)", file=sys.stderr)
        return 1
    try:
        state = RunState.load(STATE)
    except ValueError as exc:
        say(f"{exc}: treating it as a crashed run")
        STATE.unlink()
        state = None
    if state is not None and state.phase in ("up", "degraded") and _running(state):
        say(f"a supergw emulation is already running (phase {state.phase}, topology {state.topology})")
        if state.info.get("kind") == "two-site":
            print_where_to_look(ts, sites, state)
            return 0
        say("`make stop` first to start the two-site topology")
        return 1
    if state is not None or any(network.existing_namespaces(t) for t in sites) or network.netns_exists(ts.wan.netns):
        say("leftovers of an earlier run found: cleaning up first")
        cmd_down(ts, sites, quiet=True)
    for topo in sites:
        shutil.rmtree(site_dir(topo), ignore_errors=True)  # no operator intent left from the last run
    if LOGS.exists():
        previous = RUN_DIR / "logs.previous"
        shutil.rmtree(previous, ignore_errors=True)
        LOGS.rename(previous)
    bringup = TwoSiteBringup(ts, sites, topo_path)
    try:
        ok = bringup.run()
    except (network.NetworkError, OSError, subprocess.SubprocessError, ComponentError) as exc:
        say(f"FAIL building the topology: {exc}")
        cmd_down(ts, sites, quiet=True)
        return 1
    except KeyboardInterrupt:
        say("interrupted: stopping what was started")
        cmd_down(ts, sites, quiet=True)
        return 130
    print()
    print_where_to_look(ts, sites, bringup.state)
    if not ok:
        failed = [stage for stage, good, _ in bringup.results if not good]
        say(f"DEGRADED: {', '.join(failed)} failed (details above and in {LOGS}); what did start keeps running")
        return 1
    say("supergw two-site emulation is up")
    return 0


def cmd_down(ts: TwoSite, sites: list[Topology], quiet: bool = False) -> int:
    try:
        state = RunState.load(STATE)
    except ValueError as exc:
        say(f"{exc}; removing namespaces anyway (processes it listed cannot be stopped by pid)")
        state = None
    for rec in reversed(state.processes if state else []):
        outcome = processes.stop(rec)
        if not quiet or outcome != "not running":
            say(f"{rec.name} (pid {rec.pid}): {outcome}")
    for topo in sites:
        for config in sorted((site_dir(topo) / "config").glob("gateway-*.yaml")):
            try:
                proc = components.gateway_cli("down", config, timeout=30)
                if proc.returncode != 0 and not quiet:
                    say(f"{config.stem}: `supergw-gateway down` failed: {proc.stderr.strip()[-200:]}")
            except (ComponentError, OSError, subprocess.TimeoutExpired) as exc:
                if not quiet:
                    say(f"{config.stem}: `supergw-gateway down` failed: {exc}")
    removed: list[str] = []
    for topo in sites:
        removed += network.teardown(topo)
        pins = components.pin_dir(topo)
        if pins.exists():
            shutil.rmtree(pins, ignore_errors=True)
            removed.append(str(pins))
    if network.netns_exists(ts.wan.netns):
        network.run(["ip", "netns", "del", ts.wan.netns], check=False)
        removed.append(ts.wan.netns)
    if removed and not quiet:
        say(f"removed {len(removed)} namespaces/links")
    STATE.unlink(missing_ok=True)
    if not quiet:
        say("supergw two-site emulation stopped")
    return 0


def cmd_status(ts: TwoSite, sites: list[Topology]) -> int:
    try:
        state = RunState.load(STATE)
    except ValueError as exc:
        print(exc)
        return 1
    present = [ns for t in sites for ns in network.existing_namespaces(t)]
    if state is None:
        print("not running (no .run/state.json)")
        if present:
            print(f"leftover namespaces: {', '.join(present)} (run `make stop`)")
        return 1
    print(f"phase {state.phase}, started {time.ctime(state.started_at)} (two sites)")
    for rec in state.processes:
        print(f"  {rec.name:<16} pid {rec.pid:<8} {'running' if processes.alive(rec) else 'STOPPED'}   log {rec.log}")
    for key, value in state.info.items():
        if key.startswith("stage."):
            print(f"  {key[6:]:<22} {value}")
    if ts.simulated_hosts is not None:
        for topo in sites:
            print(f"  {simhosts.status_line(topo, RUN_DIR)}")
    print(json.dumps({"namespaces": present}))
    return 0 if state.phase == "up" and all(processes.alive(p) for p in state.processes) else 1


def main(command: str, topo_path: Path, switch: SwitchKind | None) -> int:
    """`run.main` hands two-site files here."""
    try:
        ts, sites = load_two_site(topo_path, switch if command == "up" else None)
    except TopologyError as exc:
        print(exc, file=sys.stderr)
        return 2
    if command == "up":
        if ts.switch.kind == "bmv2" and (why := bmv2.missing()) is not None:
            print(f"cannot run the emulation on BMv2: {why}", file=sys.stderr)
            return 2
        return cmd_up(ts, sites, topo_path)
    if command == "down":
        return cmd_down(ts, sites)
    return cmd_status(ts, sites)
