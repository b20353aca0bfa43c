"""The measurements of bench/remote on a running remote-access emulation (one site, its
clients started): transfers (the paper's Fig. 1 analogue), IKE capacity, client failover,
client redirect on drain and client disruptions under bucket moves. Each function returns plain records; __main__.py boots
the emulation per N and writes the report. What each number counts: README.md."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bench.gaps import FlowGap, ProbeOutputError, ping_flow
from supergw_gateway.errors import GatewayError
from supergw_gateway.ra.client import ClientState, Followed, RemoteClient, follow_move
from topologies import raclients
from topologies.drop_counts import unknown_port_drops
from topologies.model import RemoteAccessSpec
from topologies.poll import wait_until
from topologies.site import Site

IPERF_PORT_BASE = 5300
MODES = ("ipsec", "plain")


class RemoteBenchError(RuntimeError):
    pass


def ra_spec(site: Site) -> RemoteAccessSpec:
    if site.topo.remote_access is None:
        raise RemoteBenchError(f"site {site.prefix} has no remote access: boot topologies/remote-access.yaml")
    return site.topo.remote_access


def holder(site: Site, state: ClientState | None) -> str | None:
    """The gateway that holds a client's SA: the one whose pool its virtual IP is in."""
    ra = ra_spec(site)
    if state is None or state.vip is None:
        return None
    vip = ipaddress.IPv4Address(state.vip)
    for k, g in enumerate(site.topo.gateways):
        if vip in ra.pool(k):
            return g.name
    return None


def states(fleet: Sequence[RemoteClient]) -> dict[str, ClientState | None]:
    def one(c: RemoteClient) -> tuple[str, ClientState | None]:
        try:
            return c.cfg.name, c.state()
        except (GatewayError, OSError):
            return c.cfg.name, None
    with ThreadPoolExecutor(16) as pool:
        return dict(pool.map(one, fleet))


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (its threads included) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds this machine spent not idle (all cores, /proc/stat) so far."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return (sum(f[:8]) - idle) / os.sysconf("SC_CLK_TCK")


# --- (a) transfers: Fig. 1 analogue -------------------------------------------------------

@dataclass(frozen=True)
class TransferRun:
    mode: str  # ipsec: through each client's tunnel to its gateway's LAN address; plain: to IP_P without IPsec
    clients: int
    seconds: float
    mbit_s: float  # sum over the clients of what each received (iperf3 -R: the server sends), Mb/s
    per_client_mbit_s: float
    gateway_cpu_cores: float  # the gateways' charons (IKE, kernel-libipsec ESP) + the iperf3 servers, CPU-s per s
    machine_cpu_cores: float  # the whole machine's non-idle CPU-s per s (clients, switches, kernel included)
    failed: int  # clients whose transfer failed (no iperf3 result)

    @property
    def gateway_cpu_per_client(self) -> float:
        return self.gateway_cpu_cores / self.clients


def transfer(site: Site, fleet: Sequence[RemoteClient], mode: str, seconds: float) -> TransferRun:
    """Each client downloads from the gateway that holds it for `seconds` at once (iperf3 -R,
    one server per client in that gateway's namespace), as the paper's clients download from
    the VPN server: `ipsec` through its tunnel to the gateway's LAN address, `plain` to IP_P
    in the clear (the outside switch sends it by the client's pin, to the same gateway)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    ra = ra_spec(site)
    st = states(fleet)
    owners = {c.cfg.name: holder(site, st[c.cfg.name]) for c in fleet}
    lost = [n for n, g in owners.items() if g is None]
    if lost:
        raise RemoteBenchError(f"clients without an established SA before the transfer: {lost}")
    lan_ip = {g.name: str(g.lan_ip) for g in site.topo.gateways}
    servers = []
    for i, c in enumerate(fleet):
        gw = owners[c.cfg.name]
        assert gw is not None
        servers.append(subprocess.Popen(["ip", "netns", "exec", site.topo.ns(gw), "iperf3", "-s", "-1",
                                         "-p", str(IPERF_PORT_BASE + i)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.5)
    pids = [site.charon_pid(g.name) for g in site.topo.gateways]
    cpu0 = sum(cpu_s(p) for p in pids) + sum(_safe_cpu(s.pid) for s in servers)
    busy0, t0 = machine_busy_s(), time.monotonic()
    clients_p = []
    for i, c in enumerate(fleet):
        target = lan_ip[owners[c.cfg.name] or ""] if mode == "ipsec" else str(ra.public_ip)
        clients_p.append(subprocess.Popen(
            ["ip", "netns", "exec", c.cfg.netns, "iperf3", "-c", target, "-p", str(IPERF_PORT_BASE + i), "-R",
             "-t", str(seconds), "-J", "--connect-timeout", "3000"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    time.sleep(seconds)
    cpu1 = sum(cpu_s(p) for p in pids) + sum(_safe_cpu(s.pid) for s in servers)
    busy1, t1 = machine_busy_s(), time.monotonic()
    bits, failed = 0.0, 0
    for p in clients_p:
        out, _ = p.communicate(timeout=seconds + 30)
        got = received_bits_per_s(out)
        if got is None:
            failed += 1
        else:
            bits += got
    for s in servers:
        s.kill()
        s.wait()
    wall = t1 - t0
    n = len(fleet)
    return TransferRun(mode, n, wall, bits / 1e6, bits / 1e6 / n, (cpu1 - cpu0) / wall, (busy1 - busy0) / wall, failed)


def _safe_cpu(pid: int) -> float:
    try:
        return cpu_s(pid)
    except OSError:
        return 0.0


def received_bits_per_s(iperf_json: str) -> float | None:
    """The receiver's rate from `iperf3 -J` output (None: the run failed or printed no result)."""
    try:
        doc = json.loads(iperf_json)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or doc.get("error"):
        return None
    rate = doc.get("end", {}).get("sum_received", {}).get("bits_per_second")
    return float(rate) if isinstance(rate, (int, float)) and rate > 0 else None


