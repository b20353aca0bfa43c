"""A gateway's remote-access side: IP_P held without ARP, the charon settings the outside switch
steers on, the client pool and connection as VICI messages, and the credential cache as swanctl
settings. One charon serves these clients and the site-to-site tunnel.

The cache (`cache_mapping`): the gateway keeps an absent client's IKE SA, CHILD SA and
virtual IP, so a client that comes back continues that SA (after an outage, a sleep, or a
MOBIKE address change) instead of a new IKE_SA_INIT + IKE_AUTH. For that the gateway must
never start an exchange toward a client that may be away: a request nobody answers ends the
IKE SA after the retransmission budget. So with a cache it runs no DPD and no rekeying of its
own (clients rekey; the gateway answers), and a CHILD SA never outlives nor predeceases its
IKE SA. What ends a cached SA is the strategy's lifetime:

- clocked: reauth_time = lifetime. Responding to clients with virtual IPs, charon cannot
  reauthenticate itself: it sends the lifetime in AUTH_LIFETIME (RFC 4478), so a present
  client reauthenticates (make-before-break) `its over_time` before it, and deletes the SA at
  lifetime + over_time when the client did not.
- established, data: the agent (`sessions.CacheEnforcer`) ends the SA when the client is
  absent with its budget spent; reauth_time = max_auth_age_s bounds them all.
- none: the gateway's DPD (dpd_delay, then the retransmission budget) drops absent clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from supergw_gateway.charon import CharonOptions
from supergw_gateway.config import GatewayConfig
from supergw_gateway.executor import Executor
from supergw_gateway.ra.config import RemoteAccess
from supergw_gateway.statesync.ownership import SpiOwnership
from supergw_gateway.vici_client import ViciClient
from supergw_proto.reports import RemoteAccessInfo

# Loaded into a remote-access gateway's charon: IKE message counters per connection
# (`get-counters`), e.g. the IKE_AUTH requests it answered.
RA_PLUGINS = ("counters",)


def require(cfg: GatewayConfig) -> RemoteAccess:
    if cfg.remote_access is None:
        raise ValueError(f"gateway {cfg.name} has no remote_access section")
    return cfg.remote_access


# The remote-access connection and its child have the same names on every gateway: a charon
# that receives another gateway's SAs (state replication, statesync/) finds their config by
# name, and one that takes them over serves them with it.
CONN = "ra"
CHILD = "ra-net"


def conn_name(cfg: GatewayConfig) -> str:
    return CONN


def child_name(cfg: GatewayConfig) -> str:
    return CHILD


def pool_name(cfg: GatewayConfig) -> str:
    return f"ra-{cfg.name}-pool"


def charon_settings(ra: RemoteAccess) -> tuple[tuple[str, str], ...]:
    """strongswan.conf lines (charon section): inbound ESP SPIs from this gateway's range, local
    IKE SPIs with its label. Lower-case 0x: strongSwan reads anything else as decimal."""
    s = ra.spi
    lines = [("spi_min", f"0x{s.esp_min:08x}"), ("spi_max", f"0x{s.esp_max:08x}")]
    if s.ike_mask:
        lines += [("spi_mask", f"0x{s.ike_mask:016x}"), ("spi_label", f"0x{s.ike_label:016x}")]
    return tuple(lines)


@dataclass(frozen=True)
class CacheMapping:
    """The swanctl settings of one cache policy, and what the agent enforces beyond them."""

    strategy: str
    ike: dict[str, str] = field(default_factory=dict)
    child: dict[str, str] = field(default_factory=dict)
    agent: str | None = None

    def describe(self) -> list[str]:
        out = [f"strategy {self.strategy}:",
               "  connection: " + ", ".join(f"{k}={v}" for k, v in self.ike.items()),
               "  child:      " + ", ".join(f"{k}={v}" for k, v in self.child.items())]
        out.append(f"  agent:      {self.agent}" if self.agent else "  agent:      nothing (charon alone)")
        return out


def cache_mapping(ra: RemoteAccess) -> CacheMapping:
    p = ra.caching
    age, over = p.auth_age_s, p.over_s
    ike = {
        "rekey_time": "0s",  # clients rekey; an unanswered gateway rekey would end a cached SA
        "reauth_time": f"{age}s",
        "over_time": f"{over}s",
        "rand_time": "0s",  # the lifetime is the lifetime, not up to over_time less
        "dpd_delay": f"{ra.dpd_delay}s",
        "unique": ra.unique,
        "mobike": "yes" if ra.mobike else "no",
    }
    child = {
        "rekey_time": "0s",
        # Never before the IKE SA ends (a gateway-initiated delete toward an absent client
        # would fail and take the IKE SA with it); 0 = no hard end of its own.
        "life_time": f"{age + over}s" if age else "0s",
        # Without it charon jitters a rekey time of 0 by life_time into nonsense (5.9.8).
        "rand_time": "0s",
        "dpd_action": "clear",
        "close_action": "none",
        "start_action": "none",
    }
    agent: str | None = None
    if p.strategy == "established":
        agent = (f"ends an IKE SA whose client was present (inbound ESP within {p.idle_s:g}s) for {p.lifetime_s}s "
                 f"since its IKE_AUTH, once it is absent (no inbound ESP for {p.idle_s:g}s)")
    elif p.strategy == "data":
        agent = (f"ends an IKE SA that carried {p.lifetime_bytes} bytes (in + out, all its CHILD SAs) since its "
                 f"IKE_AUTH, once its client is absent (no inbound ESP for {p.idle_s:g}s)")
    return CacheMapping(p.strategy, ike, child, agent)


def build_pool(cfg: GatewayConfig) -> dict[str, Any]:
    return {pool_name(cfg): {"addrs": str(require(cfg).pool)}}


def build_conn(cfg: GatewayConfig) -> dict[str, Any]:
    """The load-conn message of the remote-access connection (responder only)."""
    ra = require(cfg)
    m = cache_mapping(ra)
    subnets = ra.subnets or cfg.ipv4_subnets(cfg.local)
    child: dict[str, Any] = {
        "local_ts": [str(n) for n in subnets],
        "esp_proposals": list(ra.proposals.esp or cfg.proposals.esp),
        "mode": "tunnel",
        **m.child,
    }
    conn: dict[str, Any] = {
        "version": "2",
        "local_addrs": [str(ra.public.address)],
        "pools": [pool_name(cfg)],
        "proposals": list(ra.proposals.ike or cfg.proposals.ike),
        "send_cert": "always",
        **m.ike,
        "local-1": {"auth": "pubkey", "id": ra.auth.id, "certs": [ra.auth.cert.read_bytes()]},
        "remote-1": {"auth": "pubkey", "cacerts": [ra.auth.cacert.read_bytes()]},
        "children": {child_name(cfg): child},
    }
    return {conn_name(cfg): conn}


def load(cfg: GatewayConfig, v: ViciClient) -> None:
    """Key, pool and connection; loading the same config twice changes nothing."""
    ra = require(cfg)
    v.load_key(ra.auth.key.read_bytes())
    v.load_pool(build_pool(cfg))
    v.load_conn(build_conn(cfg))


# arp_ignore=3: no ARP replies for scope-host addresses; arp_announce=2: ARP requests carry
# the best (the WAN's own) source address, never IP_P.
ARP_SYSCTLS = (("arp_ignore", 3), ("arp_announce", 2))


def hold_public_address(cfg: GatewayConfig, ex: Executor) -> None:
    """IP_P/32 with scope host on the WAN interface, ARP for it off there. Idempotent."""
    ra = require(cfg)
    wan = next(i.device for i in cfg.interfaces if i.role == "wan")
    for key, value in ARP_SYSCTLS:  # before the address exists: never a window that answers ARP
        ex.run(["sysctl", "-qw", f"net/ipv4/conf/{wan}/{key}={value}"])
    ex.run(["ip", "addr", "replace", f"{ra.public.address}/32", "scope", "host", "dev", wan])


@dataclass(frozen=True)
class SyncAddresses:
    """The two ends of charon's `ha` sync socket (UDP 4510 on both): charon's and its agent's.
    In a namespace both are on loopback; in a UML guest charon is on the guest's end of the
    management link and the agent on the namespace's."""

    charon: str
    agent: str


