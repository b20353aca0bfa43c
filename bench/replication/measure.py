"""The phases of one size: every SA made on gateway 0 (initial copy to its backup g1), every
CHILD SA rekeyed, every IKE SA rekeyed, a new backup (g2) given a full copy, then gateway 0
killed and taken over by g2. Each phase returns what it cost, read from the agents' own
counters, the scheduler, the kernel's UDP and TCP counters and the charons' SA lists."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bench.replication.agent import AgentMeter
from bench.replication.fleet import ConnState, FleetClient
from bench.replication.lab import HALF_OPEN_PER_CLIENT, HALF_OPEN_TOTAL, Rig
from bench.replication.probes import (Wire, print_difference, sa_print, tcp_connections, tree_seconds, udp_drops,
                                      wire_between)
from supergw_gateway.ra.config import cluster_spi_plan
from supergw_proto.replication import ReplicationState

POLL_S = 0.02  # state polls while a time is measured: the resolution of the copy and takeover times
QUIET_S = 0.5  # a relay is settled when nothing more was sent for this long and all is acknowledged
COPY_CHECK_S = 30.0  # a backup's charon may list its copies a little after the agent acknowledged them
PING_WITHIN_S = 10.0
DROP_WITHIN_S = 30.0  # an old backup drops the copies it no longer protects within this
CONTROL = "control: CHILD rekey, replication off"


class PhaseError(RuntimeError):
    """A phase could not do what it measures (say what, and where to look)."""


@dataclass(frozen=True)
class Snap:
    t: float
    states: dict[int, ReplicationState]
    meters: dict[int, AgentMeter]
    charon_s: dict[int, float]
    drops: dict[int, int]
    wire: dict[tuple[int, int, int], Wire]


def snap(rig: Rig) -> Snap:
    live = rig.live()
    return Snap(time.monotonic(), {k: rig.state(k) for k in live}, {k: rig.agents[k].meter() for k in live},
                {k: tree_seconds(rig.gws[k].charon_pid()) for k in live}, {k: udp_drops(rig.gws[k]) for k in live},
                tcp_connections())


@dataclass
class PhaseCost:
    """One phase at one size: what the sender's relay sent to the receiver and what it cost."""

    phase: str
    sas: int
    sender: str
    receiver: str
    seconds: float  # the phase's driver start -> the relay settled
    messages: int  # sync messages the sender relayed
    payload_bytes: int  # their bytes (charon's sync messages as they are)
    wire_bytes: int  # TCP payload from the sender's agent to the receiver's (frames, TLS, handshake)
    wire_back_bytes: int  # TCP payload back (acknowledgements)
    sender_relay_s: float  # CPU of the sender agent's loop thread (the relay)
    sender_agent_s: float  # CPU of the whole sender agent (relay, sweeps)
    receiver_relay_s: float
    receiver_agent_s: float
    sender_charon_s: float  # CPU of the sender's charon (its IKE work too: not separable)
    receiver_charon_s: float  # CPU of the receiver's charon (holds copies: the ha plugin's receive side)
    lags_ms: list[float]  # the sender's per-message lags in the phase
    lags_full: bool
    udp_drops: int  # over every live gateway
    copy_problem: str | None = None  # the receiver's charon does not hold the sender's SAs exactly
    times: dict[str, float] = field(default_factory=dict)  # phase-specific instants, seconds from its start
    counts: dict[str, int] = field(default_factory=dict)
    list_sas: list[tuple[float, int]] = field(default_factory=list)  # the sender's sweeps' list-sas (s, IKE SAs)


def cost(phase: str, rig: Rig, before: Snap, after: Snap, sender: int, receiver: int, t0: float) -> PhaseCost:
    sb, sa = before.states[sender], after.states[sender]
    wire = wire_between(before.wire, after.wire, rig.agents[sender].proc.pid,
                        int(rig.agents[receiver].endpoint.rpartition(":")[2]))
    m = after.meters[sender]
    return PhaseCost(
        phase=phase, sas=rig.sas, sender=rig.name(sender), receiver=rig.name(receiver), seconds=after.t - t0,
        messages=sa.messages_out - sb.messages_out, payload_bytes=sa.bytes_out - sb.bytes_out,
        wire_bytes=wire.sent, wire_back_bytes=wire.received,
        sender_relay_s=m.loop_s - before.meters[sender].loop_s,
        sender_agent_s=m.process_s - before.meters[sender].process_s,
        receiver_relay_s=after.meters[receiver].loop_s - before.meters[receiver].loop_s,
        receiver_agent_s=after.meters[receiver].process_s - before.meters[receiver].process_s,
        sender_charon_s=after.charon_s[sender] - before.charon_s[sender],
        receiver_charon_s=after.charon_s[receiver] - before.charon_s[receiver],
        lags_ms=list(m.lags_ms), lags_full=m.lags_full,
        udp_drops=sum(after.drops[k] - before.drops.get(k, 0) for k in after.drops),
        list_sas=list(m.list_sas),
    )


