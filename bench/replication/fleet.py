"""Many remote-access clients from few charons: one stock `charon-systemd` (kernel-libipsec) in a
client namespace holds M connections, each its own identity and certificate, each asking the
gateway for its own virtual IP. To the gateway every connection is one client (its own IKE SA,
IKE_AUTH, CHILD SA and virtual IP); they share the client's outer address, so the outside
steers them together.

Each connection is `ra.client.build_conn` of a one-connection client (strongSwan's client
defaults: no DPD), renamed: the same connection a `RemoteClient` makes, M times.

The gateway allows `block_threshold` (strongSwan's default 5) half-open IKE SAs per peer
address: `initiate` keeps at most `window` of this client's connections in IKE_SA_INIT/IKE_AUTH
at once, so the gateways run their shipped DoS settings.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supergw_gateway.charon import CharonOptions, CharonProcess, Retransmit
from supergw_gateway.config import CharonTuning
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.ra.client import CHILD, CLIENT_THREADS, CONN, ClientConfig, build_conn
from supergw_gateway.vici_client import ViciClient

# libipsec's log line for an inbound ESP packet its replay window refused.
REPLAY_DROP = "ESP sequence number verification failed"


@dataclass(frozen=True)
class Identity:
    """One connection's credentials: its IKE identity and certificate (with the key)."""

    name: str
    cert: Path
    key: Path


@dataclass(frozen=True)
class FleetConfig:
    name: str
    netns: str
    device: str
    address: ipaddress.IPv4Interface
    next_hop: ipaddress.IPv4Address
    server: ipaddress.IPv4Address
    server_id: str
    cacert: Path
    subnets: tuple[ipaddress.IPv4Network, ...]
    identities: tuple[Identity, ...]
    run_dir: Path
    retransmit: Retransmit = field(default_factory=lambda: Retransmit(tries=4, timeout_s=1.0, base=1.4))


@dataclass(frozen=True)
class ConnState:
    """One connection's IKE SA as the client's charon lists it."""

    conn: str
    ike_id: int
    state: str
    spis: tuple[str, str]  # initiator, responder
    initiator: bool  # this client initiated this IKE SA (a gateway's rekey makes the gateway its initiator)
    vip: str | None
    children: tuple[tuple[int, str, str], ...]  # (unique id, state, spi-in)

    def gateway_spi(self) -> str:
        return self.spis[1] if self.initiator else self.spis[0]

    def installed(self) -> list[tuple[int, str, str]]:
        return [c for c in self.children if c[1] == "INSTALLED"]


def conn_name(j: int) -> str:
    return f"{CONN}{j}"


def conn_states(entries: Iterator[dict[str, Any]]) -> dict[str, list[ConnState]]:
    """list-sas replies -> connection name -> its IKE SAs (two while one is rekeyed)."""
    out: dict[str, list[ConnState]] = {}
    for entry in entries:
        for name, ike in entry.items():
            vips = ike.get("local-vips", [])
            children = tuple((int(c.get("uniqueid", 0)), str(c.get("state", "?")), str(c.get("spi-in", "")))
                             for c in ike.get("child-sas", {}).values())
            out.setdefault(name, []).append(ConnState(
                conn=name, ike_id=int(ike.get("uniqueid", 0)), state=str(ike.get("state", "?")),
                spis=(str(ike.get("initiator-spi", "")), str(ike.get("responder-spi", ""))),
                initiator=ike.get("initiator") == "yes",
                vip=vips[0] if vips else None, children=children))
    return out


