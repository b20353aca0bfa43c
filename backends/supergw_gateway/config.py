"""Gateway configuration: one validated YAML file per gateway.

The agent's timing (heartbeat and report intervals, miss count, and so the pair beacons')
is not here: its controller tells it (`supergw_proto.reports.AgentTiming`, in the answer
to every report). The keys that used to set it (`controller.heartbeat_interval_ms`,
`controller.report_interval_ms`, `partner.interval_ms`, `partner.missed`) still load, with
a warning that they are ignored.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import ssl
from enum import Enum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from supergw_gateway.errors import ConfigError
from supergw_gateway.tuning.groups import GATEWAY_GROUPS, SECTION, GatewayGroup
from supergw_gateway.ike_syntax import DEFAULT_ESP_PROPOSAL as DEFAULT_ESP_PROPOSAL
from supergw_gateway.ike_syntax import DEFAULT_IKE_PROPOSAL as DEFAULT_IKE_PROPOSAL
from supergw_gateway.ike_syntax import check_proposals
from supergw_gateway.ra.config import RemoteAccess, check_gateway
from supergw_proto import certfiles
from supergw_proto.strict import StrictModel, read_yaml_mapping, validate

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


class Backend(str, Enum):
    AUTO = "auto"
    XFRM = "xfrm"
    LIBIPSEC = "libipsec"
    UML = "uml"


# A dual-stack gateway's namespace or guest: IPv6 on (on interfaces made later too, such as
# libipsec's TUN device) and forwarded; forwarding also makes it ignore Router Advertisements.
IPV6_SYSCTLS = (
    "net.ipv6.conf.all.disable_ipv6=0",
    "net.ipv6.conf.default.disable_ipv6=0",
    "net.ipv6.conf.all.forwarding=1",
)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Interface(StrictModel):
    """A NIC of the gateway. `device` is the interface in the gateway's namespace."""

    role: Literal["lan", "wan"]
    device: str
    address: ipaddress.IPv4Interface
    addresses6: list[ipaddress.IPv6Interface] = Field(
        default_factory=list,
        description="its IPv6 addresses (dual stack), without duplicate address detection: they are configured",
    )
    mtu: int | None = Field(default=None, ge=576, le=65535)

    @field_validator("addresses6")
    @classmethod
    def _ipv6(cls, v: list[ipaddress.IPv6Interface]) -> list[ipaddress.IPv6Interface]:
        for a in v:
            if a.ip.is_multicast or a.ip.is_unspecified or a.ip.is_loopback:
                raise ValueError(f"{a} cannot be an interface address")
        if len({a.ip for a in v}) != len(v):
            raise ValueError(f"an address is listed twice: {[str(a) for a in v]}")
        return v

    @field_validator("device")
    @classmethod
    def _ifname(cls, v: str) -> str:
        if not IFNAME_RE.match(v):
            raise ValueError(f"invalid interface name {v!r} (1-15 chars of [A-Za-z0-9_.-])")
        return v


class Route(StrictModel):
    destination: IPNetwork
    via: IPAddress

    @model_validator(mode="after")
    def _one_family(self) -> Route:
        if self.destination.version != self.via.version:
            raise ValueError(f"route to {self.destination} via {self.via}: destination and via are of different "
                             "IP versions")
        return self


class Endpoint(StrictModel):
    """One side of the site-to-site tunnel: its outer address (IPv4 or IPv6) and the inner
    subnets it carries (either version, mixed: a dual-stack tunnel is one CHILD_SA with
    IPv4 and IPv6 traffic selectors)."""

    address: IPAddress
    subnets: list[IPNetwork] = Field(min_length=1)
    id: str | None = None


class PskAuth(StrictModel):
    method: Literal["psk"]
    psk: str = Field(min_length=8)