# ------------------------------------------------------------------------------------ waiting
def wait_for(what: str, pred: Callable[[], bool], timeout_s: float, poll_s: float = POLL_S) -> float:
    """Seconds (monotonic) when `pred` first held; PhaseError after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while True:
        if pred():
            return time.monotonic()
        if time.monotonic() > end:
            raise PhaseError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(poll_s)


def settle(rig: Rig, sender: int, receiver: int, own: int, timeout_s: float) -> float:
    """Wait until the sender has `own` SAs, all acknowledged, the receiver holds them, and nothing
    was sent for QUIET_S; returns when the last message was acknowledged (monotonic)."""
    end = time.monotonic() + timeout_s
    last_sent, settled_at = -1, time.monotonic()
    while time.monotonic() < end:
        s, r = rig.state(sender), rig.state(receiver)
        done = s.own_sas == own and s.replicated_sas == own and s.backup_connected and r.held_sas == own
        if not done or s.messages_out != last_sent:
            last_sent, settled_at = s.messages_out, time.monotonic()
        elif time.monotonic() - settled_at >= QUIET_S:
            return settled_at
        time.sleep(0.05)
    s, r = rig.state(sender), rig.state(receiver)
    raise PhaseError(f"{rig.name(sender)} -> {rig.name(receiver)} did not settle within {timeout_s:.0f}s: "
                     f"{rig.name(sender)} own {s.own_sas} replicated {s.replicated_sas} (want {own}), "
                     f"{rig.name(receiver)} holds {r.held_sas}; agent logs in {rig.agents[sender].log_path.parent}")


def check_copy(rig: Rig, primary: int, backup: int, within_s: float = COPY_CHECK_S) -> str | None:
    """None once the backup's charon holds, PASSIVE, exactly the primary's SAs with their CHILD
    SAs; else what differs after `within_s` (0: one look)."""
    own = sa_print(rig.gws[primary], "ESTABLISHED")
    end = time.monotonic() + within_s
    while True:
        problem = print_difference(own, sa_print(rig.gws[backup], "PASSIVE"))
        if problem is None or time.monotonic() >= end:
            return problem
        time.sleep(0.5)


class Progress:
    """A count that prints itself every tenth of the way (long operations show progress)."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.done = what, total, 0
        self._lock = threading.Lock()
        self._step = max(1, total // 10)

    def tick(self) -> None:
        with self._lock:
            self.done += 1
            if self.done % self._step == 0 or self.done == self.total:
                print(f"      {self.what}: {self.done}/{self.total}", flush=True)


def timeout_for(sas: int, per_sa_s: float, floor_s: float = 60.0) -> float:
    return max(floor_s, sas * per_sa_s)


# ------------------------------------------------------------------------------------ client views
def all_states(clients: list[FleetClient]) -> list[dict[str, list[ConnState]]]:
    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(lambda c: c.states(), clients))


def unsettled(clients: list[FleetClient], states: list[dict[str, list[ConnState]]],
              renewed: Callable[[str, ConnState], bool]) -> list[str]:
    """Connections that do not have exactly one ESTABLISHED IKE SA with one INSTALLED CHILD SA,
    both as `renewed` wants."""
    bad: list[str] = []
    for c, st in zip(clients, states):
        for conn in c.conns:
            sas = st.get(conn, [])
            if not (len(sas) == 1 and sas[0].state == "ESTABLISHED" and len(sas[0].children) == 1
                    and len(sas[0].installed()) == 1 and renewed(conn, sas[0])):
                bad.append(f"{c.cfg.name}/{conn}: {[(s.state, s.children) for s in sas]}")
    return bad