# --- (b) IKE capacity ---------------------------------------------------------------------

@dataclass(frozen=True)
class IkeRound:
    clients: int
    connected: int
    all_up_s: float  # every client initiates at t0 -> the last client's CHILD SA installed
    handshakes_per_s: float  # connected / all_up_s
    per_gateway: dict[str, int]  # clients each gateway holds afterwards (by virtual IP pool)


def disconnect_all(fleet: Sequence[RemoteClient], timeout_s: float = 30.0) -> None:
    def one(c: RemoteClient) -> None:
        try:
            c.disconnect()
        except (GatewayError, OSError):
            pass
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, fleet))
    wait_until(lambda: _none_up(fleet), timeout_s, "every client disconnected")


def _none_up(fleet: Sequence[RemoteClient]) -> tuple[bool, str]:
    up = [n for n, s in states(fleet).items() if s is not None]
    return not up, f"still up: {up[:5]}"


def ike_round(site: Site, fleet: Sequence[RemoteClient], timeout_s: float = 120.0) -> IkeRound:
    """Every client disconnects, then all initiate at once (one thread each): the time until
    the last one's CHILD SA is installed, and where they landed."""
    disconnect_all(fleet)
    time.sleep(1.0)  # the gateways' DELETE handling settles
    res = raclients.connect(fleet, timeout_s)
    per: dict[str, int] = {g.name: 0 for g in site.topo.gateways}
    for s in states(fleet).values():
        if (g := holder(site, s)) is not None:
            per[g] += 1
    done = [v for v in res.seconds.values() if v is not None]
    last = max(done) if done else res.wall_s
    return IkeRound(len(fleet), res.connected, last, res.connected / last if last > 0 else 0.0, per)


# --- (c) client failover ------------------------------------------------------------------

PROBE_INTERVAL_S = 0.1
FAULTS = ("kill", "freeze")
# What a client's libipsec logs (level 1) for ESP it refuses: a replayed or out-of-window sequence
# number, a packet its keys do not authenticate. A taken-over SA that continues from the wrong place,
# or a thawed gateway's stale ESP, shows here.
REFUSED_ESP = ("ESP sequence number verification failed", "ESP decryption or ICV verification failed")
THAW_WATCH_S = 3.0
RELEASE_TIMEOUT_S = 60.0


def serving(site: Site) -> dict[str, str]:
    """A client's inner address -> the gateway the outside switch pins it to, as the controller
    reports it: after a takeover that is the holder of its state, while its address stays in the
    pool of the gateway it first reached (so `holder` no longer tells)."""
    return {vip: c.gateway for c in site.api().clients() if c.pinned for vip in c.vips}


def served_by(site: Site, fleet: Sequence[RemoteClient], gateway: str) -> list[RemoteClient]:
    pins, st = serving(site), states(fleet)
    return [c for c in fleet if (s := st[c.cfg.name]) is not None and s.vip is not None
            and pins.get(s.vip, holder(site, s)) == gateway]


def busiest(site: Site, fleet: Sequence[RemoteClient]) -> str:
    """The gateway serving the most clients."""
    return max((g.name for g in site.topo.gateways), key=lambda g: len(served_by(site, fleet, g)))


