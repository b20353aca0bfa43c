"""Failover on the two-site emulation, both directions: real agents, real tunnels, shipped defaults.

`measure(trials)` returns the summary keys; `python -m bench.failover --two-site
[--trials 5]` writes bench/results/failover-two-site.{json,md,png}. Root; run it under
`flock /tmp/supergw-netns.lock`. It uses the running two-site emulation when one is up and
otherwise boots `topologies/two-site.yaml` through the emulation engine (and stops it again
afterwards).

Each trial fails gateway i of site A (i = trial number modulo N) -- freeze (SIGSTOP of its
charon and agent, link up), kill (SIGKILL of both) or link (its LAN interface down) -- while
three flows cross its pair (a host's bucket is the one its ARP cache's virtual MAC for IP_G
names: what the switch dispatches on):

    both:    host a3 pings host b3;  a3's bucket pinned to agw_i at site A,  b3's to bgw_i at B
    A -> B:  host a1 pings host b1;  a1's bucket pinned to agw_i at site A,  b1's to bgw_j at B
    B -> A:  host b2 pings host a2;  b2's bucket pinned to bgw_i at site B,  a2's to agw_j at A

The first crosses the victim's pair in both directions (its request enters agw_i, its answer
bgw_i): the whole path a user of the pair has, and the headline. The other two return over
another pair, so each measures one site's reaction alone.

Each one-way flow is seen entering its gateway's LAN port before the failure (or the trial
stops and says so; the both-ways flow enters the same two ports). Each probe is read by bench/gaps.py: probes sent and answered over the whole run,
and the gap from the last answer before the failure to the first answer after it (or to the
end of the run when the answers do not come back). The both-ways flow's gap is the time until
both sites stop using the pair, the A -> B flow's the time until site A stops using agw_i, the
B -> A flow's the time until site B stops using its partner bgw_i (pair beacons through the
tunnel). A flow whose answers are not back within GOAL_MS of
the end of its run has not recovered: its trial fails (`measure` raises, `main` lists it in
the report and exits 1). Pins make the flows independent of the rebalancer; a pin to a dead
gateway is failed over like any bucket, and the pins are removed after each trial. Then the
victim is restored (SIGCONT; `supergw-gateway up` and a new agent; link up) and both sites
must show every gateway alive with its partner up before the next trial. A loaded soak
afterwards (`--soak-s`) fails nothing: each gateway either site declares dead, and each failover
a switch makes by itself, is spurious (goal 0), listed with why, and fails the run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.gaps import FlowGap
from bench.probes import (GOAL_MS, KINDS, MIN_PROBE_FRAMES, BenchError, busy_pings, frames_entering, inject, ping_probe,
                          read_probe, restore, sh, spurious_failovers)
from bench.report import Metric, Series, write_report
from supergw_proto.bucket import bucket_of_vmac
from supergw_proto.rest import ApiError
from topologies.configs import HEARTBEAT_MS, MISSED_HEARTBEATS
from topologies.emulation import Emulation, EmulationError, running_or_booted
from topologies.poll import Timeout
from topologies.schema import TWO_SITE_TOPOLOGY
from topologies.site import Site

DIRECTIONS = ("both", "a_to_b", "b_to_a")  # "both": the flow whose request and answer both cross the victim's pair

__all__ = ["KINDS", "BenchError", "Trial", "measure", "run_trials", "summarize"]


@dataclass
class Trial:
    kind: str
    trial: int
    victim: str
    partner: str
    flow_a_to_b: FlowGap  # bench/gaps.py: sent, answered, lost, gap, tail, recovered
    flow_b_to_a: FlowGap
    flow_both: FlowGap  # request through the victim, answer through its partner
    detect_a_ms: float | None  # failure -> site A's "gateway dead" event for the victim
    detect_b_ms: float | None  # failure -> site B's "gateway dead" event for the partner
    why_b: str  # site B's reason
    restore_s: float | None  # restored -> both sites all alive, partners up

    def flows(self) -> dict[str, FlowGap]:
        return {"both": self.flow_both, "a_to_b": self.flow_a_to_b, "b_to_a": self.flow_b_to_a}

    def gap_ms(self, direction: str) -> float:
        return self.flows()[direction].gap_ms

    def failures(self) -> list[dict[str, object]]:
        return [{"kind": self.kind, "trial": self.trial, "victim": self.victim, "direction": d, "flow": f.flow,
                 "problem": f.problem} for d, f in self.flows().items() if not f.recovered]

    def row(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "trial": self.trial, "victim": self.victim,
                                  "partner": self.partner}
        for d, f in self.flows().items():
            out |= {f"gap_{d}_ms": f.gap_ms, f"sent_{d}": f.sent, f"lost_{d}": f.lost, f"tail_{d}_ms": f.tail_ms,
                    f"recovered_{d}": f.recovered}
        return out | {"detect_a_ms": self.detect_a_ms, "detect_b_ms": self.detect_b_ms, "why_b": self.why_b,
                      "restore_s": self.restore_s}


def dead_event(site: Site, gw: str, after: float) -> tuple[float, str] | None:
    for ev in site.api().events(limit=1000):
        if ev.kind == "gateway" and ev.reason == "dead" and ev.src == gw and ev.ts >= after:
            return ev.ts, ev.detail
    return None


class TwoSites:
    def __init__(self, emu: Emulation) -> None:
        self.a, self.b = emu.sites
        n, hosts = len(self.a.topo.gateways), min(len(self.a.topo.hosts), len(self.b.topo.hosts))
        if n < 2 or hosts < 3:
            raise BenchError(f"two-site failover needs >= 2 gateways and >= 3 hosts per site (has {n} and {hosts}): "
                             "one flow crosses the victim's pair both ways, two return over another pair")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        try:
            for site in (self.a, self.b):
                site.wait_gateways(lambda gws: all(g.state == "alive" and g.tunnel_up is not False
                                                   and g.partner_up is not False for g in gws.values()),
                                   "gateways all alive with their partners up", max(0.0, deadline - time.monotonic()))
        except Timeout as exc:
            raise BenchError(str(exc)) from None

    def host_bucket(self, site: Site, host_index: int) -> int:
        """The bucket a host's frames address: the virtual MAC its ARP cache holds for IP_G (what
        the switch dispatches on), resolved afresh if the host has none."""
        h = site.topo.hosts[host_index]
        ns, gw_ip = site.topo.ns(h.name), str(site.topo.lan.gateway_ip)
        for _ in range(2):
            neigh = json.loads(sh("ip", "netns", "exec", ns, "ip", "-j", "neigh", "show", gw_ip).stdout or "[]")
            mac = next((n.get("lladdr") for n in neigh if n.get("lladdr") and "FAILED" not in n.get("state", [])), None)
            if mac is not None:
                b = bucket_of_vmac(str(mac), site.topo.lan.vmac_base, site.topo.lan.buckets)
                if b is None:
                    raise BenchError(f"{h.name} resolved IP_G {gw_ip} to {mac}, not a virtual MAC of its site")
                return b
            sh("ip", "netns", "exec", ns, "ping", "-n", "-q", "-c", "1", "-W", "1", gw_ip, check=False)
        raise BenchError(f"{h.name} ({ns}) cannot resolve IP_G {gw_ip}: is its switch up?")

    @contextmanager
    def pinned(self, pins: list[tuple[Site, int, str]]) -> Iterator[None]:
        done: list[tuple[Site, int]] = []
        try:
            for site, bucket, gw in pins:
                site.api().pin(bucket, gw)
                done.append((site, bucket))
            yield
        finally:
            for site, bucket in done:
                try:
                    site.api().unpin(bucket)
                except ApiError as exc:
                    print(f"  warning: could not unpin bucket {bucket} at {site.prefix}: {exc}", flush=True)

    def trial(self, kind: str, round_: int) -> Trial:
        self.wait_healthy()
        a, b = self.a, self.b
        n = len(a.topo.gateways)
        i, j = round_ % n, (round_ + 1) % n
        victim, other = a.topo.gateways[i].name, a.topo.gateways[j].name
        partner, b_other = b.topo.gateways[i].name, b.topo.gateways[j].name
        a1, a2, a3 = (self.host_bucket(a, k) for k in range(3))
        b1, b2, b3 = (self.host_bucket(b, k) for k in range(3))
        if len({a1, a2, a3}) < 3 or len({b1, b2, b3}) < 3:
            raise BenchError(f"hosts 1-3 share a bucket at a site (A {a1}/{a2}/{a3}, B {b1}/{b2}/{b3}): "
                             "the three flows cannot be separated")
        pids = a.gateway_pids(victim)
        ah1, ah2, ah3 = a.topo.hosts[:3]
        bh1, bh2, bh3 = b.topo.hosts[:3]
        with self.pinned([(a, a1, victim), (a, a2, other), (a, a3, victim),
                          (b, b2, partner), (b, b1, b_other), (b, b3, partner)]):
            time.sleep(0.3)  # the pin moves are written before the probes start
            probes = {
                "both": ping_probe(a.topo.ns(ah3.name), str(bh3.ip)),
                "a_to_b": ping_probe(a.topo.ns(ah1.name), str(bh1.ip)),
                "b_to_a": ping_probe(b.topo.ns(bh2.name), str(ah2.ip)),
            }
            outs: dict[str, str] = {}
            try:
                into_victim, into_partner = frames_entering([(a, victim), (b, partner)])
                entering = {"a_to_b": (ah1.name, victim, into_victim), "b_to_a": (bh2.name, partner, into_partner)}
                wrong = [f"{h}'s pings: {n} frames entered {g} in 1 s" for h, g, n in entering.values()
                         if n < MIN_PROBE_FRAMES]
                if wrong:
                    raise BenchError("a flow does not enter the victim's pair although its bucket is pinned "
                                     f"there ({'; '.join(wrong)})")
                t_inject = time.time()
                inject(a, kind, victim, pids)
                for d, p in probes.items():
                    outs[d], _ = p.communicate(timeout=20)
            finally:
                for p in probes.values():
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            names = {"both": f"{ah3.name} -> {bh3.name}", "a_to_b": f"{ah1.name} -> {bh1.name}",
                     "b_to_a": f"{bh2.name} -> {ah2.name}"}
            flows = {d: read_probe(names[d], outs[d], t_inject, GOAL_MS / 1000) for d in DIRECTIONS}
            dead_a, dead_b = dead_event(a, victim, t_inject), dead_event(b, partner, t_inject)
            t_restore = time.monotonic()
            restore(a, kind, victim, pids)
        restore_s: float | None
        try:
            self.wait_healthy()
            restore_s = round(time.monotonic() - t_restore, 2)
        except BenchError as exc:
            print(f"  {exc}", flush=True)
            restore_s = None
        t = Trial(kind, round_, victim, partner, flows["a_to_b"], flows["b_to_a"], flows["both"],
                  None if dead_a is None else round(1000 * (dead_a[0] - t_inject), 1),
                  None if dead_b is None else round(1000 * (dead_b[0] - t_inject), 1),
                  "" if dead_b is None else dead_b[1], restore_s)
        failed = "".join(f"; FAILED {f['direction']}: {f['problem']}" for f in t.failures())
        print(f"  {kind:6s} {victim}/{partner}: gap both ways {t.gap_ms('both'):.0f} ms "
              f"({t.flow_both.lost} of {t.flow_both.sent} lost), A->B {t.gap_ms('a_to_b'):.0f} ms "
              f"({t.flow_a_to_b.lost} of {t.flow_a_to_b.sent} lost), B->A {t.gap_ms('b_to_a'):.0f} ms "
              f"({t.flow_b_to_a.lost} of {t.flow_b_to_a.sent} lost); "
              f"dead at A after {t.detect_a_ms} ms, at B after {t.detect_b_ms} ms ({t.why_b or 'no event'}); "
              f"healthy again after {restore_s} s{failed}", flush=True)
        if restore_s is None:
            raise BenchError(f"after the {kind} of {victim} the sites did not recover (see above)")
        return t

    def soak(self, seconds: float) -> dict[str, Any]:
        """Every host pings a host of the other site with 1200-byte pings every 2 ms (through every
        pair, both ways) while two busy loops load the machine; counts the gateways either site
        declared dead meanwhile (nobody failed anything: each is spurious) and why."""
        self.wait_healthy()
        t0 = time.time()
        busy_pings([(src.topo.ns(h.name), str(dst.topo.hosts[k % len(dst.topo.hosts)].ip))
                    for src, dst in ((self.a, self.b), (self.b, self.a)) for k, h in enumerate(src.topo.hosts)], seconds)
        events = [(s.prefix, ev) for s in (self.a, self.b) for ev in s.api().events(limit=1000)
                  if ev.kind == "gateway" and ev.ts >= t0]
        dead = [(p, ev) for p, ev in events if ev.reason == "dead"]
        stale = [(p, ev) for p, ev in events if ev.reason == "stale"]  # the switches' own failovers
        return {"seconds": seconds, "dead_events": len(dead), "stale_events": len(stale),
                "stale_detail": [f"{p}: {ev.detail}" for p, ev in stale],
                "partner_down_events": sum(1 for _, ev in dead if ev.detail.startswith("partner down")),
                "detail": [f"{p}: {ev.src}: {ev.detail}" for p, ev in dead]}


def usable(emu: Emulation) -> str | None:
    """Two sites facing each other. A degraded one (a stage such as the simulated hosts failed)
    is used too: every trial checks that the gateways are healthy and that its flows enter the
    victim's pair."""
    if len(emu.sites) != 2 or emu.spec.partner(emu.sites[0].topo) is None:
        return "the two-site failover needs two sites facing each other (make run TOPO=two-site)"
    if emu.state.phase == "degraded":
        print(f"  warning: the two-site emulation is degraded ({emu.state.failed_stages()}); measuring on it anyway",
              flush=True)
    return None


