"""Remote access end to end: real strongSwan clients through the real outside switch, driven
by the real controller (its CLI) from the real gateways' agents' reports.

    client i ─ brc [ net: router ] eth0 ── p1 (UPLINK)   outside switch   p11 ── eth0 gateway 0 ─ lan0 ── host 0
                                                       (eBPF or BMv2)     p12 ── eth0 gateway 1 ─ lan0 ── host 1
    LAN switch (the controller's first device; stand-in gateway ports, a host): its buckets,
    which the outside's follow, and the gateways' client_pools.

The router ARPs for IP_P (answered by the outside switch), clients connect to IP_P and are
spread by the hash of their address over 2 gateways holding IP_P without ARP; the agents
report each client's IKE SA and the controller pins it. Then: every client pings its
gateway's LAN host and back; many bucket moves and a rebalance under continuous pings lose
no packet of an established client (while the moves do send some clients' hash buckets to
the other gateway: a dispatch by address alone would have broken those); a gateway killed
loses its pins and its clients reconnect to the live one (time measured from the kill).
A drained gateway's clients are redirected (RFC 5685) to IP_P and land on the live gateway
without a gap in their traffic (time measured from the drain call).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from finsy import P4TableEntry
from finsy.p4schema import P4Schema
from finsy.proto import p4r, p4r_grpc

from sgwctl_harness import Controller, Setup, TopologySpec, agent_token, make_setup, switches
from sgwctl_topo import python, stop_process, wait_tcp
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import Ternary
from supergw_gateway.charon import Retransmit
from supergw_gateway.config import parse_config
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.ra.client import RemoteClient, follow_move
from supergw_gateway.ra.lab import LAN_DEV, OUTSIDE_NET, LabGateway, RaLab
from supergw_gateway.runtime import Gateway
from supergw_proto import p4constants as pc
from supergw_proto.bucket import client_bucket_of
from supergw_proto.p4constants import CPU_PORT
from topologies.paths import P4INFO
from topologies.switch import SwitchCommand, pin_dir
from topologies.switchlab import Endpoint, MgmtLink, SwitchLab

LAN = TopologySpec(tag="rl", index=71, hosts=1, gateways=2, prefix="sgw-rac")
TAG = "rc"
OUT_INDEX = 72
API_PORT = 18772
PUBLIC = ipaddress.IPv4Address("203.0.113.9")
PUBLIC_MAC = "02:50:00:00:00:09"
ROUTER_MAC = "02:ee:00:00:00:01"
CLIENTS = 8
K = 16
UPLINK, GW_PORTS = 1, (11, 12)
# Short client timers so a dead gateway is noticed in seconds: DPD after 2 s without
# traffic, then 3 retransmissions of 1, 1.4, 2.0 s (+ 2.7 s until giving up).
CLIENT_DPD_S = 2
CLIENT_RETRANSMIT = Retransmit(tries=3, timeout_s=1.0, base=1.4)


def wan_mac(k: int) -> str:
    return f"52:54:00:00:0e:{k:02x}"


def gateway_of(responder_spi: str) -> int:
    """The gateway whose IKE SPI label (k + 1 in the top byte, ra.config.cluster_spi_plan) it carries."""
    return int(responder_spi[:2], 16) - 1


class SwitchReader:
    """P4Runtime Read of one table of a switch, decoded with the P4Info (no arbitration)."""

    def __init__(self, addr: str, device_id: int) -> None:
        self.schema = P4Schema(P4INFO)
        self.device_id = device_id
        self.stub = p4r_grpc.P4RuntimeStub(grpc.insecure_channel(addr))

    def entries(self, table: str) -> list[P4TableEntry]:
        req = p4r.ReadRequest(device_id=self.device_id, entities=[P4TableEntry(table).encode(self.schema)])
        return [P4TableEntry.decode(e, self.schema) for resp in self.stub.Read(req, timeout=5) for e in resp.entities]

    def by_port(self, table: str) -> dict[Any, int]:
        """key -> the port its entry sends to."""
        return {ent.held_ra_key(table, e): ent.held_target(e)[0] for e in self.entries(table)}

    def buckets(self) -> dict[int, int]:
        return {b: port for b, port, _ in map(ent.held_bucket, self.entries(pc.TABLE_BUCKETS))}


class SwitchedRaLab(RaLab):
    """RaLab's clients, gateways and LAN hosts, with the outside switch between the router
    and the gateways in place of the router's bridge (brg)."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(TAG, [LabGateway(PUBLIC), LabGateway(PUBLIC)], CLIENTS, state_dir,
                         client_dpd_s=CLIENT_DPD_S, client_retransmit=CLIENT_RETRANSMIT)
        # Offloads off: BMv2 receives frames by libpcap, so a UDP checksum left to the NIC
        # (CHECKSUM_PARTIAL on a veth) would reach the other side unfilled and be dropped there.
        eps = [Endpoint("net", UPLINK, ROUTER_MAC, f"{self.router(OUTSIDE_NET)}/{OUTSIDE_NET.prefixlen}", offloads_off=True)]
        eps += [Endpoint(f"g{k}", GW_PORTS[k], wan_mac(k), offloads_off=True) for k in range(2)]
        self.switch_lab = SwitchLab(f"sgw-ra-{TAG}", eps, MgmtLink(ipaddress.IPv4Network(f"10.207.{OUT_INDEX}.0/30")))

    def create(self) -> None:
        self.destroy()
        self.switch_lab.build()  # net and the gateways' namespaces, each eth0 on its switch port
        self.add_router_client_side()
        # IP_P is on-link behind the uplink: the router ARPs for it and the switch answers.
        LocalExecutor(self.net_ns).run(["ip", "route", "replace", f"{PUBLIC}/32", "dev", "eth0"])
        for k in range(2):
            self.add_lan_host(k)
        for i in range(CLIENTS):
            self.add_client_link(i)

    def destroy(self) -> None:
        super().destroy()
        self.switch_lab.teardown()

    def gateway_yaml(self, k: int, api_port: int) -> dict[str, Any]:
        lan = self.lan(k)
        return self.gateway_dict(
            k,
            interfaces=[
                {"role": "lan", "device": LAN_DEV, "address": f"{lan.network_address + 1}/{lan.prefixlen}"},
                {"role": "wan", "device": "eth0", "address": f"{self.gw_wan(k)}/{OUTSIDE_NET.prefixlen}"},
            ],
            controller={"url": f"http://127.0.0.1:{api_port}", "token": agent_token(self.gw_name(k))},
        )


