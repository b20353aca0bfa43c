"""Failover on the real one-site emulation (`make run`): real agents, real tunnels, shipped defaults.
One way: the probe's request crosses the failed gateway, its answer returns through another
pair (the whole path, both directions through the failed pair, is the two-site variant's
headline: `--two-site`).

`python -m bench.failover [--trials 5] [--soak-s 600] [--quick]` (root; uses the running
one-site emulation, or boots one through the emulation engine (topologies/emulation.py) and
stops it again afterwards; run it under `flock /work/.emu.lock`).

For each kind of failure -- freeze (SIGSTOP of the gateway's charon and agent, link up),
kill (SIGKILL of both), link (its LAN interface down) -- each trial picks a LAN host, the
gateway that serves it (from the controller's host view, and checked: the probe's frames must
enter that gateway's LAN port before the failure) as the victim, and a remote host whose
return path does not cross the victim (the remote site is plain routed peers in the one-site
emulation: the return direction is the two-site topology's job). The host pings the remote
host every 10 ms (500 probes, the failure after 1 s); bench/gaps.py reads the probe: probes
sent and answered over the whole run, and the gap from the last answer before the failure to
the first answer after it (or to the end of the run when the answers do not come back). A
flow whose answers have not come back within GOAL_MS of the end of its run has not recovered:
its trial fails, the report lists it and the benchmark exits 1. Then the victim is restored
(SIGCONT; `supergw-gateway up` and a new agent; link up), and the time until it holds its
weighted share of buckets again is the refill time (the system is idle apart from the probe).
A soak then loads the machine (two busy loops and 1200-byte pings every 2 ms from every host
through the tunnels) and counts failovers nobody caused, the controller's and the switch's own:
their goal is 0, each is listed with why under the failed trials and fails the run. Writes
bench/results/failover.{json,md,png}.

`--unrecoverable` is for testing the benchmark itself: the probe's remote host returns through
the victim's peer, a path no LAN-side failover can restore, so every trial must fail.

`python -m bench.failover --two-site [--trials 5]`: the same failures on the two-site
emulation, with a flow in each direction (two_site.py; bench/results/failover-two-site.*).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from bench.failover.load import liveness_gaps, saturated
from bench.gaps import FlowGap
from bench.probes import GOAL_MS, KINDS, BenchError, busy_pings, fail_under_probe, restore, spurious_failovers
from bench.report import Metric, Series, write_report
from supergw_proto.reports import DEFAULT_LAN_LIVENESS_INTERVAL_MS, DEFAULT_LAN_LIVENESS_TIMEOUT_MS
from topologies.configs import HEARTBEAT_MS, MISSED_HEARTBEATS
from topologies.emulation import Emulation, EmulationError, running_or_booted
from topologies.poll import Timeout
from topologies.site import Site


@dataclass
class Trial:
    kind: str
    trial: int
    victim: str
    flow: str  # "<host> -> <remote host>"
    sent: int  # probes sent over the whole run (bench/gaps.py)
    answered: int  # probes answered within 1 s
    lost: int  # sent - answered, those after the last answer included
    gap_ms: float  # last answer before the failure -> first answer after it (or -> end of the run)
    tail_ms: float  # last answer -> end of the run
    recovered: bool
    problem: str | None
    detect_ms: float | None  # failure injected -> controller logged the gateway dead
    refill_s: float | None  # restored -> victim holds its weighted share of buckets again

    def failure(self) -> dict[str, object] | None:
        if self.recovered:
            return None
        return {"kind": self.kind, "trial": self.trial, "victim": self.victim, "flow": self.flow,
                "problem": self.problem}


def trial_of(kind: str, round_: int, victim: str, flow: FlowGap, detect_ms: float | None,
             refill_s: float | None) -> Trial:
    return Trial(kind, round_, victim, flow.flow, flow.sent, flow.answered, flow.lost, flow.gap_ms, flow.tail_ms,
                 flow.recovered, flow.problem, detect_ms, refill_s)


class OneSite:
    def __init__(self, site: Site) -> None:
        self.site, self.topo = site, site.topo
        self.api = site.api()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        try:
            self.site.wait_gateways(lambda gws: all(g.state == "alive" and g.tunnel_up is not False
                                                    for g in gws.values()), "gateways all alive", timeout)
        except Timeout as exc:
            raise BenchError(str(exc)) from None

    def pick(self, round_: int, unrecoverable: bool = False) -> tuple[str, str, str, str]:
        """(host name, its gateway, remote host name, remote ip) for this trial; `unrecoverable`:
        a remote host that returns through the victim's peer (testing the benchmark)."""
        served = {h.ip: h.gateway for h in self.api.hosts() if h.gateway and h.ip}
        hosts = [h for h in self.topo.hosts if str(h.ip) in served]
        if not hosts:
            raise BenchError("the controller has learned no LAN host with a gateway; is the probe traffic flowing?")
        host = hosts[round_ % len(hosts)]
        victim = served[str(host.ip)]
        assert victim is not None
        peer = next(g.peer.name for g in self.topo.gateways if g.name == victim)
        remote = next((r for r in self.topo.remote.hosts if (r.via == peer) == unrecoverable), None)
        if remote is None:
            raise BenchError(f"no remote host returns {'through' if unrecoverable else 'avoiding'} {peer} "
                             f"(the peer of {victim})")
        return host.name, victim, remote.name, str(remote.ip)

    def dead_event_ts(self, gw: str, after: float) -> float | None:
        for ev in self.api.events(limit=1000):
            if ev.kind == "gateway" and ev.reason == "dead" and ev.src == gw and ev.ts >= after:
                return ev.ts
        return None

    def failovers(self) -> int:
        return self.api.status().failovers_total

    def trial(self, kind: str, round_: int, unrecoverable: bool = False) -> Trial:
        self.wait_healthy()
        host, victim, remote, rip = self.pick(round_, unrecoverable)
        pids = self.site.gateway_pids(victim)
        flow, t_inject = fail_under_probe(self.site, kind, victim, pids, self.topo.ns(host), rip, f"{host} -> {remote}",
                                          timeout_s=15)
        dead_ts = self.dead_event_ts(victim, t_inject)
        t_restore = time.monotonic()
        restore(self.site, kind, victim, pids)
        share = self.site.share(victim)
        refill: float | None = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            g = self.api.gateway(victim)
            if g.state in ("alive", "recovering") and g.buckets >= share:
                refill = time.monotonic() - t_restore
                break
            time.sleep(0.1)
        t = trial_of(kind, round_, victim, flow, None if dead_ts is None else round(1000 * (dead_ts - t_inject), 1),
                     None if refill is None else round(refill, 2))
        print(f"  {kind:6s} {victim} (probe {t.flow}): gap {t.gap_ms:.0f} ms, {t.lost} of {t.sent} lost"
              f"{'' if t.recovered else f', FAILED: {t.problem}'}; "
              f"declared dead after {t.detect_ms} ms, share {share} buckets back after {t.refill_s} s", flush=True)
        return t

    def soak(self, seconds: float) -> dict[str, Any]:
        self.wait_healthy()
        before = self.failovers()
        t0 = time.time()
        remotes = [(r.name, str(r.ip)) for r in self.topo.remote.hosts]
        flows = [(self.topo.ns(h.name), self.topo.ns(remotes[i % len(remotes)][0]), remotes[i % len(remotes)][1])
                 for i, h in enumerate(self.topo.hosts)]
        ports = {g.port: f"sw-{g.name}" for g in self.topo.gateways}
        with saturated(flows, seconds), liveness_gaps(self.topo.switch_ns, sorted(ports.values()), seconds) as gaps:
            busy_pings([(ns, ip) for ns, _, ip in flows], seconds)
        after = self.failovers()
        events = [ev for ev in self.api.events(limit=1000) if ev.kind == "gateway" and ev.ts >= t0]
        dead = [ev for ev in events if ev.reason == "dead"]
        stale = [ev for ev in events if ev.reason == "stale"]
        st = self.api.status()
        return {"seconds": seconds, "failovers": after - before, "dead_events": len(dead),
                "dead_detail": [f"{e.src}: {e.detail}" for e in dead],
                "stale_events": len(stale), "stale_detail": [e.detail for e in stale],
                "liveness_gaps": gaps.result, "heartbeats_rejected": st.heartbeats_rejected}


