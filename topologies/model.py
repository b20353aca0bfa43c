"""The emulation as data: sites (`Topology`, one super gateway each) and the plan that
boots them together (`EmulationSpec`).

The models validate every cross-reference and name the bad key; derived names
(namespaces, interfaces, addresses of replicas) live here too, so the builder, the
health checks and `down` agree on them. The topology files are read by schema.py.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from supergw_controller.config import DispatchConfig, RebalancerConfig
from supergw_proto.addresses import mac_offset, mac_to_int, normalise_mac
from supergw_proto.strict import StrictModel, format_validation_error

TOPOLOGY_DIR = Path(__file__).resolve().parent
DEFAULT_TOPOLOGY = TOPOLOGY_DIR / "default.yaml"

_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
# Linux limits interface names to 15 characters; namespace names share our prefix.
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{0,10}$")
MAX_REPLICAS = 5
CLUSTER_GATEWAYS = 16  # remote access: gateway i's SPI plan is ra.config.cluster_spi_plan(i) (up to 64)


class Prefixed:
    """The names every namespace builder shares (an emulated site, a switch lab): each
    namespace is `<prefix>-<node>`, the switch's is `<prefix>-sw`, and this machine's end of
    the management link `<prefix>-m0` (so the root namespace holds one interface per prefix)."""

    prefix: str

    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    @property
    def switch_ns(self) -> str:
        return self.ns("sw")

    @property
    def mgmt_root_if(self) -> str:
        return f"{self.prefix}-m0"


class TopologyError(ValueError):
    """The topology file is missing, not YAML, or does not validate."""


def _mac(v: object) -> str:
    mac = normalise_mac(v)
    if mac_to_int(mac) >> 40 & 1:
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


class SwitchSpec(StrictModel):
    # ebpf: targets/ebpf's supergw-switch; bmv2: simple_switch_grpc with `make p4`'s JSON.
    kind: SwitchKind = "ebpf"
    device_id: int = Field(ge=0, lt=2**64)
    grpc_addr: str = "127.0.0.1:9559"
    cpu_port: int = Field(default=255, ge=0, lt=2**16)

    @property
    def grpc_port(self) -> int:
        return int(self.grpc_addr.rpartition(":")[2])


def twin6(ip: ipaddress.IPv4Address, subnet: ipaddress.IPv4Network, subnet6: ipaddress.IPv6Network) -> ipaddress.IPv6Address:
    """The IPv6 twin of a dual-stack node's IPv4 address: the same offset into `subnet6` as
    `ip` has in `subnet` (10.60.0.11 in 10.60.0.0/24 -> fd00:60::b in fd00:60::/64), so a
    topology lists every address once."""
    return subnet6.network_address + (int(ip) - int(subnet.network_address))


class LanSpec(StrictModel):
    subnet: ipaddress.IPv4Network
    gateway_ip: ipaddress.IPv4Address
    vmac_base: Mac
    buckets: int = Field(default=256, ge=1, le=4096)
    # The controller's `dispatch` section (bucket hash, initial partition), passed through.
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)
    # Dual stack: the LAN's IPv6 /64. Every node gets its IPv4 address's twin in it (twin6),
    # IP_G's twin is the gateway's global address GUA_G, `gateway_ll` its link-local LL_G;
    # the controller advertises the prefix (Router Advertisements), hosts also form SLAAC addresses.
    subnet6: ipaddress.IPv6Network | None = None
    gateway_ll: ipaddress.IPv6Address = ipaddress.IPv6Address("fe80::1")
    ra_interval_s: float = Field(default=30.0, ge=4.0, le=1800.0, description="MaxRtrAdvInterval of the emulation")

    @model_validator(mode="after")
    def _checks(self) -> LanSpec:
        if self.gateway_ip not in self.subnet:
            raise ValueError(f"gateway_ip {self.gateway_ip} is outside subnet {self.subnet}")
        if self.buckets & (self.buckets - 1):
            raise ValueError(f"buckets {self.buckets} is not a power of two")
        if self.subnet6 is not None and self.subnet6.prefixlen != 64:
            raise ValueError(f"subnet6 {self.subnet6} must be a /64 (hosts form SLAAC addresses in it)")
        if not self.gateway_ll.is_link_local:
            raise ValueError(f"gateway_ll {self.gateway_ll} is not link-local (fe80::/10)")
        return self

    @property
    def gateway_ip6(self) -> ipaddress.IPv6Address | None:
        return None if self.subnet6 is None else twin6(self.gateway_ip, self.subnet, self.subnet6)


class HostSpec(StrictModel):
    name: NodeName
    port: int = Field(ge=0, lt=2**16)
    ip: ipaddress.IPv4Address
    mac: Mac



class PeerSpec(StrictModel):
    name: NodeName
    wan_ip: ipaddress.IPv4Address
    lan_ip: ipaddress.IPv4Address



class GatewaySpec(StrictModel):
    name: NodeName
    port: int = Field(ge=0, lt=2**16)
    lan_ip: ipaddress.IPv4Address
    mac: Mac
    wan_ip: ipaddress.IPv4Address
    mgmt_ip: ipaddress.IPv4Address
    peer: PeerSpec
    weight: float = Field(default=1.0, gt=0)



class WanSpec(StrictModel):
    subnet: ipaddress.IPv4Network
    # IPv6 outer: the tunnels run between the WAN addresses' twins in this prefix (twin6);
    # every gateway and peer also holds its twin on its WAN interface. None: IPv4 outer.
    subnet6: ipaddress.IPv6Network | None = None


class RemoteHostSpec(StrictModel):
    name: NodeName
    ip: ipaddress.IPv4Address
    via: str



class RemoteSpec(StrictModel):
    subnet: ipaddress.IPv4Network
    hosts: list[RemoteHostSpec] = Field(min_length=1)
    subnet6: ipaddress.IPv6Network | None = None  # dual stack (with lan.subnet6): the remote LAN's IPv6 twin


class MgmtSpec(StrictModel):
    subnet: ipaddress.IPv4Network
    host_ip: ipaddress.IPv4Address
    controller_ip: ipaddress.IPv4Address


class ControllerSpec(StrictModel):
    api_port: int = Field(default=8080, gt=0, lt=65536)
    psk_bytes: int = Field(default=24, ge=8, le=64)
    # > 1: that many controller replicas, each with an etcd member in its own namespace on
    # the management network (topologies/ha.py; `make run HA=1` sets 3).
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    # true: the REST API serves https and P4Runtime runs over mutual TLS, with certificates
    # `up` issues (topologies/api_tls.py; `make run TLS=1` sets it).
    tls: bool = False
    # The controllers' `rebalancer:` section (supergw_controller.config.RebalancerConfig);
    # None: the controller's defaults.
    rebalancer: RebalancerConfig | None = None

    def replica_names(self) -> list[str]:
        return [f"c{i}" for i in range(1, self.replicas + 1)] if self.replicas > 1 else []


@dataclass(frozen=True)
class ControllerSlot:
    """One controller process of a site: the one controller (in the switch namespace, next to
    the port interfaces) or replica `replica` (in its own namespace with its etcd member)."""

    replica: str | None
    process: str  # its process name: "controller" or "controller-<replica>"
    netns: str
    api_url: str


class SimulatedHostsSpec(StrictModel):
    """Hosts emulated by one supergw-hostsim on one switch port (topologies/hostsim/README.md):
    host k has first_ip + k and first_mac + k * mac_step; the program runs in namespace `<prefix>-hsim`
    on `hsim0`, whose peer is the switch's `sw-hsim`."""

    count: int = Field(ge=1, le=65536)  # a whole site's host tables (p4src/common/size.p4), as hostsim's MaxHosts
    port: int = Field(ge=0, lt=2**16)
    first_ip: ipaddress.IPv4Address
    first_mac: Mac
    mac_step: int = Field(default=1, ge=1, lt=2**40)

    def ips(self) -> list[ipaddress.IPv4Address]:
        return [self.first_ip + k for k in range(self.count)]

    def macs(self) -> list[str]:
        return [mac_offset(self.first_mac, k * self.mac_step) for k in range(self.count)]

    def overflows(self) -> bool:
        """Whether the last host's MAC would run past 48 bits."""
        return mac_to_int(self.first_mac) + (self.count - 1) * self.mac_step >= 2**48


