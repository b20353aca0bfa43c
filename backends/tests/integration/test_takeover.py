"""Stateful takeover on real charon: three gateways replicate their remote-access SAs around
the ring (each agent's relay, mutual TLS), and a killed gateway's clients go on through its
backup with no new IKE_AUTH — then a second failure, and a backup that died first.

The test plays the controller: it gives the orders and moves what the switches would move
(a client's pin, a pool's route). Clients run strongSwan's defaults for DPD (none), so
nothing on the client side notices the failure. Each probe can fail: a client whose traffic
does not come back within the time fails, and so does any new IKE_AUTH (counted by the
client's own charon).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from supergw_gateway.executor import LocalExecutor
from supergw_gateway.ra.client import RemoteClient
from supergw_gateway.ra.lab import RaLab, replicating_lab, take_down
from supergw_gateway.runtime import Gateway
from supergw_gateway.statesync import hamsg
from supergw_gateway.statesync.replicator import Replicator
from supergw_gateway.statesync.setup import replicator_for
from supergw_proto.replication import ReplicationOrders, ReplicationPeer, ReplicationState
from tests.integration.conftest import require_root_strongswan, require_uml

pytestmark = pytest.mark.integration
T = TypeVar("T")

N_GATEWAYS = 3
PER_GATEWAY = 2
PUBLIC = ipaddress.IPv4Address("203.0.113.1")
BACK_WITHIN_S = 5.0  # from the takeover order to a client's traffic flowing again (today: ~20 s of DPD)


class Loop:
    """The replicators on an event loop of their own (as in the agent process)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(30)

    def wait(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def stop(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.wait(cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@dataclass
class Cluster:
    lab: RaLab
    gws: list[Gateway]
    reps: list[Replicator]
    loop: Loop
    clients: list[RemoteClient]
    generation: int = 0
    log_start: dict[int, int] = field(default_factory=dict)  # each client's charon log size when the test began

    def name(self, k: int) -> str:
        return self.gws[k].cfg.name

    def order(self, k: int, backup: int | None, protects: int | None, take_over: tuple[int, ...] = ()) -> None:
        self.generation += 1
        peer = None if backup is None else ReplicationPeer(name=self.name(backup), endpoint=self.reps[backup].endpoint
                                                           or "")
        o = ReplicationOrders(generation=self.generation, backup=peer,
                              protects=None if protects is None else self.name(protects),
                              take_over=tuple(self.name(v) for v in take_over))
        self.loop.run(lambda: self.reps[k].apply(o))

    def ring(self, alive: list[int], taken: dict[int, tuple[int, ...]] | None = None) -> None:
        """The orders of the ring over `alive` (in index order); the others are out of it."""
        for k in range(len(self.gws)):
            if k not in alive:
                self.order(k, None, None)
        for i, k in enumerate(alive):
            nxt, prev = alive[(i + 1) % len(alive)], alive[i - 1]
            self.order(k, nxt if nxt != k else None, prev if prev != k else None, (taken or {}).get(k, ()))

    def state(self, k: int) -> ReplicationState:
        return self.loop.run(self.reps[k].state)

    def wait_state(self, k: int, pred: Callable[[ReplicationState], bool], what: str, timeout_s: float = 15) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if pred(self.state(k)):
                return
            time.sleep(0.1)
        with self.gws[k].vici() as v:
            sas = [{n: {key: ike.get(key) for key in ("state", "initiator", "initiator-spi", "responder-spi")}
                    | {"children": [(ch.get("state"), ch.get("spi-in")) for ch in ike.get("child-sas", {}).values()]}
                    for n, ike in e.items()} for e in v.raw_sas("ra")]
        raise AssertionError(f"{self.name(k)}: {what} not within {timeout_s}s: {self.state(k)}; its SAs: {sas}")

    def kill(self, k: int, sig: signal.Signals = signal.SIGKILL) -> None:
        pid = self.gws[k].charon_pid()
        assert pid is not None
        os.kill(pid, sig)

    def fence(self, k: int, fenced: bool = True) -> None:
        """What the switches do to a gateway judged dead: nothing it sends gets through."""
        LocalExecutor(self.lab.net_ns).run(["ip", "link", "set", f"g{k}", "down" if fenced else "up"])
        LocalExecutor(self.lab.host_ns(0)).run(["ip", "link", "set", f"g{k}", "down" if fenced else "up"])

    def steer(self, victim: int, to: int) -> None:
        """What the outside switch does at a takeover: the victim's clients go to `to`."""
        for i in range(len(self.clients)):
            if i // PER_GATEWAY == victim:
                self.lab.route_client(self.lab.client_address(i), to)

    def steer_pool(self, victim: int, to: int) -> None:
        """What the LAN switch does once `to` renewed the taken-over CHILD SAs (before, ESP
        on them would be replay to the clients): the victim's pool goes to `to`."""
        self.wait_state(to, lambda s: self.name(victim) in s.taken_over and not s.unrenewed_children.get(
            self.name(victim)), f"CHILD SAs taken over from {self.name(victim)} renewed", timeout_s=5)
        self.lab.route_pool(victim, to)

    def client_log(self, i: int) -> Path:
        return self.clients[i].cfg.run_dir / "charon.log"

    def replay_drops(self) -> dict[int, int]:
        """ESP a client dropped as replayed since the test began (libipsec's own log of its
        replay check)."""
        out = {}
        for i in range(len(self.clients)):
            with open(self.client_log(i), "rb") as f:
                f.seek(self.log_start.get(i, 0))
                out[i] = f.read().decode(errors="replace").count("ESP sequence number verification failed")
        return out


@pytest.fixture(params=["libipsec", "uml"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Three gateways: charon with userspace ESP in namespaces, or kernel XFRM in UML guests."""
    backend: str = request.param
    if backend == "uml":
        require_uml()
    require_root_strongswan()
    lab = replicating_lab("tk", N_GATEWAYS, PUBLIC, clients=N_GATEWAYS * PER_GATEWAY, state_dir=Path("/run/sgw-ra-tk"),
                          tls_dir=tmp_path / "replication-pki", ca_name="supergw replication test CA")
    gws: list[Gateway] = []
    lab.create()
    loop = Loop()
    clients: list[RemoteClient] = []
    reps: list[Replicator] = []
    try:
        for k in range(N_GATEWAYS):
            gw = Gateway(lab.gateway_config(k, backend=backend), print)
            gw.up()
            gws.append(gw)
            rep = replicator_for(gw.cfg, gw.vici)
            assert rep is not None
            loop.wait(rep.start())
            reps.append(rep)
        c = Cluster(lab, gws, reps, loop, clients)
        c.ring(list(range(N_GATEWAYS)))
        for i in range(N_GATEWAYS * PER_GATEWAY):
            lab.route_client(lab.client_address(i), i // PER_GATEWAY)
            client = RemoteClient(lab.client_config(i, i // PER_GATEWAY))
            client.start()
            clients.append(client)
        with ThreadPoolExecutor(len(clients)) as pool:
            list(pool.map(lambda cl: cl.connect(), clients))
        for cl in clients:
            cl.wait_traffic(lab.host_ip(0), 10)
        for k in range(N_GATEWAYS):  # every gateway's backup holds its clients' SAs
            c.wait_state((k + 1) % N_GATEWAYS, lambda s: s.held_sas == PER_GATEWAY, "held copies")
            c.wait_state(k, lambda s: s.backup_connected and s.replicated_sas == PER_GATEWAY, "replicated")
        c.log_start = {i: c.client_log(i).stat().st_size for i in range(len(clients))}
        yield c
    finally:
        for rep in reps:
            loop.wait(rep.close())
        loop.stop()
        for cl in clients:
            cl.stop()
        take_down(lab, gws, print)


def back_after(cluster: Cluster, clients: list[int], t0: float) -> dict[int, float]:
    """Seconds from t0 until each client's traffic through the tunnel is answered again."""
    def one(i: int) -> float:
        cl = cluster.clients[i]
        while time.monotonic() - t0 < BACK_WITHIN_S:
            if cl.answers(cluster.lab.host_ip(0), wait_s=0.2):
                return time.monotonic() - t0
        raise AssertionError(f"client {i}: no traffic {BACK_WITHIN_S}s after the takeover order")

    with ThreadPoolExecutor(len(clients)) as pool:
        return dict(zip(clients, pool.map(one, clients)))


def assert_no_new_auth(cluster: Cluster, clients: list[int]) -> None:
    auths = {i: cluster.clients[i].ike_auths() for i in clients}
    assert all(n == 1 for n in auths.values()), f"IKE_AUTHs per client (1 = never re-authenticated): {auths}"


def key_material(c: Cluster) -> set[bytes]:
    """Every secret the sync messages each agent holds (its own and its protected gateway's) carry."""
    out: set[bytes] = set()
    def held(rep: Replicator) -> Callable[[], list[bytes]]:
        return lambda: [m.raw for m in (*rep.own.replay(), *rep.held.replay())]
    for rep in c.reps:
        out.update(v for raw in c.loop.run(held(rep)) for v in hamsg.key_material(raw) if len(v) >= 16)
    return out


def assert_secrets_stay_secret(c: Cluster, secrets: set[bytes], logs: str) -> None:
    """No secret in what an agent reports to the controller (its replication state: /status,
    metrics, the dashboard and the event log are made from it) nor in anything the agents
    logged, raw, hex or base64."""
    reports = "".join(c.state(k).model_dump_json() for k in range(len(c.gws)))
    for text, what in ((reports, "a replication report"), (logs, "the agents' log")):
        for v in secrets:
            for form in (v.hex(), v.hex().upper(), base64.b64encode(v).decode(), v.decode("latin-1")):
                assert form not in text, f"key material in {what}"


def test_a_killed_gateways_clients_go_on_through_its_backup_then_survive_a_second_failure(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    c = cluster
    caplog.set_level(logging.DEBUG)
    secrets = key_material(c)
    assert len(secrets) >= 2 * len(c.clients), f"the books hold too few secrets to check: {len(secrets)}"
    before = {i: c.clients[i].state() for i in range(len(c.clients))}
    assert c.replay_drops() == {i: 0 for i in range(len(c.clients))}
    c.kill(0)
    c.steer(0, 1)
    t0 = time.monotonic()
    c.ring([1, 2], taken={1: (0,)})
    c.steer_pool(0, 1)
    back = back_after(c, [0, 1], t0)
    print(f"takeover g0 -> g1: clients back after {back}")
    assert_no_new_auth(c, list(range(len(c.clients))))
    for i in (0, 1):
        after, was = c.clients[i].state(), before[i]
        assert after is not None and was is not None
        assert after.vip == was.vip, "the client kept its inner address"
    # g1 rekeyed what it took over: nothing left with g0's label or range, so the switch can give them back.
    c.wait_state(1, lambda s: s.taken_over == {c.name(0): PER_GATEWAY} and not s.foreign_sas.get(c.name(0)),
                 "taken-over SAs rekeyed onto g1's SPIs")
    for i in (0, 1):
        st = c.clients[i].state()
        assert st is not None and st.spi_out is not None and int(st.spi_out, 16) >> 24 == 0xC0 + 1, \
            f"client {i} sends to SPI {st and st.spi_out}, not into g1's range"
    assert c.replay_drops() == {i: 0 for i in range(len(c.clients))}, "ESP the clients dropped as replay"
    # g1's backup (g2) now holds g1's own clients and the taken-over ones.
    c.wait_state(2, lambda s: s.held_sas == 2 * PER_GATEWAY, "g2 holds g1's and g0's clients")
    c.kill(1)
    c.steer(0, 2)
    c.steer(1, 2)
    t1 = time.monotonic()
    c.ring([2], taken={2: (1,)})
    c.steer_pool(1, 2)
    c.lab.route_pool(0, 2)
    back = back_after(c, [0, 1, 2, 3], t1)
    print(f"takeover g1 -> g2: clients back after {back}")
    assert_no_new_auth(c, list(range(len(c.clients))))
    assert c.replay_drops() == {i: 0 for i in range(len(c.clients))}, "ESP the clients dropped as replay"
    assert_secrets_stay_secret(c, secrets | key_material(c), caplog.text)


def test_when_the_backup_dies_first_the_ring_relinks_and_a_later_failure_is_taken_over(cluster: Cluster) -> None:
    c = cluster
    c.kill(1)  # g1 holds g0's state
    c.steer(1, 2)
    c.ring([0, 2], taken={2: (1,)})
    c.steer_pool(1, 2)
    back_after(c, [2, 3], time.monotonic())
    c.wait_state(2, lambda s: s.held_sas == PER_GATEWAY, "g2 holds g0's clients (replayed by g0's agent)")
    c.kill(0)
    c.steer(0, 2)
    t0 = time.monotonic()
    c.ring([2], taken={2: (1, 0)})
    c.steer_pool(0, 2)
    back_after(c, [0, 1], t0)
    assert_no_new_auth(c, list(range(len(c.clients))))
    assert c.replay_drops() == {i: 0 for i in range(len(c.clients))}, "ESP the clients dropped as replay"


def test_a_frozen_gateway_that_thaws_after_the_takeover_drops_its_sas_and_disturbs_nobody(cluster: Cluster) -> None:
    """Split brain: g0 freezes, g1 takes its clients over, g0 thaws behind its fence with SAs it
    believes its own. Its agent is told it is fenced: it ends every remote-access SA and held
    copy (the DELETEs die at the fence), and says so; the clients never notice."""
    c = cluster
    c.kill(0, signal.SIGSTOP)
    c.fence(0)
    c.steer(0, 1)
    t0 = time.monotonic()
    c.ring([1, 2], taken={1: (0,)})
    c.steer_pool(0, 1)
    back_after(c, [0, 1], t0)
    c.kill(0, signal.SIGCONT)  # thaws: charon still holds the SAs as ESTABLISHED
    c.generation += 1
    c.loop.run(lambda: c.reps[0].apply(ReplicationOrders(generation=c.generation, fenced=True)))
    c.wait_state(0, lambda s: s.fence_cleared == c.generation and s.own_sas == 0 and s.held_sas == 0,
                 "fence cleared")
    with c.gws[0].vici() as v:
        left = [ike for e in v.raw_sas("ra") for ike in e.values()]
    assert left == [], f"the thawed gateway still holds remote-access SAs: {left}"
    time.sleep(2)  # anything the thawed gateway still sends would reach the clients now, were it not fenced
    for i in range(len(c.clients)):
        assert c.clients[i].answers(c.lab.host_ip(0), wait_s=1.0), f"client {i} lost its traffic"
    assert_no_new_auth(c, list(range(len(c.clients))))
    assert c.replay_drops() == {i: 0 for i in range(len(c.clients))}, "ESP the clients dropped as replay"
