"""bench/remote: remote-access clients on the super gateway (issue 18), measured on the real
remote-access emulation (`make run TOPO=remote-access`: N gateways behind the outside switch,
stock strongSwan clients each in its own namespace, shipped defaults).

`python -m bench.remote [--gateways 1,2,3,4] [--clients 64] [--counts 1,2,4,8,16,32,64]
[--seconds 10] [--rounds 3] [--failover-trials 3] [--moves 200] [--quick]` (root, under the
netns lock; boots one emulation per N and stops it again; refuses to touch one that runs):

- transfers (Shue et al. Fig. 1 analogue): c of the clients download at once from the gateway
  that holds them, through their tunnels (IPsec) and in the clear to IP_P (plain): aggregate
  and per-client throughput, the gateways' CPU per client, for each N and c;
- IKE capacity: every client disconnects, then all initiate at once: time until the last is
  up, handshakes/s, where they landed; the ratio of handshakes/s at the largest N to N = 1;
- client failover (at one N >= 2, 4 by default): the gateway serving the most clients is
  SIGKILLed, then (next trial) SIGSTOPped (charon and agent); its backup takes its clients'
  SAs over. Per client the gap from its last answered probe before the fault to the first
  after it, the IKE_AUTH exchanges it started meanwhile (its own counters), ESP any client
  refused (its libipsec log); a frozen victim then thaws behind its fence: the frames the
  switches dropped from it and any ESP a client refused. Clients run strongSwan's defaults
  (no DPD). The negative control: one kill with state replication off;
- client redirect on drain (same N): the operator drains the gateway holding the most clients;
  per client the time from the drain call to its first answer through its new SA on another
  gateway (RFC 5685 redirect), and the longest time without an answer meanwhile;
- disruptions under bucket moves: every client probes while the operator moves buckets;
  a client whose IKE SA changed, who authenticated again or lost a probe is disrupted (goal 0);
- the IKE-cost paper live (same N, ikecost.py): the sessions schedule again on gateways with a
  clocked cache, clients vanishing (link loss, suspend) instead of deleting their SA, the full
  exchanges their own counters show beside the replay's prediction; the gateways' CPU per IKE
  exchange and per ESP packet. `--only ikecost` runs this part (and the sessions it compares
  with) alone on one boot and merges it into an existing bench/results/remote.json.

Writes bench/results/remote.{json,md,png}. `--quick`: N = 1, 2, 4 clients, short runs
(a few minutes; proves the benchmark works, its numbers are not results).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.remote import ikecost
from bench.remote.ikecost import Cost, VanishRun
from bench.remote.measure import (MODES, DrainTrial, FailoverTrial, IkeRound, MoveSoak, RemoteBenchError, TransferRun,
                                  FAULTS, busiest, drain, failover, ike_round, rebalance_soak, states, transfer)
from bench.remote.sessions import PAPER, SessionRun, TraceError, session_workload
from bench.report import RESULTS_DIR, Metric, Series, read_report, write_report
from supergw_proto.strict import read_yaml_mapping
from supergw_gateway.ra.client import RemoteClient
from topologies import raclients
from topologies.emulation import Emulation, EmulationError, running_or_booted
from topologies.schema import REMOTE_ACCESS_TOPOLOGY
from topologies.site import Site

# Shue et al., Fig. 1 and §III-B: one Openswan/KLIPS server, AES-128/MD5, clients downloading a
# 56.47 MB file with wget: about 375 KB/s per client at 6 clients, projected 88 KB/s at 25.
PAPER_PER_CLIENT_MBIT = {6: 375 * 8 / 1000, 25: 88 * 8 / 1000}
# The gateways' charon CPU cap in the IKE capacity runs (% of a core each): without one, N
# gateways on 2 cores share the same cores and capacity cannot grow with N.
IKE_GATEWAY_CPU_PERCENT = 25.0
FAILOVER_RUN_S = 20.0  # 2 s before the fault; a client silent for the last 5 s has not recovered
# The sessions part's clients: connected ~20 s, gone ~40 s (exponential means): about five
# connections per client in 300 s.
SESSION_ON_OFF_S = (20.0, 40.0)
FAILOVER_TAIL_BUDGET_S = 5.0
DRAIN_TIMEOUT_S = 60.0
# The clocked lifetimes run live, in mean cycles: the measurement, and a negative control shorter
# than most absences (it must save less).
CACHE_CYCLES = (1.0, 0.25)
QUICK_CACHE_CYCLES = (1.0, 0.5)  # --quick's 10 s cycle: lifetimes 10 and 5 s
COST_CLIENTS = 8  # downloading at once for the ESP cost


@dataclass
class Plan:
    gateways: list[int]
    clients: int
    counts: list[int]
    seconds: float
    rounds: int
    failover_n: int
    failover_trials: int
    moves: int
    moves_s: float
    quick: bool
    sessions_s: float = 300.0
    seed: int = 1
    ikecost: bool = True


@dataclass
class Results:
    transfers: dict[int, list[TransferRun]] = field(default_factory=dict)
    ike: dict[int, list[IkeRound]] = field(default_factory=dict)
    failovers: list[FailoverTrial] = field(default_factory=list)
    control: FailoverTrial | None = None  # a kill with replication off: must come out worse
    drains: list[DrainTrial] = field(default_factory=list)
    soak: MoveSoak | None = None
    sessions: SessionRun | None = None
    vanish: list[VanishRun] = field(default_factory=list)
    cost: Cost | None = None
    client_start_s: dict[int, float] = field(default_factory=dict)
    failures: list[dict[str, object]] = field(default_factory=list)


def plan_from(args: argparse.Namespace) -> Plan:
    if args.quick:
        return Plan([1, 2], 4, [1, 4], 3.0, 1, 2, 1, 20, 15.0, True, 40.0, args.seed)
    ns = sorted({int(x) for x in args.gateways.split(",")})
    counts = sorted({int(x) for x in args.counts.split(",") if int(x) <= args.clients})
    return Plan(ns, args.clients, counts, args.seconds, args.rounds, max(2, args.failover_n), args.failover_trials,
                args.moves, args.moves_s, False, args.sessions_s, args.seed)


@contextmanager
def remote_site(n: int, clients: int, cpu_percent: float | None,
                replication: bool = True) -> Iterator[tuple[Site, list[RemoteClient]]]:
    """The remote-access emulation with n gateways and `clients` clients, booted here (the
    topology file's remote access, its state replication switched off for the control)."""
    ra = read_yaml_mapping(REMOTE_ACCESS_TOPOLOGY, "the remote-access topology")["remote_access"]
    want = Emulation.from_file(REMOTE_ACCESS_TOPOLOGY, changes={
        "gateways": n, "clients": clients, "gateway_cpu_percent": cpu_percent,
        "remote_access": {**ra, "replication": replication}})

    def usable(emu: Emulation) -> str | None:
        return "bench/remote boots its own emulation per N"

    with running_or_booted(want, usable) as emu:
        site = emu.site()
        yield site, raclients.clients(site.topo, site.paths)


def run_n(n: int, plan: Plan, res: Results) -> None:
    print(f"== N = {n}: {plan.clients} clients", flush=True)
    with remote_site(n, plan.clients, None) as (site, fleet):
        runs = []
        for c in plan.counts:
            for mode in MODES:
                run = transfer(site, fleet[:c], mode, plan.seconds)
                print(f"   transfer {mode:5} {c:3} clients: {run.mbit_s:8.1f} Mb/s, gateways {run.gateway_cpu_cores:.2f} "
                      f"cores, machine {run.machine_cpu_cores:.2f} cores, {run.failed} failed", flush=True)
                if run.failed:
                    res.failures.append({"trial": f"transfer N={n} {mode} c={c}", "why": f"{run.failed} transfers failed"})
                runs.append(run)
        res.transfers[n] = runs
        if n == plan.failover_n:
            if plan.sessions_s > 0:
                sessions_part(site, fleet, plan, res)
                if plan.ikecost:
                    ikecost_part(site, fleet, plan, res)
            failovers_and_moves(site, fleet, plan, res)
    if n == plan.failover_n:
        no_takeover_control(n, plan, res)
    print(f"== N = {n}: IKE capacity, gateways capped at {IKE_GATEWAY_CPU_PERCENT:.0f} % of a core", flush=True)
    with remote_site(n, plan.clients, IKE_GATEWAY_CPU_PERCENT) as (site, fleet):
        rounds = []
        for r in range(plan.rounds):
            rnd = ike_round(site, fleet)
            print(f"   IKE round {r + 1}: {rnd.connected}/{rnd.clients} up in {rnd.all_up_s:.2f} s "
                  f"({rnd.handshakes_per_s:.1f}/s), per gateway {rnd.per_gateway}", flush=True)
            if rnd.connected < rnd.clients:
                res.failures.append({"trial": f"IKE N={n} round {r + 1}", "why": f"{rnd.clients - rnd.connected} clients not up"})
            rounds.append(rnd)
        res.ike[n] = rounds


def no_takeover_control(n: int, plan: Plan, res: Results) -> None:
    """The negative control: one kill with state replication off. The clients, at strongSwan's
    defaults (no DPD), must come out worse: they do not recover within the probe (they would
    when a rekey fails, an hour later)."""
    print(f"== N = {n}: control, state replication off", flush=True)
    with remote_site(n, plan.clients, None, replication=False) as (site, fleet):
        trial = failover(site, fleet, busiest(site, fleet), "kill", FAILOVER_TAIL_BUDGET_S, FAILOVER_RUN_S)
    print(f"   control kill: {trial.victim} served {trial.clients} clients; {trial.recovered} recovered, "
          f"{trial.new_ike_auths} new IKE_AUTH", flush=True)
    res.control = trial


def sessions_part(site: Site, fleet: list[RemoteClient], plan: Plan, res: Results) -> None:
    on_s, off_s = on_off(plan)
    print(f"   sessions: {len(fleet)} clients come and go for {plan.sessions_s:.0f} s (connected ~{on_s:.0f} s, "
          f"gone ~{off_s:.0f} s, seed {plan.seed})", flush=True)
    try:
        run = session_workload(site, fleet, site.topo.hosts[0].ip, plan.sessions_s, plan.seed, on_s, off_s)
    except TraceError as exc:
        raise RemoteBenchError(f"sessions: {exc}") from None
    print(f"   sessions: {run.connects} connections, {run.recorded} recorded, "
          f"{len(run.connect_failures)} failed to connect", flush=True)
    res.failures += [{"trial": "sessions", "why": why} for why in run.connect_failures]
    res.sessions = run
    back = raclients.connect(fleet, 60)
    if back.failures:
        raise RemoteBenchError(f"after the sessions: clients not back: {sorted(back.failures)}")


def on_off(plan: Plan) -> tuple[float, float]:
    return (5.0, 5.0) if plan.quick else SESSION_ON_OFF_S


def ikecost_part(site: Site, fleet: list[RemoteClient], plan: Plan, res: Results) -> None:
    """The sessions schedule on cached gateways with vanishing clients, then IKE vs ESP cost."""
    on_s, off_s = on_off(plan)
    runs, cost = ikecost.run_live(site, fleet, site.topo.hosts[0].ip, plan.sessions_s, plan.seed, on_s, off_s,
                                  QUICK_CACHE_CYCLES if plan.quick else CACHE_CYCLES, min(COST_CLIENTS, len(fleet)),
                                  plan.seconds,
                                  lambda m: print(m, flush=True))
    res.vanish, res.cost = runs, cost
    res.failures += [{"trial": f"caching live {r.lifetime_s:g} s", "why": why} for r in runs for why in r.failures]
    back = raclients.connect([c for c, st in zip(fleet, states(fleet).values()) if st is None], 60)
    if back.failures:
        raise RemoteBenchError(f"after the caching runs: clients not back: {sorted(back.failures)}")


def failovers_and_moves(site: Site, fleet: list[RemoteClient], plan: Plan, res: Results) -> None:
    failover_trials(site, fleet, plan, res)
    victim = busiest(site, fleet)
    drain_and_moves(site, fleet, victim, res, plan)


def failover_trials(site: Site, fleet: list[RemoteClient], plan: Plan, res: Results) -> None:
    for t in range(plan.failover_trials):
        for fault in FAULTS:
            victim = busiest(site, fleet)
            trial = failover(site, fleet, victim, fault, FAILOVER_TAIL_BUDGET_S, FAILOVER_RUN_S)
            gaps = [f.gap_ms / 1000 for f in trial.flows]
            print(f"   failover {t + 1} ({fault}): {victim} served {trial.clients} clients, taken over by "
                  f"{trial.taken_over_by}; gaps {min(gaps):.2f}..{max(gaps):.2f} s, {trial.recovered}/{trial.clients} "
                  f"recovered, {trial.new_ike_auths} new IKE_AUTH, {trial.esp_refused} ESP refused"
                  + (f"; thawed: {trial.fence_drops} frames fenced, {trial.thaw_esp_refused} ESP refused, "
                     f"{trial.thaw_silent} clients silent" if fault == "freeze" else ""), flush=True)
            res.failures += [{"trial": f"failover {t + 1} ({fault})", "flow": f.flow, "why": f.problem}
                             for f in trial.flows if not f.recovered]
            res.failovers.append(trial)
            # every client up again before the next trial
            res_c = raclients.connect([c for c, s in zip(fleet, states(fleet).values()) if s is None], 60)
            if res_c.failures:
                raise RemoteBenchError(f"after failover {t + 1} ({fault}): clients not back: {sorted(res_c.failures)}")


def drain_and_moves(site: Site, fleet: list[RemoteClient], victim: str, res: Results, plan: Plan) -> None:
    drained = drain(site, fleet, victim, DRAIN_TIMEOUT_S)
    back = sorted(f.back_s for f in drained.followed.values() if f.back_s is not None)
    print(f"   drain: {victim} held {len(drained.followed)} clients; redirected, back through another gateway after "
          f"{back[0] if back else float('nan'):.2f}..{back[-1] if back else float('nan'):.2f} s, {drained.back}/"
          f"{len(drained.followed)} back; longest gap {max(f.worst_gap_s for f in drained.followed.values()):.2f} s", flush=True)
    res.failures += [{"trial": "drain", "flow": n, "why": f"not back within {DRAIN_TIMEOUT_S:.0f} s"}
                     for n, f in drained.followed.items() if f.back_s is None]
    res.drains.append(drained)
    soak = rebalance_soak(site, fleet, plan.moves, plan.moves_s)
    print(f"   bucket moves: {soak.moves} moves, {len(soak.disrupted)} of {soak.clients} clients disrupted", flush=True)
    res.failures += [{"trial": "bucket moves", "flow": n, "why": "IKE SA changed, new IKE_AUTH or a probe lost"}
                     for n in soak.disrupted]
    res.soak = soak


def takeover_part(res: Results) -> tuple[dict[str, Metric | float], list[dict[str, Any]]]:
    """The failover trials' metrics and rows (kill, freeze, the thaw, the control)."""
    metrics: dict[str, Metric | float] = {}
    rows: list[dict[str, Any]] = []
    for fault in FAULTS:
        trials = [t for t in res.failovers if t.fault == fault]
        if not trials:
            continue
        key = "client_failover" if fault == "kill" else "client_failover_freeze"
        gaps = [f.gap_ms / 1000 for t in trials for f in t.flows]
        metrics[f"{key}_s"] = Metric(round(statistics.median(gaps), 2), "s", higher_is_better=False, goal=0.5,
                                     note=f"median over clients and trials: {fault} -> first answered probe")
        metrics[f"{key}_max_s"] = Metric(round(max(gaps), 2), "s", higher_is_better=False, goal=1.0)
        metrics[f"{key}_not_recovered"] = Metric(
            sum(t.clients - t.recovered for t in trials), "clients", higher_is_better=False,
            note=f"goal 0; of {sum(t.clients for t in trials)} over {len(trials)} trials")
        metrics[f"{key}_new_ike_auth"] = Metric(sum(t.new_ike_auths for t in trials), "exchanges",
                                                higher_is_better=False,
                                                note="goal 0; IKE_AUTH the victim's clients started (their counters)")
        metrics[f"{key}_esp_refused"] = Metric(sum(t.esp_refused for t in trials), "packets", higher_is_better=False,
                                               note="goal 0; ESP any client's libipsec refused (replay, ICV)")
        metrics[f"{key}_taken_over"] = Metric(sum(1 for t in trials if t.taken_over_by is not None), "trials",
                                              note=f"of {len(trials)}: a takeover event named the holder")
        rows += [{"failover_trial": i + 1, "fault": t.fault, "victim": t.victim, "taken_over_by": t.taken_over_by,
                  "flow": f.flow, "gap_s": round(f.gap_ms / 1000, 2), "lost": f.lost, "recovered": f.recovered}
                 for i, t in enumerate(trials) for f in t.flows]
        rows += [{"failover_trial": i + 1, "fault": t.fault, "victim": t.victim, "clients": t.clients,
                  "new_ike_auths": t.new_ike_auths, "esp_refused": t.esp_refused, "fence_drops": t.fence_drops,
                  "thaw_esp_refused": t.thaw_esp_refused, "thaw_silent": t.thaw_silent}
                 for i, t in enumerate(trials)]
    if res.control is not None and (kills := [t for t in res.failovers if t.fault == "kill"]):
        c = res.control
        metrics["control_no_takeover_recovered"] = Metric(
            c.recovered, "clients", note=f"of {c.clients}: a kill with state replication off (must be fewer than "
                                         f"with it: {sum(t.recovered for t in kills)} of {sum(t.clients for t in kills)})")
        rows += [{"control": "replication off", "fault": c.fault, "victim": c.victim, "flow": f.flow,
                  "gap_s": round(f.gap_ms / 1000, 2), "recovered": f.recovered} for f in c.flows]
        if c.recovered / c.clients >= min(t.recovered / t.clients for t in kills):
            res.failures.append({"trial": "control", "why": "clients recovered as well without the takeover: "
                                 "the probe cannot tell"})
    thawed = [t for t in res.failovers if t.fault == "freeze"]
    if thawed:
        metrics["thaw_fenced_frames"] = Metric(sum(t.fence_drops or 0 for t in thawed), "frames",
                                               note="what thawed victims still sent and the switches dropped "
                                                    "(UNKNOWN_PORT), thaw -> +3 s: the fence at work")
        metrics["thaw_esp_refused"] = Metric(sum(t.thaw_esp_refused or 0 for t in thawed), "packets",
                                             higher_is_better=False,
                                             note="goal 0; stale ESP that reached a client, thaw -> +3 s")
    return metrics, rows


TAKEOVER_KEYS = ("client_failover", "thaw_", "control_no_takeover")


TAKEOVER_NOTE = ("The failover metrics (`client_failover*`, `thaw_*`, `control_no_takeover_recovered`) come from a "
                 "`--only takeover` run of the stateful takeover (issue 27); the other parts from the run named above.")


def report(plan: Plan, res: Results, results_dir: Path | None = None) -> None:
    metrics: dict[str, Metric | float] = {}
    series: list[Series] = []
    rows: list[dict[str, Any]] = []
    for n, runs in sorted(res.transfers.items()):
        for mode in MODES:
            mine = [r for r in runs if r.mode == mode]
            series.append(Series(f"{mode} N={n}", [r.clients for r in mine], [r.per_client_mbit_s for r in mine],
                                 xlabel="clients transferring at once", ylabel="Mb/s per client"))
            top = max(mine, key=lambda r: r.clients)
            metrics[f"{mode}_mbit_s_n{n}_c{top.clients}"] = Metric(round(top.mbit_s, 1), "Mb/s",
                                                                   note=f"{top.clients} clients at once, aggregate")
            metrics[f"{mode}_gateway_cpu_per_client_n{n}_c{top.clients}"] = Metric(
                round(top.gateway_cpu_per_client, 4), "cores", higher_is_better=False,
                note="the gateways' charons and iperf3 servers, CPU-s per s, per client")
        rows += [{"N": n, **asdict(r), "gateway_cpu_per_client": round(r.gateway_cpu_per_client, 4)} for r in runs]
    series.append(Series("paper IPsec (1 server; 25: projected)", list(PAPER_PER_CLIENT_MBIT),
                         list(PAPER_PER_CLIENT_MBIT.values()), xlabel="clients transferring at once",
                         ylabel="Mb/s per client"))
    hs = {n: statistics.median(r.handshakes_per_s for r in rounds) for n, rounds in res.ike.items() if rounds}
    for n, rounds in sorted(res.ike.items()):
        metrics[f"ike_handshakes_per_s_n{n}"] = Metric(round(hs[n], 2), "1/s", note=f"median of {len(rounds)} rounds, "
                                                       f"{plan.clients} clients at once")
        metrics[f"ike_all_up_s_n{n}"] = Metric(round(statistics.median(r.all_up_s for r in rounds), 2), "s",
                                               higher_is_better=False)
        rows += [{"N": n, "ike_round": i + 1, **asdict(r)} for i, r in enumerate(rounds)]
    if len(hs) > 1:
        lo, hi = min(hs), max(hs)
        metrics[f"ike_capacity_ratio_n{hi}_n{lo}"] = Metric(round(hs[hi] / hs[lo], 2), "x", goal=hi / lo / 2,
                                                             note="handshakes/s at the largest N over the smallest; "
                                                                  "goal: half of linear")
    takeover_metrics, takeover_rows = takeover_part(res)
    metrics.update(takeover_metrics)
    rows += takeover_rows
    drained = [f for t in res.drains for f in t.followed.values()]
    if drained:
        back = [f.back_s for f in drained if f.back_s is not None]
        if back:
            metrics["client_drain_s"] = Metric(round(statistics.median(back), 2), "s", higher_is_better=False,
                                               note="median over redirected clients: drain REST call -> first answer "
                                                    "through the new SA")
            metrics["client_drain_max_s"] = Metric(round(max(back), 2), "s", higher_is_better=False)
        metrics["client_drain_worst_gap_s"] = Metric(round(max(f.worst_gap_s for f in drained), 2), "s",
                                                     higher_is_better=False,
                                                     note="longest time without an answer (old SA or new) during the "
                                                          "redirect; probes wait 0.3 s")
        metrics["client_drain_not_back"] = Metric(len(drained) - len(back), "clients", note=f"goal 0; of {len(drained)}")
        rows += [{"drain_trial": i + 1, "victim": t.victim, "flow": n, "back_s": f.back_s,
                  "worst_gap_s": round(f.worst_gap_s, 2), "probes": f.probes}
                 for i, t in enumerate(res.drains) for n, f in t.followed.items()]
    if res.soak is not None:
        metrics["move_disruptions"] = Metric(len(res.soak.disrupted), "clients",
                                             note=f"goal 0; over {res.soak.moves} bucket moves, {res.soak.clients} clients")
    ike_metrics, tables = ike_part(res)
    metrics.update(ike_metrics)
    write_report("remote", metrics, rows, series, title="Remote-access clients (issue 18; Shue et al. §III)",
                 method=METHOD + "\n\n" + ikecost.METHOD
                 + ("\n\n**Quick run**: proves the benchmark works; not a result." if plan.quick else ""),
                 failures=res.failures, results_dir=results_dir, tables=tables, log_y=True)


def ike_part(res: Results) -> tuple[dict[str, Metric | float], dict[str, list[dict[str, object]]]]:
    """The IKE-cost paper's metrics and tables: Fig. 6 replayed, the cache live, IKE vs ESP."""
    metrics: dict[str, Metric | float] = {}
    tables: dict[str, list[dict[str, object]]] = {}
    if res.sessions is not None and res.sessions.analysis is not None:
        metrics, tables = sessions_report(res.sessions)
    if res.vanish or res.cost is not None:
        s = res.sessions
        live, live_tables = ikecost.report_part([] if s is None else s.trace, None if s is None else s.counted,
                                                0 if s is None else s.connects, res.vanish, res.cost)
        metrics.update(live)
        tables.update(live_tables)
    return metrics, tables


IKE_TRIALS = ("sessions", "caching live", "IKE cost")


PartReport = tuple[dict[str, Metric | float], list[dict[str, Any]], dict[str, list[dict[str, object]]]]


@dataclass(frozen=True)
class ReportPart:
    """What of the remote report a `--only` run measures again: the metrics, tables and failures
    (by their trial) under these prefixes and the rows with one of these keys are its own and
    replaced; `measure` gives its new metrics, rows and tables, `method` the method text."""
    metric_prefixes: tuple[str, ...]
    trial_prefixes: tuple[str, ...]
    measure: Callable[[Results], PartReport]
    method: Callable[[str], str]
    row_keys: tuple[str, ...] = ()
    table_prefixes: tuple[str, ...] = ()


def merge_part(part: ReportPart, plan: Plan, res: Results, results_dir: Path = RESULTS_DIR) -> None:
    """The part of an existing remote report replaced by this run's, the rest kept as it was;
    without a saved report, the whole report of this run."""
    path = results_dir / "remote.json"
    if not path.exists():
        report(plan, res, results_dir)
        return
    saved = read_report(path)
    # measured before the failures are read: a part may add to them (the takeover's control)
    new_metrics, new_rows, new_tables = part.measure(res)
    keep = {k: m for k, m in saved.metrics.items() if not k.startswith(part.metric_prefixes)}
    rows = [r for r in saved.rows if not any(k in r for k in part.row_keys)] + new_rows
    tables = {t: table for t, table in saved.tables.items() if not t.startswith(part.table_prefixes)}
    failures = [f for f in saved.failures if not str(f.get("trial", "")).startswith(part.trial_prefixes)] \
        + res.failures
    write_report("remote", {**keep, **new_metrics}, rows, saved.series, title=saved.title,
                 method=part.method(saved.method), failures=failures, results_dir=results_dir,
                 tables={**tables, **new_tables}, rows_title=saved.rows_title, log_y=True)


def takeover_method(saved: str) -> str:
    return saved + ("" if TAKEOVER_NOTE in saved else "\n\n" + TAKEOVER_NOTE)


def ike_method(saved: str) -> str:
    return saved.split(ikecost.METHOD.split("\n", 1)[0])[0].rstrip() + "\n\n" + ikecost.METHOD


def takeover_measure(res: Results) -> PartReport:
    metrics, rows = takeover_part(res)
    return metrics, rows, {}


def ike_measure(res: Results) -> PartReport:
    metrics, tables = ike_part(res)
    return metrics, [], tables


TAKEOVER_PART = ReportPart(TAKEOVER_KEYS, ("failover", "control"), takeover_measure, takeover_method,
                           row_keys=("failover_trial", "control"))
IKE_PART = ReportPart(("sessions_", "ike_cache_", "ike_cpu_", "esp_cpu_", "ike_esp_"), IKE_TRIALS,
                      ike_measure, ike_method,
                      table_prefixes=("Fig. 6 on this system", "The paper's figures", "IKE caching live"))


def merge_takeover_part(plan: Plan, res: Results, results_dir: Path = RESULTS_DIR) -> None:
    """`--only takeover`: the failover part of an existing remote report replaced by this run's,
    everything else kept as it was."""
    merge_part(TAKEOVER_PART, plan, res, results_dir)


def merge_ike_part(plan: Plan, res: Results, results_dir: Path = RESULTS_DIR) -> None:
    """`--only ikecost`: the IKE-cost part of an existing remote report replaced by this run's,
    everything else (transfers, IKE capacity, failover, drain, moves) kept as it was."""
    merge_part(IKE_PART, plan, res, results_dir)


def sessions_report(run: SessionRun) -> tuple[dict[str, Metric | float], dict[str, list[dict[str, object]]]]:
    """Fig. 6 on this system: needed / actual per strategy and lifetime, the paper's beside."""
    a = run.analysis
    assert a is not None
    cycle = run.on_mean_s + run.off_mean_s
    metrics: dict[str, Metric | float] = {
        "sessions_actual": Metric(a.actual, "exchanges", note=f"full exchanges the gateways recorded over "
                                  f"{run.seconds:.0f} s, {a.clients} clients, {a.connections} sessions"),
        "sessions_unrecorded": Metric(max(0, run.connects - len(run.connect_failures) - run.recorded), "sessions",
                                      note=f"goal 0: connections made ({run.connects}) that no session log holds"),
    }
    rows: list[dict[str, object]] = []
    for r in a.time_rows:
        for strategy in ("clocked", "clocked+reauth", "established"):
            rows.append({"strategy": strategy, "lifetime": f"{r.lifetime:g} s ({r.lifetime / cycle:g} cycles)",
                         "actual": a.actual, "needed": r.needed[strategy],
                         "needed_of_actual_pct": round(100 * r.needed[strategy] / max(1, a.actual), 1)})
    for r in a.data_rows:
        rows.append({"strategy": "data", "lifetime": f"{r.lifetime:g} B", "actual": a.actual,
                     "needed": r.needed["data"], "needed_of_actual_pct": round(100 * r.needed["data"] / max(1, a.actual), 1)})
    for strategy, k in (("clocked", 4.0), ("established", 1.0)):
        row = next(r for r in a.time_rows if abs(r.lifetime - round(k * cycle, 1)) < 1e-6)
        metrics[f"ike_cache_{strategy}_{k:g}cycles_pct"] = Metric(
            round(100 * row.needed[strategy] / max(1, a.actual), 1), "% of actual", higher_is_better=False,
            note=f"lifetime {row.lifetime:g} s; the paper (30-day campus logs): "
                 + ("clocked 8 h < 50 %" if strategy == "clocked" else "established 2 h < 20 %"))
    return metrics, {"Fig. 6 on this system: IKE exchanges needed under caching (supergw-ike-cache's analysis)": rows,
                     "The paper's figures (Shue et al. §IV-B)": list(PAPER)}


METHOD = """Real remote-access emulation (topologies/remote-access.yaml): N strongSwan gateways
behind the outside switch (our eBPF switch, roles UPLINK / GATEWAY_OUTSIDE), stock strongSwan
clients each in its own namespace with its own charon (kernel-libipsec) and certificate.
Transfers: `iperf3 -R` from the gateway holding the client (IPsec: through the tunnel to the
gateway's LAN address; plain: to IP_P in the clear, dispatched by the client's pin), all at
once for `seconds`; gateway CPU = CPU-s of the gateways' charons (IKE and userspace ESP) and
the iperf3 servers per second of the run; machine CPU = /proc/stat non-idle. IKE capacity:
every client disconnects, then all initiate at once; all_up_s = that instant -> the last
CHILD SA installed; gateways capped at 25 % of a core each (cgroup). Failover: SIGKILL of
the charon and agent of the gateway holding the most clients; per client a ping every 100 ms
to a LAN host, read by bench/gaps.py: gap = last answer before the kill -> first answer after
it (client DPD and retransmission as in the topology file). Drain: the operator drains the
gateway holding the most clients (REST); the controller removes its clients' pins and, once
the outside sends it no new client, its agent redirects them (RFC 5685) to IP_P; per client
client_drain_s = the drain call -> the first answered ping (0.3 s wait) while the client holds
only an SA on another gateway; worst gap = the longest time without any answer. Moves: every client probes while
the operator moves buckets (REST); disrupted = IKE SA SPIs changed, a new IKE_AUTH, or a
probe lost. The paper: one Openswan/KLIPS server, 1-6 clients downloading 56.47 MB with wget
(Fig. 1); its Figs. 2-5 characterise a 30-day log (no analogue on an emulation). Fig. 6 on
this system: at the failover N every client comes and goes on a seeded schedule (connected
~20 s, gone ~40 s, exponential; strategy `none`), the agents' session logs record every IKE
SA, and `supergw-ike-cache`'s replay gives the exchanges each strategy would have needed."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.remote", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gateways", default="1,2,3,4", help="N values (default %(default)s)")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--counts", default="1,2,4,8,16,32,64", help="clients transferring at once")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3, help="IKE capacity rounds per N")
    p.add_argument("--failover-n", type=int, default=4, help="the N at which failover and moves are measured")
    p.add_argument("--failover-trials", type=int, default=3)
    p.add_argument("--moves", type=int, default=200)
    p.add_argument("--moves-s", type=float, default=60.0)
    p.add_argument("--sessions-s", type=float, default=300.0,
                   help="seconds of clients coming and going for Fig. 6 (0: skip; default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="the sessions' schedule (default %(default)s)")
    p.add_argument("--only", choices=("ikecost", "takeover"), default=None,
                   help="ikecost: only the sessions and the IKE-cost part; takeover: only the failover trials and "
                        "their control (one boot each at --failover-n), merged into the existing "
                        "bench/results/remote.json")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.remote needs root (namespaces, the switch, charon)", file=sys.stderr)
        return 2
    plan = plan_from(args)
    res = Results()
    if args.only == "ikecost":
        return ikecost_only(plan, res)
    if args.only == "takeover":
        return takeover_only(plan, res)
    try:
        for n in plan.gateways:
            run_n(n, plan, res)
    except (EmulationError, RemoteBenchError) as exc:
        print(f"bench.remote: {exc}", file=sys.stderr)
        res.failures.append({"trial": "run", "why": str(exc)})
        report(plan, res)
        return 1
    report(plan, res)
    return 1 if res.failures else 0


def part_only(plan: Plan, res: Results, what: str, parts: Callable[[Site, list[RemoteClient]], None],
              merge: Callable[[Plan, Results], None], control: bool = False) -> int:
    """One part on one boot at `--failover-n` (and, for the takeover, its control on another),
    merged into the existing report; a part that failed is recorded there too."""
    n = plan.failover_n
    print(f"== N = {n}: {plan.clients} clients, {what} only", flush=True)
    try:
        with remote_site(n, plan.clients, None) as (site, fleet):
            parts(site, fleet)
        if control:
            no_takeover_control(n, plan, res)
    except (EmulationError, RemoteBenchError) as exc:
        print(f"bench.remote: {exc}", file=sys.stderr)
        res.failures.append({"trial": f"{what} run", "why": str(exc)})
        merge(plan, res)
        return 1
    merge(plan, res)
    return 1 if res.failures else 0


def ikecost_only(plan: Plan, res: Results) -> int:
    def parts(site: Site, fleet: list[RemoteClient]) -> None:
        sessions_part(site, fleet, plan, res)
        ikecost_part(site, fleet, plan, res)
    return part_only(plan, res, "IKE cost", parts, merge_ike_part)


def takeover_only(plan: Plan, res: Results) -> int:
    return part_only(plan, res, "failover", lambda site, fleet: failover_trials(site, fleet, plan, res),
                     merge_takeover_part, control=True)


if __name__ == "__main__":
    sys.exit(main())
