"""A gateway's replicator from its config (None without `remote_access.replication`)."""

from __future__ import annotations

from collections.abc import Callable

from supergw_gateway.config import GatewayConfig
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.statesync.links import TlsFiles
from supergw_gateway.statesync.replicator import Replicator, ReplicationSettings
from supergw_gateway.vici_client import ViciClient


def replicator_for(cfg: GatewayConfig, vici: Callable[[], ViciClient],
                   on_change: Callable[[], None] = lambda: None) -> Replicator | None:
    ra = cfg.remote_access
    if ra is None or ra.replication is None:
        return None
    rep = ra.replication
    addrs = ra_gateway.sync_addresses(cfg)
    return Replicator(ReplicationSettings(
        name=cfg.name, netns=cfg.netns, listen=rep.listen, tls=TlsFiles(rep.tls.cert, rep.tls.key, rep.tls.ca),
        agent_address=addrs.agent, charon_address=addrs.charon, conn=ra_gateway.conn_name(cfg),
        ours=ra_gateway.spi_ownership(cfg),
        rekey_absent=ra.caching.strategy == "none"), vici, on_change)
