"""Chaos: random faults everywhere on the two-site emulation, invariants checked while it runs.

`python -m bench.chaos [--minutes 30] [--seed N] [--kinds k1,k2] [--quick] [--plan]` (root;
under `flock -o /work/.emu.lock`; `make chaos`). Boots the two-site emulation with three
replicated controllers (and their etcd cluster) at site A when none is up, or uses the one up.

**The run.** Site A's operator intent is set first: its first gateway weighs 2, the bucket of
its second host is pinned to its second gateway, its last gateway is drained. Every namespace
host of each site then pings a host of the other site every 20 ms (`ping -D`), so requests and
answers cross the super gateways both ways the whole run. The seeded schedule
(bench/chaos/schedule.py: the same seed and shape give the same faults, targets, offsets and
durations) injects a fault every 20-60 s, a third of them with a companion fault inside their
window: gateway freeze, kill, link down, restart; agent kill and crash loop; charon restart;
leader kill and freeze; backup kill; etcd member kill and partition; switch restart; WAN loss
and delay bursts (netem on every WAN port); rebalance storms (operator moves and a
rebalance); restarts of site B's single controller. Each fault is undone after its duration.
The hosts' buckets are first spread so that every gateway carries a flow, and a gateway
fault is aimed at a gateway whose pair carries one when it is injected.

**The invariants**, checked all along (bench/chaos/checker.py), the first violation stops the
run: every flow's silence (last answer -> next answer, or -> now) within the budget of the
one fault it is charged to (of the faults that hit this flow's own gateway pairs or its path,
the one injected nearest to when it began; 500 ms without any; a controller fault only
extends a gateway fault's failover); per flow and window of 500 probes, no more lost than the
faults that hit it explain (1 % without any); no pair of terms whose accepted switch writes
overlap (every replica's `/healthz` write windows); site A's pins, drain and weights as set,
read from whoever leads, after every controller change; no bucket unassigned or on a gateway
its controller counts dead beyond the largest budget of the faults around; no process (switches, controllers, etcd,
charons, agents) whose RSS, fds, threads or controller asyncio tasks (`supergw_asyncio_tasks`)
end well above where they were after 2 minutes; no traceback, panic or fatal error in any log.

**Recovery per fault** is the longest silence charged to it (each silence to one fault).
`probes_lost` counts every probe of every flow without an answer within 1 s. Faults by type, recovery per type (median, p99, max) and the processes'
resources go to bench/results/chaos.{json,md,png}; the schedule as it ran, every silence
longer than 100 ms and the violations to bench/results/chaos-replay/history.json, and after
a violation a copy of every log to chaos-replay/logs/. `--seed` replays a run's schedule.

**Bad input** tried at every interface comes from the tallies the bad-input tests of `make unit`
write (build/test-results/bad-input/, `$SUPERGW_BADINPUT_DIR`): inputs tried per interface and
token, what the interface answered, crashes, 5xx and state changes from refused calls (goal 0
each). `--bad-input-only` writes the report again from its JSON with fresh tallies, runs
nothing.
"""

from __future__ import annotations

import argparse
import random
import sys

from bench.chaos import results
from bench.chaos.runner import ChaosRun, Record, RunError
from bench.chaos.schedule import KINDS, ScheduleError, Shape, build, counts
from bench.probes import BenchError, ha_missing
from bench.report import ReportError
from supergw_proto.badinput import tally_dir
from topologies import ha
from topologies.emulation import Emulation, EmulationError, running_or_booted
from topologies.schema import TWO_SITE_TOPOLOGY
from topologies.site import SiteError

REPLICAS_SITE = "sgw-a"


def say(msg: str) -> None:
    print(f"bench/chaos: {msg}", flush=True)


def want() -> Emulation:
    return Emulation.from_file(TWO_SITE_TOPOLOGY, replicas=ha.HA_REPLICAS, replicas_site=REPLICAS_SITE)


