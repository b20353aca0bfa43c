"""Replicated controllers in the emulation: `make run HA=1` (`up --replicas 3`) or
`controller.replicas: N` in the topology file.

Layout: replica cK gets its own namespace `<prefix>-cK` on the management bridge
(mgmt0, 10.255.60.3K with the default topology) and runs two processes there, as a
controller machine would:

- an etcd member: clients on http://10.255.60.3K:2379, peers on :2380, data in
  `.run/etcd/cK/`; the members form one cluster (`--initial-cluster c1=...,c2=...,c3=...`);
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

import dataclasses
import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from topologies import processes
from topologies.configs import GeneratedConfigs
from topologies.model import Topology, TopologyError
from topologies.network import run
from topologies.processes import ProcRecord

ETCD = "etcd"
CLIENT_PORT = 2379
PEER_PORT = 2380
HEARTBEAT_MS = 100
ELECTION_MS = 1000
LEASE_TTL_S = 2  # etcd's minimum with ELECTION_MS (see the module doc)
STORE_TIMEOUT_S = 1.0
HA_REPLICAS = 3  # make run HA=1

Say = Callable[[str], None]
Track = Callable[[ProcRecord], None]


class HaError(RuntimeError):
    """The replicated controllers could not be set up."""


def enabled(topo: Topology) -> bool:
    return topo.controller.replicas > 1


def prepare(topo: Topology, replicas: int | None) -> Topology:
    """The topology with `replicas` controllers (None: as the file says); with more than one,
    the switch's P4Runtime listens on its management address, where every replica reaches it."""
    data = topo.model_dump(mode="json")
    if replicas is not None:
        data["controller"]["replicas"] = replicas
    if data["controller"]["replicas"] > 1:
        port = topo.switch.grpc_port
        data["switch"]["grpc_addr"] = f"{topo.mgmt.controller_ip}:{port}"
    try:
        return Topology.model_validate(data)
    except ValueError as exc:
        raise TopologyError(f"controller replicas: {exc}") from None


def api_url(topo: Topology, name: str) -> str:
    return f"http://{topo.replica_ips()[name]}:{topo.controller.api_port}"


def etcd_client_url(topo: Topology, name: str) -> str:
    return f"http://{topo.replica_ips()[name]}:{CLIENT_PORT}"


def etcd_prefix(topo: Topology) -> str:
    return f"/supergw/{topo.prefix}"


# --- network --------------------------------------------------------------------------

def build_network(topo: Topology, say: Say) -> None:
    """Each replica's namespace (made by network.build) joins the management bridge."""
    mgmt = topo.ns("mgmt")
    plen = topo.mgmt.subnet.prefixlen
    for name, ip in topo.replica_ips().items():
        ns = topo.ns(name)
        run(["ip", "link", "add", name, "netns", mgmt, "type", "veth", "peer", "name", "mgmt0", "netns", ns])
        run(["ip", "link", "set", name, "master", "br0"], mgmt)
        run(["ip", "link", "set", name, "up"], mgmt)
        run(["ip", "link", "set", "mgmt0", "up"], ns)
        run(["ip", "addr", "replace", f"{ip}/{plen}", "dev", "mgmt0"], ns)
    ips = ", ".join(f"{n} {ip}" for n, ip in topo.replica_ips().items())
    say(f"controller replicas on the management network: {ips}")


# --- configs --------------------------------------------------------------------------

def replica_config(topo: Topology, base: dict[str, Any], name: str) -> dict[str, Any]:
    """The single controller's config, made replica `name`'s."""
    names = topo.controller.replica_names()
    own_first = [name] + [n for n in names if n != name]
    cfg = dict(base)
    cfg.pop("state_db", None)  # intent lives in etcd
    cfg["api"] = {**base["api"], "listen": f"0.0.0.0:{topo.controller.api_port}"}
    cfg["port_monitor"] = {"enabled": True, "netns": topo.switch_ns}
    cfg["store"] = {
        "backend": "etcd",
        "etcd": {
            "endpoints": [f"{topo.replica_ips()[n]}:{CLIENT_PORT}" for n in own_first],
            "prefix": etcd_prefix(topo),
            "timeout_s": STORE_TIMEOUT_S,
        },
    }
    cfg["ha"] = {"replica": name, "lease_ttl_s": LEASE_TTL_S, "api_url": api_url(topo, name)}
    return cfg


