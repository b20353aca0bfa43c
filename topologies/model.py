"""The emulated topology as data: a validated YAML file (see default.yaml).

`load_topology(path)` returns a `Topology` or raises `TopologyError` naming the bad key.
Derived names (namespaces, interfaces) live here too, so the builder, the health checks
and `down` agree on them.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import yaml
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from supergw_controller.config import DispatchConfig

DEFAULT_TOPOLOGY = Path(__file__).resolve().parent / "default.yaml"

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
# Linux limits interface names to 15 characters; namespace names share our prefix.
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{0,10}$")


class TopologyError(ValueError):
    """The topology file is missing, not YAML, or does not validate."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _mac(v: object) -> str:
    if not isinstance(v, str) or not _MAC_RE.match(v.lower()):
        raise ValueError(f"{v!r} is not a MAC address like '02:00:00:00:00:01'")
    mac = v.lower()
    if int(mac[:2], 16) & 1:
        raise ValueError(f"{mac} is multicast")
    return mac


def _name(v: str) -> str:
    if not _NAME_RE.match(v):
        raise ValueError(f"{v!r}: names are 1-8 lowercase letters/digits starting with a letter")
    return v


Mac = Annotated[str, AfterValidator(_mac)]
NodeName = Annotated[str, AfterValidator(_name)]


SwitchKind = Literal["ebpf", "bmv2"]
SWITCH_KINDS: tuple[SwitchKind, ...] = ("ebpf", "bmv2")
# v1model's egress_spec is 9 bits and BMv2 drops what is sent to port 511.
BMV2_MAX_PORT = 510


class SwitchSpec(_Strict):
    # ebpf: targets/ebpf's supergw-switch; bmv2: simple_switch_grpc with `make p4`'s JSON.
    kind: SwitchKind = "ebpf"
    device_id: int = Field(ge=0, lt=2**64)
    grpc_addr: str = "127.0.0.1:9559"
    cpu_port: int = Field(default=255, ge=0, lt=2**16)

    @property
    def grpc_port(self) -> int:
        return int(self.grpc_addr.rpartition(":")[2])


class LanSpec(_Strict):
    subnet: ipaddress.IPv4Network
    gateway_ip: ipaddress.IPv4Address
    vmac_base: Mac
    buckets: int = Field(default=256, ge=1, le=4096)
    # The controller's `dispatch` section (bucket hash, initial partition), passed through.
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)

    @model_validator(mode="after")
    def _checks(self) -> LanSpec:
        if self.gateway_ip not in self.subnet:
            raise ValueError(f"gateway_ip {self.gateway_ip} is outside subnet {self.subnet}")
        if self.buckets & (self.buckets - 1):
            raise ValueError(f"buckets {self.buckets} is not a power of two")
        return self


class HostSpec(_Strict):
    name: NodeName
    port: int = Field(ge=0, lt=2**16)
    ip: ipaddress.IPv4Address
    mac: Mac



class PeerSpec(_Strict):
    name: NodeName
    wan_ip: ipaddress.IPv4Address
    lan_ip: ipaddress.IPv4Address



class GatewaySpec(_Strict):
    name: NodeName
    port: int = Field(ge=0, lt=2**16)
    lan_ip: ipaddress.IPv4Address
    mac: Mac
    wan_ip: ipaddress.IPv4Address
    mgmt_ip: ipaddress.IPv4Address
    peer: PeerSpec
    weight: float = Field(default=1.0, gt=0)



class WanSpec(_Strict):
    subnet: ipaddress.IPv4Network


class RemoteHostSpec(_Strict):
    name: NodeName
    ip: ipaddress.IPv4Address
    via: str



class RemoteSpec(_Strict):
    subnet: ipaddress.IPv4Network
    hosts: list[RemoteHostSpec] = Field(min_length=1)


class MgmtSpec(_Strict):
    subnet: ipaddress.IPv4Network
    host_ip: ipaddress.IPv4Address
    controller_ip: ipaddress.IPv4Address


class ControllerSpec(_Strict):
    api_port: int = Field(default=8080, gt=0, lt=65536)
    psk_bytes: int = Field(default=24, ge=8, le=64)
    # > 1: that many controller replicas, each with an etcd member in its own namespace on
    # the management network (topologies/ha.py; `make run HA=1` sets 3).
    replicas: int = Field(default=1, ge=1, le=5)

    def replica_names(self) -> list[str]:
        return [f"c{i}" for i in range(1, self.replicas + 1)] if self.replicas > 1 else []