def soak_failures(soak: dict[str, Any]) -> list[dict[str, object]]:
    """The soak's failovers, each spurious, with why: the controller's 'gateway dead' events (and
    the failovers its status counted beyond them), the switch's 'gateway stale' events."""
    controller = list(soak["dead_detail"])
    unexplained = soak["failovers"] - len(controller)
    if unexplained > 0:
        controller.append(f"{unexplained} counted by /api/v1/status without a 'gateway dead' event in the soak")
    return spurious_failovers(controller, soak["stale_detail"])


SOAK_LOAD = ("every host's UDP flood through the tunnels (iperf3, 1200 B, 400 Mb/s offered each: more than "
             "strongSwan's userspace ESP carries, so every gateway's CPU is saturated by IPsec), two busy loops on "
             "this 2-core machine, and 1200 B pings every 2 ms from every host")


def usable_on(switch: str) -> Callable[[Emulation], str | None]:
    """The benchmark measures the one-site emulation as `make run [SWITCH=bmv2]` boots it."""
    def usable(emu: Emulation) -> str | None:
        if emu.spec.several or emu.spec.single.replicated:
            return "bench.failover measures one site with one controller (make run)"
        if emu.spec.single.switch.kind != switch:
            return f"it runs on {emu.spec.single.switch.kind}, this run measures {switch} (--switch)"
        return None if emu.state.phase == "up" else f"it is {emu.state.phase}: {emu.state.failed_stages()}"
    return usable


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--two-site" in argv:  # both directions on the two-site emulation: two_site.py
        from bench.failover import two_site

        return two_site.main([a for a in argv if a != "--two-site"])
    ap = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=None, help="trials per kind of failure (default 5; --quick 1)")
    ap.add_argument("--soak-s", type=float, default=None, help="soak duration in seconds (default 600; --quick 10)")
    ap.add_argument("--quick", action="store_true", help="1 trial per kind and a 10 s soak: proves the benchmark "
                                                         "works, measures nothing worth publishing")
    ap.add_argument("--switch", choices=("ebpf", "bmv2"), default="ebpf",
                    help="the emulation's switch (default ebpf, the shipped one); bmv2 writes failover-bmv2.*")
    ap.add_argument("--unrecoverable", action="store_true",
                    help="testing the benchmark: probe a remote host that returns through the victim's peer, which "
                         "no failover restores; every trial must be reported as failed")
    args = ap.parse_args(argv)
    args.trials = args.trials if args.trials is not None else (1 if args.quick else 5)
    args.soak_s = args.soak_s if args.soak_s is not None else (10.0 if args.quick else 600.0)
    if args.trials < 1 or args.soak_s < 0:
        ap.error("--trials must be >= 1 and --soak-s >= 0")
    if os.geteuid() != 0:
        print("bench.failover: needs root (namespaces, signals to charon)", file=sys.stderr)
        return 2
    trials: list[Trial] = []
    try:
        with running_or_booted(Emulation.from_file(switch=args.switch), usable_on(args.switch)) as emu:
            bench = OneSite(emu.site())
            for kind in KINDS:
                print(f"== {kind}: {args.trials} trials", flush=True)
                for i in range(args.trials):
                    trials.append(bench.trial(kind, i, args.unrecoverable))
            print(f"== soak: {args.soak_s:.0f} s under load", flush=True)
            soak = bench.soak(args.soak_s)
            print(f"  {soak}", flush=True)
    except (EmulationError, BenchError) as exc:
        print(f"bench.failover: {exc}", file=sys.stderr)
        return 1
    failures = [f for t in trials if (f := t.failure()) is not None] + soak_failures(soak)
    write(trials, soak, args, failures)
    for f in failures:
        where = f"{f['kind']} trial {f['trial']} ({f['victim']}), flow {f['flow']}" if "trial" in f else f["kind"]
        print(f"bench.failover: FAILED {where}: {f['problem']}", file=sys.stderr)
    return 1 if failures else 0