@contextmanager
def _emulation(topology: Path) -> Iterator[Emulation]:
    """The running two-site emulation, or one booted from `topology` (and stopped afterwards)."""
    try:
        with running_or_booted(Emulation.from_file(topology), usable) as emu:
            yield emu
    except EmulationError as exc:
        raise BenchError(str(exc)) from None


def run_trials(trials: int = 5, kinds: Sequence[str] = KINDS, topology: Path = TWO_SITE_TOPOLOGY,
               soak_s: float = 0.0) -> tuple[list[Trial], dict[str, Any] | None]:
    """Every trial of every kind (see the module doc), then a soak of `soak_s` seconds (0: none)."""
    bad = [k for k in kinds if k not in KINDS]
    if bad or trials < 1 or soak_s < 0:
        raise BenchError(f"kinds must be among {KINDS}, trials >= 1 and soak >= 0 (got {list(kinds)}, {trials}, "
                         f"{soak_s})")
    out: list[Trial] = []
    soak: dict[str, Any] | None = None
    with _emulation(topology) as running:
        emu = TwoSites(running)
        for kind in kinds:
            print(f"== two-site {kind}: {trials} trials", flush=True)
            out += [emu.trial(kind, i) for i in range(trials)]
        if soak_s > 0:
            print(f"== two-site soak: {soak_s:.0f} s under load", flush=True)
            soak = emu.soak(soak_s)
            print(f"  {soak}", flush=True)
    return out, soak