class SimulatedHostsSpec(_Strict):
    """Hosts emulated by one supergw-hostsim on one switch port (topologies/hostsim/README.md):
    host k has first_ip + k and first_mac + k * mac_step; the program runs in namespace `<prefix>-hsim`
    on `hsim0`, whose peer is the switch's `sw-hsim`."""

    count: int = Field(ge=1, le=4096)
    port: int = Field(ge=0, lt=2**16)
    first_ip: ipaddress.IPv4Address
    first_mac: Mac
    mac_step: int = Field(default=1, ge=1, lt=2**40)

    def ips(self) -> list[ipaddress.IPv4Address]:
        return [self.first_ip + k for k in range(self.count)]

    def macs(self) -> list[str]:
        base = int(self.first_mac.replace(":", ""), 16)
        return [":".join(f"{base + k * self.mac_step:012x}"[i:i + 2] for i in range(0, 12, 2)) for k in range(self.count)]


class PartnerSite(_Strict):
    """The remote side is another super gateway built beside this one (topologies/twosite.py):
    the peers are its gateways, the remote hosts its hosts; neither is built by this site."""

    wan_netns: str  # the shared WAN namespace (its bridge br0 exists before this site is built)
    initiate: bool  # whether this site's gateways initiate the IKE SAs (exactly one site does)