class X509Auth(StrictModel):
    """Certificates in PEM, e.g. made by `supergw-gateway pki`."""

    method: Literal["x509"]
    cacert: Path
    cert: Path
    key: Path

    @model_validator(mode="after")
    def _files_exist(self) -> X509Auth:
        for label, p in (("cacert", self.cacert), ("cert", self.cert), ("key", self.key)):
            if not p.is_file():
                raise ValueError(f"auth.{label}: file {p} does not exist")
        return self


Auth = Annotated[PskAuth | X509Auth, Field(discriminator="method")]


class Proposals(StrictModel):
    ike: list[str] = Field(default_factory=lambda: [DEFAULT_IKE_PROPOSAL], min_length=1)
    esp: list[str] = Field(default_factory=lambda: [DEFAULT_ESP_PROPOSAL], min_length=1)

    @field_validator("ike", "esp")
    @classmethod
    def _syntax(cls, v: list[str]) -> list[str]:
        return check_proposals(v)


class Dpd(StrictModel):
    delay_s: int = Field(default=10, ge=0, le=3600)
    timeout_s: int = Field(default=30, ge=1, le=3600)
    action: Literal["clear", "trap", "restart"] = "restart"


class Rekey(StrictModel):
    ike_rekey_s: int = Field(default=14400, ge=10)
    child_rekey_s: int = Field(default=3600, ge=10)
    child_rekey_bytes: int = Field(default=0, ge=0)
    child_rekey_packets: int = Field(default=0, ge=0)


ControllerUrl = Annotated[str, Field(pattern=r"^https?://[^/\s]+")]


def read_secret(path: Path, where: str) -> str:
    """First line of a secret file; ConfigError naming `where` when it cannot be used."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    secret = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not secret:
        raise ConfigError(f"{where}: {path} is empty (expected the gateway's agent token on its first line)")
    return secret


def _ignored(key: str, instead: str) -> None:
    log.warning("config: %s is deprecated and ignored: the controller tells the agent its timing "
                "(set %s instead)", key, instead)


class _Secret(StrictModel):
    """`token` inline or `token_file` (first line): this gateway's agent token at a controller."""

    token: SecretStr | None = Field(default=None, min_length=8)
    token_file: Path | None = None

    @model_validator(mode="after")
    def _readable(self) -> _Secret:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give at most one of `token` or `token_file`")
        if self.token_file is not None:
            try:
                read_secret(self.token_file, "token_file")
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return self

    def own_secret(self) -> str | None:
        if self.token is not None:
            return self.token.get_secret_value()
        if self.token_file is not None:
            return read_secret(self.token_file, "controller token_file")
        return None


class ControllerEndpoint(_Secret):
    """One controller with its own secret (e.g. a replica configured apart from the others)."""

    url: ControllerUrl