class FleetClient:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.ns = LocalExecutor(cfg.netns)
        # Threads: the one-connection client's, plus room for the IKE SAs it runs at once.
        self.charon = CharonProcess(
            cfg.netns, cfg.run_dir, libipsec=True,
            tuning=CharonTuning(threads=max(CLIENT_THREADS, 32)),
            options=CharonOptions(install_virtual_ip=True, plugins=("counters",), retransmit=cfg.retransmit),
        )
        self._log_start = 0

    @property
    def conns(self) -> list[str]:
        return [conn_name(j) for j in range(len(self.cfg.identities))]

    def _one(self, ident: Identity) -> ClientConfig:
        c = self.cfg
        return ClientConfig(name=f"{c.name}-{ident.name}", netns=c.netns, device=c.device, address=c.address,
                            gateway=c.next_hop, server=c.server, server_id=c.server_id, identity=ident.name,
                            cacert=c.cacert, cert=ident.cert, key=ident.key, subnets=c.subnets, run_dir=c.run_dir,
                            dpd_delay_s=0, retransmit=c.retransmit)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Outer address, default route, charon and every connection loaded (none initiated)."""
        self.ns.run(["ip", "link", "set", self.cfg.device, "up"])
        self.ns.run(["ip", "addr", "replace", str(self.cfg.address), "dev", self.cfg.device])
        self.ns.run(["ip", "route", "replace", "default", "via", str(self.cfg.next_hop), "dev", self.cfg.device])
        self.charon.start()
        with self.vici() as v:
            for j, ident in enumerate(self.cfg.identities):
                v.load_key(ident.key.read_bytes())
                v.load_conn({conn_name(j): build_conn(self._one(ident))[CONN]})
        self._log_start = self.log_size()

    def stop(self) -> None:
        pid = self.charon.pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.charon.stop()

    def vici(self) -> ViciClient:
        return ViciClient(self.charon.connect)

    # -- IKE -------------------------------------------------------------------------------
    def initiate(self, window: int, timeout_s: float, on_done: Callable[[], None] = lambda: None) -> list[str]:
        """Initiate every connection, at most `window` at once (each waits for its CHILD SA);
        returns the connections that failed, each with charon's reason."""
        failed: list[str] = []
        lock = threading.Lock()

        def one(name: str) -> None:
            try:
                with self.vici() as v:
                    v.initiate(name, CHILD, timeout_ms=int(timeout_s * 1000))
            except (GatewayError, OSError) as exc:
                with lock:
                    failed.append(f"{self.cfg.name}/{name}: {str(exc).splitlines()[0]}")
            on_done()

        with ThreadPoolExecutor(window) as pool:
            list(pool.map(one, self.conns))
        return failed

    def states(self) -> dict[str, list[ConnState]]:
        with self.vici() as v:
            return conn_states(iter(list(v.raw_sas())))

    def rekey(self, ids: list[tuple[str, int]], rate_per_s: float, stop: Callable[[], bool] = lambda: False) -> None:
        """Ask charon to rekey ("ike" or "child", unique id) one after another at `rate_per_s`."""
        with self.vici() as v:
            t0 = time.monotonic()
            for i, (kind, uid) in enumerate(ids):
                if stop():
                    return
                wait = t0 + i / rate_per_s - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if kind == "ike":
                    v.rekey_sa(ike_id=uid)
                else:
                    v.rekey_sa(child_id=uid)

    def ike_auths(self) -> int:
        """IKE_AUTH requests this charon sent over all its connections (one per full handshake)."""
        with self.vici() as v:
            return v.counters().get("ike-auth-out-req", 0)

    # -- traffic and logs ------------------------------------------------------------------
    def answers(self, vip: str, target: ipaddress.IPv4Address, wait_s: float = 1.0) -> bool:
        """One ping from connection's virtual IP `vip` through its tunnel, answered in time."""
        argv = ["ping", "-n", "-q", "-c", "1", "-W", f"{wait_s:g}", "-I", vip, str(target)]
        return self.ns.run(argv, check=False, timeout=wait_s + 10).returncode == 0

    def log_size(self) -> int:
        try:
            return self.charon.log_path.stat().st_size
        except OSError:
            return 0

    def replay_drops(self) -> int:
        """ESP the client's libipsec refused as replayed since it started (its own log)."""
        with open(self.charon.log_path, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace").count(REPLAY_DROP)

    def cpu_s(self) -> float:
        pid = self.charon.pid()
        if pid is None:
            raise GatewayError(f"client {self.cfg.name}: charon is not running")
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def started(clients: list[FleetClient]) -> Iterator[list[FleetClient]]:
    try:
        with ThreadPoolExecutor(max(1, len(clients))) as pool:
            list(pool.map(lambda c: c.start(), clients))
        yield clients
    finally:
        for c in clients:
            try:
                c.stop()
            except Exception as exc:  # keep stopping the others
                print(f"   stopping client {c.cfg.name}: {exc}", flush=True)