@dataclass
class Rig:
    lab: SwitchedRaLab
    setup: Setup
    ctl: Controller
    outside: SwitchReader
    gws: list[Gateway]
    agents: list[subprocess.Popen[bytes]]
    clients: list[RemoteClient]
    home: list[int]  # per client: the gateway its IKE SA is on
    connect_s: float
    outside_proc: subprocess.Popen[bytes] | None = None
    notes: list[str] = field(default_factory=list)

    def target(self, i: int) -> ipaddress.IPv4Address:
        return self.lab.host_ip(self.home[i])


def require_strongswan() -> None:
    for tool in ("/usr/sbin/charon-systemd", shutil.which("ip")):
        if not tool or not Path(tool).exists():
            pytest.skip(f"missing {tool}: run `make deps`")


def wait_for(pred: Any, timeout: float, what: str, step: float = 0.1) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(step)
    raise AssertionError(f"{what} not within {timeout:.0f}s")


@pytest.fixture(scope="module", params=switches())
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    if os.geteuid() != 0:
        pytest.skip("needs root (namespaces, eBPF, charon)")
    require_strongswan()
    switch = request.param
    tmp = tmp_path_factory.mktemp(f"ctl-ra-{switch}")
    for setup in make_setup(LAN, switch, tmp):  # the LAN switch (running), skips with the reason
        lab = SwitchedRaLab(Path(f"/run/sgw-ra-{TAG}"))
        gws: list[Gateway] = []
        agents: list[subprocess.Popen[bytes]] = []
        clients: list[RemoteClient] = []
        outside_proc = None
        ctl = None
        try:
            lab.create()
            out_addr = f"{lab.switch_lab.mgmt.switch_ip}:{50700 + OUT_INDEX}"  # type: ignore[union-attr]
            cmd = SwitchCommand(switch, 700 + OUT_INDEX, out_addr, CPU_PORT, lab.switch_lab.ports(),
                                pin_dir=pin_dir(lab.switch_lab.prefix) if switch == "ebpf" else None,
                                log_file=tmp / "outside-bmv2" if switch == "bmv2" else None)
            outside_proc = subprocess.Popen(["ip", "netns", "exec", lab.switch_lab.switch_ns, *cmd.argv()],
                                            stdout=open(tmp / "outside-switch.log", "ab"), stderr=subprocess.STDOUT)
            wait_tcp(out_addr, 15, outside_proc)
            lan_gws = setup.topo.gateways()
            ctl = setup.controller(
                "ra-ctl", api_port=API_PORT, buckets=K,
                gateways=[{"name": lab.gw_name(k), "port": g.port, "mac": g.mac, "site_to_site": False,
                           "agent_token": agent_token(lab.gw_name(k))} for k, g in enumerate(lan_gws)],
                remote_access={
                    "public_ip": str(PUBLIC), "public_mac": PUBLIC_MAC,
                    "switch": {"address": out_addr, "device_id": 700 + OUT_INDEX},
                    "uplinks": [UPLINK],
                    "gateways": {lab.gw_name(k): {"port": GW_PORTS[k], "mac": wan_mac(k)} for k in range(2)},
                },
                timing={"heartbeat_interval_ms": 100, "missed_heartbeats": 10},
            )
            for k in range(2):
                gws.append(Gateway(parse_config(lab.gateway_yaml(k, API_PORT), f"ra rig g{k}"), print))
            for gw in gws:
                gw.up()
            ctl.start()
            for k in range(2):
                path = tmp / f"gw{k}.yaml"
                path.write_text(yaml.safe_dump(lab.gateway_yaml(k, API_PORT)))
                agents.append(subprocess.Popen([python(), "-m", "supergw_gateway.cli", "agent", "-c", str(path)],
                                               stdout=open(tmp / f"agent{k}.log", "ab"), stderr=subprocess.STDOUT))
            outside = SwitchReader(out_addr, 700 + OUT_INDEX)
            wait_for(lambda: len(outside.buckets()) == K, 20, "the outside switch's buckets")
            for i in range(CLIENTS):
                c = RemoteClient(dataclasses.replace(lab.client_config(i, 0), subnets=(ipaddress.IPv4Network("10.80.0.0/16"),)))
                c.start()
                clients.append(c)
            t0 = time.monotonic()
            with ThreadPoolExecutor(CLIENTS) as pool:
                states = list(pool.map(lambda c: c.connect(), clients))
            connect_s = time.monotonic() - t0
            home = [gateway_of(s.responder_spi) for s in states]
            yield Rig(lab, setup, ctl, outside, gws, agents, clients, home, connect_s, outside_proc)
        finally:
            for c in clients:
                c.stop()
            for a in agents:
                stop_process(a)
            if ctl is not None:
                ctl.stop()
            for gw in gws:
                gw.down()
            if outside_proc is not None:
                stop_process(outside_proc)
            subprocess.run(["rm", "-rf", str(pin_dir(lab.switch_lab.prefix))], check=False)
            lab.destroy()


