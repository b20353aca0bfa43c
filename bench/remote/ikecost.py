"""The IKE-cost paper live (Shue et al.): credential caching measured on clients that vanish the
way the paper's logs show them leaving, and what an IKE exchange costs our gateways beside an
ESP packet (the paper's headline comparison).

**Caching, live.** The sessions part (sessions.py) records the Fig. 6 workload with the
shipped strategy `none` and orderly leaves (VICI `terminate`: the SA is deleted, so no cache
could ever serve it) and replays the trace (`ra/ikecache.py`). Here the same seeded schedule
runs again on gateways with a cache (`remote_access.caching`, strategy clocked), but each
client *vanishes* when it leaves: its link goes down (an outage) or its charon is frozen
(SIGSTOP: a laptop's suspend), at random, as in the paper's logs: nobody deletes anything. It
comes back when the schedule says: link up or SIGCONT. A gateway that still holds its SA lets
its traffic through at once (the cache served); one that dropped it (the lifetime passed)
stays silent until the client's DPD gives up (about 12 s) and `dpd_action=restart` makes a
full exchange. Counted from the clients' own charons (the `counters` plugin's IKE_AUTH
requests: one per full IKE_SA_INIT + IKE_AUTH), never from our state: `exchanges` over the run,
and per return whether its first ping was answered at once with no new IKE_AUTH (`resumed`). A lifetime shorter than
the absences (the negative control) must save less.

**IKE vs ESP.** On the same gateways (kernel-libipsec: ESP in charon's userspace threads) the
CPU the gateways' charons spend per full exchange (every client connecting at once, the
clients' counters giving the exchanges) and per ESP packet (a TCP transfer through the
tunnels, the clients' SA packet counters giving the packets the gateways encrypted or
decrypted), each less what the charons spend idle over the same time.
"""

from __future__ import annotations

import ipaddress
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from bench.remote.measure import RemoteBenchError, cpu_s, disconnect_all, transfer
from bench.remote.sessions import Presence, ike_auths, run_fleet
from bench.report import Metric
from supergw_gateway.errors import GatewayError
from supergw_gateway.ra.client import CONN, RemoteClient
from supergw_gateway.ra.ikecache import Connection, actual, needed_clocked_reauth
from topologies import raclients
from topologies.poll import Timeout
from topologies.site import Site

PING_INTERVAL_S = 0.2
RESUME_WAIT_S = 1.0  # a returning client's first ping: answered this fast, its SA was still there
HOW = ("link", "sleep")  # link loss, suspend
# A clocked client reauthenticates its own over_time (2 s, ra/client.py) before the lifetime the
# gateway sends: a lifetime must leave it some time between reauthentications.
MIN_LIFETIME_S = 5.0
IKE_ROUNDS = 3  # connects of the whole fleet for the IKE cost: enough CPU ticks (10 ms) to count
IDLE_S = 5.0


@dataclass
class VanishRun:
    strategy: str
    lifetime_s: float
    seconds: float
    on_mean_s: float
    off_mean_s: float
    presences: int = 0  # first connects + returns
    exchanges: int = 0  # IKE_AUTH requests the clients sent over the run (their counters)
    returns: int = 0
    resumed: int = 0  # returns whose first ping was answered within RESUME_WAIT_S with no new IKE_AUTH
    by_how: dict[str, int] = field(default_factory=lambda: {h: 0 for h in HOW})
    resumed_by_how: dict[str, int] = field(default_factory=lambda: {h: 0 for h in HOW})
    failures: list[str] = field(default_factory=list)


def caching_section(strategy: str, lifetime_s: float | None) -> dict[str, Any]:
    """The gateways' `remote_access.caching` (docs/remote-access.md): `none` or a lifetime."""
    return {"strategy": strategy} | ({} if lifetime_s is None else {"lifetime_s": int(lifetime_s)})


def set_caching(site: Site, caching: dict[str, Any], say: Callable[[str], None]) -> None:
    """Every gateway's config gets `caching`, then the gateway is restarted (charon and agent:
    the strategy is charon's connection and the agent's policy); waits until all are alive."""
    for g in site.topo.gateways:
        path = site.gateway_config(g.name)
        data = yaml.safe_load(path.read_text())
        data["remote_access"]["caching"] = caching
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        site.signal_gateway(site.gateway_pids(g.name), signal.SIGKILL)
        site.restart_gateway(g.name)
    try:
        site.wait_gateways(lambda gws: all(x.state == "alive" for x in gws.values()), "gateways alive", 60)
    except Timeout as exc:
        raise RemoteBenchError(f"after caching {caching}: {exc}") from None
    say(f"   gateways restarted with caching {caching}")