def write_configs(topo: Topology, gen: GeneratedConfigs) -> tuple[GeneratedConfigs, dict[str, Path]]:
    """One controller config per replica (controller-cK.yaml, replacing controller.yaml), and
    every agent reporting to all replicas. Returns the configs with `controller` = c1's."""
    base = yaml.safe_load(gen.controller.read_text())
    paths: dict[str, Path] = {}
    for name in topo.controller.replica_names():
        path = config_path(gen.controller, name)
        path.write_text(_yaml(replica_config(topo, base, name)))
        paths[name] = path
    gen.controller.unlink()
    urls = [api_url(topo, n) for n in topo.controller.replica_names()]
    for path in gen.gateways.values():
        data = yaml.safe_load(path.read_text())
        ctl = data.get("controller")
        if isinstance(ctl, dict):
            ctl.pop("url", None)
            ctl["urls"] = urls
            path.write_text(_yaml(data))
    first = paths[topo.controller.replica_names()[0]]
    return dataclasses.replace(gen, controller=first), paths


def config_path(generated: Path, name: str) -> Path:
    """Replica `name`'s config, next to `generated` (any controller config `up` wrote)."""
    return generated.with_name(f"controller-{name}.yaml")


def validate(paths: dict[str, Path]) -> list[str]:
    from supergw_controller.config import load_config

    problems = []
    for path in paths.values():
        try:
            load_config(path)
        except Exception as exc:  # the owner's ConfigError carries the message
            problems.append(str(exc))
    return problems


def _yaml(data: dict[str, Any]) -> str:
    return "# generated by `python -m topologies.run up`; do not edit\n" + yaml.safe_dump(data, sort_keys=False)


# --- etcd -----------------------------------------------------------------------------