def test_clients_are_spread_pinned_and_reach_lan_hosts(rig: Rig) -> None:
    print(f"\n{CLIENTS} clients connected to {PUBLIC} in {rig.connect_s:.2f}s; gateways {rig.home}")
    assert set(rig.home) == {0, 1}, f"the hash should spread {CLIENTS} clients over both gateways: {rig.home}"
    # Each landed where the outside switch's bucket of its address sends new clients.
    held = rig.outside.buckets()
    for i, k in enumerate(rig.home):
        b = client_bucket_of(str(rig.lab.client_address(i).ip), K)
        assert held[b] == GW_PORTS[k], f"client {i} is on gateway {k} but its bucket {b} goes to port {held[b]}"
    # Pins from the agents' reports, on the real switch, keyed on the client's address.
    want = {str(rig.lab.client_address(i).ip): GW_PORTS[k] for i, k in enumerate(rig.home)}
    wait_for(lambda: rig.outside.by_port(pc.TABLE_CLIENT_PINS) == want, 10, "a pin per client")
    assert rig.outside.by_port(pc.TABLE_IKE_SPI_LABELS) == {Ternary((k + 1) << 56, 0xFF << 56): GW_PORTS[k] for k in range(2)}
    views = rig.ctl.client.clients()
    assert sorted((v.gateway, v.remote_host, v.pinned) for v in views) == sorted(
        (rig.lab.gw_name(k), str(rig.lab.client_address(i).ip), True) for i, k in enumerate(rig.home))
    lan_pools = SwitchReader(rig.setup.topo.grpc_addr, rig.setup.topo.device_id).by_port(pc.TABLE_CLIENT_POOLS)
    assert lan_pools == {str(rig.lab.pool(k)): GW_PORTS[k] for k in range(2)}
    for i, c in enumerate(rig.clients):
        assert c.ping(rig.target(i), count=3)[1] == 3, f"client {i}: no traffic to its gateway's LAN host and back"