def _back(c: RemoteClient, how: str) -> None:
    if how == "link":
        c.link_up()
    else:
        c.wake()


def _vanishing_client(c: RemoteClient, target: ipaddress.IPv4Address, seed: int, until: float, run: VanishRun,
                      lock: threading.Lock) -> None:
    """The sessions part's schedule (the same durations from the same seed), leaving by vanishing."""
    when = Presence(seed, c.cfg.name, run.on_mean_s, run.off_mean_s, until)
    how_rng = random.Random(f"{seed}/{c.cfg.name}/how")
    time.sleep(when.first_absence())
    gone: str | None = None
    before = 0  # the client's IKE_AUTH count when it left (read while its charon runs)
    try:
        while time.monotonic() < until:
            if gone is None:
                try:
                    c.connect(timeout_s=30)
                except GatewayError as exc:
                    with lock:
                        run.failures.append(f"{c.cfg.name}: {exc}")
                    return
            else:
                _back(c, gone)
                # the cache served when traffic flows again at once with no new IKE_AUTH
                resumed = c.answers(target, wait_s=RESUME_WAIT_S) and ike_auths(c) == before
                with lock:
                    run.returns += 1
                    run.by_how[gone] += 1
                    run.resumed += resumed
                    run.resumed_by_how[gone] += resumed
            on = when.present()
            try:
                c.ping(target, count=max(1, int(on / PING_INTERVAL_S)), interval=PING_INTERVAL_S)
            except GatewayError:
                pass  # the pings carry the presence's bytes; the exchanges are counted by the client
            with lock:
                run.presences += 1
            before = ike_auths(c)
            gone = how_rng.choice(HOW)
            if gone == "link":
                c.link_down()
            else:
                c.sleep()
            time.sleep(when.absent())
    finally:
        if gone is not None:
            try:
                _back(c, gone)
            except (GatewayError, OSError) as exc:
                with lock:
                    run.failures.append(f"{c.cfg.name}: could not come back after the run: {exc}")


def vanish_workload(fleet: Sequence[RemoteClient], target: ipaddress.IPv4Address, seconds: float, seed: int,
                    on_mean_s: float, off_mean_s: float, strategy: str, lifetime_s: float) -> VanishRun:
    """Every client of `fleet` (all disconnected first) on the seeded schedule, vanishing when it
    leaves; the exchanges from the clients' IKE_AUTH counters before and after."""
    run = VanishRun(strategy, lifetime_s, seconds, on_mean_s, off_mean_s)
    disconnect_all(fleet)
    run.exchanges = run_fleet(fleet, seconds,
                              lambda c, until, lock: _vanishing_client(c, target, seed, until, run, lock))
    return run


# --- what an IKE exchange costs beside an ESP packet ------------------------------------------

@dataclass
class Cost:
    handshakes: int  # full exchanges the clients counted
    ike_cpu_s: float  # the gateways' charons over the round, less their idle CPU
    esp_packets: int  # ESP packets the gateways encrypted or decrypted (the clients' SA counters)
    esp_bytes: int
    esp_cpu_s: float  # the gateways' charons over the transfer, less their idle CPU
    idle_cpu_per_s: float  # the gateways' charons, all clients connected, nothing sent
    esp_mbit_s: float

    @property
    def ike_ms_per_handshake(self) -> float | None:
        """None when nothing was counted (no exchange, or no CPU above idle: below what the
        clock's 10 ms ticks resolve)."""
        return 1000 * self.ike_cpu_s / self.handshakes if self.handshakes and self.ike_cpu_s > 0 else None

    @property
    def esp_us_per_packet(self) -> float | None:
        return 1e6 * self.esp_cpu_s / self.esp_packets if self.esp_packets and self.esp_cpu_s > 0 else None

    @property
    def ratio(self) -> float | None:
        ike, esp = self.ike_ms_per_handshake, self.esp_us_per_packet
        return 1000 * ike / esp if ike is not None and esp else None


def gateways_cpu(site: Site) -> float:
    return sum(cpu_s(site.charon_pid(g.name)) for g in site.topo.gateways)


def esp_counts(fleet: Sequence[RemoteClient]) -> tuple[int, int]:
    """(packets, bytes) in + out of every client's CHILD SAs so far."""
    packets = octets = 0
    for c in fleet:
        try:
            with c.vici() as v:
                for sa in v.list_sas():
                    if sa.name == CONN:
                        for ch in sa.children:
                            packets += ch.packets_in + ch.packets_out
                            octets += ch.bytes_in + ch.bytes_out
        except (GatewayError, OSError):
            continue
    return packets, octets