class Controller(_Secret):
    """Where the agent reports: `url` (one controller) or `urls` (primary and backups, each
    told independently so a backup knows gateway health when it takes over). The secret is
    `token`/`token_file` here, or per entry of `urls` (`{url, token_file}`)."""

    url: ControllerUrl | None = None
    urls: list[ControllerUrl | ControllerEndpoint] = Field(default_factory=list)
    ca_file: Path | None = Field(default=None, description="PEM CA bundle that signed the controllers' https certificates")
    key_overlap_s: float = Field(
        default=120.0,
        ge=0,
        description=(
            "after the token file changes, heartbeats also carry the previous token's HMAC this long, "
            "so no beat is lost whichever of agent and controller picks up the rotated token first"
        ),
    )
    # Deprecated and ignored: the controller's answers say both (see the module doc).
    report_interval_ms: int | None = Field(default=None, ge=50, le=60000, description="deprecated, ignored")
    heartbeat_interval_ms: int | None = Field(default=None, ge=50, le=60000, description="deprecated, ignored")

    @model_validator(mode="after")
    def _deprecated_timing(self) -> Controller:
        for key in ("report_interval_ms", "heartbeat_interval_ms"):
            if getattr(self, key) is not None:
                _ignored(f"controller.{key}", f"timing.{key} in the controller's config")
        return self

    @model_validator(mode="after")
    def _one_form(self) -> Controller:
        if (self.url is None) == (not self.urls):
            raise ValueError("give exactly one of `url` (one controller) or `urls` (a non-empty list)")
        norm = [u.rstrip("/") for u in self.endpoints]
        if len(set(norm)) != len(norm):
            raise ValueError(f"duplicate controller URLs: {norm}")
        if self.ca_file is not None:
            if not self.ca_file.is_file():
                raise ValueError(f"ca_file: {certfiles.missing(self.ca_file, 'ca')}")
            self.verify()
        return self

    @property
    def endpoints(self) -> list[str]:
        if self.url is not None:
            return [self.url]
        return [u if isinstance(u, str) else u.url for u in self.urls]

    def secret(self, url: str) -> str | None:
        """This gateway's agent token at controller `url` (REST bearer token and heartbeat key)."""
        for u in self.urls:
            if isinstance(u, ControllerEndpoint) and u.url == url:
                own = u.own_secret()
                if own is not None:
                    return own
        return self.own_secret()

    def verify(self) -> ssl.SSLContext | bool:
        """httpx `verify`: a context trusting only the CA file when given, else the system's store."""
        if self.ca_file is None:
            return True
        try:
            return ssl.create_default_context(cafile=str(self.ca_file))
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"ca_file: {self.ca_file} is not a usable PEM CA bundle: {exc}") from None


class Partner(StrictModel):
    """The paired gateway at the partner site (gateway i of the other super gateway): both
    agents send each other an authenticated beacon from `local_address` to `address`, both
    inside the tunnel's subnets so that the beacons ride the IPsec SA, at the heartbeat
    interval their controllers tell them; each beacon declares its interval, and each agent
    judges its partner's silence by that (so the two sites agree even when their controllers'
    timings differ) times its own miss count. The secret (per pair, the same file content at
    both ends) keys the beacons' HMAC; it is read from `secret_file`, never taken from a
    command line, never logged."""

    name: str
    address: ipaddress.IPv4Address = Field(description="the partner's LAN address (inside remote.subnets)")
    local_address: ipaddress.IPv4Address | None = Field(
        default=None, description="this gateway's beacon address (default: its LAN interface's; inside local.subnets)"
    )
    port: int = Field(default=8790, gt=0, lt=65536)
    secret_file: Path
    # Deprecated and ignored: the pair beacons follow the heartbeat timing.
    interval_ms: int | None = Field(default=None, ge=20, le=60000, description="deprecated, ignored")
    missed: int | None = Field(default=None, ge=1, le=100, description="deprecated, ignored")
    startup_grace_s: float = Field(default=10.0, ge=0, le=3600,
                                   description="before the first beacon: 'not heard yet', not 'down'")
    max_skew_s: float = Field(default=30.0, gt=0, le=86400)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"invalid partner gateway name {v!r}: lowercase letters, digits and '-', max 31 chars")
        return v

    @model_validator(mode="after")
    def _deprecated_timing(self) -> Partner:
        if self.interval_ms is not None:
            _ignored("partner.interval_ms", "timing.heartbeat_interval_ms in the controller's config")
        if self.missed is not None:
            _ignored("partner.missed", "timing.missed_heartbeats in the controller's config")
        return self

    @model_validator(mode="after")
    def _secret(self) -> Partner:
        try:
            secret = read_secret(self.secret_file, "partner.secret_file")
        except ConfigError as exc:
            raise ValueError(str(exc).replace("agent token", "pair secret")) from None
        if len(secret) < 16:
            raise ValueError(f"partner.secret_file: {self.secret_file} holds {len(secret)} characters; "
                             "a pair secret needs at least 16")
        return self

    def secret(self) -> bytes:
        return read_secret(self.secret_file, "partner.secret_file").encode()