def test_bucket_moves_and_rebalance_disrupt_no_established_client(rig: Rig) -> None:
    before = [c.state() for c in rig.clients]
    auths = [c.ike_auths() for c in rig.clients]
    names = [rig.lab.gw_name(k) for k in range(2)]
    results: dict[int, tuple[int, int]] = {}
    count, interval = 200, 0.05

    def probe(i: int) -> None:
        results[i] = rig.clients[i].ping(rig.target(i), count=count, interval=interval)

    threads = [threading.Thread(target=probe, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    moved, stranded = 0, set()
    api = rig.ctl.client
    prev = rig.outside.buckets()
    for rnd in range(4):
        for b in range(K):
            api.move(b, names[(b + rnd) % 2])
        time.sleep(0.3)  # the outside follows the LAN's moves asynchronously
        now = rig.outside.buckets()
        moved += sum(1 for b in now if now[b] != prev.get(b))
        prev = now
        # a client whose hash bucket now points at the other gateway: a dispatch by address
        # alone would send its packets to a gateway without its SA
        for i, k in enumerate(rig.home):
            if now[client_bucket_of(str(rig.lab.client_address(i).ip), K)] != GW_PORTS[k]:
                stranded.add(i)
    api.rebalance()
    for t in threads:
        t.join(60)
    lost = {i: sent - got for i, (sent, got) in results.items()}
    assert moved >= 3 * K, f"only {moved} outside bucket changes over 4 rounds of moves"
    print(f"\n{moved} bucket moves + a rebalance under {CLIENTS} x {count} pings: lost {lost}; "
          f"clients whose bucket pointed elsewhere meanwhile: {sorted(stranded)}")
    assert stranded, "the moves never sent a client's bucket elsewhere: the probe proved nothing"
    assert all(sent == count for sent, _ in results.values())
    assert lost == {i: 0 for i in range(CLIENTS)}, f"established clients lost packets: {lost}"
    after = [c.state() for c in rig.clients]
    for i, (was, now_st) in enumerate(zip(before, after)):
        assert was is not None and now_st is not None, f"client {i} has no IKE SA"
        assert (was.initiator_spi, was.responder_spi) == (now_st.initiator_spi, now_st.responder_spi), (
            f"client {i}'s IKE SA changed")
    assert [c.ike_auths() for c in rig.clients] == auths, "a client authenticated again"


def test_a_drained_gateways_clients_are_redirected_to_a_live_gateway(rig: Rig) -> None:
    """RFC 5685 on drain: the controller moves the gateway's buckets and removes its clients'
    pins, then its agent redirects them to IP_P; each makes a new IKE SA (make-before-break),
    which the outside's hash sends to the live gateway, and deletes its old one."""
    drained, live = 1, 0
    name = rig.lab.gw_name(drained)
    victims = [i for i, k in enumerate(rig.home) if k == drained]
    stayers = [i for i, k in enumerate(rig.home) if k == live]
    assert victims
    auths = [c.ike_auths() for c in rig.clients]
    before = [c.state() for c in rig.clients]
    api = rig.ctl.client
    since = max((e.id or 0 for e in api.events(limit=1)), default=0)
    old_host, new_host = rig.lab.host_ip(drained), rig.lab.host_ip(live)
    assert all(rig.clients[i].answers(old_host, 1.0) for i in victims), "a victim has no traffic before the drain"
    with ThreadPoolExecutor(len(victims)) as pool:
        t0 = time.monotonic()
        futures = {i: pool.submit(follow_move, partial(rig.clients[i].answers, new_host, 0.3),
                                  partial(rig.clients[i].answers, old_host, 0.3), t0, 30.0) for i in victims}
        api.drain(name)
        drain_call_s = time.monotonic() - t0
        results = {i: f.result() for i, f in futures.items()}
    times = {i: r.back_s for i, r in results.items()}
    gaps = {i: round(r.worst_gap_s, 2) for i, r in results.items()}
    print(f"\ngateway {drained} drained (REST call {drain_call_s:.2f}s): its {len(victims)} clients' traffic flows "
          f"through gateway {live} after {sorted(round(t, 2) for t in times.values() if t is not None)} s; "
          f"longest time without an answer per client {gaps} (probes of 0.3 s; the DPD path takes ~21 s)")
    assert all(t is not None for t in times.values()), f"clients not back through gateway {live} within 30 s: {times}"
    assert max(t for t in times.values() if t is not None) < 10.0, f"redirect slower than expected: {times}"
    # No client stranded: the old SA answered until the new one did (a probe cycle is <= 0.6 s;
    # the margin is for a busy machine).
    assert max(gaps.values()) < 3.0, f"a client went without traffic during the redirect: {gaps}"
    for i in victims:
        c = rig.clients[i]
        st = c.wait(lambda s: s is not None and gateway_of(s.responder_spi) == live, 10, "on the live gateway")
        assert st is not None
        wait_for(lambda: c.ike_sas() == 1, 40, f"client {i}'s old IKE SA deleted")
        assert c.ike_auths() == auths[i] + 1, f"client {i}: one new full exchange, not {c.ike_auths() - auths[i]}"
    for i in stayers:  # the live gateway's own clients were not touched
        assert rig.clients[i].ike_auths() == auths[i]
        now_st, was = rig.clients[i].state(), before[i]
        assert now_st is not None and was is not None and now_st.responder_spi == was.responder_spi
    want = {str(rig.lab.client_address(i).ip): GW_PORTS[live] for i in range(CLIENTS)}
    wait_for(lambda: rig.outside.by_port(pc.TABLE_CLIENT_PINS) == want, 10, "every client pinned to the live gateway")
    events = [e for e in api.events(limit=200, since_id=since) if e.kind == "client_pin"]
    removed = sum(int(e.detail.split()[0]) for e in events if e.reason == "drain" and e.src == name)
    assert removed == len(victims), f"the event log shows {removed} pins removed by the drain: {events}"
    assert any(e.reason == "sa-up" and e.dst == rig.lab.gw_name(live) for e in events), events
    api.undrain(name)
    rig.home[:] = [live] * CLIENTS


def test_a_killed_gateways_pins_go_and_its_clients_reconnect(rig: Rig) -> None:
    dead, live = 0, 1
    victims = [i for i, k in enumerate(rig.home) if k == dead]
    assert victims
    charon = rig.gws[dead].charon_pid()
    assert charon is not None
    t_kill = time.monotonic()
    rig.agents[dead].send_signal(signal.SIGKILL)
    os.kill(charon, signal.SIGKILL)
    dead_ip = {str(rig.lab.client_address(i).ip) for i in victims}
    pins_gone = wait_for(lambda: not dead_ip & {ip for ip, p in rig.outside.by_port(pc.TABLE_CLIENT_PINS).items()
                                                if p == GW_PORTS[dead]}, 10, "the dead gateway's pins removed")
    times: dict[int, float] = {}

    def back(i: int) -> None:
        rig.clients[i].wait_traffic(rig.lab.host_ip(live), 60)
        times[i] = time.monotonic() - t_kill

    with ThreadPoolExecutor(len(victims)) as pool:
        list(pool.map(back, victims))
    print(f"\ngateway {dead} killed: its pins gone after {pins_gone:.2f}s; its {len(victims)} clients' traffic "
          f"flows again via gateway {live} after {sorted(round(t, 1) for t in times.values())} s "
          f"(client DPD {CLIENT_DPD_S}s, {CLIENT_RETRANSMIT.tries} retransmits of {CLIENT_RETRANSMIT.timeout_s}s x "
          f"{CLIENT_RETRANSMIT.base}^n)")
    for i in victims:
        st = rig.clients[i].state()
        assert st is not None and gateway_of(st.responder_spi) == live
    want = {str(rig.lab.client_address(i).ip) for i in range(CLIENTS)}
    wait_for(lambda: set(rig.outside.by_port(pc.TABLE_CLIENT_PINS)) == want
             and set(rig.outside.by_port(pc.TABLE_CLIENT_PINS).values()) == {GW_PORTS[live]}, 10,
             "every client pinned to the live gateway")