class PartnerSite(StrictModel):
    """The remote side is another super gateway built beside this one (a two-site file,
    schema.py): the peers are its gateways, the remote hosts its hosts; neither is built by
    this site."""

    wan_netns: str  # the shared WAN namespace (its bridge br0 exists before this site is built)
    initiate: bool  # whether this site's gateways initiate the IKE SAs (exactly one site does)


MAX_CLIENTS = 1024
MAX_SITE_GATEWAYS = 32  # bench/scale boots one site with 32 gateways and their peers
# A client's node name is rw<i> ("road warrior"); its namespace <prefix>-rw<i>.
CLIENT_NAME = "rw{}"


class OutsideSwitchSpec(StrictModel):
    """The switch on the gateways' outside: the same program and target as the LAN switch,
    with the UPLINK role on `uplink_port` (to the WAN) and GATEWAY_OUTSIDE on each gateway's
    port (the gateway's LAN port number, in this switch's own namespace `<prefix>-osw`). Its
    P4Runtime listens on its management address, where the site's controller reaches it."""

    device_id: int = Field(ge=0, lt=2**64)
    mgmt_ip: ipaddress.IPv4Address
    grpc_port: int = Field(default=9559, gt=0, lt=65536)
    uplink_port: int = Field(default=1, ge=0, lt=2**16)


