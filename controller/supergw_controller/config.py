"""The controller's configuration: one YAML file, validated by pydantic.

`load_config(path)` returns a `Config` or raises `ConfigError` whose message names every
bad key, e.g. ``gateways[1].port: must be a port listed in ports with role 'gateway'``.
Relative paths in the file (P4Info, device config, token file, state DB) are resolved
against the directory of the config file.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from supergw_proto import certfiles
from supergw_proto.certfiles import Kind
from supergw_proto.addresses import mac_to_int, normalise_mac
from supergw_proto.bucket import BucketHashName
from supergw_proto.p4constants import CPU_PORT, MAX_BUCKETS, BucketHash
from supergw_proto.strict import StrictModel, read_yaml_mapping, validate
from supergw_proto.reports import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_LAN_LIVENESS_INTERVAL_MS,
    DEFAULT_LAN_LIVENESS_TIMEOUT_MS,
    DEFAULT_MISSED_HEARTBEATS,
    DEFAULT_REPORT_INTERVAL_MS,
    AgentTiming,
)

# Agent and role tokens are new, so they get a real minimum; the legacy api.token keeps 8.
MIN_SECRET_CHARS = 16
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class ConfigError(ValueError):
    """The config file is missing, not YAML, or does not validate."""


class PortRoleName(StrEnum):
    HOST = "host"
    GATEWAY = "gateway"


class DigestBatching(StrEnum):
    """Who gathers learn digests into batches (`learning.digest_batching`; the rule of `auto`
    is `southbound.digests.digest_plan`'s)."""

    AUTO = "auto"
    SWITCH = "switch"
    CONTROLLER = "controller"


class ElectionId(StrictModel):
    high: int = Field(default=0, ge=0, lt=2**64)
    low: int = Field(default=1, ge=0, lt=2**64)

    @model_validator(mode="after")
    def _nonzero(self) -> ElectionId:
        if self.high == 0 and self.low == 0:
            raise ValueError("election_id must be greater than 0 (high and low are both 0)")
        return self

    @property
    def value(self) -> int:
        return (self.high << 64) | self.low


def both_or_neither(cert: Path | None, key: Path | None) -> None:
    if (cert is None) != (key is None):
        raise ValueError("give both 'cert' and 'key' (a client certificate and its key), or neither")


class SwitchTlsConfig(StrictModel):
    """P4Runtime over TLS; with `cert`/`key` also mutual TLS (the switch's
    --grpc-server-with-client-auth)."""

    cacert: Path | None = Field(default=None, description="PEM CA that signed the switch's certificate (default: system CAs)")
    cert: Path | None = Field(default=None, description="PEM client certificate, for a switch that requires one")
    key: Path | None = Field(default=None, description="PEM private key of `cert`")
    server_name: str | None = Field(
        default=None, min_length=1, description="name to check the switch's certificate against, if not the address's host"
    )

    @model_validator(mode="after")
    def _pair(self) -> SwitchTlsConfig:
        both_or_neither(self.cert, self.key)
        return self


class SwitchConfig(StrictModel):
    address: str = Field(description="host:port of the switch's P4Runtime gRPC server")
    device_id: int = Field(ge=0, lt=2**64)
    election_id: ElectionId = Field(default_factory=ElectionId)
    tls: SwitchTlsConfig | None = Field(default=None, description="P4Runtime over TLS (default: plaintext)")

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{v!r} must be 'host:port' with a port in 1..65535")
        return v


class PipelineConfig(StrictModel):
    p4info: Path = Field(description="P4Info text or binary file")
    device_config: Path | None = Field(default=None, description="target device config, e.g. BMv2 JSON")


class GatewayIp6Config(StrictModel):
    """The gateway's shared IPv6 addresses (docs/pipeline-contract.md, "IPv6 Neighbor
    Discovery on the LAN"): the switch answers Neighbor Solicitations for them with each
    host's vmac, as it answers ARP for `gateway_ip`. Owned by no box."""

    model_config = ConfigDict(populate_by_name=True)

    link_local: ipaddress.IPv6Address = Field(description="LL_G, in fe80::/10: the source of the Router Advertisements")
    global_: ipaddress.IPv6Address | None = Field(
        default=None, alias="global", description="GUA_G, a global unicast address on the LAN's prefix (optional)"
    )

    @field_validator("link_local")
    @classmethod
    def _link_local(cls, v: ipaddress.IPv6Address) -> ipaddress.IPv6Address:
        if not v.is_link_local or v.is_multicast:
            raise ValueError(f"{v} is not a link-local unicast address (fe80::/10)")
        return v

    @field_validator("global_")
    @classmethod
    def _global(cls, v: ipaddress.IPv6Address | None) -> ipaddress.IPv6Address | None:
        if v is not None and (v.is_link_local or v.is_multicast or v.is_unspecified or v.is_loopback or v.ipv4_mapped):
            raise ValueError(f"{v} is not a global (or unique local) unicast address")
        return v


class DispatchConfig(StrictModel):
    """How hosts map to buckets, and how buckets are first shared out (the switch's settings
    and the initial assignment; see docs/pipeline-contract.md, "Terms")."""

    hash: BucketHashName = Field(
        default=BucketHash.CRC32,
        description=(
            "bucket(mac) = hash(mac) & (K - 1): crc32 spreads any MACs; identity is the MAC's low bits "
            "(the clustering paper's h(m) = base | (m % K)), so sequential MACs fill sequential buckets"
        ),
    )
    partition_period: int | None = Field(
        default=None,
        ge=1,
        description=(
            "initial assignment: bucket b starts on the gateway of class b mod partition_period, the "
            "classes shared out by weighted round robin (a power of two <= buckets; unset: every "
            "bucket is its own class). 256 with K = 4096 starts every bucket where the paper's "
            "K = 256 partition puts its low byte"
        ),
    )

    @field_validator("partition_period")
    @classmethod
    def _period(cls, v: int | None) -> int | None:
        if v is not None and v & (v - 1):
            raise ValueError(f"{v} is not a power of two")
        return v


class PortConfig(StrictModel):
    role: PortRoleName
    interface: str | None = Field(
        default=None,
        min_length=1,
        max_length=15,
        description="Linux interface behind this switch port, watched by the port monitor",
    )


def _port_entry(value: Any) -> Any:
    # `10: gateway` is short for `10: {role: gateway}`.
    if isinstance(value, str):
        return {"role": value}
    return value


def read_secret_file(path: Path, where: str, min_chars: int = MIN_SECRET_CHARS) -> str:
    """The first line of a secret file, or ConfigError naming `where` (a config key)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    secret = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(secret) < min_chars:
        raise ConfigError(f"{where}: the secret in {path} is shorter than {min_chars} characters")
    return secret


def _long_enough(v: SecretStr | None, chars: int) -> SecretStr | None:
    if v is not None and len(v.get_secret_value()) < chars:
        raise ValueError(f"must be at least {chars} characters long")
    return v


class GatewayConfig(StrictModel):
    name: str = Field(min_length=1, max_length=64, pattern=_NAME_PATTERN)
    port: int
    mac: str
    weight: float = Field(default=1.0, gt=0, description="relative capacity")
    agent_url: str | None = Field(default=None, description="where the gateway agent listens (informational)")
    heartbeat: bool = Field(default=True, description="false: no agent; liveness from the port state only")
    site_to_site: bool = Field(
        default=True,
        description=(
            "false: the gateway carries no site-to-site tunnel (remote-access clients only), so a report "
            "without an installed CHILD SA does not make it dead"
        ),
    )
    agent_token: SecretStr | None = Field(
        default=None,
        description="this gateway's agent secret (prefer agent_token_file); it may report and heartbeat for this gateway only",
    )
    agent_token_file: Path | None = Field(default=None, description="file whose first line is the agent secret")
    heartbeat_from: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = Field(
        default_factory=list,
        description=(
            "addresses (networks) this gateway's agent sends its UDP heartbeats from; when given, a heartbeat "
            "naming this gateway from anywhere else is refused before its HMAC is checked (unknown_source)"
        ),
    )

    _agent_token_length = field_validator("agent_token")(lambda v: _long_enough(v, MIN_SECRET_CHARS))

    @model_validator(mode="after")
    def _one_secret(self) -> GatewayConfig:
        if self.agent_token is not None and self.agent_token_file is not None:
            raise ValueError(f"gateway {self.name!r}: give at most one of 'agent_token' or 'agent_token_file'")
        return self

    def agent_secret(self) -> str | None:
        """The secret this gateway's agent authenticates with (REST bearer token, heartbeat key),
        or None when the gateway has none. `load_config` has already read `agent_token_file`."""
        if self.agent_token is not None:
            return self.agent_token.get_secret_value()
        if self.agent_token_file is not None:
            return read_secret_file(self.agent_token_file, f"gateway {self.name!r} agent_token_file")
        return None

    @field_validator("heartbeat_from", mode="before")
    @classmethod
    def _networks(cls, v: Any) -> Any:
        if not isinstance(v, list):
            return v
        out: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for item in v:
            try:
                out.append(ipaddress.ip_network(str(item)))
            except ValueError as exc:
                raise ValueError(f"{item!r} is not an IP address or network (e.g. 192.0.2.11 or 192.0.2.0/28): {exc}") from None
        return out

    @field_validator("mac", mode="before")
    @classmethod
    def _unicast(cls, v: Any) -> str:
        mac = normalise_mac(v)
        if int(mac.split(":")[0], 16) & 1:
            raise ValueError(f"{mac} is a multicast MAC; a gateway needs a unicast MAC")
        return mac


class TimingConfig(StrictModel):
    # The agents' timing too: every answer to a report or REST heartbeat tells them (`agent_timing`).
    report_interval_ms: int = Field(default=DEFAULT_REPORT_INTERVAL_MS, gt=0)
    heartbeat_interval_ms: int = Field(default=DEFAULT_HEARTBEAT_INTERVAL_MS, gt=0, lt=1 << 32)
    missed_heartbeats: int = Field(default=DEFAULT_MISSED_HEARTBEATS, ge=1)
    rebalance_interval_ms: int = Field(default=2000, gt=0)
    ageing_s: float = Field(default=300.0, gt=0, description="idle time after which a learned host is forgotten")
    startup_grace_s: float = Field(
        default=6.0,
        ge=0,
        description=(
            "after start or takeover, a gateway not heard from yet counts as alive this long; "
            "keep it above the agents' longest heartbeat retry interval"
        ),
    )
    counter_poll_interval_ms: int = Field(default=1000, gt=0, description="bucket counter reads for load rates")
    lan_liveness_interval_ms: int = Field(
        default=DEFAULT_LAN_LIVENESS_INTERVAL_MS,
        ge=0,
        le=1000,
        description=(
            "how often each gateway's agent sends its liveness frame out of its LAN port (the agents are told); "
            "0: no frames, and the switch never fails a gateway over by itself"
        ),
    )
    lan_liveness_timeout_ms: int = Field(
        default=DEFAULT_LAN_LIVENESS_TIMEOUT_MS,
        ge=0,
        le=60_000,
        description=(
            "the switch sends a gateway's buckets to its backup (the next gateway that can serve, in the order of "
            "`gateways:`) once no liveness frame has come from it for this long, before the controller's verdict; "
            "0: it never does (the controller alone fails gateways over)"
        ),
    )

    @model_validator(mode="after")
    def _liveness_timing(self) -> TimingConfig:
        t, i = self.lan_liveness_timeout_ms, self.lan_liveness_interval_ms
        if t and not i:
            raise ValueError("lan_liveness_timeout_ms needs lan_liveness_interval_ms > 0 (no frames: every gateway stale)")
        if t and t < 3 * i:
            raise ValueError(
                f"lan_liveness_timeout_ms {t} must be at least 3 x lan_liveness_interval_ms ({3 * i}): "
                "two late frames must not fail a gateway over"
            )
        return self

    @property
    def dead_after_s(self) -> float:
        return self.heartbeat_interval_ms * self.missed_heartbeats / 1000.0

    @property
    def dataplane_failover(self) -> bool:
        """The switch fails a stale gateway's buckets over by itself (gateway_backups written)."""
        return self.lan_liveness_timeout_ms > 0

    def agent_timing(self) -> AgentTiming:
        """What the agents are told (and judged by)."""
        return AgentTiming(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            missed_heartbeats=self.missed_heartbeats,
            report_interval_ms=self.report_interval_ms,
            lan_liveness_interval_ms=self.lan_liveness_interval_ms,
        )


class HeartbeatsConfig(StrictModel):
    """The UDP heartbeat receiver's defences (see heartbeat.py): a flood of forged or
    replayed datagrams must not delay a real gateway's beat, and a rotated agent secret
    must not lose one."""

    key_overlap_s: float = Field(
        default=120.0,
        ge=0,
        description=(
            "after a gateway's agent_token_file changes, its previous secret still authenticates UDP heartbeats "
            "this long, so its agent has time to pick up the new one (its file is on another host)"
        ),
    )
    untrusted_rate_per_s: float = Field(
        default=50.0,
        gt=0,
        description=(
            "datagrams per second read from a source address that has sent no valid heartbeat and is in no "
            "gateway's heartbeat_from; beyond this rate (and burst) they are refused unread (rate_limited)"
        ),
    )
    untrusted_burst: int = Field(default=100, ge=1, description="the burst of untrusted_rate_per_s")
    receive_buffer_bytes: int = Field(
        default=4 << 20,
        ge=1 << 16,
        description="SO_RCVBUF of the heartbeat socket (the kernel caps it at net.core.rmem_max; the log says what it got)",
    )
    drain_budget_ms: float = Field(
        default=20.0,
        gt=0,
        description="longest one read of the heartbeat socket holds the event loop while datagrams keep coming",
    )


class LearningConfig(StrictModel):
    ip_wait_s: float = Field(
        default=30.0,
        ge=0,
        description=(
            "a host whose frames carry no IPv4 source (IPv6, non-IP) keeps producing digests this "
            "long, so that its IP is learned from a later frame; then it is learned without an IP "
            "(0: learn every host on its first digest)"
        ),
    )
    digest_list_size: int = Field(
        default=256,
        ge=1,
        le=65536,
        description=(
            "at most this many hosts per batch of digests the controller learns in one write: hosts that "
            "appear together (a cold start of the site) are learned in one write per batch, not one per host"
        ),
    )
    digest_timeout_ms: float = Field(
        default=2.0,
        ge=0,
        le=1000,
        description=(
            "the controller learns a batch of digests at the latest this long after its first host (0: only "
            "the digests already waiting): what a lone new host waits for its batch"
        ),
    )
    digest_batching: DigestBatching = Field(
        default=DigestBatching.AUTO,
        description=(
            "who makes the batches of digest_list_size / digest_timeout_ms: 'switch' (its DigestEntry "
            "lists; for a switch that sends a list max_timeout_ns after its first digest, as the eBPF "
            "switch), 'controller' (the switch sends each digest at once; for PI-based P4Runtime servers "
            "such as BMv2's, which send a list 100-200 ms late whatever max_timeout_ns says), or 'auto': "
            "'controller' when pipeline.device_config is given (BMv2, Tofino), 'switch' when not (the eBPF "
            "switch, whose program is built in)"
        ),
    )


class PrefixConfig(StrictModel):
    """One prefix the Router Advertisements announce (a Prefix Information option, RFC 4861
    §4.6.2; defaults from §6.2.1)."""

    prefix: ipaddress.IPv6Network
    on_link: bool = True
    autonomous: bool = Field(default=True, description="hosts form addresses in it by SLAAC (needs a /64)")
    valid_lifetime_s: int = Field(default=2_592_000, ge=0, le=0xFFFFFFFF, description="0xffffffff: infinite")
    preferred_lifetime_s: int = Field(default=604_800, ge=0, le=0xFFFFFFFF)

    @field_validator("prefix", mode="before")
    @classmethod
    def _network(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return ipaddress.IPv6Network(v)  # its message names the problem ("has host bits set")
            except ValueError as exc:
                raise ValueError(f"not an IPv6 prefix: {exc}") from None
        return v

    @field_validator("prefix")
    @classmethod
    def _routable(cls, v: ipaddress.IPv6Network) -> ipaddress.IPv6Network:
        if v.is_link_local or v.is_multicast or v.is_loopback or v.is_unspecified:
            raise ValueError(f"{v} cannot be advertised as an on-link or SLAAC prefix")
        return v

    @model_validator(mode="after")
    def _lifetimes(self) -> PrefixConfig:
        if self.autonomous and self.prefix.prefixlen != 64:
            raise ValueError(
                f"prefix {self.prefix}: autonomous (SLAAC) needs a /64 — hosts on Ethernet form 64-bit interface "
                "identifiers and ignore other lengths (RFC 4862 §5.5.3 d, RFC 2464 §4); set autonomous: false "
                "to announce it on-link only"
            )
        if self.preferred_lifetime_s > self.valid_lifetime_s:
            raise ValueError(
                f"prefix {self.prefix}: preferred_lifetime_s {self.preferred_lifetime_s} exceeds valid_lifetime_s "
                f"{self.valid_lifetime_s} (RFC 4861 §4.6.2)"
            )
        return self


class RouterAdvertConfig(StrictModel):
    """Router Advertisements the controller sends by packet-out out of every host port from
    the gateway's link-local address, without a source link-layer option (RFC 4861 §4.2), so
    every host resolves the router to its own bucket's vmac. Bounds and defaults: §6.2.1."""

    enabled: bool = True
    prefixes: list[PrefixConfig] = Field(default_factory=list)
    max_interval_s: float = Field(default=600.0, ge=4.0, le=1800.0, description="MaxRtrAdvInterval")
    min_interval_s: float | None = Field(
        default=None, ge=3.0, description="MinRtrAdvInterval (default 0.33 x max, or max when max < 9 s)"
    )
    router_lifetime_s: int | None = Field(
        default=None, ge=0, le=9000, description="AdvDefaultLifetime (default 3 x max_interval_s; 0: not a default router)"
    )
    cur_hop_limit: int = Field(default=64, ge=0, le=255)
    managed: bool = Field(default=False, description="the M flag: addresses from DHCPv6")
    other_config: bool = Field(default=False, description="the O flag: other configuration from DHCPv6")
    reachable_time_ms: int = Field(default=0, ge=0, le=3_600_000, description="0: unspecified by this router")
    retrans_timer_ms: int = Field(default=0, ge=0, le=0xFFFFFFFF, description="0: unspecified by this router")
    mtu: int | None = Field(default=None, ge=1280, le=0xFFFFFFFF, description="an MTU option (none by default)")

    @property
    def min_interval(self) -> float:
        if self.min_interval_s is not None:
            return self.min_interval_s
        return 0.33 * self.max_interval_s if self.max_interval_s >= 9 else self.max_interval_s

    @property
    def router_lifetime(self) -> int:
        return self.router_lifetime_s if self.router_lifetime_s is not None else min(9000, round(3 * self.max_interval_s))

    @model_validator(mode="after")
    def _bounds(self) -> RouterAdvertConfig:
        errors: list[str] = []
        if self.min_interval_s is not None and self.min_interval_s > 0.75 * self.max_interval_s:
            errors.append(
                f"min_interval_s {self.min_interval_s} exceeds 0.75 x max_interval_s ({0.75 * self.max_interval_s:g}; "
                "RFC 4861 §6.2.1)"
            )
        lifetime = self.router_lifetime
        if lifetime != 0 and lifetime < self.max_interval_s:
            errors.append(
                f"router_lifetime_s {lifetime} is below max_interval_s {self.max_interval_s:g}: hosts would drop the "
                "default route between two advertisements (0 or >= max_interval_s; RFC 4861 §6.2.1)"
            )
        seen: dict[ipaddress.IPv6Network, int] = {}
        for i, p in enumerate(self.prefixes):
            if p.prefix in seen:
                errors.append(f"prefixes[{i}]: {p.prefix} is also prefixes[{seen[p.prefix]}]")
            seen.setdefault(p.prefix, i)
        if errors:
            raise ValueError("\n".join(errors))
        return self


class RebalancePolicy(StrEnum):
    SUPERGW = "supergw"
    PAPER = "paper"


class PaperPolicyConfig(StrictModel):
    """The clustering paper's Algorithm 5 (§3.3, `rebalancer.PaperParams`); defaults are §4.3's values."""

    load_window_s: float = Field(
        default=1.33, gt=0,
        description="T_L: under policy paper the agents report their load (CPU over the window) this often, "
        "in place of timing.report_interval_ms",
    )
    interval_s: float = Field(default=4.0, gt=0, description="T_M: one round of migration decisions this often")
    load_difference: float = Field(
        default=0.10, ge=0, le=1,
        description="L_D: a gateway migrates when its CPU load exceeds its ring successor's by more than this "
        "(a fraction: 0.10 = 10 percentage points)",
    )
    move_size: int = Field(default=4, ge=1, description="|W|: random buckets of its own a gateway hands its successor")
    seed: int | None = Field(default=None, description="seed of the random choice (null: a fresh one per start)")


class RebalancerConfig(StrictModel):
    policy: RebalancePolicy = Field(
        default=RebalancePolicy.SUPERGW,
        description="supergw: greedy moves every timing.rebalance_interval_ms; paper: the clustering paper's "
        "Algorithm 5 (a ring in gateway order, |W| random buckets to the successor) every paper.interval_s",
    )
    paper: PaperPolicyConfig = Field(default_factory=PaperPolicyConfig)
    threshold: float = Field(default=1.10, gt=1.0, description="rebalance when max/mean load exceeds this")
    hysteresis: float = Field(default=0.05, ge=0, lt=1.0, description="stop once max/mean < threshold - hysteresis; a round whose load moves would "
        "lower max/mean by less than this moves nothing (whole buckets as even as they get)")
    move_budget: int = Field(
        default=64,
        ge=1,
        description="bucket moves per round at most (8 per 2 s round need 38 s to spread 224 busy buckets over 3)",
    )
    refill_budget: int = Field(default=4, ge=1, description="buckets given back to a recovered gateway per round")


class Role(StrEnum):
    READ_ONLY = "read-only"
    ADMIN = "admin"


class OperatorToken(StrictModel):
    """One operator credential; `name` is what the event log records, never the secret."""

    name: str = Field(min_length=1, max_length=64, pattern=_NAME_PATTERN)
    role: Role
    token: SecretStr | None = None
    token_file: Path | None = None

    _token_length = field_validator("token")(lambda v: _long_enough(v, MIN_SECRET_CHARS))

    @model_validator(mode="after")
    def _one_secret(self) -> OperatorToken:
        if (self.token is None) == (self.token_file is None):
            raise ValueError(f"token {self.name!r}: give exactly one of 'token' or 'token_file'")
        return self

    def secret(self) -> str:
        if self.token is not None:
            return self.token.get_secret_value()
        assert self.token_file is not None
        return read_secret_file(self.token_file, f"api.tokens[{self.name}].token_file")


class TlsConfig(StrictModel):
    cert: Path = Field(description="PEM certificate chain the REST API presents")
    key: Path = Field(description="PEM private key of `cert`")


LEGACY_TOKEN_NAME = "admin"


class ApiConfig(StrictModel):
    listen: str = Field(default="127.0.0.1:18700")
    token: SecretStr | None = Field(default=None, description="legacy: one admin token named 'admin'")
    token_file: Path | None = Field(default=None, description="legacy: file holding one admin token named 'admin'")
    tokens: list[OperatorToken] = Field(default_factory=list, description="operator tokens with roles")
    tls: TlsConfig | None = Field(default=None, description="serve HTTPS with this certificate and key")
    ops_token_required: bool = Field(
        default=False,
        description=(
            "true: /metrics and /healthz need an operator token (role read-only or admin), as /api/v1 does; "
            "false (the default, for existing scrapers and probes): they answer anyone"
        ),
    )

    _token_length = field_validator("token")(lambda v: _long_enough(v, 8))

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{v!r} must be 'address:port' with a port in 1..65535")
        return v

    @model_validator(mode="after")
    def _tokens(self) -> ApiConfig:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give at most one of 'token' or 'token_file'")
        if self.token is None and self.token_file is None and not self.tokens:
            raise ValueError("no operator token: give 'tokens' (name, role, token_file) or the legacy 'token'/'token_file'")
        names = [t.name for t in self.tokens]
        if self.token is not None or self.token_file is not None:
            names.append(LEGACY_TOKEN_NAME)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate token names {dupes} (the legacy token/token_file is named {LEGACY_TOKEN_NAME!r})")
        return self

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def operator_tokens(self) -> list[tuple[str, Role, str]]:
        """(name, role, secret) of every operator token; the legacy token is an admin named 'admin'."""
        out = [(t.name, t.role, t.secret()) for t in self.tokens]
        if self.token is not None:
            out.append((LEGACY_TOKEN_NAME, Role.ADMIN, self.token.get_secret_value()))
        elif self.token_file is not None:
            out.append((LEGACY_TOKEN_NAME, Role.ADMIN, read_secret_file(self.token_file, "api.token_file", 8)))
        return out

    def read_token(self) -> str:
        """The first admin token's secret (for local tools acting as the operator)."""
        for _, role, secret in self.operator_tokens():
            if role is Role.ADMIN:
                return secret
        raise ConfigError("api: no admin token configured")


class PortMonitorConfig(StrictModel):
    enabled: bool = Field(default=False, description="watch port interfaces via netlink (controller on the switch host)")
    netns: str | None = Field(default=None, description="network namespace holding the interfaces")


class StoreBackend(StrEnum):
    SQLITE = "sqlite"
    ETCD = "etcd"


class EtcdTlsConfig(StrictModel):
    """etcd over TLS; with `cert`/`key` a client certificate (etcd's --client-cert-auth), whose
    CN is the etcd user when etcd auth is enabled."""

    cacert: Path = Field(description="PEM CA that signed the etcd members' certificates (--trusted-ca-file)")
    cert: Path | None = Field(default=None, description="PEM client certificate; its CN is the etcd user")
    key: Path | None = Field(default=None, description="PEM private key of `cert`")
    server_name: str | None = Field(
        default=None, min_length=1, description="name to check the members' certificates against, if not the endpoint's host"
    )

    @model_validator(mode="after")
    def _pair(self) -> EtcdTlsConfig:
        both_or_neither(self.cert, self.key)
        return self


class EtcdStoreConfig(StrictModel):
    endpoints: list[str] = Field(
        min_length=1, description="etcd client addresses, host:port or https://host:port (any member will do)"
    )
    prefix: str = Field(default="/supergw/default", description="key prefix of this super gateway's intent")
    timeout_s: float = Field(default=1.0, gt=0, le=30, description="deadline of every etcd call")
    tls: EtcdTlsConfig | None = Field(default=None, description="etcd over TLS (default: plaintext)")

    @model_validator(mode="after")
    def _schemes(self) -> EtcdStoreConfig:
        from supergw_controller.etcd_kv import check_schemes

        check_schemes(self.endpoints, self.tls is not None)
        if self.tls is not None and len(self.endpoints) > 1 and self.tls.server_name is None:
            # One channel balances over every member and checks each member's certificate
            # against one name (the target's), so each certificate must carry that name.
            raise ValueError(
                "several etcd endpoints over TLS: set tls.server_name to a name every member's certificate "
                "carries (e.g. etcd.supergw: supergw-gateway pki --peer etcd-c1=10.0.0.11,etcd.supergw)"
            )
        return self

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, v: list[str]) -> list[str]:
        from supergw_controller.etcd_kv import grpc_target

        grpc_target(v)  # raises ValueError saying which endpoint is wrong
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        from supergw_controller.etcd_store import validate_prefix

        return validate_prefix(v)


class StoreConfig(StrictModel):
    """Where operator intent and the event log live: SQLite (`state_db`) or etcd (replicas)."""

    backend: StoreBackend = StoreBackend.SQLITE
    etcd: EtcdStoreConfig | None = None

    @model_validator(mode="after")
    def _etcd_given(self) -> StoreConfig:
        if self.backend is StoreBackend.ETCD and self.etcd is None:
            raise ValueError(
                "backend is etcd but there is no store.etcd section: add store.etcd.endpoints"
                ' (e.g. ["127.0.0.1:2379"]), and optionally prefix and timeout_s'
            )
        return self


class HaConfig(StrictModel):
    """Replicated controllers (issue 9): leadership from etcd, see supergw_controller/ha/."""

    replica: str = Field(
        min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="this replica's name, unique"
    )
    lease_ttl_s: int = Field(default=2, ge=1, le=60, description="etcd lease of the leader key (whole seconds)")
    fence_margin_s: float = Field(
        default=0.5, ge=0, description="the leader stops writing this long before its lease could expire"
    )
    api_url: str | None = Field(
        default=None, description="this replica's REST API as others should reach it (default: scheme://api.listen)"
    )

    @model_validator(mode="after")
    def _margin(self) -> HaConfig:
        if self.fence_margin_s >= self.lease_ttl_s:
            raise ValueError(
                f"fence_margin_s {self.fence_margin_s} must be below lease_ttl_s {self.lease_ttl_s}"
            )
        return self


class OutsideGatewayConfig(StrictModel):
    """A gateway's side on the outside switch: the port its WAN interface is on and that
    interface's MAC (client packets to IP_P leave toward it with dst := this MAC)."""

    port: int = Field(ge=0, lt=2**16)
    mac: str

    _mac = field_validator("mac", mode="before")(lambda v: GatewayConfig._unicast(v))


class RemoteAccessConfig(StrictModel):
    """Remote-access clients at one public address (docs/remote-access.md): the outside
    switch, a second P4Runtime device of this controller running the same program with the
    outside roles. What each gateway serves (its pool, ESP SPI range, IKE SPI label) is not
    here: it comes from the gateway's own config through its reports (`remote_access`), and
    a report that disagrees with this section (another IP_P) or with another gateway (an
    overlapping pool, range or label) is refused and logged."""

    public_ip: ipaddress.IPv4Address = Field(description="IP_P: the switch answers ARP for it; every gateway holds it")
    public_mac: str = Field(description="the MAC the switch answers with and gives the gateways' frames from IP_P")
    switch: SwitchConfig = Field(description="the outside switch's P4Runtime server (another device than the LAN's)")
    pipeline: PipelineConfig | None = Field(default=None, description="default: the LAN switch's (the same program)")
    uplinks: list[int] = Field(min_length=1, description="outside switch ports toward the routers")
    gateways: dict[str, OutsideGatewayConfig] = Field(
        description="every gateway's outside port and WAN MAC, by name (each gateway of `gateways`)"
    )
    pins: bool = Field(
        default=True,
        description="pin each client's outer address to the gateway that reports its IKE SA (false: address hash only)",
    )
    takeover: bool = Field(
        default=True,
        description=(
            "stateful takeover of a dead gateway's remote-access SAs by its ring backup (docs/remote-access.md, "
            "\"Takeover of a dead gateway\"): agents that report a replication endpoint are told who backs up "
            "whom; false: no replication orders, a dead gateway's clients reconnect on their own (its pins go)"
        ),
    )

    _public_mac = field_validator("public_mac", mode="before")(lambda v: GatewayConfig._unicast(v))

    @field_validator("public_ip")
    @classmethod
    def _public_ip(cls, v: ipaddress.IPv4Address) -> ipaddress.IPv4Address:
        if v.is_unspecified or v.is_multicast or v.is_loopback or v == ipaddress.IPv4Address("255.255.255.255"):
            raise ValueError(f"{v} cannot be a public address")
        return v

    @model_validator(mode="after")
    def _ports(self) -> RemoteAccessConfig:
        errors: list[str] = []
        seen: dict[int, str] = {}
        for p in self.uplinks:
            if p in seen:
                errors.append(f"uplinks: port {p} listed twice")
            seen[p] = "an uplink"
        macs: dict[str, str] = {}
        for name, g in self.gateways.items():
            if g.port in seen:
                errors.append(f"gateways.{name}.port: port {g.port} is already {seen[g.port]}")
            seen.setdefault(g.port, f"gateway {name}'s")
            if g.mac in macs or g.mac == self.public_mac:
                errors.append(f"gateways.{name}.mac: {g.mac} is also {macs.get(g.mac, 'public_mac')}'s")
            macs.setdefault(g.mac, name)
        if CPU_PORT in seen:
            errors.append(f"port {CPU_PORT} is the CPU port and cannot have a role")
        if errors:
            raise ValueError("\n".join(errors))
        return self


class Config(StrictModel):
    switch: SwitchConfig
    pipeline: PipelineConfig
    gateway_ip: ipaddress.IPv4Address
    gateway_ip6: GatewayIp6Config | None = Field(
        default=None, description="the gateway's IPv6 addresses; without it the switch answers no Neighbor Discovery"
    )
    buckets: int = Field(description="K, a power of two <= MAX_BUCKETS")
    vmac_base: str
    dispatch: DispatchConfig = Field(default_factory=DispatchConfig)
    ports: dict[int, Annotated[PortConfig, Field()]]
    gateways: list[GatewayConfig] = Field(min_length=1)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    heartbeats: HeartbeatsConfig = Field(default_factory=HeartbeatsConfig)
    learning: LearningConfig = Field(default_factory=LearningConfig)
    router_advertisements: RouterAdvertConfig | None = Field(
        default=None, description="Router Advertisements by packet-out from gateway_ip6.link_local (none when unset)"
    )
    rebalancer: RebalancerConfig = Field(default_factory=RebalancerConfig)
    api: ApiConfig
    port_monitor: PortMonitorConfig = Field(default_factory=PortMonitorConfig)
    state_db: Path = Field(default=Path("supergw-state.sqlite3"))
    store: StoreConfig = Field(default_factory=StoreConfig)
    ha: HaConfig | None = Field(default=None, description="run as one of several replicas (needs store.backend etcd)")
    remote_access: RemoteAccessConfig | None = Field(
        default=None, description="remote-access clients at one public address, dispatched by an outside switch"
    )

    def agent_timing(self) -> AgentTiming:
        """What the agents are told (and judged by): `timing`'s, except that under
        `rebalancer.policy: paper` they report every T_L (`rebalancer.paper.load_window_s`),
        as the paper's gateways send their load information every T_L."""
        told = self.timing.agent_timing()
        if self.rebalancer.policy is RebalancePolicy.PAPER:
            return told.model_copy(update={"report_interval_ms": max(1, round(self.rebalancer.paper.load_window_s * 1000))})
        return told

    @field_validator("ports", mode="before")
    @classmethod
    def _ports_short(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: _port_entry(e) for k, e in v.items()}
        return v

    @field_validator("ports")
    @classmethod
    def _port_numbers(cls, v: dict[int, PortConfig]) -> dict[int, PortConfig]:
        for port in v:
            if not 0 <= port < 2**16:
                raise ValueError(f"port {port} is outside 0..65535")
            if port == CPU_PORT:
                raise ValueError(f"port {port} is the CPU port and cannot have a role")
        return v

    @field_validator("gateway_ip")
    @classmethod
    def _gateway_ip(cls, v: ipaddress.IPv4Address) -> ipaddress.IPv4Address:
        if v.is_unspecified or v.is_multicast or v == ipaddress.IPv4Address("255.255.255.255"):
            raise ValueError(f"{v} cannot be a gateway address")
        return v

    @field_validator("buckets")
    @classmethod
    def _buckets(cls, v: int) -> int:
        if v < 1 or v & (v - 1):
            raise ValueError(f"{v} is not a power of two")
        if v > MAX_BUCKETS:
            raise ValueError(f"{v} exceeds MAX_BUCKETS = {MAX_BUCKETS} of the pipeline")
        return v

    @field_validator("vmac_base", mode="before")
    @classmethod
    def _vmac_base(cls, v: Any, info: ValidationInfo) -> str:
        mac = normalise_mac(v)
        first = int(mac[:2], 16)
        if first & 1:
            raise ValueError(f"{mac} is multicast; vmac_base must be unicast")
        if not first & 2:
            raise ValueError(f"{mac} is not locally administered (set bit 0x02 of the first byte)")
        if mac_to_int(mac) & 0xFFFF:
            raise ValueError(f"{mac} must have its low 16 bits zero")
        return mac

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        errors: list[str] = []
        if self.router_advertisements is not None and self.gateway_ip6 is None:
            errors.append(
                "router_advertisements: the RAs are sent from the gateway's link-local address: set "
                "gateway_ip6.link_local (and its global address, optional)"
            )
        if self.ha is not None and self.store.backend is not StoreBackend.ETCD:
            errors.append(
                "ha: replicas need the shared etcd store: set store.backend: etcd and store.etcd.endpoints"
                f" (store.backend is {self.store.backend.value})"
            )
        period = self.dispatch.partition_period
        if period is not None and period > self.buckets:
            errors.append(f"dispatch.partition_period: {period} exceeds buckets ({self.buckets})")
        gw_ports = {p for p, pc in self.ports.items() if pc.role is PortRoleName.GATEWAY}
        names: dict[str, int] = {}
        ports_used: dict[int, int] = {}
        macs: dict[str, int] = {}
        base = mac_to_int(self.vmac_base)
        for i, gw in enumerate(self.gateways):
            where = f"gateways[{i}]"
            if gw.name in names:
                errors.append(f"{where}.name: duplicate name {gw.name!r} (also gateways[{names[gw.name]}])")
            names.setdefault(gw.name, i)
            if gw.port not in gw_ports:
                errors.append(f"{where}.port: must be a port listed in ports with role 'gateway' (got {gw.port})")
            elif gw.port in ports_used:
                errors.append(f"{where}.port: port {gw.port} is already used by gateways[{ports_used[gw.port]}]")
            ports_used.setdefault(gw.port, i)
            if gw.mac in macs:
                errors.append(f"{where}.mac: duplicate MAC {gw.mac} (also gateways[{macs[gw.mac]}])")
            macs.setdefault(gw.mac, i)
            if mac_to_int(gw.mac) & ~0xFFFF == base:
                errors.append(f"{where}.mac: {gw.mac} lies inside the vmac block of vmac_base {self.vmac_base}")
            if gw.heartbeat and gw.agent_token is None and gw.agent_token_file is None:
                errors.append(
                    f"{where}.agent_token_file: required while heartbeat is on: the secret this gateway's agent "
                    f"authenticates with (or set heartbeat: false for a gateway without an agent)"
                )
        interfaces: dict[str, int] = {}
        for port, pc in self.ports.items():
            if pc.interface is None:
                continue
            if pc.interface in interfaces:
                errors.append(f"ports.{port}.interface: {pc.interface!r} is also used by port {interfaces[pc.interface]}")
            interfaces.setdefault(pc.interface, port)
        if self.port_monitor.enabled and not interfaces:
            errors.append("port_monitor.enabled: no port names an 'interface' to watch")
        errors += self._remote_access_checks()
        if errors:
            raise ValueError("\n".join(errors))
        return self

    def _remote_access_checks(self) -> list[str]:
        ra = self.remote_access
        if ra is None:
            return []
        errors: list[str] = []
        names = [g.name for g in self.gateways]
        missing = [n for n in names if n not in ra.gateways]
        unknown = sorted(set(ra.gateways) - set(names))
        if missing:
            # The outside's buckets follow the LAN's: a bucket on a gateway without an outside
            # port would drop its new clients.
            errors.append(f"remote_access.gateways: no outside port for {missing} (every gateway needs one)")
        if unknown:
            errors.append(f"remote_access.gateways: {unknown} are not in gateways")
        if ra.public_ip == self.gateway_ip:
            errors.append(f"remote_access.public_ip: {ra.public_ip} is also gateway_ip")
        if ra.switch.address == self.switch.address and ra.switch.device_id == self.switch.device_id:
            errors.append("remote_access.switch: the same address and device_id as switch (the outside is another device)")
        if self.ha is not None:
            errors.append("remote_access: not supported with ha (replicated controllers) yet; run a single controller")
        return errors

    # Derived views the core uses.
    def ports_with_role(self, role: PortRoleName) -> list[int]:
        return sorted(p for p, pc in self.ports.items() if pc.role is role)

    @property
    def bucket_mask(self) -> int:
        return self.buckets - 1

    def gateway(self, name: str) -> GatewayConfig:
        for gw in self.gateways:
            if gw.name == name:
                return gw
        raise KeyError(name)

    def outside_switch(self) -> Config:
        """This config as the outside switch's session sees it: its switch and pipeline
        (`remote_access.switch`, `.pipeline` or the LAN's). ValueError without remote_access."""
        ra = self.remote_access
        if ra is None:
            raise ValueError("no remote_access section: there is no outside switch")
        return self.model_copy(update={"switch": ra.switch, "pipeline": ra.pipeline or self.pipeline})

    def agent_secret(self, name: str) -> str:
        """The secret of gateway `name`'s agent: its REST bearer token and its heartbeat key.
        KeyError for an unknown gateway; ConfigError when the gateway has no secret."""
        secret = self.gateway(name).agent_secret()
        if secret is None:
            raise ConfigError(f"gateway {name!r} has no agent_token/agent_token_file (heartbeat is off)")
        return secret

    def secret_files(self) -> list[Path]:
        """Every file a token is read from: operator tokens, the legacy token, agent tokens."""
        files = [t.token_file for t in self.api.tokens] + [self.api.token_file]
        files += [g.agent_token_file for g in self.gateways]
        return [f for f in files if f is not None]

    def with_secrets_reread(self) -> Config:
        """This config with every token file read again (a rotated token takes effect without a
        restart). ConfigError naming every problem when one cannot be used: then nothing changes."""
        tokens = [t.model_copy(update={"token": None}) if t.token_file else t for t in self.api.tokens]
        gateways = [g.model_copy(update={"agent_token": None}) if g.agent_token_file else g for g in self.gateways]
        fresh = self.model_copy(update={"api": self.api.model_copy(update={"tokens": tokens}), "gateways": gateways})
        try:
            cfg, problems = _read_secrets(fresh)
        except OSError as exc:  # the legacy token_file, which _read_secrets reads unguarded
            raise ConfigError(f"api.token_file: cannot read {self.api.token_file}: {exc.strerror or exc}") from None
        try:
            cfg.api.operator_tokens()  # the legacy token_file is read on use: check it now
        except ConfigError as exc:
            problems.append(str(exc))
        if problems:
            raise ConfigError("token files:\n  " + "\n  ".join(problems))
        return cfg


def _resolve(base: Path, p: Path | None) -> Path | None:
    if p is None:
        return None
    p = p.expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def parse_config(data: Any, base_dir: Path, source: str = "<config>") -> Config:
    """Validate an already-parsed YAML document; relative paths are taken from `base_dir`."""
    cfg = validate(Config, data, source, "config", ConfigError, mapping_keys=frozenset({"ports"}),
                   located_prefixes=("gateways[", "ports.", "port_monitor."))
    pipeline = cfg.pipeline.model_copy(
        update={
            "p4info": _resolve(base_dir, cfg.pipeline.p4info),
            "device_config": _resolve(base_dir, cfg.pipeline.device_config),
        }
    )
    tls = cfg.api.tls
    if tls is not None:
        tls = TlsConfig(cert=_resolve(base_dir, tls.cert) or tls.cert, key=_resolve(base_dir, tls.key) or tls.key)
    api = cfg.api.model_copy(
        update={
            "token_file": _resolve(base_dir, cfg.api.token_file),
            "tokens": [t.model_copy(update={"token_file": _resolve(base_dir, t.token_file)}) for t in cfg.api.tokens],
            "tls": tls,
        }
    )
    gateways = [g.model_copy(update={"agent_token_file": _resolve(base_dir, g.agent_token_file)}) for g in cfg.gateways]
    switch = cfg.switch
    if switch.tls is not None:
        paths = {k: _resolve(base_dir, getattr(switch.tls, k)) for k in ("cacert", "cert", "key")}
        switch = switch.model_copy(update={"tls": switch.tls.model_copy(update=paths)})
    store = cfg.store
    if store.etcd is not None and store.etcd.tls is not None:
        etcd_tls = store.etcd.tls
        paths = {k: _resolve(base_dir, getattr(etcd_tls, k)) for k in ("cacert", "cert", "key")}
        etcd = store.etcd.model_copy(update={"tls": etcd_tls.model_copy(update=paths)})
        store = store.model_copy(update={"etcd": etcd})
    cfg = cfg.model_copy(
        update={
            "pipeline": pipeline,
            "api": api,
            "gateways": gateways,
            "switch": switch,
            "store": store,
            "state_db": _resolve(base_dir, cfg.state_db),
            "remote_access": _resolve_remote_access(base_dir, cfg.remote_access),
        }
    )
    missing: list[str] = []
    assert cfg.pipeline.p4info is not None
    if not cfg.pipeline.p4info.is_file():
        missing.append(f"pipeline.p4info: file not found: {cfg.pipeline.p4info}")
    if cfg.pipeline.device_config is not None and not cfg.pipeline.device_config.is_file():
        missing.append(f"pipeline.device_config: file not found: {cfg.pipeline.device_config}")
    if cfg.api.token_file is not None:
        if not cfg.api.token_file.is_file():
            missing.append(f"api.token_file: file not found: {cfg.api.token_file}")
        elif len(cfg.api.token_file.read_text().strip()) < 8:
            missing.append(f"api.token_file: token in {cfg.api.token_file} is shorter than 8 characters")
    if cfg.api.tls is not None:
        missing += _missing_tls_files("api.tls", cfg.api.tls, "server")
    if cfg.switch.tls is not None:
        missing += _missing_tls_files("switch.tls", cfg.switch.tls, "client")
    if cfg.store.etcd is not None and cfg.store.etcd.tls is not None:
        missing += _missing_tls_files("store.etcd.tls", cfg.store.etcd.tls, "client")
    ra = cfg.remote_access
    if ra is not None and ra.pipeline is not None:
        files: list[tuple[str, Path | None]] = [("p4info", ra.pipeline.p4info), ("device_config", ra.pipeline.device_config)]
        for key, f in files:
            if f is not None and not f.is_file():
                missing.append(f"remote_access.pipeline.{key}: file not found: {f}")
    if ra is not None and ra.switch.tls is not None:
        missing += _missing_tls_files("remote_access.switch.tls", ra.switch.tls, "client")
    cfg, problems = _read_secrets(cfg)
    missing += problems
    if missing:
        raise ConfigError(f"{source}: invalid config:\n  " + "\n  ".join(missing))
    return cfg


def _missing_tls_files(where: str, tls: TlsConfig | SwitchTlsConfig | EtcdTlsConfig, own: Kind) -> list[str]:
    """One line per TLS file of `where` that does not exist, saying how to make it: `cacert`
    is the site's CA, `cert` and `key` this program's own certificate (`own`: server or client)."""
    out: list[str] = []
    for key in ("cacert", "cert", "key"):
        p = getattr(tls, key, None)
        if p is not None and not p.is_file():
            out.append(f"{where}.{key}: {certfiles.missing(p, 'ca' if key == 'cacert' else own)}")
    return out


def _resolve_remote_access(base: Path, ra: RemoteAccessConfig | None) -> RemoteAccessConfig | None:
    if ra is None:
        return None
    update: dict[str, Any] = {}
    if ra.pipeline is not None:
        update["pipeline"] = ra.pipeline.model_copy(
            update={"p4info": _resolve(base, ra.pipeline.p4info), "device_config": _resolve(base, ra.pipeline.device_config)}
        )
    if ra.switch.tls is not None:
        paths = {k: _resolve(base, getattr(ra.switch.tls, k)) for k in ("cacert", "cert", "key")}
        update["switch"] = ra.switch.model_copy(update={"tls": ra.switch.tls.model_copy(update=paths)})
    return ra.model_copy(update=update)


_Holder = TypeVar("_Holder", "OperatorToken", "GatewayConfig")


def _read_secrets(cfg: Config) -> tuple[Config, list[str]]:
    """Read every secret file once (so a later read cannot fail or change mid-run) and
    refuse a secret shared by two principals: it would let one act as the other."""
    problems: list[str] = []
    owners: dict[str, str] = {}

    def claim(secret: str, who: str) -> None:
        if secret in owners:
            problems.append(f"{who}: the same secret as {owners[secret]}; every token must be different")
        owners.setdefault(secret, who)

    def read_each(
        items: Sequence[_Holder], key: str, secret_key: str, read: Callable[[_Holder], str | None], suffix: str
    ) -> list[_Holder]:
        """items with each one's secret read into `secret_key`; a bad file is a problem named
        `<key>[i].<secret_key>_file`, a secret another principal has is one too."""
        out: list[_Holder] = []
        for i, item in enumerate(items):
            try:
                secret = read(item)
            except ConfigError as exc:
                problems.append(f"{key}[{i}].{secret_key}_file: {str(exc).split(': ', 1)[1]}")
                out.append(item)
                continue
            if secret is not None:
                claim(secret, f"{key}[{i}] ({item.name}){suffix}")
                item = item.model_copy(update={secret_key: SecretStr(secret)})
            out.append(item)
        return out

    tokens = read_each(cfg.api.tokens, "api.tokens", "token", OperatorToken.secret, "")
    if cfg.api.token is not None:
        claim(cfg.api.token.get_secret_value(), "api.token")
    elif cfg.api.token_file is not None and cfg.api.token_file.is_file():
        claim(cfg.api.token_file.read_text().strip(), "api.token_file")
    gateways = read_each(cfg.gateways, "gateways", "agent_token", GatewayConfig.agent_secret, " agent token")
    api = cfg.api.model_copy(update={"tokens": tokens})
    return cfg.model_copy(update={"api": api, "gateways": gateways}), problems


def load_config(path: str | Path) -> Config:
    """Read and validate the YAML config at `path`."""
    path = Path(path)
    return parse_config(read_yaml_mapping(path, "config", ConfigError), path.resolve().parent, str(path))