class Uml(StrictModel):
    mem_mb: int = Field(default=160, ge=64, le=4096)
    mgmt_subnet: ipaddress.IPv4Network = ipaddress.IPv4Network("169.254.77.0/30")
    boot_timeout_s: float = Field(default=60.0, gt=0)


class CharonTuning(StrictModel):
    """Daemon limits; the defaults are strongSwan's (DoS protection for half-open IKE SAs)."""

    threads: int = Field(default=16, ge=4, le=256)
    cookie_threshold: int = Field(default=10, ge=0)
    block_threshold: int = Field(default=5, ge=0)
    reuse_ikesa: bool = True
    dos_protection: bool = True
    log_level: int = Field(default=1, ge=-1, le=4)


class Tuning(StrictModel):
    """The tuning paper's profile on this gateway: `up` applies it, `down` restores exactly
    what `up` changed (backends/README.md, "Tuning"). Knobs a device, namespace or kernel
    cannot take are refused with the reason (/health, `tune plan`), never skipped."""

    enabled: bool = False
    knobs: list[GatewayGroup] = Field(default_factory=lambda: list(GATEWAY_GROUPS), min_length=1,
                                      description="knob groups (default: all): " + ", ".join(GATEWAY_GROUPS))
    host_wide: bool = Field(default=False, description=(
        "also set the host-wide sysctls (net.core.*) on the host: they are shared by every namespace of the "
        "machine, held by reference between its gateways and restored by the last `down`"))
    path_mtu: dict[str, Annotated[int, Field(ge=576, le=65535)]] = Field(
        default_factory=dict, description="device -> the MTU every hop of the path behind it takes (§5.3 jumbo)")

    @field_validator("knobs", mode="before")
    @classmethod
    def _gateway_knobs(cls, v: object) -> object:
        if isinstance(v, list):
            if "tcp" in v:
                raise ValueError(f"'tcp' ({SECTION['tcp']}) belongs to the TCP endpoints, not to a gateway, which "
                                 "forwards TCP: tune hosts with `supergw-gateway tune --role endpoint --netns NS`")
            if len(set(map(str, v))) != len(v):
                raise ValueError(f"knob groups listed twice: {v}")
        return v