def summarize(trials: Sequence[Trial]) -> dict[str, float]:
    """The keys `measure` returns, from trials (a flow that did not recover counts with its gap
    to the end of its run)."""
    out: dict[str, float] = {}
    for kind in dict.fromkeys(t.kind for t in trials):
        ts = [t for t in trials if t.kind == kind]
        both = statistics.median(t.gap_ms("both") for t in ts)
        a_to_b = statistics.median(t.gap_ms("a_to_b") for t in ts)
        b_to_a = statistics.median(t.gap_ms("b_to_a") for t in ts)
        out[f"failover_{kind}_ms"] = round(both, 1)
        out[f"failover_{kind}_a_to_b_ms"] = round(a_to_b, 1)
        out[f"failover_{kind}_b_to_a_ms"] = round(b_to_a, 1)
        out[f"failover_{kind}_max_ms"] = max(t.gap_ms(d) for t in ts for d in DIRECTIONS)
    return out


def failures(trials: Sequence[Trial], soak: dict[str, Any] | None = None) -> list[dict[str, object]]:
    """Every flow of every trial that did not recover (which trial, which direction, why), then
    every failover of the soak (each spurious: whose and why)."""
    spurious = [] if soak is None else spurious_failovers(soak["detail"], soak["stale_detail"])
    return [f for t in trials for f in t.failures()] + spurious


