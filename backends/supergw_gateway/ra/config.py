"""The `remote_access` section of a gateway config: road-warrior clients on a shared public address.

Every gateway of a cluster holds the public address IP_P without answering ARP for it; a
switch on the outside dispatches clients to gateways (docs/remote-access.md). What that
switch needs from a gateway is here and must be consistent within one config: its own
client address pool, its inbound ESP SPI range (`charon.spi_min`/`spi_max`) and its IKE SPI
label (`charon.spi_label` under `charon.spi_mask`). That the ranges and labels of a
cluster's gateways do not overlap is for whoever builds the cluster: `cluster_conflicts`
checks a set of plans.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from supergw_gateway.ike_syntax import check_proposals
from supergw_proto.strict import StrictModel

# SPIs 0..255 are reserved (RFC 4303 §2.1); libipsec and the kernel refuse them.
ESP_SPI_MIN = 0x100
ESP_SPI_MAX = 0xFFFFFFFF
# charon draws random SPIs in the range until it hits a free one (libipsec loops forever on a
# full range): keep a range far larger than the SAs a gateway will ever hold at once.
ESP_SPI_MIN_RANGE = 0x10000
IKE_SPI_BITS = 64
# The bits the label leaves random: the IKE SPI is also what keeps SAs apart in charon.
IKE_SPI_MIN_RANDOM_BITS = 32
# strongSwan's own default for the hard end after a reauth time (10 %), made explicit.
OVER_TIME_FRACTION = 0.1
DEFAULT_MAX_AUTH_AGE_S = 86400
DEFAULT_DPD_DELAY_S = 30

Strategy = Literal["none", "clocked", "established", "data"]


def _int_or_hex(v: object) -> object:
    """YAML reads 0x... as an int already; a quoted "0x..." string is accepted too."""
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            raise ValueError(f"{v!r} is not an integer (decimal or 0x-hex)") from None
    return v


class PublicAddress(StrictModel):
    """IP_P, the one address every remote client talks to. `hold: wan_host_scope` puts it
    (/32, scope host) on the WAN interface and sets arp_ignore=3 (no ARP replies for scope-host
    addresses) and arp_announce=2 (never an ARP source) there: the gateway accepts and sends
    IKE/ESP on IP_P, answers ARP only for its own WAN address, and the kernel never picks IP_P
    as a source on its own. Not on loopback (the LVS habit) nor a dummy device: charon checks
    that an SA's address lives on the interface its route leaves by, and with MOBIKE it moves
    the SA off IP_P onto the WAN address otherwise (and these kernels have no dummy device)."""

    address: ipaddress.IPv4Address
    hold: Literal["wan_host_scope"] = "wan_host_scope"

    @field_validator("address")
    @classmethod
    def _unicast(cls, v: ipaddress.IPv4Address) -> ipaddress.IPv4Address:
        if v.is_loopback or v.is_multicast or v.is_unspecified or v.is_reserved or v.is_link_local:
            raise ValueError(f"{v} cannot be a public service address (loopback, multicast, link-local or reserved)")
        return v


class SpiPlan(StrictModel):
    """What the outside switch steers on: inbound ESP SPIs in [esp_min, esp_max] and IKE SPIs
    whose bits under ike_mask equal ike_label (both in host order, as strongswan.conf takes them)."""

    esp_min: int
    esp_max: int
    ike_label: int = 0
    ike_mask: int = 0

    @field_validator("esp_min", "esp_max", "ike_label", "ike_mask", mode="before")
    @classmethod
    def _hex(cls, v: object) -> object:
        return _int_or_hex(v)

    @model_validator(mode="after")
    def _consistent(self) -> SpiPlan:
        for label, v in (("esp_min", self.esp_min), ("esp_max", self.esp_max)):
            if not ESP_SPI_MIN <= v <= ESP_SPI_MAX:
                raise ValueError(f"spi.{label} {v:#x} is outside {ESP_SPI_MIN:#x}..{ESP_SPI_MAX:#x} "
                                 "(SPIs below 0x100 are reserved)")
        if self.esp_min > self.esp_max:
            raise ValueError(f"spi.esp_min {self.esp_min:#x} is above spi.esp_max {self.esp_max:#x}")
        if self.esp_max - self.esp_min + 1 < ESP_SPI_MIN_RANGE:
            raise ValueError(f"spi.esp_min..esp_max holds {self.esp_max - self.esp_min + 1} SPIs; give at least "
                             f"{ESP_SPI_MIN_RANGE:#x}: charon draws random SPIs there until one is free")
        for label, v in (("ike_label", self.ike_label), ("ike_mask", self.ike_mask)):
            if not 0 <= v < 1 << IKE_SPI_BITS:
                raise ValueError(f"spi.{label} {v:#x} is not a 64-bit value")
        if self.ike_label & ~self.ike_mask:
            raise ValueError(f"spi.ike_label {self.ike_label:#018x} has bits outside spi.ike_mask "
                             f"{self.ike_mask:#018x}: charon would OR them into every SPI, the switch never matches them")
        if self.ike_mask and not self.ike_label:
            raise ValueError("spi.ike_label is 0 under a non-zero spi.ike_mask: give this gateway a non-zero label "
                             "(0 would also match SPIs of gateways without a label)")
        free = IKE_SPI_BITS - bin(self.ike_mask).count("1")
        if free < IKE_SPI_MIN_RANDOM_BITS:
            raise ValueError(f"spi.ike_mask {self.ike_mask:#018x} leaves {free} random bits in an IKE SPI; "
                             f"keep at least {IKE_SPI_MIN_RANDOM_BITS}")
        return self

    def esp_overlaps(self, other: SpiPlan) -> bool:
        return self.esp_min <= other.esp_max and other.esp_min <= self.esp_max

    def ike_collides(self, other: SpiPlan) -> bool:
        """True when some IKE SPI could carry both labels (the switch could not tell them apart)."""
        common = self.ike_mask & other.ike_mask
        if not self.ike_mask or not other.ike_mask:
            return True
        return (self.ike_label & common) == (other.ike_label & common)


class ClientAuth(StrictModel):
    """Clients authenticate with X.509 certificates issued by `cacert` (e.g. `supergw-gateway
    pki`); the gateway proves `id` (the service's name, the same on every gateway of the
    cluster, in its certificate's subjectAltName) with `cert`/`key`."""

    method: Literal["x509"] = "x509"
    cacert: Path
    cert: Path
    key: Path
    id: str = Field(min_length=1, max_length=255)

    @model_validator(mode="after")
    def _files_exist(self) -> ClientAuth:
        for label, p in (("cacert", self.cacert), ("cert", self.cert), ("key", self.key)):
            if not p.is_file():
                raise ValueError(f"remote_access.auth.{label}: file {p} does not exist")
        return self


class ReplicationTls(StrictModel):
    """The mutual TLS between the agents that carry state: this gateway's certificate (its CN
    and subjectAltName are the gateway's name, as in the controller's config) and the CA of
    every gateway's (`supergw-gateway pki peer NAME=NAME`)."""

    cert: Path
    key: Path
    ca: Path

    @model_validator(mode="after")
    def _files_exist(self) -> ReplicationTls:
        for label, p in (("cert", self.cert), ("key", self.key), ("ca", self.ca)):
            if not p.is_file():
                raise ValueError(f"remote_access.replication.tls.{label}: file {p} does not exist")
        return self


class Replication(StrictModel):
    """State replication (docs/DESIGN.md, "Stateful takeover"): this gateway's remote-access
    SAs are held by its backup, and it holds those of the gateway it protects; the controller
    says which, and orders takeovers. `listen`: where this agent accepts the protected
    gateway's state (an address the other gateways' agents reach, e.g. on the management
    network)."""

    listen: str = Field(description="ADDRESS:PORT of this agent's replication listener")
    tls: ReplicationTls

    @field_validator("listen")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        try:
            ipaddress.ip_address(host.strip("[]"))
            ok = bool(sep) and 0 < int(port) < 65536
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{v!r}: want ADDRESS:PORT, e.g. 10.255.60.11:4520 (an IP address, not a name)")
        return v


class RaProposals(StrictModel):
    """None: the gateway's own `proposals`."""

    ike: list[str] | None = Field(default=None, min_length=1)
    esp: list[str] | None = Field(default=None, min_length=1)

    @field_validator("ike", "esp")
    @classmethod
    def _syntax(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_proposals(v)


class CachePolicy(StrictModel):
    """How long a gateway keeps an absent client's IKE SA so that it resumes without a new
    IKE_SA_INIT + IKE_AUTH (Shue et al. §IV; the mapping is in docs/remote-access.md):

    - none: no cache: the gateway's DPD drops a silent client; a returning client that
      outlived its own retransmissions authenticates again.
    - clocked: `lifetime_s` of wall clock since the last IKE_AUTH (charon: reauth_time).
    - established: `lifetime_s` of time the client was present (sending) since the last
      IKE_AUTH; enforced by the agent, which ends the SA when the client goes absent
      (no inbound ESP for `idle_s`) with the budget spent.
    - data: `lifetime_bytes` (in + out) since the last IKE_AUTH, enforced the same way.
    """

    strategy: Strategy = "none"
    lifetime_s: int | None = Field(default=None, gt=0)
    lifetime_bytes: int | None = Field(default=None, gt=0)
    idle_s: float = Field(default=30.0, ge=1, le=86400)
    max_auth_age_s: int | None = Field(
        default=None, ge=0,
        description=f"established/data: reauthenticate after this much wall clock anyway (charon reauth_time; "
                    f"default {DEFAULT_MAX_AUTH_AGE_S}, 0: never)")
    over_time_s: int | None = Field(default=None, gt=0,
                                    description="hard end of an SA after its reauth time (default 10 %)")

    @model_validator(mode="after")
    def _consistent(self) -> CachePolicy:
        s = self.strategy
        if s in ("clocked", "established") and self.lifetime_s is None:
            raise ValueError(f"caching.strategy {s} needs caching.lifetime_s (seconds)")
        if s == "data" and self.lifetime_bytes is None:
            raise ValueError("caching.strategy data needs caching.lifetime_bytes")
        if s != "data" and self.lifetime_bytes is not None:
            raise ValueError(f"caching.lifetime_bytes belongs to strategy data, not {s}")
        if s in ("none", "data") and self.lifetime_s is not None:
            raise ValueError(f"caching.lifetime_s belongs to strategies clocked/established, not {s}")
        if s == "clocked" and self.max_auth_age_s is not None:
            raise ValueError("caching.max_auth_age_s does not apply to strategy clocked: its lifetime_s is the "
                             "authentication age")
        return self

    @property
    def auth_age_s(self) -> int:
        """charon's reauth_time for this policy (0: none)."""
        if self.strategy == "clocked":
            assert self.lifetime_s is not None
            return self.lifetime_s
        return DEFAULT_MAX_AUTH_AGE_S if self.max_auth_age_s is None else self.max_auth_age_s

    @property
    def over_s(self) -> int:
        if self.over_time_s is not None:
            return self.over_time_s
        return max(1, round(self.auth_age_s * OVER_TIME_FRACTION))

    @property
    def agent_enforced(self) -> bool:
        return self.strategy in ("established", "data")


class RemoteAccess(StrictModel):
    """Remote-access (road-warrior) clients of this gateway, beside its site-to-site tunnel."""

    public: PublicAddress
    pool: ipaddress.IPv4Network = Field(description="inner addresses this gateway hands out (its own, routed to it)")
    subnets: list[ipaddress.IPv4Network] = Field(
        default_factory=list, description="what clients reach through the gateway (default: local.subnets)")
    spi: SpiPlan
    auth: ClientAuth
    proposals: RaProposals = Field(default_factory=RaProposals)
    mobike: bool = True
    dpd_delay_s: int | None = Field(
        default=None, ge=0, le=3600,
        description=f"None: {DEFAULT_DPD_DELAY_S} without a cache, 0 (off) with one")
    caching: CachePolicy = Field(default_factory=CachePolicy)
    unique: Literal["replace", "keep", "never"] = "replace"
    session_log: Path | None = Field(default=None, description="JSON lines of finished client sessions "
                                                               "(default: <state_dir>/<name>/ra-sessions.jsonl)")
    replication: Replication | None = Field(
        default=None, description="None: no state replication; a dead gateway's clients reconnect by themselves")

    @model_validator(mode="after")
    def _consistent(self) -> RemoteAccess:
        if self.pool.prefixlen > 30:
            raise ValueError(f"remote_access.pool {self.pool} is too small: give at least a /30")
        if self.public.address in self.pool:
            raise ValueError(f"remote_access.public.address {self.public.address} is inside remote_access.pool "
                             f"{self.pool}")
        for n in self.subnets:
            if n.overlaps(self.pool):
                raise ValueError(f"remote_access.subnets {n} overlaps remote_access.pool {self.pool}")
        if self.caching.strategy != "none" and self.dpd_delay_s:
            raise ValueError(
                f"remote_access.dpd_delay_s {self.dpd_delay_s} with caching.strategy {self.caching.strategy}: the "
                "gateway's DPD would delete an absent client's IKE SA after a few retransmissions, i.e. empty "
                "the cache; set dpd_delay_s: 0 (or leave it out), or caching.strategy: none")
        return self

    @property
    def dpd_delay(self) -> int:
        if self.dpd_delay_s is not None:
            return self.dpd_delay_s
        return DEFAULT_DPD_DELAY_S if self.caching.strategy == "none" else 0


def check_gateway(ra: RemoteAccess, *, backend: str, wan: ipaddress.IPv4Interface,
                  lan: list[ipaddress.IPv4Interface], local_subnets: list[ipaddress.IPv4Network],
                  remote_subnets: list[ipaddress.IPv4Network]) -> None:
    """ValueError when `ra` does not fit the rest of its gateway's config."""
    pool, ip_p = ra.pool, ra.public.address
    named: list[tuple[str, ipaddress.IPv4Network]] = [("the wan network", wan.network)]
    named += [(f"the lan network {i.network}", i.network) for i in lan]
    named += [(f"local.subnets {n}", n) for n in local_subnets]
    named += [(f"remote.subnets {n}", n) for n in remote_subnets]
    for what, net in named:
        if pool.overlaps(net):
            raise ValueError(f"remote_access.pool {pool} overlaps {what}: the pool must be this gateway's own "
                             "addresses, routed to it")
    if ip_p == wan.ip:
        raise ValueError(f"remote_access.public.address {ip_p} is the wan interface address: every gateway holds "
                         "IP_P, so it must be an extra address that no gateway answers ARP for")
    for i in lan:
        if ip_p in i.network:
            raise ValueError(f"remote_access.public.address {ip_p} is inside the lan network {i.network}")


CLUSTER_MAX_GATEWAYS = 64
_CLUSTER_ESP_BASE = 0xC0000000
_CLUSTER_ESP_STRIDE = 1 << 24
_CLUSTER_IKE_MASK = 0xFF << 56


def cluster_spi_plan(index: int) -> SpiPlan:
    """The plan of gateway `index` (0..63) in a cluster laid out the simple way: inbound ESP
    SPIs 0xc0000000 + index * 2**24 onwards (2**24 of them, top byte 0xc0 + index) and IKE
    label index + 1 in the top byte of the SPI (mask 0xff << 56). Disjoint for distinct indices."""
    if not 0 <= index < CLUSTER_MAX_GATEWAYS:
        raise ValueError(f"gateway index {index} is outside 0..{CLUSTER_MAX_GATEWAYS - 1}")
    low = _CLUSTER_ESP_BASE + index * _CLUSTER_ESP_STRIDE
    return SpiPlan(esp_min=low, esp_max=low + _CLUSTER_ESP_STRIDE - 1, ike_label=(index + 1) << 56,
                   ike_mask=_CLUSTER_IKE_MASK)


def cluster_conflicts(plans: dict[str, SpiPlan]) -> list[str]:
    """Pairs of gateways whose ESP SPI ranges overlap or whose IKE labels collide."""
    out: list[str] = []
    names = sorted(plans)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if plans[a].esp_overlaps(plans[b]):
                out.append(f"{a} and {b}: ESP SPI ranges overlap ({plans[a].esp_min:#x}..{plans[a].esp_max:#x} vs "
                           f"{plans[b].esp_min:#x}..{plans[b].esp_max:#x})")
            if plans[a].ike_collides(plans[b]):
                out.append(f"{a} and {b}: IKE SPI labels cannot be told apart ({plans[a].ike_label:#018x}/"
                           f"{plans[a].ike_mask:#018x} vs {plans[b].ike_label:#018x}/{plans[b].ike_mask:#018x})")
    return out