class GatewayConfig(StrictModel):
    name: str
    namespace: str | None = None
    backend: Backend = Backend.AUTO
    interfaces: list[Interface] = Field(min_length=1)
    routes: list[Route] = Field(default_factory=list)
    local: Endpoint
    remote: Endpoint
    auth: Auth
    proposals: Proposals = Field(default_factory=Proposals)
    dpd: Dpd = Field(default_factory=Dpd)
    rekey: Rekey = Field(default_factory=Rekey)
    initiate: bool = True
    controller: Controller | None = None
    partner: Partner | None = None  # None: no pair beacons (a one-site peer is plain strongSwan)
    remote_access: RemoteAccess | None = None  # None: site-to-site only (ra/config.py, docs/remote-access.md)
    cpu_quota_percent: float | None = Field(default=None, gt=0, le=100 * 64)
    uml: Uml = Field(default_factory=Uml)
    charon: CharonTuning = Field(default_factory=CharonTuning)
    tuning: Tuning = Field(default_factory=Tuning)
    state_dir: Path = Path("/run/sgw-gw")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"invalid gateway name {v!r}: lowercase letters, digits and '-', max 31 chars")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> GatewayConfig:
        roles = [i.role for i in self.interfaces]
        if roles.count("wan") != 1:
            raise ValueError("exactly one interface with role 'wan' is required")
        devices = [i.device for i in self.interfaces]
        if len(set(devices)) != len(devices):
            raise ValueError(f"duplicate interface devices: {devices}")
        if self.local.address == self.remote.address:
            raise ValueError("local.address and remote.address must differ")
        if self.local.address.version != self.remote.address.version:
            raise ValueError(f"local.address {self.local.address} and remote.address {self.remote.address} are of "
                             "different IP versions: the tunnel's outer addresses are both IPv4 or both IPv6")
        wan = self.wan
        wan_ips = [wan.ip, *(a.ip for a in self.wan_interface.addresses6)]
        if self.local.address not in wan_ips:
            raise ValueError(f"local.address {self.local.address} must be the wan interface address or one of its "
                             f"addresses6 ({', '.join(map(str, wan_ips))})")
        for a in self.local.subnets:
            for b in self.remote.subnets:
                if a.version == b.version and a.overlaps(b):
                    raise ValueError(f"local subnet {a} overlaps remote subnet {b}")
        if (p := self.partner) is not None:
            if not any(p.address in n for n in self.remote.subnets):
                raise ValueError(f"partner.address {p.address} is not in remote.subnets "
                                 f"{[str(n) for n in self.remote.subnets]}: its beacons would not cross the tunnel")
            local = self.partner_local_address
            if local is None:
                raise ValueError("partner.local_address is required when the gateway has no 'lan' interface")
            if not any(local in n for n in self.local.subnets):
                raise ValueError(f"partner.local_address {local} is not in local.subnets "
                                 f"{[str(n) for n in self.local.subnets]}: its beacons would not cross the tunnel")
            if p.name == self.name:
                raise ValueError(f"partner.name {p.name!r} is this gateway's own name")
        if self.remote_access is not None:
            check_gateway(self.remote_access, backend=self.backend.value, wan=wan,
                          lan=[i.address for i in self.interfaces if i.role == "lan"],
                          local_subnets=self.ipv4_subnets(self.local), remote_subnets=self.ipv4_subnets(self.remote))
        return self

    @model_validator(mode="after")
    def _tuning_devices(self) -> GatewayConfig:
        devices = [i.device for i in self.interfaces]
        unknown = [d for d in self.tuning.path_mtu if d not in devices]
        if unknown:
            raise ValueError(f"tuning.path_mtu names {unknown}, not interfaces of this gateway {devices}")
        return self

    @property
    def lan(self) -> Interface | None:
        return next((i for i in self.interfaces if i.role == "lan"), None)

    @property
    def partner_local_address(self) -> ipaddress.IPv4Address | None:
        if self.partner is None:
            return None
        if self.partner.local_address is not None:
            return self.partner.local_address
        lan = self.lan
        return None if lan is None else lan.address.ip

    @staticmethod
    def ipv4_subnets(end: Endpoint) -> list[ipaddress.IPv4Network]:
        """The IPv4 inner subnets of a tunnel end (remote access is IPv4 only)."""
        return [n for n in end.subnets if isinstance(n, ipaddress.IPv4Network)]

    @property
    def wan_interface(self) -> Interface:
        return next(i for i in self.interfaces if i.role == "wan")

    @property
    def wan(self) -> ipaddress.IPv4Interface:
        return self.wan_interface.address

    @property
    def ipv6(self) -> bool:
        """Dual stack: an IPv6 address, inner subnet, outer address or route is configured
        (the gateway then forwards IPv6 too)."""
        return (any(i.addresses6 for i in self.interfaces) or self.local.address.version == 6
                or any(n.version == 6 for n in [*self.local.subnets, *self.remote.subnets])
                or any(r.destination.version == 6 for r in self.routes))

    @property
    def netns(self) -> str:
        return self.namespace or f"sgw-gw-{self.name}"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / self.name

    @property
    def local_id(self) -> str:
        return self.local.id or str(self.local.address)

    @property
    def remote_id(self) -> str:
        return self.remote.id or str(self.remote.address)


def parse_config(data: object, source: str = "<config>") -> GatewayConfig:
    return validate(GatewayConfig, data, source, "gateway config", ConfigError)


def load_config(path: Path) -> GatewayConfig:
    return parse_config(read_yaml_mapping(path, "gateway config", ConfigError), str(path))