def measure(trials: int = 5, kinds: Sequence[str] = KINDS, topology: Path = TWO_SITE_TOPOLOGY) -> dict[str, float]:
    """Median longest gap (ms) over `trials` trials per kind of failure of a site A gateway.

    Uses the running two-site emulation when one is up; otherwise boots `topology` and stops it
    afterwards. Needs root; call it under
    `flock /work/.emu.lock`. Keys, for each kind in `kinds`:
    `failover_<kind>_ms` (median gap of the flow whose request and answer both cross the
    victim's pair: the whole path), `failover_<kind>_a_to_b_ms` and `failover_<kind>_b_to_a_ms`
    (median gap of a flow entering the victim's pair at site A, resp. site B, and returning
    over another pair), `failover_<kind>_max_ms` (worst trial, any flow); each gap as
    bench/gaps.py measures it.
    Raises `BenchError` (bench.failover.two_site) when the emulation cannot be booted or probed,
    and when a flow has not recovered by the end of its run (naming the trials and flows): a
    failover that never completes has no gap to report.
    """
    done = run_trials(trials, kinds, topology)[0]
    bad = failures(done)
    if bad:
        raise BenchError(f"{len(bad)} probe flow(s) did not recover: " + "; ".join(
            f"{f['kind']} trial {f['trial']} {f['direction']} {f['flow']}: {f['problem']}" for f in bad))
    return summarize(done)


