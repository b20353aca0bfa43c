"""Config files the emulation generates for the controller and the gateway agents.

The schemas belong to their owners (controller/supergw_controller/config.py,
backends/supergw_gateway/config.py); this module only fills them from the topology and
validates the result with the owners' own loaders when those are importable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from supergw_controller.config import TimingConfig

from topologies.model import GatewaySpec, Topology
from topologies.network import switch_interfaces

REPO = Path(__file__).resolve().parent.parent
P4INFO = REPO / "p4src" / "v1model" / "supergw.p4info.txtpb"
# `make p4` writes p4c's BMv2 JSON and, beside it, the P4Info it generated with it.
BMV2_JSON = REPO / "build" / "p4" / "supergw.json"
BMV2_BUILT_P4INFO = REPO / "build" / "p4" / "supergw.p4info.txtpb"

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


def controller_url(topo: Topology) -> str:
    return f"http://{topo.mgmt.controller_ip}:{topo.controller.api_port}"


def agent_token_file(conf_dir: Path, gateway: str) -> Path:
    return conf_dir / f"agent-{gateway}.token"


def pair_secret_file(conf_dir: Path, gateway: str) -> Path:
    return conf_dir / f"pair-{gateway}.secret"


def readonly_token_file(conf_dir: Path) -> Path:
    return conf_dir / "api-token-readonly"


def controller_config(topo: Topology, run_dir: Path, token_file: Path) -> dict[str, Any]:
    ifaces = switch_interfaces(topo)
    host_ports = topo.host_ports
    ports: dict[int, Any] = {
        port: {"role": "host" if port in host_ports else "gateway", "interface": ifname}
        for port, ifname in ifaces.items()
    }
    return {
        "switch": {
            "address": topo.switch.grpc_addr,
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
                "mac": g.mac,
                "weight": g.weight,
                "agent_url": f"http://{g.mgmt_ip}:8780",
                "agent_token_file": str(agent_token_file(token_file.parent, g.name)),
            }
            for g in topo.gateways
        ],
        "timing": {
            "report_interval_ms": REPORT_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "missed_heartbeats": MISSED_HEARTBEATS,
        },
        # 0.0.0.0 inside the switch namespace: 127.0.0.1 there, and the management address.
        "api": {
            "listen": f"0.0.0.0:{topo.controller.api_port}",
            "tokens": [
                {"name": "operator", "role": "admin", "token_file": str(token_file)},
                {"name": "viewer", "role": "read-only", "token_file": str(readonly_token_file(token_file.parent))},
            ],
        },
        # The controller runs inside the switch namespace, next to the port interfaces.
        "port_monitor": {"enabled": True},
        "state_db": str(run_dir / "controller-state.sqlite3"),
    }


def gateway_config(
    topo: Topology, g: GatewaySpec, side: str, sec: Secrets, state_dir: Path, conf_dir: Path
) -> dict[str, Any]:
    """`side` is "lan" for gw<i> (the super gateway's member) or "remote" for its peer."""
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
        "backend": "auto",
        "interfaces": [
            {"role": "lan", "device": "lan0", "address": lan_addr},
            {"role": "wan", "device": "wan0", "address": f"{wan}/{wan_len}"},
        ],
        "local": {"address": str(wan), "subnets": [str(local_net)]},
        "remote": {"address": str(peer_wan), "subnets": [str(remote_net)]},
        "auth": {"method": "psk", "psk": sec.psk},
        # Members initiate; peers at the remote site answer. Both ends are loaded first.
        # Facing a partner super gateway, exactly one of the two sites initiates.
        "initiate": side == "lan" and (topo.partner_site is None or topo.partner_site.initiate),
        "dpd": {"delay_s": 5, "timeout_s": 15, "action": "restart"},
        "state_dir": str(state_dir),
    }
    if side == "lan" and topo.gateway_cpu_percent is not None:
        cfg["cpu_quota_percent"] = topo.gateway_cpu_percent
    if topo.esp_proposals is not None:
        cfg["proposals"] = {"esp": list(topo.esp_proposals)}
    if side == "lan":
        cfg["controller"] = {
            "url": controller_url(topo),
            "token_file": str(agent_token_file(conf_dir, name)),
            "report_interval_ms": REPORT_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
        }
    if side == "lan" and topo.partner_site is not None:
        # Facing a partner super gateway: pair beacons through the tunnel, at the heartbeat
        # cadence, so that the partner site stops using the partner of a failed gateway.
        cfg["partner"] = {
            "name": g.peer.name,
            "address": str(g.peer.lan_ip),
            "secret_file": str(pair_secret_file(conf_dir, name)),
            "interval_ms": HEARTBEAT_MS,
            "missed": MISSED_HEARTBEATS,
        }
    return cfg


@dataclass(frozen=True)
class GeneratedConfigs:
    controller: Path
    token_file: Path
    gateways: dict[str, Path]  # gateway or peer name -> its YAML
    secrets: Secrets


def write_all(topo: Topology, run_dir: Path, sec: Secrets) -> GeneratedConfigs:
    conf_dir = run_dir / "config"
    conf_dir.mkdir(parents=True, exist_ok=True)
    token_file = conf_dir / "api-token"
    _write_secret(token_file, sec.api_token)
    _write_secret(readonly_token_file(conf_dir), sec.readonly_token)
    for g in topo.gateways:
        _write_secret(agent_token_file(conf_dir, g.name), sec.agent_token(g.name))
        if topo.partner_site is not None:
            if not sec.pair_seed:
                raise ValueError("Secrets.pair_seed is empty: both sites need the same pair seed")
            _write_secret(pair_secret_file(conf_dir, g.name), sec.pair_secret(g.name, g.peer.name))
    ctl = conf_dir / "controller.yaml"
    ctl.write_text(_yaml(controller_config(topo, run_dir, token_file)))
    gws: dict[str, Path] = {}
    for g in topo.gateways:
        # A partner site writes its own gateways' configs.
        sides = (("lan", g.name),) if topo.partner_site is not None else (("remote", g.peer.name), ("lan", g.name))
        for side, name in sides:
            path = conf_dir / f"gateway-{name}.yaml"
            path.write_text(_yaml(gateway_config(topo, g, side, sec, run_dir / "gateways", conf_dir)))
            path.chmod(0o600)
            gws[name] = path
    return GeneratedConfigs(controller=ctl, token_file=token_file, gateways=gws, secrets=sec)


def _write_secret(path: Path, secret: str) -> None:
    """Created 0600 from the start: never readable by others, not even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    path.chmod(0o600)  # an existing file keeps its old mode through O_CREAT


def validate_with_owners(generated: GeneratedConfigs) -> list[str]:
    """Load each file with its owner's loader; returns problems (empty when all fine)."""
    problems: list[str] = []
    try:
        from supergw_controller.config import load_config as load_controller
    except ImportError as exc:
        problems.append(f"controller config not validated: {exc}")
    else:
        try:
            load_controller(generated.controller)
        except Exception as exc:  # the owner's error type carries the message we show
            problems.append(str(exc))
    try:
        from supergw_gateway.config import load_config as load_gateway
    except ImportError as exc:
        problems.append(f"gateway configs not validated: {exc}")
    else:
        for path in generated.gateways.values():
            try:
                load_gateway(path)
            except Exception as exc:
                problems.append(str(exc))
    return problems


def _yaml(data: dict[str, Any]) -> str:
    return "# generated by `python -m topologies.run up`; do not edit\n" + yaml.safe_dump(data, sort_keys=False)
