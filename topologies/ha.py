"""Replicated controllers in the emulation: `make run HA=1` (`up --replicas 3`),
`controller.replicas: N` in a site file or `sites[].replicas` in a two-site file.

Layout: replica cK gets its own namespace `<prefix>-cK` on the management bridge
(mgmt0, 10.255.60.3K with the default topology) and runs two processes there, as a
controller machine would:

- an etcd member: clients on https://10.255.60.3K:2379, peers on :2380, data in
  `.run/etcd/cK/` (`.run/<prefix>/etcd/cK/` when there are several sites); the members form one cluster (`--initial-cluster c1=...,c2=...,c3=...`);
  secured as docs/deploy-linux.md says (topologies/etcd_auth.py): TLS with client
  certificates towards clients and peers (certificates in `.run/config/pki/`, made by
  `supergw-gateway pki`), auth enabled, the controllers' user `supergw` (their client
  certificate's CN) confined by its role to the site's prefix;
- `supergw-controller --config .run/config/controller-cK.yaml`: `store.backend: etcd`
  (its own member listed first, then the others), `ha: {replica: cK}`, its REST API on
  http://10.255.60.3K:8080, P4Runtime to the switch over the management network (the
  switch listens on its management address instead of 127.0.0.1) and the port monitor
  watching the switch namespace's interfaces by name.

Why namespaces of their own rather than loopback in the switch namespace: a replica and
its etcd member then fail and partition together, as on separate machines. Killing one
replica's processes, or dropping its etcd traffic with iptables inside its namespace while
P4Runtime still flows, touches nothing of the others; on one shared loopback every member
and every replica would share one fate.

The agents report to every replica (`controller.urls`), so a backup knows gateway health
when it takes over; `/healthz` of any replica says who leads (`ha.role`, `ha.leader`).

etcd timing: `--heartbeat-interval 100 --election-timeout 1000` (etcd's defaults): three
members share two cores with the switch, the gateways and the controllers here, and a
shorter election timeout makes an etcd leader election out of every scheduling hiccup.
etcd's minimum lease TTL follows (1.5 election timeouts, rounded up): 2 s, hence
`ha.lease_ttl_s: 2`. A killed leader is replaced sooner than that: the backups see its
P4Runtime stream end and revoke its lease (supergw_controller/ha/replica.py).
"""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from supergw_proto.api import ReplicaHealth
from supergw_proto.rest import ApiError, ControllerClient
from topologies import processes
from topologies.etcd_auth import EtcdAuthError, EtcdPki, client_ssl_context, enable_auth, member_tls_flags
from topologies.iproute import run
from topologies.model import Topology
from topologies.paths import SitePaths
from topologies.poll import wait_until
from topologies.processes import ProcRecord

ETCD = "etcd"
CLIENT_PORT = 2379
PEER_PORT = 2380
HEARTBEAT_MS = 100
ELECTION_MS = 1000
LEASE_TTL_S = 2  # etcd's minimum with ELECTION_MS (see the module doc)
STORE_TIMEOUT_S = 1.0
HA_REPLICAS = 3  # make run HA=1

Track = Callable[[ProcRecord], None]


class HaError(RuntimeError):
    """The replicated controllers could not be set up."""


def etcd_client_url(topo: Topology, name: str) -> str:
    return f"https://{topo.replica_ips()[name]}:{CLIENT_PORT}"


def etcd_prefix(topo: Topology) -> str:
    return f"/supergw/{topo.prefix}"


def etcd_endpoints(topo: Topology) -> str:
    """Every member's client URL, comma-separated (etcdctl --endpoints)."""
    return ",".join(etcd_client_url(topo, n) for n in topo.replica_ips())


# --- etcd -----------------------------------------------------------------------------

def etcd_argv(topo: Topology, name: str, data_dir: Path, pki: EtcdPki) -> list[str]:
    ip = topo.replica_ips()[name]
    cluster = ",".join(f"{n}=https://{a}:{PEER_PORT}" for n, a in topo.replica_ips().items())
    argv = [
        ETCD,
        "--name", name,
        "--data-dir", str(data_dir),
        "--listen-client-urls", f"https://{ip}:{CLIENT_PORT}",
        "--advertise-client-urls", f"https://{ip}:{CLIENT_PORT}",
        "--listen-peer-urls", f"https://{ip}:{PEER_PORT}",
        "--initial-advertise-peer-urls", f"https://{ip}:{PEER_PORT}",
        *member_tls_flags(pki, name),
        "--initial-cluster", cluster,
        "--initial-cluster-token", topo.prefix,
        "--initial-cluster-state", "new",
        "--heartbeat-interval", str(HEARTBEAT_MS),
        "--election-timeout", str(ELECTION_MS),
        # etcd 3.4 has pre-vote off: a member rejoining after a partition comes back with a
        # higher raft term and deposes the etcd leader, so the controller leader cannot renew
        # its lease for ~1 s and steps down although nothing failed (bench/ha: 5 of 20 heals).
        "--pre-vote=true",
        "--logger", "zap",
        "--log-outputs", "stderr",
    ]  # fmt: skip
    return argv


