"""The replication benchmark's lab: 3 real gateways in namespaces (`ra.lab.RaLab`, shared LAN,
kernel-libipsec, or kernel XFRM in UML guests), each with its real replicator in an agent process
of its own, and fleet clients that put every SA on gateway 0.

Gateways run the shipped defaults (charon's `block_threshold` 5 half-open IKE SAs per peer
address, `cookie_threshold` 10 in all, 16 threads) with one change the benchmark needs: each
gateway's pool is a /22 (1,022 virtual IPs), since a /24 holds 254 clients.

The test's outside router steers by client address (a pin) and the shared LAN's host routes
each pool to a gateway (the LAN switch's `client_pools`); the benchmark moves both at a
takeover, as the controller would. Names: `sgw-ra-rb-…`.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.replication.agent import AgentHandle
from bench.replication.fleet import FleetClient, FleetConfig, Identity, started
from supergw_gateway.config import parse_config
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.pki import make_demo_pki
from supergw_gateway.ra.lab import CLIENT_DEV, SERVICE_ID, RaLab, replicating_lab, take_down
from supergw_gateway.runtime import Gateway
from supergw_proto.replication import ReplicationOrders, ReplicationPeer, ReplicationState

TAG = "rb"
GATEWAYS = 3
PUBLIC = ipaddress.IPv4Address("203.0.113.1")
POOLS = ipaddress.IPv4Network("10.100.0.0/16")
POOL_PREFIX = 22
# Half-open IKE SAs a client keeps at once: under the gateway's block_threshold (5 per peer
# address), and all clients together under its cookie_threshold (10).
HALF_OPEN_PER_CLIENT = 4
HALF_OPEN_TOTAL = 8


def pool(k: int) -> ipaddress.IPv4Network:
    return list(POOLS.subnets(new_prefix=POOL_PREFIX))[k]


def identity(i: int, j: int) -> str:
    return f"{TAG}-c{i}-{j}.sgw.test"


def split(sas: int, clients: int) -> list[int]:
    """SAs per client charon: as even as can be, every client at least one."""
    if sas < 1 or clients < 1:
        raise ValueError(f"{sas} SAs over {clients} clients: both must be at least 1")
    clients = min(clients, sas)
    return [sas // clients + (1 if i < sas % clients else 0) for i in range(clients)]


@dataclass
class Rig:
    lab: RaLab
    gws: list[Gateway]
    agents: list[AgentHandle]
    clients: list[FleetClient]
    backend: str
    generation: int = 0
    dead: set[int] = field(default_factory=set)

    @property
    def sas(self) -> int:
        return sum(len(c.cfg.identities) for c in self.clients)

    def name(self, k: int) -> str:
        return self.gws[k].cfg.name

    def live(self) -> list[int]:
        return [k for k in range(len(self.gws)) if k not in self.dead]

    def orders(self, k: int, backup: int | None, protects: int | None,
               take_over: tuple[int, ...] = ()) -> ReplicationOrders:
        peer = None if backup is None else ReplicationPeer(name=self.name(backup), endpoint=self.agents[backup].endpoint)
        return ReplicationOrders(generation=self.generation, backup=peer,
                                 protects=None if protects is None else self.name(protects),
                                 take_over=tuple(self.name(v) for v in take_over))

    def ring(self, alive: list[int], taken: dict[int, tuple[int, ...]] | None = None,
             first: list[int] | None = None) -> None:
        """The controller's ring over `alive` (successor = backup), one new generation; the
        gateways in `first` get theirs first (a receiver before the sender it must accept)."""
        self.generation += 1
        out: dict[int, ReplicationOrders] = {}
        for i, k in enumerate(alive):
            nxt, prev = alive[(i + 1) % len(alive)], alive[i - 1]
            out[k] = self.orders(k, nxt if nxt != k else None, prev if prev != k else None, (taken or {}).get(k, ()))
        for k in [*(first or []), *[k for k in alive if k not in (first or [])]]:
            self.agents[k].apply(out[k])

    def state(self, k: int) -> ReplicationState:
        return self.agents[k].state()

    def kill(self, k: int) -> None:
        """Gateway k dies: its charon (SIGKILL) and its agent."""
        pid = self.gws[k].charon_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        self.agents[k].kill()
        self.dead.add(k)

    def steer_clients(self, to: int) -> None:
        """The outside switch's pins: every client to gateway `to`."""
        for c in self.clients:
            self.lab.route_client(c.cfg.address, to)

    def route_pool(self, k: int, via: int) -> None:
        """The LAN switch's client_pools: gateway k's pool through gateway `via`."""
        LocalExecutor(self.lab.host_ns(0)).run(["ip", "route", "replace", str(pool(k)), "via",
                                                str(self.lab.gw_lan(via).ip)])


def fleet_configs(lab: RaLab, per_client: list[int], state_dir: Path, progress: Any) -> list[FleetConfig]:
    ids = [[identity(i, j) for j in range(n)] for i, n in enumerate(per_client)]
    flat = [x for row in ids for x in row]
    progress(f"certificates for {len(flat)} client identities (made once, kept in {state_dir / 'pki'})")
    files = make_demo_pki(state_dir / "pki", [SERVICE_ID, *flat])
    return [FleetConfig(
        name=lab.client_name(i), netns=lab.client_ns(i), device=CLIENT_DEV, address=lab.client_address(i),
        next_hop=lab.router(lab.client_address(i).network), server=PUBLIC, server_id=SERVICE_ID,
        cacert=files["ca.crt"], subnets=(lab.lan(0),),
        identities=tuple(Identity(x, files[f"{x}.crt"], files[f"{x}.key"]) for x in row),
        run_dir=state_dir / "fleet" / lab.client_name(i)) for i, row in enumerate(ids)]


@contextmanager
def rig(sas: int, clients: int, backend: str, state_dir: Path, progress: Any = print) -> Iterator[Rig]:
    """The lab with every agent started and in the ring 0 -> 1 -> 2 -> 0, and the clients'
    charons started with their connections loaded (none initiated)."""
    per_client = split(sas, clients)
    for stale in ("gw", "fleet", "agents"):  # each lab starts with fresh logs; the PKIs are kept
        shutil.rmtree(state_dir / stale, ignore_errors=True)
    lab = replicating_lab(TAG, GATEWAYS, PUBLIC, clients=len(per_client), state_dir=state_dir,
                          tls_dir=state_dir / "replication-pki", ca_name="supergw replication bench CA",
                          remote_access=lambda k: {"pool": str(pool(k))})
    dicts = [lab.gateway_dict(k, backend=backend) for k in range(GATEWAYS)]
    fleet = [FleetClient(c) for c in fleet_configs(lab, per_client, state_dir, progress)]
    progress(f"lab: {GATEWAYS} gateways ({backend}), {len(fleet)} client charons holding {per_client} connections")
    lab.create()
    gws: list[Gateway] = []
    agents: list[AgentHandle] = []
    try:
        with ExitStack() as stack:
            for k, d in enumerate(dicts):
                gw = Gateway(parse_config(d, f"bench replication g{k}"))
                gws.append(gw)
                gw.up()
                agent = AgentHandle(lab.gw_name(k), d, state_dir / "agents")
                agents.append(agent)
                agent.start()
            r = Rig(lab, gws, agents, fleet, backend)
            for k in range(GATEWAYS):
                r.route_pool(k, k)
            r.ring(list(range(GATEWAYS)))
            r.steer_clients(0)
            stack.enter_context(started(fleet))
            yield r
    finally:
        for a in agents:
            a.stop()
        take_down(lab, gws, progress)