def wait_clients(clients: list[FleetClient], renewed: Callable[[str, ConnState], bool], what: str,
                 timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    bad: list[str] = []
    while time.monotonic() < end:
        bad = unsettled(clients, all_states(clients), renewed)
        if not bad:
            return
        time.sleep(0.5)
    raise PhaseError(f"{what}: {len(bad)} connections not done within {timeout_s:.0f}s, e.g. {bad[:3]}")


# ------------------------------------------------------------------------------------ phases
def establish(rig: Rig) -> PhaseCost:
    """Every client connection initiated (the gateway's half-open limits kept): the initial copy."""
    n = rig.sas
    before = snap(rig)
    t0 = time.monotonic()
    window = max(1, min(HALF_OPEN_PER_CLIENT, HALF_OPEN_TOTAL // len(rig.clients)))
    prog = Progress("connected", n)
    with ThreadPoolExecutor(len(rig.clients)) as pool:
        failed = [f for fs in pool.map(lambda c: c.initiate(window, 60, prog.tick), rig.clients) for f in fs]
    if failed:
        raise PhaseError(f"{len(failed)} of {n} connections failed, e.g. {failed[:3]}")
    connected = time.monotonic()
    wait_clients(rig.clients, lambda _c, _s: True, "connections up", 30)
    settled = settle(rig, 0, 1, n, timeout_for(n, 0.1))
    after = snap(rig)
    c = cost("initial copy", rig, before, after, 0, 1, t0)
    c.times = {"all_connected_s": connected - t0, "settled_s": settled - t0}
    c.copy_problem = check_copy(rig, 0, 1)
    return c


def rekey(rig: Rig, kind: str, rate_per_s: float, replicating: bool = True) -> PhaseCost:
    """Every client asks its gateway to rekey each CHILD SA (`child`) or IKE SA (`ike`), paced.
    `replicating=False` (the negative control): g0 has no backup, so nothing is relayed and g1's
    copies go stale; the phase ends QUIET_S after the clients hold their new SAs."""
    n = rig.sas
    states = all_states(rig.clients)
    old: dict[tuple[int, str], tuple[str, ...]] = {}
    ids: list[list[tuple[str, int]]] = []
    for i, st in enumerate(states):
        mine: list[tuple[str, int]] = []
        for conn, sas in st.items():
            sa = sas[0]
            if kind == "child":
                mine += [("child", uid) for uid, _s, _spi in sa.installed()]
                old[(i, conn)] = tuple(spi for _u, _s, spi in sa.installed())
            else:
                mine.append(("ike", sa.ike_id))
                old[(i, conn)] = sa.spis
        ids.append(mine)
    before = snap(rig)
    t0 = time.monotonic()
    per_client = rate_per_s / len(rig.clients)
    with ThreadPoolExecutor(len(rig.clients)) as pool:
        list(pool.map(lambda ci: ci[0].rekey(ci[1], per_client), zip(rig.clients, ids)))
    asked = time.monotonic()
    index = {c.cfg.name: i for i, c in enumerate(rig.clients)}

    def renewed_for(client: FleetClient) -> Callable[[str, ConnState], bool]:
        i = index[client.cfg.name]
        if kind == "child":
            return lambda conn, sa: sa.installed()[0][2] not in old[(i, conn)]
        return lambda conn, sa: sa.spis != old[(i, conn)]

    for client in rig.clients:
        wait_clients([client], renewed_for(client), f"{kind} rekeys on {client.cfg.name}", timeout_for(n, 0.1))
    renewed = time.monotonic()
    if not replicating:
        time.sleep(QUIET_S)  # whatever charon's ha plugin still sends has reached the agent
        after = snap(rig)
        c = cost(CONTROL, rig, before, after, 0, 1, t0)
        c.times = {"asked_s": asked - t0, "renewed_s": renewed - t0}
        c.copy_problem = check_copy(rig, 0, 1, within_s=0)  # must differ: every copy is stale
        return c
    settled = settle(rig, 0, 1, n, timeout_for(n, 0.1))
    after = snap(rig)
    c = cost(f"{'CHILD' if kind == 'child' else 'IKE'} rekey", rig, before, after, 0, 1, t0)
    c.times = {"asked_s": asked - t0, "renewed_s": renewed - t0, "settled_s": settled - t0}
    c.copy_problem = check_copy(rig, 0, 1)
    return c


def replication_off(rig: Rig, rate_per_s: float) -> PhaseCost:
    """The negative control: g0 is ordered to have no backup (g1 keeps protecting it and keeps
    its copies), then every CHILD SA is rekeyed. Nothing may be relayed (0 messages, 0 bytes)
    and the copy check must find every one of g1's copies stale; the next phase's ring change
    gives g0 a backup again."""
    rig.generation += 1
    orders = {0: rig.orders(0, None, 2), 1: rig.orders(1, 2, 0), 2: rig.orders(2, 0, 1)}
    for k in (1, 2, 0):
        rig.agents[k].apply(orders[k])
    wait_for("g0 without a backup", lambda: not rig.state(0).backup_connected, 10)
    return rekey(rig, "child", rate_per_s, replicating=False)


def new_backup(rig: Rig) -> PhaseCost:
    """The ring changes so that g2, which held nothing of g0, becomes its backup: g0's agent
    replays its lineage log to g2 (and g1 drops its copies)."""
    n = rig.sas
    before = snap(rig)
    t0 = time.monotonic()
    rig.ring([0, 2, 1], first=[2, 1])  # g2 accepts g0 before g0 turns to it
    acked = wait_for("g2 holds g0's SAs, all acknowledged",
                     lambda: rig.state(2).held_sas == n and rig.state(0).replicated_sas == n
                     and rig.state(0).backup == rig.name(2), timeout_for(n, 0.05))
    settled = settle(rig, 0, 2, n, timeout_for(n, 0.05))
    after = snap(rig)
    c = cost("full copy to a new backup", rig, before, after, 0, 2, t0)
    c.times = {"acked_s": acked - t0, "settled_s": settled - t0}
    c.copy_problem = check_copy(rig, 0, 2)
    try:
        left = wait_for("g1 dropped its copies of g0",
                        lambda: rig.state(1).held_sas == 0 and not sa_print(rig.gws[1], "PASSIVE"), DROP_WITHIN_S, 0.2)
        c.times["old_backup_dropped_s"] = left - t0
        c.counts["old_backup_left"] = 0
    except PhaseError:  # a finding, not the end of the size: the report lists it
        c.counts["old_backup_left"] = len(sa_print(rig.gws[1], "PASSIVE"))
    c.udp_drops += sum(udp_drops(rig.gws[k]) - after.drops[k] for k in after.drops)  # the drop's too
    return c


@dataclass
class TakeoverResult:
    cost: PhaseCost
    pinged: int = 0
    answered: int = 0
    new_ike_auths: int = 0
    replay_drops: int = 0
    not_rekeyed: int = 0  # client IKE SAs whose gateway SPI does not carry the taker's label at the end
    failures: list[str] = field(default_factory=list)


def takeover(rig: Rig, victim: int = 0, taker: int = 2, other: int = 1) -> TakeoverResult:
    """Gateway `victim` dies (charon SIGKILL, agent killed); as the controller would, its
    clients and pool are steered to `taker`, which is ordered to take it over. Until every
    taken-over CHILD SA is renewed, and until every IKE SA is rekeyed onto the taker's SPIs."""
    n = rig.sas
    states = all_states(rig.clients)
    auths = [c.ike_auths() for c in rig.clients]
    vips = [(c, [sa.vip for conn in (c.conns[0], c.conns[-1]) for sa in st.get(conn, [])[:1] if sa.vip])
            for c, st in zip(rig.clients, states)]
    vname = rig.name(victim)
    rig.kill(victim)
    rig.steer_clients(taker)
    before = snap(rig)
    t0 = time.monotonic()
    rig.ring([taker, other], taken={taker: (victim,)}, first=[taker])
    limit = timeout_for(n, 0.2)
    activated = wait_for("takeover ordered", lambda: vname in rig.state(taker).taken_over, 10)
    children = wait_for("every taken-over CHILD SA renewed",
                        lambda: not rig.state(taker).unrenewed_children.get(vname), limit)
    rig.route_pool(victim, taker)  # the LAN's way to the victim's clients, once ESP from the taker is fresh
    ike = wait_for("every taken-over IKE SA rekeyed", lambda: not rig.state(taker).foreign_sas.get(vname), limit)
    st = rig.state(taker)
    if st.taken_over.get(vname) != n:
        raise PhaseError(f"{rig.name(taker)} took over {st.taken_over.get(vname)} IKE SAs of {vname}, not {n}")
    settled = settle(rig, taker, other, n, limit)
    after = snap(rig)
    c = cost("takeover", rig, before, after, taker, other, t0)
    c.times = {"activated_s": activated - t0, "children_renewed_s": children - t0, "ike_rekeyed_s": ike - t0,
               "backup_settled_s": settled - t0}
    c.counts = {"sweep_rekeys": after.meters[taker].rekeys}
    c.copy_problem = check_copy(rig, taker, other)
    res = TakeoverResult(c)
    for client, addrs in vips:
        for vip in addrs:
            res.pinged += 1
            ok = False
            end = time.monotonic() + PING_WITHIN_S
            while not ok and time.monotonic() < end:
                ok = client.answers(vip, rig.lab.host_ip(0))
            res.answered += ok
            if not ok:
                res.failures.append(f"{client.cfg.name} from {vip}: no answer through its tunnel "
                                    f"{PING_WITHIN_S:.0f}s after the takeover")
    res.new_ike_auths = sum(c.ike_auths() for c in rig.clients) - sum(auths)
    res.replay_drops = sum(c.replay_drops() for c in rig.clients)
    label = cluster_spi_plan(taker).ike_label >> 56
    res.not_rekeyed = sum(1 for st2 in all_states(rig.clients) for sas in st2.values() for sa in sas
                          if int(sa.gateway_spi()[:2], 16) != label)
    return res

