"""The road-warrior clients of a remote-access site: one stock strongSwan charon per client
(`supergw_gateway.ra.client.RemoteClient`: kernel-libipsec, its own VICI socket and log
under `.run/clients/<name>/`) in its namespace `<prefix>-rw<i>` behind the router
`<prefix>-cnet`, each with its own certificate, all connecting to IP_P.

`start` starts their charons (tracked for `down`), `connect` initiates every client at once
and times each until its CHILD SA is installed, `reach` checks that every client's traffic
reaches a LAN host through its tunnel and back. Used by `up` and by bench/remote.
"""

from __future__ import annotations

import time
from ipaddress import IPv4Address, IPv4Interface
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from supergw_gateway.charon import Retransmit
from supergw_gateway.errors import GatewayError
from supergw_gateway.pki import make_demo_pki
from supergw_gateway.ra.client import ClientConfig, RemoteClient
from topologies import processes
from topologies.configs import RA_SERVICE_ID, ra_client_id
from topologies.model import Topology
from topologies.network import CLIENT_IF
from topologies.paths import SitePaths
from topologies.processes import ProcRecord

Track = Callable[[ProcRecord], None]
# Client charons started at once (each start forks charon and waits for its VICI socket).
START_WORKERS = 8


def client_configs(topo: Topology, paths: SitePaths) -> list[ClientConfig]:
    """Every client's config: its outer address, IP_P, its certificate, the LAN behind the cluster."""
    ra = topo.remote_access
    if ra is None:
        raise ValueError(f"site {topo.prefix} has no remote_access section: no clients")
    names = ra.client_names()
    # The files `up` made (configs.write_all); existing ones are kept, so this only names them.
    pki = make_demo_pki(paths.config / "pki", [RA_SERVICE_ID, *(ra_client_id(n) for n in names)])
    retransmit = Retransmit(tries=ra.client_retransmit_tries, timeout_s=ra.client_retransmit_timeout_s,
                            base=ra.client_retransmit_base)
    out = []
    for i, name in enumerate(names, start=1):
        ident = ra_client_id(name)
        out.append(ClientConfig(
            name=name, netns=topo.ns(name), device=CLIENT_IF,
            address=IPv4Interface(f"{ra.client_ip(i)}/{ra.client_subnet.prefixlen}"), gateway=ra.router_client_ip,
            server=ra.public_ip, server_id=RA_SERVICE_ID, identity=ident, cacert=pki["ca.crt"],
            cert=pki[f"{ident}.crt"], key=pki[f"{ident}.key"], subnets=(topo.lan.subnet,),
            run_dir=paths.clients / name, dpd_delay_s=ra.client_dpd_s, retransmit=retransmit,
        ))
    return out


def clients(topo: Topology, paths: SitePaths) -> list[RemoteClient]:
    """Handles on the site's clients (running or not)."""
    return [RemoteClient(c) for c in client_configs(topo, paths)]


def start(topo: Topology, paths: SitePaths, track: Track) -> tuple[list[RemoteClient], float]:
    """Starts every client's charon with its connection loaded (not initiated), each tracked for
    `down`; returns the clients and the seconds it took."""
    fleet = clients(topo, paths)
    t0 = time.monotonic()

    def one(c: RemoteClient) -> ProcRecord:
        pid = c.start()
        rec = processes.adopt(f"client-{c.cfg.name}", pid, ["charon-systemd"], str(c.charon.log_path),
                              netns=c.cfg.netns, site=topo.prefix)
        if rec is None:
            raise GatewayError(f"client {c.cfg.name}: charon (pid {pid}) exited at once; see {c.charon.log_path}")
        return rec

    with ThreadPoolExecutor(START_WORKERS) as pool:
        for rec in pool.map(one, fleet):
            track(rec)
    return fleet, time.monotonic() - t0


@dataclass(frozen=True)
class ConnectResult:
    """Clients initiated at once: each one's seconds from the common start until its CHILD SA
    was installed (None: not within the timeout, with why in `failures`)."""

    seconds: dict[str, float | None]
    failures: dict[str, str]
    wall_s: float  # the common start -> the last client installed (or the timeout)

    @property
    def connected(self) -> int:
        return sum(1 for v in self.seconds.values() if v is not None)


def connect(fleet: Sequence[RemoteClient], timeout_s: float = 60.0) -> ConnectResult:
    """Every client initiates at the same moment (one thread each: each blocks on its own
    charon); per client the time from that moment until its CHILD SA is INSTALLED."""
    t0 = time.monotonic()

    def one(c: RemoteClient) -> tuple[str, float | None, str]:
        try:
            c.connect(timeout_s)
        except (GatewayError, OSError) as exc:
            return c.cfg.name, None, str(exc)
        return c.cfg.name, time.monotonic() - t0, ""

    with ThreadPoolExecutor(max(1, len(fleet))) as pool:
        results = list(pool.map(one, fleet))
    seconds = {name: s for name, s, _ in results}
    return ConnectResult(seconds, {name: why for name, s, why in results if s is None}, time.monotonic() - t0)


def reach(fleet: Sequence[RemoteClient], targets: Sequence[object], timeout_s: float = 20.0) -> dict[str, str]:
    """Every client pings a LAN host (client i: targets[i % len]) through its tunnel until one
    answers; returns the clients that got no answer within `timeout_s`, with why."""
    def one(ic: tuple[int, RemoteClient]) -> tuple[str, str]:
        i, c = ic
        target = IPv4Address(str(targets[i % len(targets)]))
        try:
            c.wait_traffic(target, timeout_s)
        except (GatewayError, OSError) as exc:
            return c.cfg.name, str(exc)
        return c.cfg.name, ""

    with ThreadPoolExecutor(max(1, min(len(fleet), 32))) as pool:
        return {name: why for name, why in pool.map(one, enumerate(fleet)) if why}