def usable(emu: Emulation) -> str | None:
    """Two sites facing each other, replicated controllers at the first, every stage up."""
    if len(emu.sites) != 2 or emu.spec.partner(emu.sites[0].topo) is None:
        return "bench/chaos runs on two sites facing each other"
    if len(emu.sites[0].topo.controller.replica_names()) < 2:
        return f"bench/chaos needs replicated controllers at {emu.sites[0].prefix} (--replicas {REPLICAS_SITE}=3)"
    return None if emu.state.phase == "up" else f"it is {emu.state.phase}: {emu.state.failed_stages()}"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.chaos", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=None, help="length of the schedule (default 30; --quick 3)")
    ap.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a random one, printed)")
    ap.add_argument("--kinds", default=None, help=f"comma-separated fault kinds (default all: {', '.join(KINDS)})")
    ap.add_argument("--spacing", default="20,60", help="seconds between main faults, min,max (default 20,60)")
    ap.add_argument("--overlap", type=float, default=0.3, help="chance of a companion fault (default 0.3)")
    ap.add_argument("--quick", action="store_true", help="3 minutes: proves the run works, measures nothing to publish")
    ap.add_argument("--plan", action="store_true", help="print the schedule and exit (no root, nothing runs)")
    ap.add_argument("--bad-input-only", action="store_true",
                    help="write bench/results/chaos.* again with the bad-input tests' current tallies; runs nothing")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.bad_input_only:
        try:
            say(f"wrote {results.rewrite_bad_input()} with the tallies in {tally_dir()}")
        except ReportError as exc:
            say(f"cannot rewrite the report: {exc}; run the benchmark first")
            return 1
        return 0
    minutes = args.minutes if args.minutes is not None else (3.0 if args.quick else 30.0)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    try:
        lo, hi = (float(x) for x in args.spacing.split(","))
        topo = want().spec.sites[0]
        shape = Shape(len(topo.gateways), tuple(topo.controller.replica_names()))
        kinds = None if args.kinds is None else [k.strip() for k in args.kinds.split(",") if k.strip()]
        schedule = build(seed, minutes, shape, kinds, (lo, hi), args.overlap)
    except (ScheduleError, ValueError) as exc:
        say(f"bad arguments: {exc}")
        return 2
    say(f"seed {seed}, {minutes:g} min, {len(schedule)} faults: "
        + ", ".join(f"{k} {n}" for k, n in counts(schedule).items()))
    if args.plan:
        for f in schedule:
            print(f"  {f.describe()}" + (f" (inside #{f.within})" if f.within is not None else ""))
        return 0
    if (why := ha_missing("namespaces, signals, tc, iptables")) is not None:
        say(f"cannot run: {why}")
        return 2
    rec = Record(seed, minutes, schedule)
    try:
        with running_or_booted(want(), usable) as emu:
            ChaosRun(emu, rec, say).go()
    except (RunError, EmulationError, BenchError, SiteError) as exc:
        say(f"FAILED before the faults: {exc}")
        return 1
    ran = (f"\n\nThis run: seed {seed}, {minutes:g} minutes scheduled, {len(rec.injected)} faults injected, "
           f"{len(rec.flows)} flows. The machine (2 cores) is shared with other work.")
    replay_dir = results.write(rec, (__doc__ or "") + ran, args.quick)
    replay = (f"python -m bench.chaos --seed {seed} --minutes {minutes:g}" + (f" --kinds {args.kinds}" if args.kinds else "")
              + (f" --spacing {args.spacing}" if args.spacing != "20,60" else "")
              + (f" --overlap {args.overlap:g}" if args.overlap != 0.3 else ""))
    for v in rec.violations:
        say(f"FAILED: {v.line()}")
    if rec.violations:
        say(f"replay: {replay}; history and logs in {replay_dir}")
        return 1
    say(f"ok: {len(rec.injected)} faults, 0 violations (bench/results/chaos.*; replay: {replay})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