def write(trials: Sequence[Trial], n_trials: int, topology: str = "topologies/two-site.yaml",
          soak: dict[str, Any] | None = None) -> None:
    summary = summarize(trials)
    metrics: dict[str, Metric] = {}
    if soak is not None:
        metrics["spurious_failovers_soak_two_site"] = Metric(
            soak["dead_events"], "failovers", goal=0, higher_is_better=False,
            note=f"{soak['seconds']:.0f} s, 1200 B pings every 2 ms from every host to the other site and two "
                 f"busy loops; {soak['partner_down_events']} of them 'partner down'; each listed with why under the "
                 "failed trials")
        metrics["spurious_dataplane_failovers_soak_two_site"] = Metric(
            soak["stale_events"], "failovers", goal=0, higher_is_better=False,
            note="the switches' own (gateway/stale events of either site), same soak; each listed with why under the "
                 "failed trials")
    for kind in dict.fromkeys(t.kind for t in trials):
        k = f"failover_{kind}"
        metrics[f"{k}_ms"] = Metric(summary[f"{k}_ms"], "ms", goal=GOAL_MS, higher_is_better=False,
                                    note="median, the flow whose request enters the victim at site A and whose "
                                         "answer enters its partner at site B: the whole path, both directions")
        for d, label in (("a_to_b", "A -> B flow (enters the victim at site A)"),
                         ("b_to_a", "B -> A flow (enters the victim's partner at site B)")):
            metrics[f"{k}_{d}_ms"] = Metric(summary[f"{k}_{d}_ms"], "ms", goal=GOAL_MS, higher_is_better=False,
                                            note=f"median, {label}")
        metrics[f"{k}_max_ms"] = Metric(summary[f"{k}_max_ms"], "ms", goal=GOAL_MS, higher_is_better=False,
                                        note="worst trial, any of the three flows")
        detects = [t.detect_b_ms for t in trials if t.kind == kind and t.detect_b_ms is not None]
        metrics[f"{k}_partner_detect_ms"] = Metric(
            statistics.median(detects) if detects else None, "ms",
            note="median, failure -> site B's 'gateway dead' event for the partner")
    flows = [f for t in trials for f in t.flows().values()]
    metrics["failover_not_recovered"] = Metric(
        sum(1 for f in flows if not f.recovered), "flows",
        note=f"goal 0; of {len(flows)} (three per trial): answers not back within {GOAL_MS:.0f} ms of the end of the run")
    metrics["probe_lost"] = Metric(
        sum(f.lost for f in flows), "probes",
        note=f"of {sum(f.sent for f in flows)} sent by all flows, every probe without an answer within 1 s "
             "(those after the last answer included)")
    series = [Series(f"{kind} {'both ways' if d == 'both' else d.replace('_to_', '->').upper()}",
                     x=[i + 1 for i in range(sum(1 for t in trials if t.kind == kind))],
                     y=[t.gap_ms(d) for t in trials if t.kind == kind],
                     xlabel="trial", ylabel="longest gap (ms)")
              for kind in dict.fromkeys(t.kind for t in trials) for d in DIRECTIONS]
    method = (
        "Two-site emulation (`make run TOPO=two-site`: two eBPF switches, two controllers, N strongSwan gateway "
        "pairs with kernel-libipsec, real agents), shipped defaults: UDP heartbeats every "
        f"{HEARTBEAT_MS} ms, dead after {MISSED_HEARTBEATS} missed; pair beacons between the agents of each pair "
        f"through their tunnel at the same cadence, partner down after {MISSED_HEARTBEATS} missed (or when the "
        "partner says its charon or LAN is down); port monitor on. Per trial gateway i of site A is frozen (SIGSTOP "
        "charon + agent, link up), killed (SIGKILL both) or unplugged (its LAN interface down) while three flows "
        "cross its pair (`ping -D -O -i 0.01 -W 1`, 500 probes, failure after 1 s; host buckets pinned for the "
        "trial): one whose request enters the victim at site A and whose answer enters its partner at site B (both "
        "directions through the pair: the headline `failover_<kind>_ms`), and one each way returning over another "
        "pair (each checked to enter the victim's pair, >= 50 frames in 1 s, before the failure). Each probe is "
        "read by bench/gaps.py: `sent` probes over the whole run, "
        "`lost` = sent - those answered within 1 s (the probes after the last answer included); the gap runs from "
        "the arrival of the last answer to a probe sent before the failure to the first answer to a probe sent after "
        "it, or between later answers, or from the last answer to the end of the run (the send of the last probe), "
        "whichever is longest. The both-ways flow's gap is the time until both sites stop using the pair, the "
        "A -> B flow's the time until site A stops using the victim, the B -> A flow's the time until site B stops "
        "using the victim's partner. A flow whose answers are not back within "
        f"{GOAL_MS:.0f} ms of the end of its run (or never came after the failure) has not recovered: its gap runs "
        "to the end of the run, the trial is listed under the failed trials and the benchmark exits 1. "
        f"{n_trials} trials per kind, i rotating over the pairs; the victim is restored and both sites are healthy "
        f"again before the next trial. Topology: {topology}. The machine (2 cores) is shared with other work."
        + ("" if soak is None else
           f" Soak: {soak['seconds']:.0f} s under load, nothing failed: each gateway either site declared dead and "
           "each failover a switch made by itself is spurious (goal 0), listed with its event's detail under the "
           "failed trials, and the benchmark exits 1.")
    )
    paths = write_report("failover-two-site", metrics, [t.row() for t in trials], series,
                         title="Gateway failover on the two-site emulation, both directions (shipped defaults)",
                         method=method, failures=failures(trials, soak))
    print(f"wrote {paths.json}, {paths.markdown}, {paths.png}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.failover --two-site", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=None, help="trials per kind of failure (default 5; --quick 1)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    ap.add_argument("--topology", type=Path, default=TWO_SITE_TOPOLOGY, help="two-site file to boot if none is up")
    ap.add_argument("--soak-s", type=float, default=None,
                    help="soak under load afterwards, seconds (0: none; default 60; --quick 10)")
    ap.add_argument("--quick", action="store_true", help="1 trial per kind and a 10 s soak: proves the benchmark "
                                                         "works, measures nothing worth publishing")
    args = ap.parse_args(argv)
    args.trials = args.trials if args.trials is not None else (1 if args.quick else 5)
    args.soak_s = args.soak_s if args.soak_s is not None else (10.0 if args.quick else 60.0)
    try:
        trials, soak = run_trials(args.trials, [k for k in args.kinds.split(",") if k], args.topology, args.soak_s)
    except BenchError as exc:
        print(f"bench.failover --two-site: {exc}", file=sys.stderr)
        return 1
    a = Emulation.from_file(args.topology).spec.sites[0]
    write(trials, args.trials, f"{args.topology.name} (N = {len(a.gateways)} pairs, {len(a.hosts)} namespace hosts per "
                               f"site, gateway CPU cap {a.gateway_cpu_percent} % of a core"
                               f"{'' if a.simulated_hosts is None else f', {a.simulated_hosts.count} simulated hosts'})",
          soak)
    bad = failures(trials, soak)
    for f in bad:
        where = (f"{f['kind']} trial {f['trial']} ({f['victim']}), {f['direction']} flow {f['flow']}" if "trial" in f
                 else f["kind"])
        print(f"bench.failover --two-site: FAILED {where}: {f['problem']}", file=sys.stderr)
    return 1 if bad else 0
