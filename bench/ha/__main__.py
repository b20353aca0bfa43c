"""Replicated controllers on the real HA emulation (`make run HA=1`): leader kills and leader
partitions with real agents, real tunnels and shipped defaults.

`python -m bench.ha [--kills 5] [--takeover-failovers 5] [--partitions 20] [--switch ebpf|bmv2]
[--quick]` (root; run it under `flock /work/.emu.lock`). Boots the HA emulation (`make run
HA=1`'s plan, through the emulation engine) when none is up (and stops it again afterwards),
or uses the HA emulation that is up. `--quick`: 1 kill of each kind and 2 partitions.

What runs (topologies/ha.py): 3 controller replicas, each in its own namespace on the
management network with its own etcd member (a 3-member cluster, etcd's default timing),
the shipped `ha:`/`store.etcd`/`timing` defaults of the generated configs, the eBPF switch,
3 strongSwan gateways whose real agents report to every replica, real LAN and remote hosts.

- **Kills**, two kinds. In each trial a LAN host pings a remote host through its gateway and
  tunnel every 10 ms (`ping -D -O -i 0.01 -W 1`, 500 probes); the probe's frames are checked
  to enter the gateway the leader's bucket map sends its bucket to (>= 50 frames into that
  gateway's LAN port in 1 s); then the leading replica's controller gets SIGKILL and, at the
  same instant, a gateway is frozen (SIGSTOP of its charon and agent), so the new leader has a
  failover to do. The remote host's return path avoids the frozen gateway.
  - `kill` (`--kills`): the frozen gateway is another one holding buckets; the probe's own
    gateway keeps forwarding, so the probe measures the data plane while no controller runs.
  - `kill_own` (`--takeover-failovers`): the frozen gateway is the probe's own (the host is
    picked by the bucket -> gateway map the leader's REST API shows, its host view agreeing,
    and its bucket must still point there right before the kill): the probe comes back only
    when the new leader has taken over, declared the gateway dead and moved its buckets.
  The probes are read by bench/gaps.py: `sent` probes over the whole run, `answered` those
  with a reply within 1 s, `lost` = sent - answered (those after the last answer included),
  `gap_ms` from the arrival of the last answer to a probe sent before the kill to the first
  answer to a probe sent after it, or between later answers, or from the last answer to the
  end of the run (the send of the last probe), whichever is longest. A flow whose answers are
  not back within 1 s of the end of its run has not recovered: its gap runs to the end of the
  run, the trial is listed under the failed trials and the benchmark exits 1.
  **takeover_failover_gap_ms**: that gap for the `kill_own` trials (median; `_max_ms` the
  worst), the takeover plus the failover as a user of the frozen gateway sees it.
  **takeover_s**: kill -> the new leader's log line "primary on the switch and reconciled"
  (its failover and rebalancing loops run again; wall clock, same host), over both kinds.
  **failover_s**: kill -> the new leader's first failover move off the frozen gateway (its
  event log), gateway death detection (3 x 100 ms) included, over both kinds.
  **takeover_loss**: probes lost across the `kill` trials (goal 0: the data plane forwards
  without a controller); `takeover_gap_ms`: their worst gap. **takeover_rewrites**: buckets
  whose gateway on the switch changed across the takeover although they did not have to (not
  the frozen gateway's): the bucket map read through the old leader before the kill against
  the new leader's right after its failover, over both kinds. (The reconcile's own update count
  is an info-level log line; the shipped level is warning.) Then the frozen gateway is thawed,
  the killed replica is started again as `up` starts it (`rejoin_s`: until it follows the new
  leader as a backup), and the next trial waits for every gateway alive with its share of
  buckets.
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
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench.ha.analysis import ProbePlan, median, plan_own_probe, plan_probe, rewritten
from bench.ha.emulation import HaEmulation
from bench.probes import (MIN_PROBE_FRAMES, BenchError, frames_entering, ha_missing, inject, ping_probe, read_probe,
                          restore)
from bench.report import Metric, Series, write_report
from supergw_controller.ha.view import overlaps
from topologies import ha
from topologies.emulation import Emulation, EmulationError, running_or_booted


GOAL_TAKEOVER_S = 1.0
GOAL_TAKEOVER_FAILOVER_MS = 1000.0  # takeover plus failover, as the frozen gateway's user sees it
MOVED_BUCKET = 5
KILL_KINDS = ("kill", "kill_own")


def say(msg: str) -> None:
    print(f"bench/ha: {msg}", flush=True)


@dataclass
class Kill:
    kind: str  # "kill": another gateway frozen; "kill_own": the probe's own gateway frozen
    trial: int
    old: str
    new: str
    old_term: int
    new_term: int
    takeover_s: float | None
    failover_s: float | None
    rewritten: int  # buckets moved that did not have to
    flow: str  # "<host> -> <remote host>"
    through: str  # the gateway the probe's frames entered before the kill
    frozen: str
    sent: int  # probes sent over the whole run (bench/gaps.py)
    lost: int  # sent - answered within 1 s, those after the last answer included
    gap_ms: float  # last answer before the kill -> first answer after it (or -> end of the run)
    tail_ms: float  # last answer -> end of the run
    recovered: bool
    problem: str | None
    rejoin_s: float

    def failure(self) -> dict[str, object] | None:
        if self.recovered:
            return None
        return {"kind": self.kind, "trial": self.trial, "frozen": self.frozen, "flow": self.flow,
                "problem": self.problem}


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


def probe_plan(emu: HaEmulation, kind: str, leader: str, i: int, unrecoverable: bool) -> ProbePlan:
    if kind == "kill_own":
        own = plan_own_probe(emu.topo, emu.hosts(leader), emu.buckets(leader), i, unrecoverable)
        if own is None:
            raise BenchError(f"no probe plan: no learned host whose bucket the switch sends to a gateway "
                             f"(hosts {[(h.ip, h.bucket, h.gateway) for h in emu.hosts(leader)]})")
        return own
    other = plan_probe(emu.topo, emu.served(leader), emu.buckets(leader), i, unrecoverable)
    if other is None:
        raise BenchError(f"no probe plan: hosts served {emu.served(leader)}, no second gateway with buckets to freeze")
    return other


def kill_trial(emu: HaEmulation, kind: str, i: int, unrecoverable: bool = False) -> Kill:
    """One leader SIGKILL with a gateway frozen at the same instant: another one (`kill`) or the
    probe's own (`kill_own`); `unrecoverable`: the probe returns through the frozen gateway's
    peer (testing the benchmark: the trial must fail)."""
    old = emu.settled_leader()
    emu.use(old)
    emu.wait_healthy()
    p = probe_plan(emu, kind, old, i, unrecoverable)
    pids = emu.site.gateway_pids(p.frozen)
    old_term = emu.term(old)
    probe = ping_probe(emu.topo.ns(p.host), p.remote_ip)
    killed = frozen = False
    try:
        (entered,) = frames_entering([(emu.site, p.serving)])
        if entered < MIN_PROBE_FRAMES:
            raise BenchError(f"{p.host}'s probe does not enter {p.serving}, the gateway the leader's bucket map "
                             f"sends it to ({entered} frames in 1 s)")
        before = emu.buckets(old)  # as late as possible: the leader may still rebalance
        if p.bucket is not None and before.get(p.bucket) != p.frozen:
            raise BenchError(f"the leader moved {p.host}'s bucket {p.bucket} from {p.frozen} to "
                             f"{before.get(p.bucket)} before the kill: the probe would not cross the frozen gateway")
        killed_at = time.time()
        emu.kill(old)
        killed = True
        inject(emu.site, "freeze", p.frozen, pids)
        frozen = True
        new = emu.new_leader(old)
        ready = emu.wait_log(new, "primary on the switch and reconciled", killed_at)
        moved = emu.failover_ts(new, p.frozen, killed_at)
        after = emu.buckets(new)
        new_term = emu.term(new)
        out, _ = probe.communicate(timeout=30)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
        if frozen:
            restore(emu.site, "freeze", p.frozen, pids)
        if killed:
            emu.restart(old)
    f = read_probe(f"{p.host} -> {p.remote}", out, killed_at, GOAL_TAKEOVER_FAILOVER_MS / 1000)
    k = Kill(kind, i, old, new, old_term, new_term,
             None if ready is None else round(ready - killed_at, 3),
             None if moved is None else round(moved - killed_at, 3),
             rewritten(before, after, p.frozen), f.flow, p.serving, p.frozen, f.sent, f.lost, f.gap_ms, f.tail_ms,
             f.recovered, f.problem, round(emu.wait_backup(old, new), 2))  # fmt: skip
    say(f"{kind} {i}: {k}" + ("" if k.recovered else f" -- FAILED: {k.problem}"))
    emu.use(new)
    share = emu.share(p.frozen)
    deadline = time.monotonic() + 60
    while emu.gateways()[p.frozen].buckets < share:
        if time.monotonic() > deadline:
            raise BenchError(f"{p.frozen} did not get its {share} buckets back within 60 s of the thaw")
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
    ap.add_argument("--kills", type=int, default=None,
                    help="leader SIGKILLs with another gateway frozen (default 5; --quick 1)")
    ap.add_argument("--takeover-failovers", type=int, default=None,
                    help="leader SIGKILLs with the probe's own gateway frozen (default 5; --quick 1)")
    ap.add_argument("--partitions", type=int, default=None, help="leader partitions from etcd (default 20; --quick 2)")
    ap.add_argument("--switch", choices=["ebpf", "bmv2"], default="ebpf", help="when booting the emulation")
    ap.add_argument("--quick", action="store_true", help="1 kill of each kind, 2 partitions: proves the benchmark "
                                                         "works, measures nothing worth publishing")
    ap.add_argument("--unrecoverable", action="store_true",
                    help="testing the benchmark: every kill's probe returns through the frozen gateway's peer, which "
                         "no failover restores; every kill trial must be reported as failed")
    args = ap.parse_args(argv)
    counts = {"kill": args.kills, "kill_own": args.takeover_failovers}
    counts = {k: (1 if args.quick else 5) if n is None else n for k, n in counts.items()}
    partitions = (2 if args.quick else 20) if args.partitions is None else args.partitions
    if min(*counts.values(), partitions) < 0:
        ap.error("trial counts must be >= 0")
    if (why := ha_missing("namespaces, signals, iptables in the replicas' namespaces")) is not None:
        say(f"cannot run: {why}")
        return 2
    kills: list[Kill] = []
    parts: list[Partition] = []
    try:
        with running_or_booted(Emulation.from_file(switch=args.switch, replicas=ha.HA_REPLICAS), usable) as running:
            emu = HaEmulation(running)
            for kind in KILL_KINDS:
                for i in range(counts[kind]):
                    kills.append(kill_trial(emu, kind, i, args.unrecoverable))
            seen: set[tuple[int, int]] = set()
            for i in range(partitions):
                parts.append(partition_trial(emu, i, seen))
    except (BenchError, EmulationError) as exc:
        say(f"FAILED after {len(kills)} kills and {len(parts)} partitions: {exc}")
        return 1
    report(kills, parts, running, args.unrecoverable)
    short = shortfalls(kills, parts)
    for why in short:
        say(f"FAILED: {why}")
    say(f"takeover_s={median([k.takeover_s for k in kills])} "
        f"takeover_failover_gap_ms={median([k.gap_ms for k in kills if k.kind == 'kill_own'])} "
        f"split_brain_writes={sum(p.split_brain for p in parts)} (results in bench/results/ha.*)")
    return 1 if short else 0


def shortfalls(kills: list[Kill], parts: list[Partition]) -> list[str]:
    """Why the run fails (empty: it passes): a probe that did not recover, or a goal missed."""
    out = [f"{f['kind']} trial {f['trial']} (frozen {f['frozen']}), flow {f['flow']}: {f['problem']}"
           for k in kills if (f := k.failure()) is not None]
    takeover = median([k.takeover_s for k in kills])
    if kills and (takeover is None or takeover > GOAL_TAKEOVER_S):
        out.append(f"takeover_s {takeover} (goal <= {GOAL_TAKEOVER_S} s)")
    lost = sum(k.lost for k in kills if k.kind == "kill")
    if lost:
        out.append(f"takeover_loss {lost} probes in the kills with another gateway frozen (goal 0)")
    own = median([k.gap_ms for k in kills if k.kind == "kill_own"])
    if own is not None and own > GOAL_TAKEOVER_FAILOVER_MS:
        out.append(f"takeover_failover_gap_ms {own} (goal <= {GOAL_TAKEOVER_FAILOVER_MS:.0f} ms)")
    split = sum(p.split_brain for p in parts)
    if split:
        out.append(f"split_brain_writes {split} (goal 0)")
    return out


def report(kills: list[Kill], parts: list[Partition], emu: Emulation, unrecoverable: bool = False) -> None:
    topo = emu.spec.single
    plain = [k for k in kills if k.kind == "kill"]
    own = [k for k in kills if k.kind == "kill_own"]
    proving = sum(1 for p in parts if p.accepted_old and p.accepted_new)
    down = sum(1 for k in kills if not k.recovered)
    metrics = {
        "takeover_s": Metric(median([k.takeover_s for k in kills]), "s", goal=GOAL_TAKEOVER_S, higher_is_better=False,
                             note=f"median of {len(kills)} leader SIGKILLs (both kinds)"),
        "takeover_failover_gap_ms": Metric(
            median([k.gap_ms for k in own]), "ms", goal=GOAL_TAKEOVER_FAILOVER_MS, higher_is_better=False,
            note=f"median of {len(own)} kills with the probe's own gateway frozen: takeover + failover as its user "
                 "sees it" + (f"; {sum(1 for k in own if not k.recovered)} not recovered (gap = to the end of the "
                              "run)" if any(not k.recovered for k in own) else "")),
        "takeover_failover_gap_max_ms": Metric(max((k.gap_ms for k in own), default=None), "ms",
                                               goal=GOAL_TAKEOVER_FAILOVER_MS, higher_is_better=False,
                                               note="worst of those kills"),
        "takeover_failover_loss": Metric(float(sum(k.lost for k in own)), "probes",
                                         note=f"of {sum(k.sent for k in own)} sent through the frozen gateway"),
        "takeover_loss": Metric(float(sum(k.lost for k in plain)), "probes",
                                note=f"goal 0; of {sum(k.sent for k in plain)} probes (10 ms) across the "
                                     f"{len(plain)} kills with another gateway frozen"),
        "takeover_gap_ms": Metric(max((k.gap_ms for k in plain), default=None), "ms", higher_is_better=False,
                                  note="longest probe gap, worst kill with another gateway frozen"),
        "probes_not_recovered": Metric(float(down), "kills",
                                       note=f"goal 0; of {len(kills)}: probe answers not back within "
                                            f"{GOAL_TAKEOVER_FAILOVER_MS:.0f} ms of the end of the run"),
        "split_brain_writes": Metric(float(sum(p.split_brain for p in parts)), "writes",
                                     note=f"goal 0; over {len(parts)} leader partitions from etcd "
                                          f"({proving} with writes of both leaders)"),
        "takeover_rewrites": Metric(float(sum(k.rewritten for k in kills)), "buckets",
                                    note="buckets the takeovers moved that did not have to (not the frozen gateway's)"),
        "failover_s": Metric(median([k.failover_s for k in kills]), "s", higher_is_better=False,
                             note="kill -> new leader's failover move off the frozen gateway (median, both kinds)"),
        "stepdown_s": Metric(median([p.stepdown_s for p in parts]), "s", higher_is_better=False,
                             note="etcd cut -> old leader steps down (median)"),
        "rejoin_s": Metric(median([p.rejoin_s for p in parts]), "s", higher_is_better=False,
                           note="etcd healed -> every replica follows one leader again (median)"),
        "heal_leader_changes": Metric(float(sum(1 for p in parts if p.leader_after_heal != f"{p.new} (term {p.new_term})")),
                                      "partitions", note=f"of {len(parts)}: healing the cut changed the leader again"),
    }  # fmt: skip
    rows: list[dict[str, Any]] = [asdict(k) for k in kills]
    rows += [{"kind": "partition", **asdict(p)} for p in parts]
    n = list(range(1, len(kills) + 1))
    series = [
        Series("takeover_s (new leader primary, reconciled)", x=n, y=[k.takeover_s for k in kills],
               xlabel="leader SIGKILL #", ylabel="seconds after the kill"),
        Series("failover_s (its failover move)", x=n, y=[k.failover_s for k in kills],
               xlabel="leader SIGKILL #", ylabel="seconds after the kill"),
        Series("probe gap, own gateway frozen (s)", x=n,
               y=[k.gap_ms / 1000 if k.kind == "kill_own" else None for k in kills],
               xlabel="leader SIGKILL #", ylabel="seconds after the kill"),
    ]  # fmt: skip
    ran = (
        f"\n\nThis run: `make run HA=1` emulation, switch {topo.switch.kind}, "
        f"{len(topo.controller.replica_names())} replicas with one etcd member each (etcd {etcd_version()}), "
        f"{len(topo.gateways)} strongSwan gateways with their agents, {len(topo.hosts)} LAN hosts, "
        f"{len(plain)} kills with another gateway frozen, {len(own)} with the probe's own gateway frozen, "
        f"{len(parts)} partitions. The machine (2 cores) is shared with other work."
        + (" **Run with --unrecoverable (testing the benchmark): every kill's probe returned through the frozen "
           "gateway's peer, which no failover restores.**" if unrecoverable else "")
    )
    write_report("ha", metrics, rows=rows, series=series, title="Replicated controllers on the HA emulation",
                 method=(__doc__ or "") + ran, failures=[f for k in kills if (f := k.failure()) is not None])


if __name__ == "__main__":
    sys.exit(main())