def etcd_health(url: str, pki: EtcdPki) -> tuple[bool, str]:
    try:
        resp = httpx.get(f"{url}/health", timeout=2, verify=client_ssl_context(pki))
        body = resp.json()  # 503 with a body while there is no quorum yet
    except (httpx.HTTPError, ValueError) as exc:
        return False, str(exc) or type(exc).__name__
    if not isinstance(body, dict):
        return False, f"HTTP {resp.status_code}"
    return body.get("health") == "true", f"health {body.get('health')}"


def start_etcd_member(topo: Topology, paths: SitePaths, name: str) -> ProcRecord:
    """Member `name` in its replica's namespace: at `up`, and again after a kill (its data
    directory then holds its WAL, so it rejoins the cluster it left)."""
    return processes.start(f"etcd-{name}", etcd_argv(topo, name, paths.etcd / name, EtcdPki(paths.pki)),
                           paths.logs / f"etcd-{name}.log", netns=topo.ns(name), site=topo.prefix)


def start_etcd_cluster(topo: Topology, paths: SitePaths, track: Track) -> str:
    """One member per replica, each in the replica's namespace; waits until each is healthy,
    then enables auth with the controllers' user confined to the site's prefix."""
    if shutil.which(ETCD) is None:
        raise HaError("etcd is not installed (Debian package etcd-server; `make deps` installs it)")
    shutil.rmtree(paths.etcd, ignore_errors=True)  # a fresh cluster per `up`, as the SQLite file is
    pki = EtcdPki(paths.pki)  # configs.write_all made it
    recs = []
    for name in topo.controller.replica_names():
        rec = start_etcd_member(topo, paths, name)
        track(rec)
        recs.append((name, rec))
    # Members wait for each other (quorum) before any answers healthy: start all, then wait.
    for name, rec in recs:
        wait_until(lambda n=name: etcd_health(etcd_client_url(topo, n), pki), 30, f"etcd member {name}", rec)  # type: ignore[misc]
    first = recs[0][0]
    try:
        enable_auth(pki, etcd_endpoints(topo), etcd_prefix(topo), netns=topo.ns(first))
    except EtcdAuthError as exc:
        raise HaError(f"etcd auth setup: {exc}") from None
    return f"TLS, auth on, {len(recs)} members ({', '.join(f'{n} {etcd_client_url(topo, n)}' for n, _ in recs)})"


# --- who leads ------------------------------------------------------------------------

def roles(topo: Topology, verify: bool | ssl.SSLContext = True) -> dict[str, str]:
    """Replica -> "leader" / "backup" / what else its /healthz says ("down" when it does not
    answer); `verify`: the CA of the APIs' https certificates (`api_tls.verify`)."""
    out = {}
    for slot in topo.controllers():
        assert slot.replica is not None
        try:
            with ControllerClient(slot.api_url, timeout=2, verify=verify) as api:
                health = api.health()
        except ApiError:
            out[slot.replica] = "down"
            continue
        out[slot.replica] = health.ha.role if isinstance(health, ReplicaHealth) else "no ha in /healthz"
    return out


def one_leader(topo: Topology, verify: bool | ssl.SSLContext = True) -> tuple[bool, str]:
    r = roles(topo, verify)
    leaders = [n for n, role in r.items() if role == "leader"]
    return len(leaders) == 1, ", ".join(f"{n} {role}" for n, role in r.items())


def agreed_leader(views: Mapping[str, ReplicaHealth | None], primary: bool = False) -> str | None:
    """The replica that says it leads while every other replica in `views` names it as its
    leader (a replica that does not answer agrees with nobody); with `primary`, the leader is
    also primary on the switch and every other replica a backup. None when there is none."""
    leaders = [n for n, h in views.items() if h is not None and h.ha.role == "leader"]
    if len(leaders) != 1:
        return None
    leader = leaders[0]
    for name, h in views.items():
        if h is None or h.ha.leader != leader:
            return None
        if primary and (h.role != "primary" if name == leader else h.ha.role != "backup"):
            return None
    return leader


def wait_one_leader(topo: Topology, timeout: float = 20, verify: bool | ssl.SSLContext = True) -> str:
    return wait_until(lambda: one_leader(topo, verify), timeout, "exactly one leading controller")


# --- partitions ------------------------------------------------------------------------

_ETCD_DROP = ["-p", "tcp", "-m", "multiport", "--ports", f"{CLIENT_PORT},{PEER_PORT}", "-j", "DROP"]


def cut_etcd(topo: Topology, name: str) -> None:
    """Partition replica `name` from etcd: its namespace drops every etcd packet (client and
    peer ports, both ways: its controller loses every member, its member the other members)
    while P4Runtime, the REST API and heartbeats still flow. Connections stay open, as in a
    network partition, so calls time out rather than fail fast."""
    for chain in ("INPUT", "OUTPUT"):
        run(["iptables", "-I", chain, *_ETCD_DROP], topo.ns(name))


def heal_etcd(topo: Topology, name: str) -> None:
    """Undo `cut_etcd` (every copy of its rules, so a repeated cut heals too)."""
    for chain in ("INPUT", "OUTPUT"):
        while run(["iptables", "-D", chain, *_ETCD_DROP], topo.ns(name), check=False).returncode == 0:
            pass