def ike_esp_cost(site: Site, fleet: Sequence[RemoteClient], transfer_clients: int, seconds: float) -> Cost:
    """The gateways' charon CPU per full exchange and per ESP packet (see the module doc)."""
    disconnect_all(fleet)  # SAs a restarted gateway no longer holds go first
    back = raclients.connect(list(fleet), 60)
    if back.failures:
        raise RemoteBenchError(f"IKE cost: clients not up: {sorted(back.failures)[:5]}")
    c0, t0 = gateways_cpu(site), time.monotonic()
    time.sleep(IDLE_S)
    idle = (gateways_cpu(site) - c0) / (time.monotonic() - t0)
    handshakes, ike_cpu = 0, 0.0
    for _ in range(IKE_ROUNDS):
        disconnect_all(fleet)
        time.sleep(1.0)  # the gateways' DELETE handling settles
        a0 = sum(ike_auths(c) for c in fleet)
        c0, t0 = gateways_cpu(site), time.monotonic()
        up = raclients.connect(list(fleet), 120)
        c1, t1 = gateways_cpu(site), time.monotonic()
        handshakes += sum(ike_auths(c) for c in fleet) - a0
        if up.failures:
            raise RemoteBenchError(f"IKE cost: {len(up.failures)} clients did not connect: {sorted(up.failures)[:5]}")
        ike_cpu += (c1 - c0) - idle * (t1 - t0)
    movers = list(fleet[:transfer_clients])
    p0, b0 = esp_counts(movers)
    c0, t0 = gateways_cpu(site), time.monotonic()
    run = transfer(site, movers, "ipsec", seconds)
    c1, t1 = gateways_cpu(site), time.monotonic()
    p1, b1 = esp_counts(movers)
    if run.failed:
        raise RemoteBenchError(f"IKE cost: {run.failed} of {len(movers)} transfers failed")
    return Cost(handshakes, ike_cpu, p1 - p0, b1 - b0, (c1 - c0) - idle * (t1 - t0), idle, run.mbit_s)


def run_live(site: Site, fleet: Sequence[RemoteClient], target: ipaddress.IPv4Address, seconds: float, seed: int,
             on_mean_s: float, off_mean_s: float, cycles: Sequence[float], cost_clients: int, cost_seconds: float,
             say: Callable[[str], None]) -> tuple[list[VanishRun], Cost]:
    """One vanishing run per clocked lifetime (k x the mean cycle, k in `cycles`), the gateways
    back on the shipped `none` afterwards, then the IKE/ESP cost there."""
    runs: list[VanishRun] = []
    cycle = on_mean_s + off_mean_s
    try:
        for k in cycles:
            lifetime = max(MIN_LIFETIME_S, float(round(k * cycle)))
            set_caching(site, caching_section("clocked", lifetime), say)
            say(f"   caching live: clocked {lifetime:g} s, {len(fleet)} clients vanish and come back for {seconds:.0f} s")
            run = vanish_workload(fleet, target, seconds, seed, on_mean_s, off_mean_s, "clocked", lifetime)
            say(f"   caching live: {run.exchanges} full exchanges for {run.presences} presences ({run.returns} returns, "
                f"{run.resumed} resumed; {len(run.failures)} failures)")
            runs.append(run)
    finally:
        set_caching(site, caching_section("none", None), say)
    cost = ike_esp_cost(site, fleet, cost_clients, cost_seconds)
    say(f"   IKE vs ESP: {cost.ike_ms_per_handshake} CPU-ms per exchange ({cost.handshakes}), "
        f"{cost.esp_us_per_packet} CPU-us per ESP packet ({cost.esp_packets}): ratio {cost.ratio}")
    return runs, cost


# --- the report's part -----------------------------------------------------------------------

METHOD = """### The IKE-cost paper live (bench/remote/ikecost.py)

Caching, live: after the sessions part (strategy `none`, orderly leaves, the trace the replay
reads), the gateways are restarted with `caching: {strategy: clocked, lifetime_s: L}` and the
same seeded schedule runs again, but a leaving client vanishes: its link goes down (an outage)
or its charon is frozen (SIGSTOP: a suspend), at random, and comes back (link up, SIGCONT) when
the schedule says; nothing is deleted. `exchanges` = the IKE_AUTH requests the clients' own
charons counted (the `counters` plugin: one per full IKE_SA_INIT + IKE_AUTH, with the
clocked strategy's reauthentications of present clients); `presences` = first connects plus
returns (what the baseline makes one exchange each); live needed = exchanges / presences,
beside the replay's `clocked+reauth` for the same L on the baseline's trace. A return
`resumed` when the client's first ping after it was answered within 1 s with no new
IKE_AUTH (the gateway still held its SA). L = 1 cycle is the
measurement; L = 1/4 cycle (shorter than most absences) is the negative control and must save
less. IKE vs ESP: the gateways' charons (kernel-libipsec: IKE and userspace ESP in one process)
with every client connected and idle for 5 s give the idle rate; every client then
disconnects and all connect at once, three times: CPU per full exchange (certificates, RSA) =
the charons' CPU over those connects, less idle, / the exchanges the clients counted; then some clients download
through their tunnels (iperf3 -R): CPU per ESP packet = the charons' CPU less idle / the ESP
packets the clients' SAs counted in and out (each one the gateways encrypted or decrypted).
Ratio = CPU per exchange / CPU per packet."""


