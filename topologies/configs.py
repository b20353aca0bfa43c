"""Config files the emulation generates for a site's controller(s) and gateways.

The schemas belong to their owners (controller/supergw_controller/config.py,
backends/supergw_gateway/config.py); this module only fills them from the topology and
validates the result with the owners' own loaders when those are importable. With
replicated controllers each replica gets its own config (`controller-cK.yaml`: intent and
events in etcd, its own member listed first) and the agents report to every replica.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from supergw_controller.config import TimingConfig
from supergw_gateway.pki import Leaf, issue, make_ca, make_demo_pki
from supergw_gateway.uml_init import stable_mac
from supergw_gateway.ra.config import cluster_spi_plan

from topologies import api_tls, ha
from topologies.etcd_auth import SERVER_NAME as ETCD_SERVER_NAME
from topologies.etcd_auth import USER as ETCD_USER
from topologies.etcd_auth import EtcdPki, make_etcd_pki
from topologies.model import ControllerSlot, GatewaySpec, Topology
from topologies.network import switch_interfaces
from topologies.paths import BMV2_JSON, P4INFO, SitePaths

AGENT_PORT = 8780  # each gateway agent's health endpoint, on its management address
# Remote access: the identity every gateway presents to clients (one certificate, the service's),
# and each client's own (its certificate's SAN).
RA_SERVICE_ID = "vpn.sgw.test"


def ra_client_id(name: str) -> str:
    return f"{name}.clients.sgw.test"

# The shipped defaults, from their owner (the controller's TimingConfig): UDP heartbeats
# from a thread of each agent hold 3 x 100 ms on a loaded 2-core machine
# (bench/results/failover.md measures the gap and the spurious failovers).
_TIMING = TimingConfig()
HEARTBEAT_MS = _TIMING.heartbeat_interval_ms
MISSED_HEARTBEATS = _TIMING.missed_heartbeats
REPORT_MS = _TIMING.report_interval_ms


@dataclass(frozen=True)
class Secrets:
    api_token: str  # operator "operator", role admin
    psk: str
    readonly_token: str = ""  # operator "viewer", role read-only
    agent_seed: str = ""  # each gateway's agent token is derived from it (see agent_token)
    pair_seed: str = ""  # each pair's beacon secret is derived from it (see pair_secret); shared by both sites

    @classmethod
    def fresh(cls, psk_bytes: int) -> Secrets:
        return cls(
            api_token=secrets.token_urlsafe(24),
            psk=secrets.token_urlsafe(psk_bytes),
            readonly_token=secrets.token_urlsafe(24),
            agent_seed=secrets.token_urlsafe(32),
            pair_seed=secrets.token_urlsafe(32),
        )

    def agent_token(self, gateway: str) -> str:
        """Gateway `gateway`'s own agent token: one per gateway, none derivable from another."""
        digest = hmac.new(self.agent_seed.encode(), gateway.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def pair_secret(self, a: str, b: str) -> str:
        """The beacon secret of the pair (a, b), the same whichever end asks; none derivable from another."""
        digest = hmac.new(self.pair_seed.encode(), "\0".join(sorted((a, b))).encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def agent_token_file(conf_dir: Path, gateway: str) -> Path:
    return conf_dir / f"agent-{gateway}.token"


def pair_secret_file(conf_dir: Path, gateway: str) -> Path:
    return conf_dir / f"pair-{gateway}.secret"


def readonly_token_file(conf_dir: Path) -> Path:
    return conf_dir / "api-token-readonly"


def gateway_mac(topo: Topology, g: GatewaySpec) -> str:
    """The MAC of member `g`'s LAN NIC: its veth's in its namespace, or with `gateway_backend:
    uml` the guest NIC's own (the one the guest gives it; the veth only carries its frames)."""
    return stable_mac(g.name, "lan0") if topo.gateway_backend == "uml" else g.mac


def controller_config(topo: Topology, paths: SitePaths, slot: ControllerSlot | None = None) -> dict[str, Any]:
    """The config of controller `slot` of the site (None: its first, the only one without replicas)."""
    slot = slot or topo.controllers()[0]
    conf_dir = paths.config
    ifaces = switch_interfaces(topo)
    host_ports = topo.host_ports
    ports: dict[int, Any] = {
        port: {"role": "host" if port in host_ports else "gateway", "interface": ifname}
        for port, ifname in ifaces.items()
    }
    cfg: dict[str, Any] = {
        "switch": {
            "address": topo.p4runtime_addr,
            "device_id": topo.switch.device_id,
            "election_id": {"high": 0, "low": 10},
        },
        # BMv2 starts with no program: the controller pushes the JSON with the P4Info.
        "pipeline": {"p4info": str(P4INFO)} | ({"device_config": str(BMV2_JSON)} if topo.switch.kind == "bmv2" else {}),
        "gateway_ip": str(topo.lan.gateway_ip),
        "buckets": topo.lan.buckets,
        "vmac_base": topo.lan.vmac_base,
        "dispatch": topo.lan.dispatch.model_dump(mode="json", exclude_none=True),
        "ports": ports,
        "gateways": [
            {
                "name": g.name,
                "port": g.port,
                "mac": gateway_mac(topo, g),
                "weight": g.weight,
                "agent_url": f"http://{g.mgmt_ip}:{AGENT_PORT}",
                "agent_token_file": str(agent_token_file(conf_dir, g.name)),
            }
            for g in topo.gateways
        ],
        "timing": {
            "report_interval_ms": REPORT_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "missed_heartbeats": MISSED_HEARTBEATS,
        },
        # 0.0.0.0 inside its namespace: 127.0.0.1 there, and the management address.
        "api": {
            "listen": f"0.0.0.0:{topo.controller.api_port}",
            "tokens": [
                {"name": "operator", "role": "admin", "token_file": str(paths.token_file)},
                {"name": "viewer", "role": "read-only", "token_file": str(readonly_token_file(conf_dir))},
            ],
        },
        # The one controller runs inside the switch namespace, next to the port interfaces;
        # a replica in its own namespace watches them through the switch namespace by name.
        "port_monitor": {"enabled": True} | ({"netns": topo.switch_ns} if slot.replica else {}),
    }
    if topo.controller.rebalancer is not None:
        cfg["rebalancer"] = topo.controller.rebalancer.model_dump(mode="json")
    if topo.controller.tls:
        tls = api_tls.site_pki(paths)
        cfg["switch"]["tls"] = api_tls.switch_tls_config(tls)
        cfg["api"]["tls"] = api_tls.api_tls_config(tls)
    if topo.lan.subnet6 is not None:
        cfg["gateway_ip6"] = {"link_local": str(topo.lan.gateway_ll), "global": str(topo.lan.gateway_ip6)}
        cfg["router_advertisements"] = {
            "max_interval_s": topo.lan.ra_interval_s,
            "prefixes": [{"prefix": str(topo.lan.subnet6)}],
        }
    if (ra := topo.remote_access) is not None:
        cfg["remote_access"] = {  # the outside switch: a second P4Runtime device of this controller
            "public_ip": str(ra.public_ip),
            "public_mac": ra.public_mac,
            "switch": {"address": topo.outside_p4runtime_addr, "device_id": ra.outside.device_id,
                       "election_id": {"high": 0, "low": 10}},
            "uplinks": [ra.outside.uplink_port],
            "gateways": {g.name: {"port": g.port, "mac": topo.wan_mac(g)} for g in topo.gateways},
        }
        if topo.controller.tls:  # the outside switch serves the LAN switch's certificate, and requires ours
            cfg["remote_access"]["switch"]["tls"] = api_tls.switch_tls_config(api_tls.site_pki(paths))
    if slot.replica is None:
        cfg["state_db"] = str(paths.state_db)
        return cfg
    names = topo.controller.replica_names()
    own_first = [slot.replica] + [n for n in names if n != slot.replica]
    pki = EtcdPki(paths.pki)
    cert, key = pki.client(ETCD_USER)
    cfg["store"] = {  # intent and events live in etcd, over TLS as the etcd user supergw (its cert's CN)
        "backend": "etcd",
        "etcd": {
            "endpoints": [f"https://{topo.replica_ips()[n]}:{ha.CLIENT_PORT}" for n in own_first],
            "prefix": ha.etcd_prefix(topo),
            "timeout_s": ha.STORE_TIMEOUT_S,
            "tls": {"cacert": str(pki.ca), "cert": str(cert), "key": str(key), "server_name": ETCD_SERVER_NAME},
        },
    }
    cfg["ha"] = {"replica": slot.replica, "lease_ttl_s": ha.LEASE_TTL_S, "api_url": slot.api_url}
    return cfg


REPLICATION_PORT = 4520  # each agent's replication listener, on its management address


def ra_gateway_section(topo: Topology, g: GatewaySpec, pki: dict[str, Path],
                       replication_pki: Path | None = None) -> dict[str, Any]:
    """Member `g`'s `remote_access` section: IP_P, its own pool and SPI plan (one layout for the
    cluster: `cluster_spi_plan` of its index, what the switch matches), the service certificate,
    and its state replication (listener on its management address, its certificate in
    `replication_pki`)."""
    assert topo.remote_access is not None
    ra, k = topo.remote_access, topo.gateways.index(g)
    section: dict[str, Any] = {
        "public": {"address": str(ra.public_ip)},
        "pool": str(ra.pool(k)),
        "spi": cluster_spi_plan(k).model_dump(),
        "auth": {"cacert": str(pki["ca.crt"]), "cert": str(pki[f"{RA_SERVICE_ID}.crt"]),
                 "key": str(pki[f"{RA_SERVICE_ID}.key"]), "id": RA_SERVICE_ID},
    }
    if replication_pki is not None:
        section["replication"] = {
            "listen": f"{g.mgmt_ip}:{REPLICATION_PORT}",
            "tls": {"cert": str(replication_pki / f"{g.name}.crt"), "key": str(replication_pki / f"{g.name}.key"),
                    "ca": str(replication_pki / "ca.crt")},
        }
    return section


def make_replication_pki(topo: Topology, out: Path) -> Path:
    """The cluster's replication CA and one certificate per gateway (CN and SAN its name):
    what the agents present to each other."""
    make_ca(out, f"{topo.prefix} replication CA")
    for g in topo.gateways:
        issue(out, Leaf("peer", g.name, g.name, (g.name,)))
    return out


def gateway_config(
    topo: Topology, g: GatewaySpec, side: str, sec: Secrets, state_dir: Path, conf_dir: Path,
    pki: dict[str, Path] | None = None, ca_file: Path | None = None, replication_pki: Path | None = None,
) -> dict[str, Any]:
    """`side` is "lan" for gw<i> (the super gateway's member) or "remote" for its peer;
    `ca_file` the CA of the controllers' https certificates (with `controller.tls`)."""
    lan_len, wan_len = topo.lan.subnet.prefixlen, topo.wan.subnet.prefixlen
    rlan_len = topo.remote.subnet.prefixlen
    if side == "lan":
        name, ns = g.name, topo.ns(g.name)
        lan_addr, wan, peer_wan = f"{g.lan_ip}/{lan_len}", g.wan_ip, g.peer.wan_ip
        local_net, remote_net = topo.lan.subnet, topo.remote.subnet
    else:
        name, ns = g.peer.name, topo.ns(g.peer.name)
        lan_addr, wan, peer_wan = f"{g.peer.lan_ip}/{rlan_len}", g.peer.wan_ip, g.wan_ip
        local_net, remote_net = topo.remote.subnet, topo.lan.subnet
    cfg: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "backend": topo.gateway_backend,
        "interfaces": [
            {"role": "lan", "device": "lan0", "address": lan_addr},
            {"role": "wan", "device": "wan0", "address": f"{wan}/{wan_len}"},
        ],
        "local": {"address": str(topo.outer(wan)), "subnets": [str(local_net)]},
        "remote": {"address": str(topo.outer(peer_wan)), "subnets": [str(remote_net)]},
        "auth": {"method": "psk", "psk": sec.psk},
        # Members initiate; peers at the remote site answer. Both ends are loaded first.
        # Facing a partner super gateway, exactly one of the two sites initiates.
        "initiate": side == "lan" and (topo.partner_site is None or topo.partner_site.initiate),
        "dpd": {"delay_s": 5, "timeout_s": 15, "action": "restart"},
        "state_dir": str(state_dir),
    }
    if topo.wan.subnet6 is not None:  # IPv6 outer: the gateway puts its twin on its WAN interface
        cfg["interfaces"][1]["addresses6"] = [f"{topo.outer(wan)}/{topo.wan.subnet6.prefixlen}"]
    if topo.dual_stack:
        # the tunnel carries IPv6 inside (its traffic selectors); the outer is IPv4 unless wan.subnet6
        lan6 = topo.lan6(g.lan_ip) if side == "lan" else topo.remote6(g.peer.lan_ip)
        cfg["interfaces"][0]["addresses6"] = [f"{lan6}/64"]
        local6, remote6 = topo.lan.subnet6, topo.remote.subnet6
        if side != "lan":
            local6, remote6 = remote6, local6
        cfg["local"]["subnets"].append(str(local6))
        cfg["remote"]["subnets"].append(str(remote6))
    if side == "lan" and topo.gateway_cpu_percent is not None:
        cfg["cpu_quota_percent"] = topo.gateway_cpu_percent
    if topo.esp_proposals is not None:
        cfg["proposals"] = {"esp": list(topo.esp_proposals)}
    if side == "lan":
        urls = [c.api_url for c in topo.controllers()]
        cfg["controller"] = {
            # with replicas the agent reports to every one of them
            **({"urls": urls} if topo.replicated else {"url": urls[0]}),
            "token_file": str(agent_token_file(conf_dir, name)),
            **({"ca_file": str(ca_file)} if ca_file is not None else {}),
            # no timing here: the controller tells the agent its `timing` in every answer
        }
    if side == "lan" and topo.remote_access is not None:
        if pki is None:
            raise ValueError("remote access: the gateway config needs the PKI files")
        cfg["remote_access"] = ra_gateway_section(topo, g, pki, replication_pki)
        # Replies to clients leave by the WAN toward their router (IP_P's own segment has no default route).
        cfg["routes"] = [{"destination": str(topo.remote_access.client_subnet), "via": str(topo.remote_access.router_wan_ip)}]
    if side == "lan" and topo.partner_site is not None:
        # Facing a partner super gateway: pair beacons through the tunnel, at the heartbeat
        # cadence (the controller's), so that the partner site stops using the partner of a failed gateway.
        cfg["partner"] = {
            "name": g.peer.name,
            "address": str(g.peer.lan_ip),
            "secret_file": str(pair_secret_file(conf_dir, name)),
        }
    return cfg


@dataclass(frozen=True)
class GeneratedConfigs:
    controllers: dict[str, Path]  # controller process name ("controller", "controller-c1", ...) -> its YAML
    token_file: Path
    gateways: dict[str, Path]  # gateway or peer name -> its YAML
    secrets: Secrets
    pki: dict[str, Path] = field(default_factory=dict)  # remote access: "ca.crt", "<id>.crt", "<id>.key"


def write_all(topo: Topology, paths: SitePaths, sec: Secrets) -> GeneratedConfigs:
    """Every config and secret of site `topo` into `paths.config` (mode 0600 where secret)."""
    conf_dir = paths.config
    conf_dir.mkdir(parents=True, exist_ok=True)
    _write_secret(paths.token_file, sec.api_token)
    _write_secret(readonly_token_file(conf_dir), sec.readonly_token)
    for g in topo.gateways:
        _write_secret(agent_token_file(conf_dir, g.name), sec.agent_token(g.name))
        if topo.partner_site is not None:
            if not sec.pair_seed:
                raise ValueError("Secrets.pair_seed is empty: both sites need the same pair seed")
            _write_secret(pair_secret_file(conf_dir, g.name), sec.pair_secret(g.name, g.peer.name))
    if topo.replicated:
        make_etcd_pki(paths.pki, topo.replica_ips())
    pki: dict[str, Path] = {}
    replication_pki: Path | None = None
    if topo.remote_access is not None:
        ids = [RA_SERVICE_ID, *(ra_client_id(n) for n in topo.remote_access.client_names())]
        pki = make_demo_pki(conf_dir / "pki", ids)
        if topo.remote_access.replication:
            replication_pki = make_replication_pki(topo, conf_dir / "replication-pki")
    ca_file = api_tls.make_site_pki(topo, paths).ca if topo.controller.tls else None
    controllers: dict[str, Path] = {}
    for slot in topo.controllers():
        path = paths.controller_config(slot.replica)
        path.write_text(_yaml(controller_config(topo, paths, slot)))
        controllers[slot.process] = path
    gws: dict[str, Path] = {}
    for g in topo.gateways:
        # A partner site writes its own gateways' configs.
        sides = (("lan", g.name),) if topo.partner_site is not None else (("remote", g.peer.name), ("lan", g.name))
        for side, name in sides:
            path = paths.gateway_config(name)
            path.write_text(_yaml(gateway_config(topo, g, side, sec, paths.gateways, conf_dir, pki, ca_file,
                                                 replication_pki)))
            path.chmod(0o600)
            gws[name] = path
    return GeneratedConfigs(controllers=controllers, token_file=paths.token_file, gateways=gws, secrets=sec, pki=pki)


def _write_secret(path: Path, secret: str) -> None:
    """Created 0600 from the start: never readable by others, not even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    path.chmod(0o600)  # an existing file keeps its old mode through O_CREAT


def validate_with_owners(generated: GeneratedConfigs) -> list[str]:
    """Load each file with its owner's loader; returns problems (empty when all fine)."""
    problems: list[str] = []
    owners = (("controller config", "supergw_controller.config", list(generated.controllers.values())),
              ("gateway configs", "supergw_gateway.config", list(generated.gateways.values())))
    for what, module, paths in owners:
        try:
            load = importlib.import_module(module).load_config
        except ImportError as exc:
            problems.append(f"{what} not validated: {exc}")
            continue
        for path in paths:
            try:
                load(path)
            except Exception as exc:  # the owner's error type carries the message we show
                problems.append(str(exc))
    return problems


def _yaml(data: dict[str, Any]) -> str:
    return "# generated by `python -m topologies.run up`; do not edit\n" + yaml.safe_dump(data, sort_keys=False)
