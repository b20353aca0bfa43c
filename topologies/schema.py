"""The topology file: one YAML schema with two forms, read by `load` into an `EmulationSpec`.

- `kind: site` (the default when `kind` is absent; default.yaml): one super gateway with
  every host, gateway, peer and address written out (a `Topology`), its remote side plain
  peer gateways with remote hosts behind them. The emulation is that one site.
- `kind: two-site` (two-site.yaml, two-site-paper.yaml): two super gateways facing each
  other over a shared WAN, gateway i of site A paired with gateway i of site B. Sizes are
  given (`gateways`, `hosts_per_site`, `simulated_hosts`) and every name and address is
  derived per index (`derive`), so each site is an ordinary `Topology` whose peers are the
  other site's gateways (`Topology.partner_site`).

Either form may ask for replicated controllers per site (`controller.replicas`, resp.
`sites[].replicas`) and for REST and P4Runtime over TLS (`controller.tls`, resp.
`sites[].tls`); `load` applies the command line's overrides (switch, replicas, tls) on top.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from supergw_controller.config import DispatchConfig, RebalancerConfig
from supergw_proto.addresses import mac_offset
from supergw_proto.strict import StrictModel, read_yaml_mapping, validate

from topologies.model import (
    DEFAULT_TOPOLOGY,
    MAX_REPLICAS,
    TOPOLOGY_DIR,
    EmulationSpec,
    LanSpec,
    Mac,
    MgmtSpec,
    SwitchKind,
    SwitchSpec,
    Topology,
    TopologyError,
)

TWO_SITE_TOPOLOGY = TOPOLOGY_DIR / "two-site.yaml"
TWO_SITE_PAPER_TOPOLOGY = TOPOLOGY_DIR / "two-site-paper.yaml"
REMOTE_ACCESS_TOPOLOGY = TOPOLOGY_DIR / "remote-access.yaml"
KINDS = ("site", "two-site", "remote-access")
MAX_PAIRS = 4
# One switch port per namespace host, and the eBPF switch floods to at most 32 ports
# (RESOURCE_EXHAUSTED beyond): many hosts per side are `simulated_hosts`, all on one port.
MAX_HOSTS = 32
_SITE_RE = re.compile(r"^[a-z]$")
# A shared-WAN port is "<prefix>-<gateway>" (Topology.wan_port): 6 + 1 + 8 fits Linux's 15.
_SITE_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{0,5}$")


class SiteSpec(StrictModel):
    """One side of a two-site file."""

    name: str
    prefix: str
    lan: ipaddress.IPv4Network
    gateway_ip: ipaddress.IPv4Address
    vmac_base: Mac
    mac_base: Mac
    mgmt: ipaddress.IPv4Network
    initiate: bool
    lan6: ipaddress.IPv6Network | None = None  # dual stack: the site LAN's IPv6 /64 (both sites or neither)
    api_port: int = Field(default=8080, gt=0, lt=65536)
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)  # > 1: replicated controllers on etcd at this site
    tls: bool = False  # REST over https and P4Runtime over mutual TLS at this site

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SITE_RE.match(v):
            raise ValueError(f"{v!r}: a site name is one lowercase letter")
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not _SITE_PREFIX_RE.match(v):
            raise ValueError(f"{v!r}: a site prefix is 1-6 of [a-z0-9-] starting with a letter")
        return v


class WanNetOnly(StrictModel):
    subnet: ipaddress.IPv4Network


class WanNet(StrictModel):
    netns: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    subnet: ipaddress.IPv4Network
    subnet6: ipaddress.IPv6Network | None = None  # IPv6 outer between the pairs (model.WanSpec)


class SimulatedHosts(StrictModel):
    """Each site's simulated hosts: one supergw-hostsim on one switch port (topologies/hostsim).
    Host k of a site has LAN .(first_host + k) and MAC mac_base + (first_host + k) * mac_step (step 1:
    like the namespace hosts; 256: the paper's §4.3 hosts ..:18:00, ..:19:00, ...)."""

    count: int = Field(ge=1, le=250)
    first_host: int = Field(ge=2, le=250)
    port: int = Field(default=200, ge=1, le=510)
    mac_step: int = Field(default=1, ge=1, le=2**16)


class TwoSiteFile(StrictModel):
    kind: Literal["two-site"]
    gateways: int = Field(ge=1, le=MAX_PAIRS)
    hosts_per_site: int = Field(ge=1, le=MAX_HOSTS)
    first_host: int = Field(default=11, ge=2, le=249)  # host j: LAN .(first_host + j - 1), MAC mac_base + the same
    gateway_cpu_percent: float | None = Field(default=None, gt=0, le=6400)
    gateway_backend: Literal["auto", "libipsec", "uml"] = "auto"  # every gateway of both sites (model.Topology)
    esp_proposals: list[str] | None = Field(default=None, min_length=1)  # both sites' tunnels; None: the default
    buckets: int = Field(default=256, ge=1, le=4096)
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)  # both controllers' `dispatch` section
    rebalancer: RebalancerConfig | None = None  # both controllers' `rebalancer` section (None: their defaults)
    switch: SwitchSpec
    wan: WanNet
    sites: list[SiteSpec] = Field(min_length=2, max_length=2)
    psk_bytes: int = Field(default=24, ge=8, le=64)
    simulated_hosts: SimulatedHosts | None = None

    @model_validator(mode="after")
    def _checks(self) -> TwoSiteFile:
        a, b = self.sites
        errors = []
        if a.name == b.name or a.prefix == b.prefix:
            errors.append("the two sites need different names and prefixes")
        if a.initiate == b.initiate:
            errors.append("exactly one site initiates the IKE SAs (sites[].initiate)")
        if a.lan.overlaps(b.lan) or a.mgmt.overlaps(b.mgmt):
            errors.append("the sites' lan (or mgmt) subnets overlap")
        if (a.lan6 is None) != (b.lan6 is None):
            errors.append("dual stack needs sites[].lan6 at both sites (or at neither)")
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
        for s in self.sites:  # addresses are derived by index: a subnet too small has none to give
            if s.lan.num_addresses < 256:
                errors.append(f"sites[{s.name}].lan {s.lan} is too small: hosts and gateways take "
                              f".{self.first_host}-.254 (a /24 or larger)")
            if s.mgmt.num_addresses < 16:
                errors.append(f"sites[{s.name}].mgmt {s.mgmt} is too small: gateways take .11-.14 (a /28 or larger)")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def _nodes(self, idx: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(hosts, gateways) of site `idx` without their peers, addresses derived from the index."""
        s = self.sites[idx]
        first = self.first_host
        hosts = [{"name": f"{s.name}h{j}", "port": j, "ip": str(s.lan[first + j - 1]),
                  "mac": mac_offset(s.mac_base, first + j - 1)}
                 for j in range(1, self.hosts_per_site + 1)]
        gws = [{"name": f"{s.name}gw{i}", "port": 250 + i, "lan_ip": str(s.lan[250 + i]),
                "mac": mac_offset(s.mac_base, 0x100 + i), "wan_ip": str(self.wan.subnet[10 * idx + 10 + i]),
                "mgmt_ip": str(s.mgmt[10 + i])}
               for i in range(1, self.gateways + 1)]
        return hosts, gws

    def site(self, idx: int) -> Topology:
        """Site `idx` as an ordinary Topology whose remote side is the other site."""
        s, o = self.sites[idx], self.sites[1 - idx]
        hosts, gws = self._nodes(idx)
        o_hosts, o_gws = self._nodes(1 - idx)
        for g, peer in zip(gws, o_gws):
            g["peer"] = {"name": peer["name"], "wan_ip": peer["wan_ip"], "lan_ip": peer["lan_ip"]}
        data: dict[str, Any] = {
            "prefix": s.prefix,
            "switch": self.switch.model_dump(mode="json"),
            "lan": {"subnet": str(s.lan), "gateway_ip": str(s.gateway_ip), "vmac_base": s.vmac_base,
                    "buckets": self.buckets, "dispatch": self.dispatch,
                    **({"subnet6": str(s.lan6)} if s.lan6 is not None else {})},
            "hosts": hosts,
            "gateways": gws,
            "wan": {"subnet": str(self.wan.subnet),
                    **({"subnet6": str(self.wan.subnet6)} if self.wan.subnet6 is not None else {})},
            "remote": {"subnet": str(o.lan),
                       "hosts": [{"name": h["name"], "ip": h["ip"], "via": o_gws[j % len(o_gws)]["name"]}
                                 for j, h in enumerate(o_hosts)],
                       **({"subnet6": str(o.lan6)} if o.lan6 is not None else {})},
            "mgmt": {"subnet": str(s.mgmt), "host_ip": str(s.mgmt[1]), "controller_ip": str(s.mgmt[2])},
            "controller": {"api_port": s.api_port, "psk_bytes": self.psk_bytes, "replicas": s.replicas, "tls": s.tls,
                           "rebalancer": self.rebalancer},
            "gateway_cpu_percent": self.gateway_cpu_percent,
            "gateway_backend": self.gateway_backend,
            "esp_proposals": self.esp_proposals,
            "partner_site": {"wan_netns": self.wan.netns, "initiate": s.initiate},
        }
        if (sim := self.simulated_hosts) is not None:
            data["simulated_hosts"] = {"count": sim.count, "port": sim.port, "first_ip": str(s.lan[sim.first_host]),
                                       "first_mac": mac_offset(s.mac_base, sim.first_host * sim.mac_step),
                                       "mac_step": sim.mac_step}
        return Topology.model_validate(data)

    def derive(self) -> EmulationSpec:
        return EmulationSpec(sites=[self.site(0), self.site(1)], shared_wan=self.wan.netns)


class RemoteAccessFile(StrictModel):
    """`kind: remote-access` (remote-access.yaml): one site whose gateways also serve road-warrior
    clients on one public address behind the outside switch. Sizes are given (`gateways`,
    `hosts`, `clients`) and the nodes derived per index as default.yaml writes them out: host j
    LAN .(10 + j), port j, MAC mac_base + the same; gateway i LAN .(250 + i), port 10 + i, MAC
    mac_base + 0x100 + i, WAN .(10 + i), management .(10 + i), peer i WAN .(20 + i) and remote
    LAN .(250 + i); one remote host r1 behind peer1 (the site-to-site side, unchanged)."""

    kind: Literal["remote-access"]
    prefix: str
    gateways: int = Field(ge=1, le=MAX_PAIRS)
    hosts: int = Field(default=2, ge=1, le=MAX_HOSTS)
    clients: int = Field(default=8, ge=0)  # checked against MAX_CLIENTS by RemoteAccessSpec
    switch: SwitchSpec
    lan: LanSpec
    mac_base: Mac
    wan: WanNetOnly
    remote_subnet: ipaddress.IPv4Network
    mgmt: MgmtSpec
    gateway_cpu_percent: float | None = Field(default=None, gt=0, le=6400)
    remote_access: dict[str, Any]  # RemoteAccessSpec without `clients` (the top-level key sets it)

    @model_validator(mode="after")
    def _sizes(self) -> RemoteAccessFile:
        """Addresses are derived by index (class doc): each subnet must hold the highest one."""
        need = {"lan.subnet": (self.lan.subnet, 256), "wan.subnet": (self.wan.subnet, 32),
                "remote_subnet": (self.remote_subnet, 256), "mgmt.subnet": (self.mgmt.subnet, 16)}
        small = [f"{k} {net} is too small for the addresses derived in it (at least {n} addresses)"
                 for k, (net, n) in need.items() if net.num_addresses < n]
        if small:
            raise ValueError("; ".join(small))
        return self

    def derive(self) -> EmulationSpec:
        lan, wan, rlan, mgmt = self.lan.subnet, self.wan.subnet, self.remote_subnet, self.mgmt.subnet
        hosts = [{"name": f"h{j}", "port": j, "ip": str(lan[10 + j]), "mac": mac_offset(self.mac_base, 10 + j)}
                 for j in range(1, self.hosts + 1)]
        gws = [{"name": f"gw{i}", "port": 10 + i, "lan_ip": str(lan[250 + i]), "mac": mac_offset(self.mac_base, 0x100 + i),
                "wan_ip": str(wan[10 + i]), "mgmt_ip": str(mgmt[10 + i]),
                "peer": {"name": f"peer{i}", "wan_ip": str(wan[20 + i]), "lan_ip": str(rlan[250 + i])}}
               for i in range(1, self.gateways + 1)]
        if "clients" in self.remote_access:
            raise ValueError("remote_access.clients: give the client count as the top-level key `clients`")
        data: dict[str, Any] = {
            "prefix": self.prefix,
            "switch": self.switch.model_dump(mode="json"),
            "lan": self.lan.model_dump(mode="json"),
            "hosts": hosts,
            "gateways": gws,
            "wan": {"subnet": str(wan)},
            "remote": {"subnet": str(rlan), "hosts": [{"name": "r1", "ip": str(rlan[11]), "via": "peer1"}]},
            "mgmt": self.mgmt.model_dump(mode="json"),
            "gateway_cpu_percent": self.gateway_cpu_percent,
            "remote_access": {**self.remote_access, "clients": self.clients},
        }
        return EmulationSpec(sites=[Topology.model_validate(data)])


def parse(data: Mapping[str, Any], source: str) -> EmulationSpec:
    """The plan a topology file's mapping describes; TopologyError naming the bad key."""
    body = dict(data)
    kind = body.get("kind", "site")
    if "kind" not in body and "sites" in body:  # else a wall of "unknown key" that never says why
        raise TopologyError(f"{source}: kind: missing, and the file has `sites`: a two-site topology needs `kind: two-site`")
    if kind == "two-site":
        two = validate(TwoSiteFile, body, source, "two-site topology", TopologyError)
        try:
            return two.derive()
        except ValueError as exc:  # a derived site or the pair refused: the file's values caused it
            raise TopologyError(f"{source}: invalid two-site topology:\n  {exc}") from None
    if kind == "remote-access":
        ra = validate(RemoteAccessFile, body, source, "remote-access topology", TopologyError)
        try:
            return ra.derive()
        except ValueError as exc:
            raise TopologyError(f"{source}: invalid remote-access topology:\n  {exc}") from None
    if kind != "site":
        raise TopologyError(f"{source}: kind: {kind!r} is not a topology kind (one of {', '.join(KINDS)})")
    body.pop("kind", None)
    site = validate(Topology, body, source, "topology", TopologyError)
    return EmulationSpec(sites=[site])


def load(path: Path = DEFAULT_TOPOLOGY, *, switch: SwitchKind | None = None, replicas: int | None = None,
         replicas_site: str | None = None, changes: Mapping[str, Any] | None = None, tls: bool = False) -> EmulationSpec:
    """The plan in the topology file at `path`. `changes` replace top-level keys of the file
    before it is validated (e.g. `{"gateways": 2}` for a two-site file); `switch` puts every
    site on that switch; `replicas` gives site `replicas_site` (None: every site) that many
    controllers; `tls` puts every site's REST and P4Runtime on TLS (False: as the file says).
    Every override is validated as the file is."""
    data = read_yaml_mapping(path, "topology", TopologyError)
    data.update(changes or {})
    spec = parse(data, str(path))
    try:
        return spec.with_switch(switch).with_replicas(replicas, replicas_site).with_tls(tls)
    except TopologyError as exc:
        raise TopologyError(f"{path}: {exc}") from None