def etcd_argv(topo: Topology, name: str, data_dir: Path) -> list[str]:
    ip = topo.replica_ips()[name]
    cluster = ",".join(f"{n}=http://{a}:{PEER_PORT}" for n, a in topo.replica_ips().items())
    argv = [
        ETCD,
        "--name", name,
        "--data-dir", str(data_dir),
        "--listen-client-urls", f"http://{ip}:{CLIENT_PORT}",
        "--advertise-client-urls", f"http://{ip}:{CLIENT_PORT}",
        "--listen-peer-urls", f"http://{ip}:{PEER_PORT}",
        "--initial-advertise-peer-urls", f"http://{ip}:{PEER_PORT}",
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


def etcd_health(url: str) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # 503 with a body while there is no quorum yet
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, str(getattr(exc, "reason", exc))
    return body.get("health") == "true", f"health {body.get('health')}"


def start_etcd_cluster(topo: Topology, run_dir: Path, logs: Path, track: Track) -> str:
    from topologies.components import ComponentError, wait_until

    if shutil.which(ETCD) is None:
        raise ComponentError("etcd is not installed (Debian package etcd-server; `make deps` installs it)")
    root = run_dir / "etcd"
    shutil.rmtree(root, ignore_errors=True)  # a fresh cluster per `up`, as the SQLite file is
    recs = []
    for name in topo.controller.replica_names():
        rec = processes.start(f"etcd-{name}", etcd_argv(topo, name, root / name), logs / f"etcd-{name}.log",
                              netns=topo.ns(name))
        track(rec)
        recs.append((name, rec))
    # Members wait for each other (quorum) before any answers healthy: start all, then wait.
    for name, rec in recs:
        wait_until(lambda n=name: etcd_health(etcd_client_url(topo, n)), 30, f"etcd member {name}", rec)  # type: ignore[misc]
    return f"{len(recs)} members ({', '.join(f'{n} {etcd_client_url(topo, n)}' for n, _ in recs)})"


# --- controllers ----------------------------------------------------------------------

def healthz(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as resp:
            data = json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # a backup may answer 503 and still say who it is
        try:
            data = json.loads(exc.read())
        except ValueError:
            return None
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def roles(topo: Topology) -> dict[str, str]:
    """Replica -> "leader" / "backup" / what else its /healthz says ("down" when it does not answer)."""
    out = {}
    for name in topo.controller.replica_names():
        h = healthz(api_url(topo, name))
        ha = h.get("ha") if h else None
        out[name] = "down" if h is None else str(ha.get("role")) if isinstance(ha, dict) else "no ha in /healthz"
    return out


def one_leader(topo: Topology) -> tuple[bool, str]:
    r = roles(topo)
    leaders = [n for n, role in r.items() if role == "leader"]
    return len(leaders) == 1, ", ".join(f"{n} {role}" for n, role in r.items())


def start_replica(topo: Topology, name: str, path: Path, logs: Path) -> ProcRecord:
    """Replica `name`'s controller in its namespace (by `up`, and by bench/ha after a kill)."""
    from topologies.components import CONTROLLER_BIN

    return processes.start(f"controller-{name}", [str(CONTROLLER_BIN), "--config", str(path)],
                           logs / f"controller-{name}.log", netns=topo.ns(name))


def start_replicas(topo: Topology, paths: dict[str, Path], logs: Path, track: Track) -> str:
    from topologies.components import CONTROLLER_BIN, ComponentError, http_answers, probe_in_netns, wait_until

    if not CONTROLLER_BIN.is_file():
        raise ComponentError(f"controller: {CONTROLLER_BIN} is missing (pip install -e controller)")
    recs = []
    for name, path in paths.items():
        rec = start_replica(topo, name, path, logs)
        track(rec)
        recs.append((name, rec))
    for name, rec in recs:
        url = api_url(topo, name)
        wait_until(lambda u=url: http_answers(f"{u}/metrics"), 30, f"controller {name} API {url}", rec)  # type: ignore[misc]
    wait_until(lambda: probe_in_netns(topo.switch_ns, "pipeline", topo.switch.grpc_addr, str(topo.switch.device_id)),
               30, "pipeline pushed by the leading controller")
    detail = wait_until(lambda: one_leader(topo), 20, "exactly one leading controller")
    return f"{len(recs)} replicas: {detail}"


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


def gateways_alive_everywhere(topo: Topology, token: str, names: set[str]) -> tuple[bool, str]:
    """Every replica counts every gateway alive (each judges liveness itself)."""
    from topologies.components import gateways_alive

    details = []
    for name in topo.controller.replica_names():
        ok, detail = gateways_alive(f"{api_url(topo, name)}/api/v1/gateways", token, names)
        if not ok:
            return False, f"{name}: {detail}"
        details.append(f"{name}: {detail}")
    return True, "; ".join(details)


def where_lines(topo: Topology, logs: Path) -> list[str]:
    names = topo.controller.replica_names()
    endpoints = ",".join(f"{topo.replica_ips()[n]}:{CLIENT_PORT}" for n in names)
    r = roles(topo)
    lines = ["  replicas     " + ", ".join(f"{n} {api_url(topo, n)} ({r[n]})" for n in names)]
    lines += [
        f"               namespaces {', '.join(topo.ns(n) for n in names)}; logs {logs}/controller-cK.log",
        f"  etcd         members {', '.join(f'{n} {etcd_client_url(topo, n)}' for n in names)}; logs {logs}/etcd-cK.log",
        f"  who leads    curl -s {api_url(topo, names[0])}/healthz     (ha.role, ha.leader; any replica answers)",
        f"               ETCDCTL_API=3 etcdctl --endpoints {endpoints} get {etcd_prefix(topo)}/leader",
        "  takeover     kill -9 the leader's controller (`python -m topologies.run status` lists pids),",
        "               then ask /healthz again: a backup leads (README.md, 'Watching a takeover')",
    ]
    return lines


def teardown_leftovers(topo: Topology) -> list[str]:
    """Replica namespaces a topology with fewer replicas does not name (a run whose state is lost)."""
    from topologies.network import netns_exists

    removed = []
    for i in range(1, 6):
        ns = topo.ns(f"c{i}")
        if ns not in topo.namespaces() and netns_exists(ns):
            run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    return removed