def esp_refused(c: RemoteClient, since: int) -> int:
    """Lines of `REFUSED_ESP` in the client's charon log after byte offset `since`."""
    with open(c.charon.log_path, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    return sum(text.count(line) for line in REFUSED_ESP)


def log_offsets(fleet: Sequence[RemoteClient]) -> dict[str, int]:
    return {c.cfg.name: c.charon.log_path.stat().st_size for c in fleet}


@dataclass(frozen=True)
class FailoverTrial:
    fault: str  # "kill" (SIGKILL) or "freeze" (SIGSTOP, then SIGCONT after the probes)
    victim: str
    taken_over_by: str | None  # the takeover event's holder (None: no takeover was logged)
    clients: int  # clients the victim served
    flows: list[FlowGap]  # per client: gap_ms = last answer before the fault -> first answer after it
    new_ike_auths: int  # IKE_AUTH exchanges its clients started (their counters), 2 s before the fault -> probe end
    esp_refused: int  # ESP every client's libipsec refused (REFUSED_ESP), fault -> end of probe
    fence_drops: int | None  # freeze: frames both switches dropped as from a port without a role, thaw -> +3 s
    thaw_esp_refused: int | None  # freeze: ESP every client refused, thaw -> +3 s
    thaw_silent: int | None  # freeze: the victim's clients without an answer just after those 3 s

    @property
    def recovered(self) -> int:
        return sum(1 for f in self.flows if f.recovered)


def _probe(ns: str, dst: str, seconds: float) -> subprocess.Popen[str]:
    count = int(seconds / PROBE_INTERVAL_S)
    return subprocess.Popen(["ip", "netns", "exec", ns, "ping", "-n", "-D", "-O", "-i", str(PROBE_INTERVAL_S),
                             "-W", "1", "-c", str(count), dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def failover(site: Site, fleet: Sequence[RemoteClient], victim: str, fault: str, budget_s: float,
             run_s: float) -> FailoverTrial:
    """Each client the victim serves pings a LAN host every 100 ms; after 2 s the victim's charon
    and agent are SIGKILLed (`kill`) or SIGSTOPped (`freeze`). Per client, bench/gaps.py reads
    the gap from its last answer before the fault to its first answer after it; a client still
    silent `budget_s` before the end of its `run_s` probe has not recovered. A frozen victim then
    thaws behind its fence (what it still sends is counted dropped, no client may refuse ESP);
    a killed one is restarted. Either way the trial ends once the controller released it."""
    if fault not in FAULTS:
        raise ValueError(f"fault {fault!r} is not one of {FAULTS}")
    held = served_by(site, fleet, victim)
    if not held:
        raise RemoteBenchError(f"{victim} serves no client: nothing to fail over")
    api = site.api()
    target = str(site.topo.hosts[0].ip)
    pids = site.gateway_pids(victim)
    auths = {c.cfg.name: c.ike_auths() for c in held}
    last_event = max((e.id for e in api.events(limit=1) if e.id is not None), default=0)
    probes = [(c.cfg.name, _probe(c.cfg.netns, target, run_s)) for c in held]
    time.sleep(2.0)
    logs = log_offsets(fleet)
    fault_t = time.time()
    site.signal_gateway(pids, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    flows = []
    for name, p in probes:
        out, _ = p.communicate(timeout=run_s + 30)
        try:
            flows.append(ping_flow(f"{name} -> {target}", out, fault_t, budget_s))
        except ProbeOutputError as exc:
            raise RemoteBenchError(str(exc)) from None
    new_auths = sum(c.ike_auths() - auths[c.cfg.name] for c in held)
    refused = sum(esp_refused(c, logs[c.cfg.name]) for c in fleet)
    took = [e.dst for e in api.events(limit=200, since_id=last_event) if e.kind == "takeover" and e.src == victim
            and e.reason == "takeover"]
    fence_drops = thaw_refused = thaw_silent = None
    if fault == "freeze":
        drops, logs = unknown_port_drops(site), log_offsets(fleet)
        site.signal_gateway(pids, signal.SIGCONT)
        time.sleep(THAW_WATCH_S)
        fence_drops = unknown_port_drops(site) - drops
        thaw_refused = sum(esp_refused(c, logs[c.cfg.name]) for c in fleet)
        thaw_silent = sum(1 for c in held if not c.answers(site.topo.hosts[0].ip, 1.0))
    else:
        site.restart_gateway(victim)

    def released() -> tuple[bool, str]:
        g = next(g for g in api.gateways() if g.name == victim)
        return g.state in ("alive", "recovering") and not g.fenced, f"{victim}: {g.state}, fenced {g.fenced}"
    wait_until(released, RELEASE_TIMEOUT_S, f"{victim} released after its {fault}")
    return FailoverTrial(fault, victim, took[0] if took else None, len(held), flows, new_auths, refused,
                         fence_drops, thaw_refused, thaw_silent)


# --- (c) client redirect on drain (RFC 5685) -----------------------------------------------

@dataclass(frozen=True)
class DrainTrial:
    victim: str
    followed: dict[str, Followed]  # per client the victim held

    @property
    def back(self) -> int:
        return sum(1 for f in self.followed.values() if f.back_s is not None)


def drain(site: Site, fleet: Sequence[RemoteClient], victim: str, timeout_s: float) -> DrainTrial:
    """The operator drains `victim` (REST); each client it held is probed from just before the
    call: back_s = the call -> the first probe answered while the client holds only an SA on
    another gateway (its old one deleted: the answer came through the new SA); worst_gap_s =
    the longest time in between without any answer (its old SA carries traffic until then).
    A probe is one ping to a LAN host waiting 0.3 s. The drain starts once every other gateway
    is alive. Then the victim is undrained."""
    held = served_by(site, fleet, victim)
    if not held:
        raise RemoteBenchError(f"{victim} serves no client: nothing to redirect")
    target = site.topo.hosts[0].ip
    before = states(held)

    def moved(c: RemoteClient) -> bool:
        # one IKE SA, not the one it had: the redirect's new SA (with another gateway; a
        # taken-over client's address may stay in the pool of neither)
        try:
            was, now = before[c.cfg.name], c.state()
            return c.ike_sas() == 1 and was is not None and now is not None \
                and now.initiator_spi != was.initiator_spi and c.answers(target, 0.3)
        except (GatewayError, OSError):
            return False

    api = site.api()

    def others_alive() -> tuple[bool, str]:
        # a gateway restarted by a failover trial just before: until it is alive again the
        # drain has nowhere to move the buckets, and the redirect rightly waits for it
        gws = api.gateways()
        return all(g.alive for g in gws if g.name != victim), ", ".join(f"{g.name}: {g.state}" for g in gws)

    wait_until(others_alive, 60, "every other gateway alive before the drain")
    with ThreadPoolExecutor(len(held)) as pool:
        t0 = time.monotonic()
        futures = {c.cfg.name: pool.submit(follow_move, partial(moved, c), partial(c.answers, target, 0.3), t0, timeout_s)
                   for c in held}
        api.drain(victim)
        followed = {n: f.result() for n, f in futures.items()}
    api.undrain(victim)
    return DrainTrial(victim, followed)


# --- (c) disruptions under bucket moves ----------------------------------------------------

@dataclass(frozen=True)
class MoveSoak:
    moves: int  # bucket moves the operator API accepted
    clients: int
    disrupted: list[str]  # clients whose IKE SA changed (other SPIs, a new IKE_AUTH) or whose probe lost a reply
    flows: list[FlowGap]


def rebalance_soak(site: Site, fleet: Sequence[RemoteClient], moves: int, run_s: float) -> MoveSoak:
    """Every client pings a LAN host every 100 ms while the operator moves `moves` buckets
    round-robin over the gateways (REST `move`); a client is disrupted when its IKE SA is not
    the one it had (SPIs), it sent another IKE_AUTH, or any of its probes went unanswered."""
    before = states(fleet)
    auths = {c.cfg.name: c.ike_auths() for c in fleet}
    hosts = [str(h.ip) for h in site.topo.hosts]
    probes = [(c.cfg.name, _probe(c.cfg.netns, hosts[i % len(hosts)], run_s)) for i, c in enumerate(fleet)]
    time.sleep(1.0)
    gws = [g.name for g in site.topo.gateways]
    done = 0
    api = site.api()  # the site's own client: closed by the emulation, not here
    buckets = api.buckets()
    deadline = time.monotonic() + run_s - 3
    for i in range(moves):
        if time.monotonic() > deadline:
            break
        b = buckets[(i * 37) % len(buckets)]
        to = gws[(gws.index(b.gateway) + 1) % len(gws)] if b.gateway in gws else gws[0]
        api.move(b.bucket, to)
        done += 1
    flows = []
    for name, p in probes:
        out, _ = p.communicate(timeout=run_s + 30)
        flows.append(ping_flow(name, out, None, 1.0))
    after = states(fleet)
    disrupted = []
    for c in fleet:
        n, was, now = c.cfg.name, before[c.cfg.name], after[c.cfg.name]
        flow = next(f for f in flows if f.flow == n)
        same = was is not None and now is not None and \
            (was.initiator_spi, was.responder_spi) == (now.initiator_spi, now.responder_spi)
        if not same or c.ike_auths() != auths[n] or flow.lost > 0:
            disrupted.append(n)
    return MoveSoak(done, len(fleet), disrupted, flows)