class RemoteAccessSpec(StrictModel):
    """Road-warrior clients on one public address IP_P (docs/remote-access.md): each client a
    stock strongSwan charon in its own namespace `<prefix>-rw<i>` behind a router `<prefix>-cnet`
    on the WAN; the outside switch answers ARP for IP_P and dispatches them to the gateways.
    Gateway i (1-based) hands out inner addresses from the i-th /24 of `pools`."""

    public_ip: ipaddress.IPv4Address
    public_mac: Mac
    outside: OutsideSwitchSpec
    clients: int = Field(default=8, ge=0, le=MAX_CLIENTS)
    client_subnet: ipaddress.IPv4Network  # the clients' outer addresses: .1 the router, client i .(10 + i)
    router_wan_ip: ipaddress.IPv4Address  # the clients' router on the WAN
    pools: ipaddress.IPv4Network
    # The clients' own timers; the defaults are strongSwan's own (no DPD; 5 retransmissions at
    # 4 s x 1.8^n): a client needs nothing of ours (docs/remote-access.md "Clients on failover").
    client_dpd_s: int = Field(default=0, ge=0, le=3600)
    client_retransmit_tries: int = Field(default=5, ge=1, le=10)
    client_retransmit_timeout_s: float = Field(default=4.0, gt=0, le=60)
    client_retransmit_base: float = Field(default=1.8, ge=1, le=4)
    # State replication between the gateways: a dead gateway's clients are taken over by its
    # backup (docs/DESIGN.md, "Stateful takeover"); False: they reconnect by themselves.
    replication: bool = True

    def client_names(self) -> list[str]:
        return [CLIENT_NAME.format(i) for i in range(1, self.clients + 1)]

    def client_ip(self, i: int) -> ipaddress.IPv4Address:
        """Client i's (1-based) outer address."""
        return self.client_subnet.network_address + 10 + i

    @property
    def router_client_ip(self) -> ipaddress.IPv4Address:
        return self.client_subnet.network_address + 1

    def pool(self, index: int) -> ipaddress.IPv4Network:
        """The pool of gateway `index` (0-based)."""
        return next(itertools.islice(self.pools.subnets(new_prefix=24), index, None))