def sync_addresses(cfg: GatewayConfig) -> SyncAddresses:
    if cfg.backend.value == "uml":
        hosts = list(cfg.uml.mgmt_subnet.hosts())
        return SyncAddresses(charon=str(hosts[1]), agent=str(hosts[0]))  # uml_init.GuestAddrs' order
    return SyncAddresses(charon="127.0.0.1", agent="127.0.0.2")


def ha_settings(cfg: GatewayConfig) -> tuple[tuple[str, str], ...]:
    """strongSwan's `ha` plugin as state replication uses it: one segment, no heartbeat or
    takeover of its own (the controller judges death and orders takeovers), no FIFO (the
    agent speaks to charon over the sync socket), no resync at start (the backup's agent
    replays what it needs)."""
    a = sync_addresses(cfg)
    return (("local", a.charon), ("remote", a.agent), ("segment_count", "1"), ("monitor", "no"),
            ("fifo_interface", "no"), ("resync", "no"))


def charon_options(cfg: GatewayConfig) -> CharonOptions:
    """The gateway daemon's additions for remote access (none without a remote_access section)."""
    ra = cfg.remote_access
    if ra is None:
        return CharonOptions()
    if ra.replication is None:
        return CharonOptions(plugins=RA_PLUGINS, settings=charon_settings(ra))
    return CharonOptions(plugins=(*RA_PLUGINS, "ha"), settings=charon_settings(ra),
                         plugin_settings=(("ha", ha_settings(cfg)),))


def report_info(cfg: GatewayConfig) -> RemoteAccessInfo:
    """What the controller (and through it the outside switch) needs from this gateway."""
    ra = require(cfg)
    return RemoteAccessInfo(public_address=ra.public.address, pool=ra.pool, esp_spi_min=ra.spi.esp_min,
                            esp_spi_max=ra.spi.esp_max, ike_spi_label=ra.spi.ike_label,
                            ike_spi_mask=ra.spi.ike_mask, caching=ra.caching.strategy)


def spi_ownership(cfg: GatewayConfig) -> SpiOwnership:
    """This gateway's IKE SPI label and ESP SPI range: what marks an SA as made here."""
    spi = require(cfg).spi
    return SpiOwnership(spi.ike_label, spi.ike_mask, spi.esp_min, spi.esp_max)