def write(trials: list[Trial], soak: dict[str, Any], args: argparse.Namespace,
          failures: list[dict[str, object]]) -> None:
    metrics: dict[str, Metric] = {}
    for kind in KINDS:
        ts = [t for t in trials if t.kind == kind]
        gaps = [t.gap_ms for t in ts]
        down = sum(1 for t in ts if not t.recovered)
        failed = f"; {down} not recovered (gap = to the end of the run)" if down else ""
        metrics[f"failover_{kind}_ms"] = Metric(round(statistics.median(gaps), 1), "ms", goal=GOAL_MS,
                                                higher_is_better=False, note=f"one way (request through the victim, "
                                                f"answer through another pair): median of {len(gaps)}{failed}")
        metrics[f"failover_{kind}_max_ms"] = Metric(max(gaps), "ms", goal=GOAL_MS, higher_is_better=False,
                                                    note=f"one way: worst of {len(gaps)}{failed}")
    sent, lost = sum(t.sent for t in trials), sum(t.lost for t in trials)
    metrics["failover_not_recovered"] = Metric(
        sum(1 for t in trials if not t.recovered), "trials",
        note=f"goal 0; of {len(trials)}: probe answers not back within {GOAL_MS:.0f} ms of the end of the run")
    metrics["probe_lost"] = Metric(lost, "probes", note=f"of {sent} sent across all trials, every probe without an "
                                                        "answer within 1 s (those after the last answer included)")
    refills = [t.refill_s for t in trials if t.refill_s is not None]
    missing = sum(1 for t in trials if t.refill_s is None)
    metrics["refill_s"] = Metric(statistics.median(refills) if refills else None, "s",
                                 note=f"median over {len(refills)} recoveries, idle system"
                                      + (f"; {missing} never got their share back in 60 s" if missing else ""))
    metrics["refill_max_s"] = Metric(max(refills) if refills else None, "s", note="worst recovery")
    metrics["spurious_failovers_soak"] = Metric(
        soak["failovers"], "failovers", goal=0, higher_is_better=False,
        note=f"the controller's, {soak['seconds']:.0f} s at full load ({SOAK_LOAD}); {soak['dead_events']} "
             "'gateway dead' events; each listed with why under the failed trials")
    metrics["spurious_dataplane_failovers_soak"] = Metric(
        soak["stale_events"], "failovers", goal=0, higher_is_better=False,
        note="the switch's own (gateway/stale events: a gateway's buckets sent to its backup), same soak; each "
             "listed with why under the failed trials")
    gaps = soak["liveness_gaps"]
    worst = max((g["max_gap_ms"] or 0.0 for g in gaps.values()), default=None) if gaps else None
    metrics["liveness_max_gap_soak_ms"] = Metric(
        worst, "ms", goal=DEFAULT_LAN_LIVENESS_TIMEOUT_MS, higher_is_better=False,
        note=("longest silence between two liveness frames of one gateway at the switch's port during the soak "
              "(kernel receive timestamps), against the switch's timeout: "
              + "; ".join(f"{k}: {g['frames']} frames, max {g['max_gap_ms']} ms, p99 {g['p99_gap_ms']} ms"
                          for k, g in sorted(gaps.items()))) if gaps else "not measured")
    rows = [vars(t) for t in trials]
    series = [Series(kind, x=[i + 1 for i, t in enumerate([t for t in trials if t.kind == kind])],
                     y=[t.gap_ms for t in trials if t.kind == kind], xlabel="trial", ylabel="longest gap (ms)")
              for kind in KINDS]
    method = (
        f"One-site emulation (`make run`, {'eBPF' if args.switch == 'ebpf' else 'BMv2'} switch, 3 strongSwan gateways with kernel-libipsec, real agents), "
        f"shipped defaults: UDP heartbeats every {HEARTBEAT_MS} ms, dead after {MISSED_HEARTBEATS} missed, "
        f"port monitor on; the switch's own failover on: each agent's liveness frame every "
        f"{DEFAULT_LAN_LIVENESS_INTERVAL_MS} ms, a gateway silent for {DEFAULT_LAN_LIVENESS_TIMEOUT_MS} ms has its "
        "buckets sent to its backup by the switch (docs/pipeline-contract.md, 'Gateway liveness'). Per trial: a LAN host pings a remote host every 10 ms (`ping -D -O -i 0.01 -W 1`, 500 "
        "probes); its probe is checked to enter the gateway the controller says serves it (>= 50 frames into that "
        "gateway's LAN port in 1 s); then that gateway is frozen (SIGSTOP charon + agent), killed (SIGKILL both) or "
        "unplugged (its LAN interface down). The probe is read by bench/gaps.py: `sent` probes over the whole run, "
        "`answered` those with a reply within 1 s, `lost` = sent - answered (the probes after the last answer "
        "included); `gap_ms` = from the arrival of the last answer to a probe sent before the failure to the first "
        "answer to a probe sent after it, or between later answers, or from the last answer to the end of the run "
        "(the send of the last probe), whichever is longest; `tail_ms` = last answer -> end of the run. A flow whose "
        f"tail exceeds {GOAL_MS:.0f} ms (or with no answer after the failure) has not recovered: its gap runs to the "
        "end of the run, the trial is listed under the failed trials and the benchmark exits 1. "
        "**One way**: the remote host's return path avoids the victim's pair. In the one-site topology the remote "
        "side is stock strongSwan peers, not a super gateway: the victim's peer would keep sending the answers into "
        "the dead tunnel until its IKE dead-peer detection (about 20 s), which no LAN-side failover shortens. So "
        "these figures cover the request's half of the path; both directions through a failed pair are measured on "
        "two super gateways facing each other (`python -m bench.failover --two-site`, "
        "bench/results/failover-two-site.md). detect_ms: failure to the controller's 'gateway dead' event. "
        "refill_s: restore (SIGCONT / `supergw-gateway up` + new agent / link up) until the victim holds "
        f"floor(K x weight / total weight) buckets again, on an otherwise idle system. {args.trials} trials per kind. "
        f"Soak: {soak['seconds']:.0f} s at full load ({SOAK_LOAD}); the controller's failovers counted from "
        f"/api/v1/status (dead events: {soak['dead_events']}; UDP heartbeats rejected: "
        f"{soak['heartbeats_rejected']}), the switch's own from its gateway/stale events ({soak['stale_events']}); "
        "nobody fails a gateway in the soak, so each is spurious (goal 0): listed with its event's detail under the "
        "failed trials, and the benchmark exits 1. Every liveness frame's arrival at the switch's gateway ports is "
        "taken with its kernel timestamp (bench/failover/liveness_gaps.py). "
        "The machine is shared with other work, so this is a loaded machine."
        + (" **Run with --unrecoverable (testing the benchmark): the probes returned through the victim's peer, "
           "which no failover restores.**" if args.unrecoverable else "")
    )
    name, on = ("failover", "") if args.switch == "ebpf" else (f"failover-{args.switch}", f", {args.switch} switch")
    paths = write_report(name, metrics, rows, series,
                         title="Gateway failover on the one-site emulation, one way: the request crosses the failed "
                               f"gateway (shipped defaults{on})",
                         method=method, failures=failures)
    print(f"wrote {paths.json}, {paths.markdown}, {paths.png}")


if __name__ == "__main__":
    sys.exit(main())
