"""Replicated controllers on the real HA emulation (`make run HA=1`): leader kills and leader
partitions with real agents, real tunnels and shipped defaults.

`python -m bench.ha [--kills 5] [--partitions 20] [--switch ebpf|bmv2]` (root; run it under
`flock /tmp/supergw-netns.lock`). Boots the HA emulation (`make run HA=1`'s plan, through
the emulation engine) when none is up (and stops it again afterwards), or uses the HA
emulation that is up.

What runs (topologies/ha.py): 3 controller replicas, each in its own namespace on the
management network with its own etcd member (a 3-member cluster, etcd's default timing),
the shipped `ha:`/`store.etcd`/`timing` defaults of the generated configs, the eBPF switch,
3 strongSwan gateways whose real agents report to every replica, real LAN and remote hosts.

- **Kills** (each trial): a LAN host pings a remote host through its gateway and tunnel every
  10 ms (`ping -D -i 0.01`, 5 s); after 1 s the leading replica's controller gets SIGKILL and,
  at the same instant, another gateway holding buckets is frozen (SIGSTOP of its charon and
  agent), so the new leader has a failover to do. The remote host's return path avoids the
  frozen gateway. **takeover_s**: kill -> the new leader's log line "primary on the switch and
  reconciled" (its failover and rebalancing loops run again; wall clock, same host).
  **failover_s**: kill -> the new leader's first failover move off the frozen gateway (its
  event log), gateway death detection (3 x 100 ms) included. **takeover_loss**: probe packets
  lost across all kills (ping's own count); `gap_ms` in the rows is the longest gap between
  two replies. **takeover_rewrites**: buckets whose gateway on the switch changed across the
  takeover although they did not have to (not the frozen gateway's): the bucket map read
  through the old leader before the kill against the new leader's right after its failover.
  (The reconcile's own update count is an info-level log line; the shipped level is warning.)
  Then the frozen gateway is thawed, the killed replica is started again as `up` starts it
  (`rejoin_s`: until it follows the new leader as a backup), and the next trial waits for
  every gateway alive with its share of buckets.
- **Partitions** (each trial): an operator client asks every replica, every 20 ms each, to
  move one bucket back and forth between two gateways (each request a leader accepts is a
  switch write). After 0.5 s the leader's namespace drops every etcd packet (iptables, client
  and peer ports, both directions: its controller loses every member and its member the
  others) while P4Runtime, the REST API and the heartbeats still flow; 1 s after another
  replica leads and is primary, the writer stops and the cut is healed. Every replica records,
  per term it led, when the switch accepted its writes (sent before the first, answered
  after the last: `/healthz` `ha.writes`). **split_brain_writes**: pairs of terms whose
  windows overlap (the older term's last write answered after the newer term's first was
  sent; every pair of terms the replicas still show is compared after every trial, each
  pair counted once); a trial proves something only when both leaders wrote (`accepted_old`,
  `accepted_new` > 0 in the rows). **stepdown_s**: cut -> the old leader's "stepping down"
  log line. `rejoin_s`: heal -> every replica follows one leader again (the healed one as a
  backup). The next trial starts once one leader has kept its term for 3 s;
  **heal_leader_changes**: trials in which that leader is no longer the new leader of the
  same term (the heal itself cost a leader change).

Writes bench/results/ha.{json,md,png}.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.ha.analysis import median, ping_summary, plan_probe, rewritten
from bench.ha.emulation import HaEmulation
from bench.probes import BenchError, inject, max_gap_ms, ping_probe, restore
from bench.report import Metric, Series, write_report
from supergw_controller.ha.view import overlaps
from topologies import ha
from topologies.emulation import Emulation, EmulationError, running_or_booted


GOAL_TAKEOVER_S = 1.0
MOVED_BUCKET = 5


def say(msg: str) -> None:
    print(f"bench/ha: {msg}", flush=True)


@dataclass
class Kill:
    trial: int
    old: str
    new: str
    old_term: int
    new_term: int
    takeover_s: float | None
    failover_s: float | None
    rewritten: int  # buckets moved that did not have to
    host: str
    remote: str
    frozen: str
    sent: int
    lost: int
    gap_ms: float
    rejoin_s: float


@dataclass
class Partition:
    trial: int
    old: str
    new: str
    old_term: int
    new_term: int
    accepted_old: int  # switch writes of the old term (its whole window)
    accepted_new: int
    split_brain: int  # term pairs, not counted before, whose accepted switch writes could overlap
    stepdown_s: float | None
    rejoin_s: float
    leader_after_heal: str  # not `new` (or another term): the heal changed the leader again
    http_accepted_old: int  # bucket moves the old leader answered 200 during this trial
    http_accepted_new: int


def kill_trial(emu: HaEmulation, i: int) -> Kill:
    old = emu.settled_leader()
    emu.use(old)
    emu.wait_healthy()
    plan = plan_probe(emu.topo, emu.served(old), emu.buckets(old), i)
    if plan is None:
        raise BenchError(f"no probe plan: hosts served {emu.served(old)}, no second gateway with buckets to freeze")
    pids = emu.site.gateway_pids(plan.frozen)
    old_term = emu.term(old)
    probe = ping_probe(emu.topo.ns(plan.host), plan.remote_ip)
    killed = frozen = False
    try:
        time.sleep(1.0)
        before = emu.buckets(old)  # as late as possible: the leader may still rebalance
        killed_at = time.time()
        emu.kill(old)
        killed = True
        inject(emu.site, "freeze", plan.frozen, pids)
        frozen = True
        new = emu.new_leader(old)
        ready = emu.wait_log(new, "primary on the switch and reconciled", killed_at)
        moved = emu.failover_ts(new, plan.frozen, killed_at)
        after = emu.buckets(new)
        new_term = emu.term(new)
        out, _ = probe.communicate(timeout=30)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
        if frozen:
            restore(emu.site, "freeze", plan.frozen, pids)
        if killed:
            emu.restart(old)
    try:
        sent, got = ping_summary(out)
    except ValueError as exc:
        raise BenchError(f"the probe {plan.host} -> {plan.remote}: {exc}") from None
    gap, _ = max_gap_ms(out)
    k = Kill(i, old, new, old_term, new_term,
             None if ready is None else round(ready - killed_at, 3),
             None if moved is None else round(moved - killed_at, 3),
             rewritten(before, after, plan.frozen), plan.host, plan.remote, plan.frozen, sent, sent - got,
             round(gap, 1), round(emu.wait_backup(old, new), 2))  # fmt: skip
    say(f"kill {i}: {k}")
    emu.use(new)
    share = emu.share(plan.frozen)
    deadline = time.monotonic() + 60
    while emu.gateways()[plan.frozen].buckets < share:
        if time.monotonic() > deadline:
            raise BenchError(f"{plan.frozen} did not get its {share} buckets back within 60 s of the thaw")
        time.sleep(0.2)
    return k


def partition_trial(emu: HaEmulation, i: int, seen: set[tuple[int, int]]) -> Partition:
    """`seen`: overlapping term pairs earlier trials counted (each pair counts once, whichever
    trial's windows show it: a replica keeps its last 8 terms)."""
    old = emu.stable_leader()
    old_term = emu.term(old)
    try:
        with emu.move_writer(MOVED_BUCKET) as w:
            time.sleep(0.5)
            cut_at = time.time()
            emu.cut(old)
            new = emu.new_leader(old)
            new_term = emu.term(new)
            time.sleep(1.0)
    finally:
        emu.heal(old)
    healed = time.monotonic()
    emu.settled_leader()  # the healed replica follows whoever leads now
    rejoin = time.monotonic() - healed
    settled = emu.stable_leader()
    stepped = emu.log_time(old, "stepping down", cut_at)
    windows = emu.windows()
    pairs = set(overlaps(windows)) - seen
    seen |= pairs
    p = Partition(
        i, old, new, old_term, new_term,
        int(windows[old_term][1]["writes"]) if old_term in windows else 0,
        int(windows[new_term][1]["writes"]) if new_term in windows else 0,
        len(pairs),
        None if stepped is None else round(stepped - cut_at, 3),
        round(rejoin, 2),
        f"{settled} (term {emu.term(settled)})",
        len(w.accepted(old)), len(w.accepted(new)),
    )  # fmt: skip
    say(f"partition {i}: {p}")
    return p


def usable(emu: Emulation) -> str | None:
    """bench/ha measures `make run HA=1`: one site with replicated controllers, every stage up."""
    if emu.spec.several or not emu.spec.single.replicated:
        return "bench/ha runs on `make run HA=1` (one site, replicated controllers)"
    return None if emu.state.phase == "up" else f"it is {emu.state.phase}: {emu.state.failed_stages()}"


def etcd_version() -> str:
    out = subprocess.run(["etcd", "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0].split(":", 1)[-1].strip() if out else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ha", description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--kills", type=int, default=5, help="leader SIGKILLs (default 5)")
    ap.add_argument("--partitions", type=int, default=20, help="leader partitions from etcd (default 20)")
    ap.add_argument("--switch", choices=["ebpf", "bmv2"], default="ebpf", help="when booting the emulation")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        say("cannot run: needs root (namespaces, signals, iptables in the replicas' namespaces)")
        return 2
    if shutil.which("etcd") is None:
        say("cannot run: etcd is not installed (Debian etcd-server; `make deps` installs it)")
        return 2
    kills: list[Kill] = []
    parts: list[Partition] = []
    try:
        with running_or_booted(Emulation.from_file(switch=args.switch, replicas=ha.HA_REPLICAS), usable) as running:
            emu = HaEmulation(running)
            for i in range(args.kills):
                kills.append(kill_trial(emu, i))
            seen: set[tuple[int, int]] = set()
            for i in range(args.partitions):
                parts.append(partition_trial(emu, i, seen))
    except (BenchError, EmulationError) as exc:
        say(f"FAILED after {len(kills)} kills and {len(parts)} partitions: {exc}")
        return 1
    report(kills, parts, running)
    takeover = median([k.takeover_s for k in kills])
    lost = sum(k.lost for k in kills)
    split = sum(p.split_brain for p in parts)
    say(f"takeover_s={takeover} takeover_loss={lost} split_brain_writes={split} (results in bench/results/ha.*)")
    return 0 if takeover is not None and takeover <= GOAL_TAKEOVER_S and lost == 0 and split == 0 else 1


def report(kills: list[Kill], parts: list[Partition], emu: Emulation) -> None:
    topo = emu.spec.single
    sent = sum(k.sent for k in kills)
    proving = sum(1 for p in parts if p.accepted_old and p.accepted_new)
    metrics = {
        "takeover_s": Metric(median([k.takeover_s for k in kills]), "s", goal=GOAL_TAKEOVER_S, higher_is_better=False,
                             note=f"median of {len(kills)} leader SIGKILLs"),
        "takeover_loss": Metric(float(sum(k.lost for k in kills)), "packets",
                                note=f"goal 0; of {sent} probe packets (10 ms) across all kills"),
        "split_brain_writes": Metric(float(sum(p.split_brain for p in parts)), "writes",
                                     note=f"goal 0; over {len(parts)} leader partitions from etcd "
                                          f"({proving} with writes of both leaders)"),
        "takeover_rewrites": Metric(float(sum(k.rewritten for k in kills)), "buckets",
                                    note="buckets the takeovers moved that did not have to (not the frozen gateway's)"),
        "failover_s": Metric(median([k.failover_s for k in kills]), "s", higher_is_better=False,
                             note="kill -> new leader's failover move off the frozen gateway (median)"),
        "takeover_gap_ms": Metric(max((k.gap_ms for k in kills), default=None), "ms", higher_is_better=False,
                                  note="longest gap between two probe replies, worst kill"),
        "stepdown_s": Metric(median([p.stepdown_s for p in parts]), "s", higher_is_better=False,
                             note="etcd cut -> old leader steps down (median)"),
        "rejoin_s": Metric(median([p.rejoin_s for p in parts]), "s", higher_is_better=False,
                           note="etcd healed -> every replica follows one leader again (median)"),
        "heal_leader_changes": Metric(float(sum(1 for p in parts if p.leader_after_heal != f"{p.new} (term {p.new_term})")),
                                      "partitions", note=f"of {len(parts)}: healing the cut changed the leader again"),
    }  # fmt: skip
    rows: list[dict[str, Any]] = [{"kind": "kill", **asdict(k)} for k in kills]
    rows += [{"kind": "partition", **asdict(p)} for p in parts]
    series = [
        Series("takeover_s (new leader primary, reconciled)", x=[k.trial for k in kills],
               y=[k.takeover_s for k in kills], xlabel="leader SIGKILL #", ylabel="seconds after the kill"),
        Series("failover_s (its failover move)", x=[k.trial for k in kills], y=[k.failover_s for k in kills],
               xlabel="leader SIGKILL #", ylabel="seconds after the kill"),
    ]  # fmt: skip
    ran = (
        f"\n\nThis run: `make run HA=1` emulation, switch {topo.switch.kind}, "
        f"{len(topo.controller.replica_names())} replicas with one etcd member each (etcd {etcd_version()}), "
        f"{len(topo.gateways)} strongSwan gateways with their agents, {len(topo.hosts)} LAN hosts, "
        f"{len(kills)} kills, {len(parts)} partitions. The machine (2 cores) is shared with other work."
    )
    write_report("ha", metrics, rows=rows, series=series, title="Replicated controllers on the HA emulation",
                 method=(__doc__ or "") + ran)


if __name__ == "__main__":
    sys.exit(main())
