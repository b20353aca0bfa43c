"""The site-to-site tunnel as VICI messages, and an idempotent apply."""

from __future__ import annotations

import logging
from typing import Any

from supergw_gateway.config import GatewayConfig, PskAuth, X509Auth
from supergw_gateway.vici_client import ViciClient

log = logging.getLogger(__name__)


def conn_name(cfg: GatewayConfig) -> str:
    return f"sgw-{cfg.name}"


def child_name(cfg: GatewayConfig) -> str:
    return f"sgw-{cfg.name}-net"


def build_conn(cfg: GatewayConfig) -> dict[str, Any]:
    """The load-conn message for the gateway's IKEv2 connection."""
    if isinstance(cfg.auth, PskAuth):
        local_auth: dict[str, Any] = {"auth": "psk", "id": cfg.local_id}
        remote_auth: dict[str, Any] = {"auth": "psk", "id": cfg.remote_id}
    else:
        local_auth = {"auth": "pubkey", "id": cfg.local_id, "certs": [cfg.auth.cert.read_bytes()]}
        remote_auth = {"auth": "pubkey", "id": cfg.remote_id, "cacerts": [cfg.auth.cacert.read_bytes()]}
    child = {
        "local_ts": [str(n) for n in cfg.local.subnets],
        "remote_ts": [str(n) for n in cfg.remote.subnets],
        "esp_proposals": list(cfg.proposals.esp),
        "mode": "tunnel",
        "rekey_time": f"{cfg.rekey.child_rekey_s}s",
        "rekey_bytes": str(cfg.rekey.child_rekey_bytes),
        "rekey_packets": str(cfg.rekey.child_rekey_packets),
        "dpd_action": cfg.dpd.action,
        "close_action": "none",
        "start_action": "none",
    }
    ike = {
        "version": "2",
        "local_addrs": [str(cfg.local.address)],
        "remote_addrs": [str(cfg.remote.address)],
        "proposals": list(cfg.proposals.ike),
        "rekey_time": f"{cfg.rekey.ike_rekey_s}s",
        "dpd_delay": f"{cfg.dpd.delay_s}s",
        "dpd_timeout": f"{cfg.dpd.timeout_s}s",
        "keyingtries": "1",
        "unique": "replace",
        "mobike": "no",
        "local-1": local_auth,
        "remote-1": remote_auth,
        "children": {child_name(cfg): child},
    }
    return {conn_name(cfg): ike}


def build_shared(cfg: GatewayConfig) -> dict[str, Any] | None:
    if not isinstance(cfg.auth, PskAuth):
        return None
    return {
        "id": f"sgw-{cfg.name}-psk",
        "type": "IKE",
        "data": cfg.auth.psk,
        "owners": [cfg.local_id, cfg.remote_id],
    }


def load(cfg: GatewayConfig, v: ViciClient) -> None:
    """Load credentials and the connection; loading the same config twice changes nothing."""
    if isinstance(cfg.auth, X509Auth):
        v.load_cert(cfg.auth.cacert.read_bytes(), flag="CA")
        v.load_key(cfg.auth.key.read_bytes())
    if (secret := build_shared(cfg)) is not None:
        v.load_shared(secret)
    v.load_conn(build_conn(cfg))


def is_up(cfg: GatewayConfig, v: ViciClient) -> bool:
    for sa in v.list_sas():
        if sa.name == conn_name(cfg) and sa.state == "ESTABLISHED":
            if any(c.name == child_name(cfg) and c.state == "INSTALLED" for c in sa.children):
                return True
    return False


def apply(cfg: GatewayConfig, v: ViciClient, initiate: bool, timeout_ms: int = 15000) -> bool:
    """Load the tunnel and bring it up if we initiate and it is not already up.

    Returns True when this call initiated a new SA.
    """
    load(cfg, v)
    if not initiate or is_up(cfg, v):
        return False
    v.initiate(conn_name(cfg), child_name(cfg), timeout_ms=timeout_ms)
    return True