class Topology(StrictModel, Prefixed):
    prefix: str
    switch: SwitchSpec
    lan: LanSpec
    hosts: list[HostSpec] = Field(min_length=1)
    gateways: list[GatewaySpec] = Field(min_length=1, max_length=MAX_SITE_GATEWAYS)
    wan: WanSpec
    remote: RemoteSpec
    mgmt: MgmtSpec
    controller: ControllerSpec = Field(default_factory=ControllerSpec)
    # cgroup CPU quota of each member gateway's charon (UML: its guest), % of one core (None: no cap).
    gateway_cpu_percent: float | None = Field(default=None, gt=0, le=6400)
    # Where every gateway's IPsec runs (backends/supergw_gateway/config.py `backend`): "auto" is
    # kernel XFRM in its namespace where the kernel has ESP, else strongSwan's kernel-libipsec
    # ("libipsec": that one whatever the kernel has); "uml" a User-Mode Linux guest in its
    # namespace (real kernel ESP on any host kernel).
    gateway_backend: Literal["auto", "libipsec", "uml"] = "auto"
    # ESP proposals of every tunnel (strongSwan syntax, checked by the gateway's loader);
    # None: the gateway's default (supergw_gateway.config.DEFAULT_ESP_PROPOSAL).
    esp_proposals: list[str] | None = Field(default=None, min_length=1)
    partner_site: PartnerSite | None = None
    simulated_hosts: SimulatedHostsSpec | None = None
    remote_access: RemoteAccessSpec | None = None

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
        names += ["sw", "wan", "rlan", "mgmt", "hsim", "osw", "cnet", *self.controller.replica_names()]
        if self.remote_access is not None:
            names += self.remote_access.client_names()
            if self.gateway_backend == "uml":
                errors.append("gateway_backend uml: remote access does not run on UML gateways in this emulation "
                              "(the gateways support it, backends/tests/integration/test_takeover.py; the lab's "
                              "client network with UML members is not built or tested)")
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
        if sim is not None and sim.overflows():
            errors.append("simulated_hosts: first_mac + count * mac_step overflows 48 bits")
            sim = None  # its ranges cannot be checked
        if sim is not None:
            sim_ips, sim_macs = sim.ips(), sim.macs()
            if sim_ips[-1] not in self.lan.subnet or sim_ips[-1] == self.lan.subnet.broadcast_address:
                errors.append(f"simulated_hosts: {sim.first_ip} + {sim.count} runs past the LAN subnet {self.lan.subnet}")
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
            taken = {self.mgmt.host_ip, self.mgmt.controller_ip, *(g.mgmt_ip for g in self.gateways)}
            for name, ip in self.replica_ips().items():
                if ip not in self.mgmt.subnet or ip in taken:
                    errors.append(f"controller replica {name}: its address {ip} is outside {self.mgmt.subnet} or taken")
        if self.lan.subnet.overlaps(self.remote.subnet):
            errors.append("lan.subnet overlaps remote.subnet")
        if (self.lan.subnet6 is None) != (self.remote.subnet6 is None):
            errors.append("dual stack needs both lan.subnet6 and remote.subnet6 (or neither)")
        elif self.lan.subnet6 is not None and self.remote.subnet6 is not None:
            if self.lan.subnet6.overlaps(self.remote.subnet6):
                errors.append("lan.subnet6 overlaps remote.subnet6")
            for net, net6 in ((self.lan.subnet, self.lan.subnet6), (self.remote.subnet, self.remote.subnet6)):
                if net.num_addresses > net6.num_addresses:
                    errors.append(f"{net6} is smaller than {net}: not every address has an IPv6 twin")
        if (wan6 := self.wan.subnet6) is not None:
            if self.wan.subnet.num_addresses > wan6.num_addresses:
                errors.append(f"wan.subnet6 {wan6} is smaller than wan.subnet {self.wan.subnet}: not every WAN "
                              "address has an IPv6 twin")
            errors += [f"wan.subnet6 {wan6} overlaps {label} {net}" for label, net in
                       (("lan.subnet6", self.lan.subnet6), ("remote.subnet6", self.remote.subnet6))
                       if net is not None and net.overlaps(wan6)]
            if self.remote_access is not None:
                errors.append("wan.subnet6: remote access is IPv4 only (the outside switch dispatches IPv4)")
        if self.remote_access is not None:
            errors += self._remote_access_checks(self.remote_access)
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @property
    def dual_stack(self) -> bool:
        return self.lan.subnet6 is not None

    def lan6(self, ip: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
        """The IPv6 twin of a LAN address (dual stack only)."""
        if self.lan.subnet6 is None:
            raise ValueError(f"site {self.prefix} is IPv4 only")
        return twin6(ip, self.lan.subnet, self.lan.subnet6)

    def outer(self, wan_ip: ipaddress.IPv4Address) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        """A tunnel end's outer address: its WAN address, or that address's twin in
        wan.subnet6 with an IPv6 outer."""
        return wan_ip if self.wan.subnet6 is None else twin6(wan_ip, self.wan.subnet, self.wan.subnet6)

    def remote6(self, ip: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
        """The IPv6 twin of a remote-LAN address (dual stack only)."""
        if self.remote.subnet6 is None:
            raise ValueError(f"site {self.prefix} is IPv4 only")
        return twin6(ip, self.remote.subnet, self.remote.subnet6)
    def _remote_access_checks(self, ra: RemoteAccessSpec) -> list[str]:
        errors: list[str] = []
        if self.partner_site is not None:
            errors.append("remote_access: a site facing a partner site has no outside switch here")
        nets = {"lan.subnet": self.lan.subnet, "wan.subnet": self.wan.subnet, "remote.subnet": self.remote.subnet,
                "mgmt.subnet": self.mgmt.subnet}
        for label, net in (("client_subnet", ra.client_subnet), ("pools", ra.pools)):
            errors += [f"remote_access.{label} {net} overlaps {k} {v}" for k, v in nets.items() if net.overlaps(v)]
        if ra.client_subnet.overlaps(ra.pools):
            errors.append("remote_access.client_subnet overlaps remote_access.pools")
        if ra.pools.prefixlen > 24 or 2 ** (24 - ra.pools.prefixlen) < len(self.gateways):
            errors.append(f"remote_access.pools {ra.pools} holds fewer /24s than the {len(self.gateways)} gateways")
        if ra.clients and ra.client_ip(ra.clients) >= ra.client_subnet.broadcast_address:
            errors.append(f"remote_access: {ra.clients} clients (.11 onwards) do not fit client_subnet {ra.client_subnet}")
        for net in nets.values():
            if ra.public_ip in net:
                errors.append(f"remote_access.public_ip {ra.public_ip} lies in {net}: IP_P is its own address")
        taken = {g.wan_ip for g in self.gateways} | {g.peer.wan_ip for g in self.gateways}
        if ra.router_wan_ip not in self.wan.subnet or ra.router_wan_ip in taken:
            errors.append(f"remote_access.router_wan_ip {ra.router_wan_ip} is outside {self.wan.subnet} or taken")
        mgmt_taken = {self.mgmt.host_ip, self.mgmt.controller_ip, *(g.mgmt_ip for g in self.gateways),
                      *self.replica_ips().values()}
        if ra.outside.mgmt_ip not in self.mgmt.subnet or ra.outside.mgmt_ip in mgmt_taken:
            errors.append(f"remote_access.outside.mgmt_ip {ra.outside.mgmt_ip} is outside {self.mgmt.subnet} or taken")
        outside_ports = [ra.outside.uplink_port, *(g.port for g in self.gateways)]
        if len(set(outside_ports)) != len(outside_ports) or self.switch.cpu_port in outside_ports:
            errors.append(f"remote_access.outside.uplink_port {ra.outside.uplink_port} is a gateway's or the CPU port")
        if len(self.gateways) > CLUSTER_GATEWAYS:
            errors.append(f"remote_access: at most {CLUSTER_GATEWAYS} gateways")
        return errors

    # Derived names: one place, used by build, health checks and teardown (ns, switch_ns,
    # mgmt_root_if: Prefixed).
    @property
    def replicated(self) -> bool:
        return self.controller.replicas > 1

    def controllers(self) -> list[ControllerSlot]:
        """The site's controller processes: one, or one per replica."""
        port, scheme = self.controller.api_port, self.api_scheme
        if not self.replicated:
            return [ControllerSlot(None, "controller", self.switch_ns, f"{scheme}://{self.mgmt.controller_ip}:{port}")]
        return [ControllerSlot(name, f"controller-{name}", self.ns(name), f"{scheme}://{ip}:{port}")
                for name, ip in self.replica_ips().items()]

    @property
    def api_scheme(self) -> str:
        return "https" if self.controller.tls else "http"

    def api_url(self, replica: str | None = None) -> str:
        """The REST API of the controller (of replica `replica`; None: the first)."""
        slots = self.controllers()
        slot = slots[0] if replica is None else next((c for c in slots if c.replica == replica), None)
        if slot is None:
            raise KeyError(f"site {self.prefix} has no controller replica {replica!r}")
        return slot.api_url

    def replica_ips(self) -> dict[str, ipaddress.IPv4Address]:
        """Controller replica name -> its management address (.31, .32, ...); empty with one controller."""
        base = self.mgmt.subnet.network_address + 30
        return {name: base + i for i, name in enumerate(self.controller.replica_names(), start=1)}

    def namespaces(self) -> list[str]:
        """The namespaces this site builds (with a partner site: not the WAN nor the remote side)."""
        sim = ["hsim"] if self.simulated_hosts is not None else []
        nodes = ["sw", "mgmt", *sim, *self.controller.replica_names(), *(h.name for h in self.hosts)]
        nodes += [g.name for g in self.gateways]
        if self.remote_access is not None:
            nodes += ["osw", "cnet", *self.remote_access.client_names()]
        if self.partner_site is None:
            nodes += ["wan", "rlan", *(g.peer.name for g in self.gateways), *(r.name for r in self.remote.hosts)]
        return [self.ns(n) for n in nodes]

    @property
    def outside_ns(self) -> str:
        return self.ns("osw")

    @property
    def outside_p4runtime_addr(self) -> str:
        """Where the outside switch serves P4Runtime (remote access only): its management address."""
        if self.remote_access is None:
            raise TopologyError(f"site {self.prefix} has no remote_access section, hence no outside switch")
        o = self.remote_access.outside
        return f"{o.mgmt_ip}:{o.grpc_port}"

    @property
    def p4runtime_addr(self) -> str:
        """Where the switch serves P4Runtime and the controllers reach it: `switch.grpc_addr`
        inside the switch namespace, or with replicated controllers the switch's management
        address, where every replica (each in its own namespace) reaches it."""
        if self.controller.replicas > 1:
            return f"{self.mgmt.controller_ip}:{self.switch.grpc_port}"
        return self.switch.grpc_addr

    def with_switch(self, kind: SwitchKind) -> Topology:
        return self._changed({"switch": {**self.switch.model_dump(mode="json"), "kind": kind}})

    def with_replicas(self, replicas: int) -> Topology:
        return self._changed({"controller": {**self.controller.model_dump(mode="json"), "replicas": replicas}})

    def with_tls(self, tls: bool) -> Topology:
        return self._changed({"controller": {**self.controller.model_dump(mode="json"), "tls": tls}})

    def _changed(self, update: dict[str, object]) -> Topology:
        """A validated copy with `update` (top-level keys) applied: a change is checked like the file."""
        try:
            return Topology.model_validate({**self.model_dump(mode="json", exclude_none=True), **update})
        except ValidationError as exc:
            raise TopologyError(f"site {self.prefix}: {format_validation_error(exc)}") from None

    @property
    def host_ports(self) -> set[int]:
        """Switch ports with the HOST role: the namespace hosts' and the simulated hosts' port."""
        ports = {h.port for h in self.hosts}
        if self.simulated_hosts is not None:
            ports.add(self.simulated_hosts.port)
        return ports

    @staticmethod
    def wan_mac(g: GatewaySpec) -> str:
        """Gateway `g`'s WAN interface MAC (remote access: the outside switch sends its clients there)."""
        return mac_offset(g.mac, 1 << 16)

    def wan_port(self, g: GatewaySpec) -> str:
        """Gateway `g`'s end in the WAN namespace (site-prefixed when the WAN is shared)."""
        return f"{self.prefix}-{g.name}" if self.partner_site is not None else g.name

    def peer_of(self, name: str) -> GatewaySpec:
        for g in self.gateways:
            if g.peer.name == name:
                return g
        raise KeyError(name)




class EmulationSpec(StrictModel):
    """What one emulation boots: one or more sites, and the WAN namespace they share when
    they face each other (built before them). `make run` is a list of one site."""

    sites: list[Topology] = Field(min_length=1)
    shared_wan: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9-]{0,30}$")

    @model_validator(mode="after")
    def _cross_site_checks(self) -> EmulationSpec:
        errors: list[str] = []
        prefixes = [s.prefix for s in self.sites]
        if len(set(prefixes)) != len(prefixes):
            errors.append(f"sites share a prefix: {prefixes}")
        spaces = [ns for s in self.sites for ns in s.namespaces()]
        if len(set(spaces)) != len(spaces) or self.shared_wan in spaces:
            errors.append("two sites (or a site and the shared WAN) would build the same namespace")
        # gateway names are cgroup names too (sgw-gw-<name>): unique across sites
        gws = [g.name for s in self.sites for g in s.gateways]
        if len(set(gws)) != len(gws):
            errors.append(f"gateway names must differ between sites (they name cgroups): {gws}")
        mgmt = [s.mgmt.subnet for s in self.sites]
        if any(a.overlaps(b) for i, a in enumerate(mgmt) for b in mgmt[i + 1:]):
            errors.append("the sites' mgmt subnets overlap")
        facing = [s for s in self.sites if s.partner_site is not None]
        errors += [f"site {s.prefix} faces a partner site, but no site has its peers {[g.peer.name for g in s.gateways]}"
                   for s in facing if self.partner(s) is None]
        if facing and (self.shared_wan is None or any(s.partner_site.wan_netns != self.shared_wan for s in facing
                                                      if s.partner_site is not None)):
            errors.append("sites facing a partner site need the shared WAN namespace their partner_site names")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @property
    def several(self) -> bool:
        return len(self.sites) > 1

    @property
    def single(self) -> Topology:
        """The site, when there is exactly one (`make run`, `make mininet`)."""
        if self.several:
            raise TopologyError(f"{len(self.sites)} sites where one is expected")
        return self.sites[0]

    def site(self, prefix: str) -> Topology:
        for s in self.sites:
            if s.prefix == prefix:
                return s
        raise KeyError(f"no site {prefix!r}; sites: {', '.join(s.prefix for s in self.sites)}")

    def namespaces(self) -> list[str]:
        return [ns for s in self.sites for ns in s.namespaces()] + ([self.shared_wan] if self.shared_wan else [])

    def partner(self, topo: Topology) -> Topology | None:
        """The site `topo` faces (whose gateways are its peers), or None (plain peers)."""
        if topo.partner_site is None:
            return None
        peers = {g.peer.name for g in topo.gateways}
        return next((s for s in self.sites if {g.name for g in s.gateways} == peers), None)

    def with_switch(self, kind: SwitchKind | None) -> EmulationSpec:
        """Every site on switch `kind` (None: as given)."""
        if kind is None:
            return self
        return self._with_sites([s.with_switch(kind) for s in self.sites])

    def with_replicas(self, replicas: int | None, site: str | None = None) -> EmulationSpec:
        """`replicas` controllers at site `site` (None: at every site; replicas None: as given)."""
        if replicas is None:
            return self
        if site is not None and site not in [s.prefix for s in self.sites]:
            raise TopologyError(f"replicas for site {site!r}: there is no such site; sites: {', '.join(s.prefix for s in self.sites)}")
        try:
            return self._with_sites([s.with_replicas(replicas) if site in (None, s.prefix) else s for s in self.sites])
        except TopologyError as exc:
            raise TopologyError(f"controller replicas: {exc}") from None

    def with_tls(self, tls: bool) -> EmulationSpec:
        """Every site with REST and P4Runtime over TLS (`tls`), or as given (False)."""
        return self._with_sites([s.with_tls(True) for s in self.sites]) if tls else self

    def _with_sites(self, sites: list[Topology]) -> EmulationSpec:
        try:
            return EmulationSpec(sites=sites, shared_wan=self.shared_wan)
        except ValidationError as exc:
            raise TopologyError(format_validation_error(exc)) from None