class Topology(_Strict):
    prefix: str
    switch: SwitchSpec
    lan: LanSpec
    hosts: list[HostSpec] = Field(min_length=1)
    gateways: list[GatewaySpec] = Field(min_length=1, max_length=16)
    wan: WanSpec
    remote: RemoteSpec
    mgmt: MgmtSpec
    controller: ControllerSpec = Field(default_factory=ControllerSpec)
    # cgroup CPU quota of each member gateway's charon, % of one core (None: no cap).
    gateway_cpu_percent: float | None = Field(default=None, gt=0, le=6400)
    # ESP proposals of every tunnel (strongSwan syntax, checked by the gateway's loader);
    # None: the gateway's default (supergw_gateway.config.DEFAULT_ESP_PROPOSAL).
    esp_proposals: list[str] | None = Field(default=None, min_length=1)
    partner_site: PartnerSite | None = None
    simulated_hosts: SimulatedHostsSpec | None = None

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not _PREFIX_RE.match(v):
            raise ValueError(f"{v!r}: prefix is 1-11 of [a-z0-9-] starting with a letter")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> Topology:
        errors: list[str] = []
        names = [h.name for h in self.hosts] + [g.name for g in self.gateways]
        names += [g.peer.name for g in self.gateways] + [r.name for r in self.remote.hosts]
        names += ["sw", "wan", "rlan", "mgmt", "hsim", *self.controller.replica_names()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            errors.append(f"names used twice (or reserved sw/wan/rlan/mgmt): {dup}")
        ports = [h.port for h in self.hosts] + [g.port for g in self.gateways]
        sim = self.simulated_hosts
        if sim is not None:
            ports.append(sim.port)
        if len(set(ports)) != len(ports):
            errors.append(f"switch ports used twice: {sorted(p for p in set(ports) if ports.count(p) > 1)}")
        if self.switch.cpu_port in ports:
            errors.append(f"port {self.switch.cpu_port} is the CPU port")
        if self.switch.kind == "bmv2":
            wide = sorted(p for p in [*ports, self.switch.cpu_port] if p > BMV2_MAX_PORT)
            if wide:
                errors.append(f"switch.kind bmv2: ports {wide} do not fit v1model's 9-bit ports (0-{BMV2_MAX_PORT})")
        macs = [h.mac for h in self.hosts] + [g.mac for g in self.gateways] + [self.lan.vmac_base]
        lan_ips = [h.ip for h in self.hosts] + [g.lan_ip for g in self.gateways] + [self.lan.gateway_ip]
        if sim is not None:
            sim_ips, sim_macs = sim.ips(), sim.macs()
            if sim_ips[-1] not in self.lan.subnet or sim_ips[-1] == self.lan.subnet.broadcast_address:
                errors.append(f"simulated_hosts: {sim.first_ip} + {sim.count} runs past the LAN subnet {self.lan.subnet}")
            if int(sim.first_mac.replace(":", ""), 16) + (sim.count - 1) * sim.mac_step >= 2**48:
                errors.append("simulated_hosts: first_mac + count * mac_step overflows 48 bits")
            if set(sim_ips) & set(lan_ips) or set(sim_macs) & set(macs):
                errors.append("simulated_hosts: its IP or MAC range overlaps a host, a gateway or IP_G")
            macs += sim_macs
            lan_ips.append(sim.first_ip)
        if len(set(macs)) != len(macs):
            errors.append("MAC addresses used twice")
        for ip in lan_ips:
            if ip not in self.lan.subnet:
                errors.append(f"{ip} is outside the LAN subnet {self.lan.subnet}")
        if len(set(lan_ips)) != len(lan_ips):
            errors.append("LAN addresses used twice")
        peers = {g.peer.name for g in self.gateways}
        for g in self.gateways:
            if g.wan_ip not in self.wan.subnet or g.peer.wan_ip not in self.wan.subnet:
                errors.append(f"gateway {g.name}: WAN addresses must be in {self.wan.subnet}")
            if g.peer.lan_ip not in self.remote.subnet:
                errors.append(f"peer {g.peer.name}: lan_ip must be in {self.remote.subnet}")
            if g.mgmt_ip not in self.mgmt.subnet:
                errors.append(f"gateway {g.name}: mgmt_ip must be in {self.mgmt.subnet}")
        for r in self.remote.hosts:
            if r.via not in peers:
                errors.append(f"remote host {r.name}: via {r.via!r} is not a peer gateway")
            if r.ip not in self.remote.subnet:
                errors.append(f"remote host {r.name}: {r.ip} is outside {self.remote.subnet}")
        if self.controller.replicas > 1:
            if self.partner_site is not None:
                errors.append("controller.replicas > 1 is for the one-site topology only")
            taken = {self.mgmt.host_ip, self.mgmt.controller_ip, *(g.mgmt_ip for g in self.gateways)}
            for name, ip in self.replica_ips().items():
                if ip not in self.mgmt.subnet or ip in taken:
                    errors.append(f"controller replica {name}: its address {ip} is outside {self.mgmt.subnet} or taken")
        if self.lan.subnet.overlaps(self.remote.subnet):
            errors.append("lan.subnet overlaps remote.subnet")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    # Derived names: one place, used by build, health checks and teardown.
    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    @property
    def switch_ns(self) -> str:
        return self.ns("sw")

    @property
    def mgmt_root_if(self) -> str:
        """The machine's end of the management link (root namespace)."""
        return f"{self.prefix}-m0"

    def replica_ips(self) -> dict[str, ipaddress.IPv4Address]:
        """Controller replica name -> its management address (.31, .32, ...); empty with one controller."""
        base = self.mgmt.subnet.network_address + 30
        return {name: base + i for i, name in enumerate(self.controller.replica_names(), start=1)}

    def namespaces(self) -> list[str]:
        """The namespaces this topology builds (with a partner site: not the WAN nor the remote side)."""
        sim = ["hsim"] if self.simulated_hosts is not None else []
        if self.partner_site is not None:
            return [self.ns(n) for n in ["sw", "mgmt", *(h.name for h in self.hosts), *(g.name for g in self.gateways), *sim]]
        nodes = ["sw", "wan", "rlan", "mgmt", *sim, *self.controller.replica_names()]
        nodes += [h.name for h in self.hosts]
        for g in self.gateways:
            nodes += [g.name, g.peer.name]
        nodes += [r.name for r in self.remote.hosts]
        return [self.ns(n) for n in nodes]

    @property
    def host_ports(self) -> set[int]:
        """Switch ports with the HOST role: the namespace hosts' and the simulated hosts' port."""
        ports = {h.port for h in self.hosts}
        if self.simulated_hosts is not None:
            ports.add(self.simulated_hosts.port)
        return ports

    def wan_port(self, g: GatewaySpec) -> str:
        """Gateway `g`'s end in the WAN namespace (site-prefixed when the WAN is shared)."""
        return f"{self.prefix}-{g.name}" if self.partner_site is not None else g.name

    def peer_of(self, name: str) -> GatewaySpec:
        for g in self.gateways:
            if g.peer.name == name:
                return g
        raise KeyError(name)


def load_topology(path: Path = DEFAULT_TOPOLOGY, switch: SwitchKind | None = None) -> Topology:
    """`switch`, when given, replaces the file's `switch.kind` (and is validated with it)."""
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
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "<top>"
            lines.append(f"  {loc}: {str(err['msg']).removeprefix('Value error, ')}")
        raise TopologyError(f"{path}: invalid topology:\n" + "\n".join(lines)) from None