def predicted_pct(trace: Sequence[Connection], lifetime_s: float) -> float | None:
    """The replay's needed/actual (%) of the clocked strategy with its reauthentications
    (`clocked+reauth`: what charon does) at `lifetime_s`, on the sessions part's trace."""
    done = actual(trace)
    return round(100 * needed_clocked_reauth(trace, lifetime_s) / done, 1) if done else None


def report_part(trace: Sequence[Connection], baseline_exchanges: int | None, baseline_connects: int,
                runs: Sequence[VanishRun], cost: Cost | None) -> tuple[dict[str, Metric], dict[str, list[dict[str, object]]]]:
    """Metrics and the table of the live runs (beside the replay) and the IKE/ESP cost."""
    metrics: dict[str, Metric] = {}
    rows: list[dict[str, object]] = []
    if baseline_exchanges is not None:
        metrics["sessions_counted"] = Metric(
            baseline_exchanges, "exchanges",
            note=f"IKE_AUTH requests the clients counted in the sessions part ({baseline_connects} connections, "
                 "strategy none, orderly leaves): the replay's `actual`, counted by the clients")
    for run in runs:
        cycle = run.on_mean_s + run.off_mean_s
        k = run.lifetime_s / cycle
        live = round(100 * run.exchanges / run.presences, 1) if run.presences else None
        pred = predicted_pct(trace, run.lifetime_s)
        key = f"ike_cache_live_clocked_{k:g}cycles_pct"
        metrics[key] = Metric(live, "% of presences", higher_is_better=False,
                              note=f"live: {run.exchanges} full exchanges the clients counted for {run.presences} "
                                   f"presences ({run.returns} returns, {run.resumed} resumed without IKE); the "
                                   f"replay predicted {pred} % (clocked+reauth, L = {run.lifetime_s:g} s)"
                                   + ("; the negative control: must save less" if k < 1 else ""))
        rows.append({"strategy": run.strategy, "lifetime": f"{run.lifetime_s:g} s ({k:g} cycles)",
                     "presences": run.presences, "exchanges_live": run.exchanges, "needed_live_pct": live,
                     "needed_replay_pct": pred, "saved_live_pct": None if live is None else round(100 - live, 1),
                     "saved_replay_pct": None if pred is None else round(100 - pred, 1),
                     "returns": run.returns, "resumed": run.resumed,
                     "link_loss": f"{run.resumed_by_how['link']}/{run.by_how['link']} resumed",
                     "suspend": f"{run.resumed_by_how['sleep']}/{run.by_how['sleep']} resumed",
                     "failures": len(run.failures)})
    if cost is not None:
        metrics["ike_cpu_ms_per_exchange"] = Metric(
            None if cost.ike_ms_per_handshake is None else round(cost.ike_ms_per_handshake, 2), "ms",
            higher_is_better=False, note=f"the gateways' charons per full exchange ({cost.handshakes} counted by the "
                                         f"clients, certificates), less idle ({cost.idle_cpu_per_s:.3f} CPU-s/s)")
        metrics["esp_cpu_us_per_packet"] = Metric(
            None if cost.esp_us_per_packet is None else round(cost.esp_us_per_packet, 2), "µs",
            higher_is_better=False, note=f"the gateways' charons (kernel-libipsec) per ESP packet ({cost.esp_packets} "
                                         f"in + out, {cost.esp_bytes / max(1, cost.esp_packets):.0f} B each on "
                                         f"average, {cost.esp_mbit_s:.0f} Mb/s), less idle")
        metrics["ike_esp_cost_ratio"] = Metric(
            None if cost.ratio is None else round(cost.ratio), "x",
            note="CPU per full IKE exchange / CPU per ESP packet on our gateways (the paper: three orders of "
                 "magnitude)")
    title = "IKE caching live: clients that vanish (link loss, suspend), beside the replay"
    return metrics, ({title: rows} if rows else {})


__all__ = ["METHOD", "Cost", "VanishRun", "caching_section", "ike_esp_cost", "predicted_pct", "report_part",
           "run_live", "set_caching", "vanish_workload"]
