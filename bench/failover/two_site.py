"""Failover on the two-site emulation, both directions: real agents, real tunnels, shipped defaults.

`measure(trials)` is what bench/scaling calls; `python -m bench.failover --two-site
[--trials 5]` writes bench/results/failover-two-site.{json,md,png}. Root; run it under
`flock /tmp/supergw-netns.lock`. It uses the running two-site emulation when one is up and
otherwise boots `topologies/two-site.yaml` (and stops it again afterwards).

Each trial fails gateway i of site A (i = trial number modulo N) -- freeze (SIGSTOP of its
charon and agent, link up), kill (SIGKILL of both) or link (its LAN interface down) -- while
two flows cross its pair, one each way, each returning over another pair (a host's bucket is
the one its ARP cache's virtual MAC for IP_G names: what the switch dispatches on):

    A -> B:  host a1 pings host b1;  a1's bucket pinned to agw_i at site A,  b1's to bgw_j at B
    B -> A:  host b2 pings host a2;  b2's bucket pinned to bgw_i at site B,  a2's to agw_j at A

Each flow is seen entering its gateway's LAN port before the failure (or the trial stops and
says so). The longest gap between two replies of the A -> B flow is the time until site A
stops using agw_i, that of the B -> A flow the time until site B stops using its partner
bgw_i (pair beacons through the tunnel). Pins make the flows independent of the rebalancer; a pin
to a dead gateway is failed over like any bucket, and the pins are removed after each trial.
Then the victim is restored (SIGCONT; `supergw-gateway up` and a new agent; link up) and
both sites must show every gateway alive with its partner up before the next trial.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.failover.__main__ import GOAL_MS, Api, BenchError, busy_pings, max_gap_ms, sh
from bench.report import Metric, Series, write_report
from supergw_proto.bucket import bucket_of_vmac
from topologies import components, processes
from topologies.configs import HEARTBEAT_MS, MISSED_HEARTBEATS, REPO, controller_url
from topologies.model import Topology
from topologies.processes import RunState
from topologies.run import AGENT_PORT, STATE
from topologies.twosite import TWO_SITE_TOPOLOGY, load_two_site, site_dir, site_logs

KINDS = ("freeze", "kill", "link")
DIRECTIONS = ("a_to_b", "b_to_a")
PING_INTERVAL_S = 0.01
PROBE_PINGS = 500  # 5 s: 1 s before the failure, 4 s after

__all__ = ["KINDS", "BenchError", "Trial", "measure", "run_trials", "summarize"]


@dataclass
class Trial:
    kind: str
    victim: str
    partner: str
    gap_a_to_b_ms: float
    gap_b_to_a_ms: float
    lost_a_to_b: int
    lost_b_to_a: int
    detect_a_ms: float | None  # failure -> site A's "gateway dead" event for the victim
    detect_b_ms: float | None  # failure -> site B's "gateway dead" event for the partner
    why_b: str  # site B's reason
    restore_s: float | None  # restored -> both sites all alive, partners up


class Site:
    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        conf = site_dir(topo) / "config"
        self.conf_dir = conf
        self.api = Api(controller_url(topo), (conf / "api-token").read_text().strip())

    def post(self, path: str, body: dict[str, Any] | None, method: str = "POST") -> Any:
        req = urllib.request.Request(self.api.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {self.api.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def gateways(self) -> dict[str, dict[str, Any]]:
        return {g["name"]: g for g in self.api.get("/gateways")}

    def dead_event(self, gw: str, after: float) -> tuple[float, str] | None:
        for ev in self.api.get("/events?limit=1000"):
            if ev.get("kind") == "gateway" and ev.get("reason") == "dead" and ev.get("src") == gw and ev["ts"] >= after:
                return float(ev["ts"]), str(ev.get("detail") or "")
        return None

    def gw_config(self, name: str) -> Path:
        return self.conf_dir / f"gateway-{name}.yaml"


class TwoSites:
    def __init__(self, sites: list[Topology], state: RunState) -> None:
        self.a, self.b = Site(sites[0]), Site(sites[1])
        self.state = state
        n, hosts = len(sites[0].gateways), min(len(sites[0].hosts), len(sites[1].hosts))
        if n < 2 or hosts < 2:
            raise BenchError(f"two-site failover needs >= 2 gateways and >= 2 hosts per site (has {n} and {hosts}): "
                             "each flow returns over another pair")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            views = {s.topo.prefix: s.gateways() for s in (self.a, self.b)}
            last = {p: {n: (g["state"], g["buckets"], g.get("tunnel_up"), g.get("partner_up")) for n, g in v.items()}
                    for p, v in views.items()}
            if all(g["state"] == "alive" and g.get("tunnel_up") is not False and g.get("partner_up") is not False
                   for v in views.values() for g in v.values()):
                return
            time.sleep(0.3)
        raise BenchError(f"gateways not all alive with their partners up after {timeout:.0f}s: {last}")

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
                site.post(f"/buckets/{bucket}/pin", {"gateway": gw})
                done.append((site, bucket))
            yield
        finally:
            for site, bucket in done:
                try:
                    site.post(f"/buckets/{bucket}/pin", None, method="DELETE")
                except OSError as exc:
                    print(f"  warning: could not unpin bucket {bucket} at {site.topo.prefix}: {exc}", flush=True)

    def pids(self, gw: str) -> list[int]:
        charon = components.gateway_status(self.a.gw_config(gw)).get("charon_pid")
        if not isinstance(charon, int):
            raise BenchError(f"{gw}: no charon running")
        agent = next((p for p in self.state.processes if p.name == f"agent-{gw}" and processes.alive(p)), None)
        if agent is None:
            raise BenchError(f"{gw}: its agent is not running")
        return [charon, agent.pid]

    def inject(self, kind: str, gw: str, pids: list[int]) -> None:
        if kind == "link":
            sh("ip", "netns", "exec", self.a.topo.ns(gw), "ip", "link", "set", "lan0", "down")
            return
        sig = signal.SIGSTOP if kind == "freeze" else signal.SIGKILL
        for pid in pids:
            os.kill(pid, sig)

    def restore(self, kind: str, gw: str, pids: list[int]) -> None:
        topo = self.a.topo
        if kind == "link":
            sh("ip", "netns", "exec", topo.ns(gw), "ip", "link", "set", "lan0", "up")
        elif kind == "freeze":
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        else:
            logs = site_logs(topo)
            config = self.a.gw_config(gw)
            components.gateway_up(gw, config, logs)
            member = next(g for g in topo.gateways if g.name == gw)
            charon = components.charon_record(gw, config, logs)
            agent = components.start_agent(gw, topo.ns(gw), config, f"{member.mgmt_ip}:{AGENT_PORT}", logs)
            keep = [p for p in self.state.processes if p.name not in (f"charon-{gw}", f"agent-{gw}")]
            self.state.processes = keep + [r for r in (charon, agent) if r is not None]
            self.state.save(STATE)

    def trial(self, kind: str, round_: int) -> Trial:
        self.wait_healthy()
        a, b = self.a, self.b
        n = len(a.topo.gateways)
        i, j = round_ % n, (round_ + 1) % n
        victim, other = a.topo.gateways[i].name, a.topo.gateways[j].name
        partner, b_other = b.topo.gateways[i].name, b.topo.gateways[j].name
        a1, a2, b1, b2 = (self.host_bucket(a, 0), self.host_bucket(a, 1),
                          self.host_bucket(b, 0), self.host_bucket(b, 1))
        if a1 == a2 or b1 == b2:
            raise BenchError(f"hosts 1 and 2 share a bucket at a site (A {a1}/{a2}, B {b1}/{b2}): "
                             "the two flows cannot be separated")
        pids = self.pids(victim)
        ah1, ah2 = a.topo.hosts[0], a.topo.hosts[1]
        bh1, bh2 = b.topo.hosts[0], b.topo.hosts[1]
        with self.pinned([(a, a1, victim), (a, a2, other), (b, b2, partner), (b, b1, b_other)]):
            time.sleep(0.3)  # the pin moves are written before the probes start
            probes = {
                "a_to_b": self._probe(a.topo.ns(ah1.name), str(bh1.ip)),
                "b_to_a": self._probe(b.topo.ns(bh2.name), str(ah2.ip)),
            }
            outs: dict[str, str] = {}
            try:
                rx0 = (self.lan_rx(a, victim), self.lan_rx(b, partner))
                time.sleep(1.0)
                rx1 = (self.lan_rx(a, victim), self.lan_rx(b, partner))
                entering = {"a_to_b": (ah1.name, victim, rx1[0] - rx0[0]), "b_to_a": (bh2.name, partner, rx1[1] - rx0[1])}
                wrong = [f"{h}'s pings: {n} frames entered {g} in 1 s" for h, g, n in entering.values() if n < 50]
                if wrong:
                    raise BenchError("a flow does not enter the victim's pair although its bucket is pinned "
                                     f"there ({'; '.join(wrong)})")
                t_inject = time.time()
                self.inject(kind, victim, pids)
                for d, p in probes.items():
                    outs[d], _ = p.communicate(timeout=20)
            finally:
                for p in probes.values():
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            gaps = {d: max_gap_ms(outs[d]) for d in DIRECTIONS}
            dead_a, dead_b = a.dead_event(victim, t_inject), b.dead_event(partner, t_inject)
            t_restore = time.monotonic()
            self.restore(kind, victim, pids)
        restore_s: float | None
        try:
            self.wait_healthy()
            restore_s = round(time.monotonic() - t_restore, 2)
        except BenchError as exc:
            print(f"  {exc}", flush=True)
            restore_s = None
        t = Trial(kind, victim, partner, round(gaps["a_to_b"][0], 1), round(gaps["b_to_a"][0], 1),
                  gaps["a_to_b"][1], gaps["b_to_a"][1],
                  None if dead_a is None else round(1000 * (dead_a[0] - t_inject), 1),
                  None if dead_b is None else round(1000 * (dead_b[0] - t_inject), 1),
                  "" if dead_b is None else dead_b[1], restore_s)
        print(f"  {kind:6s} {victim}/{partner}: gap A->B {t.gap_a_to_b_ms:.0f} ms, B->A {t.gap_b_to_a_ms:.0f} ms; "
              f"dead at A after {t.detect_a_ms} ms, at B after {t.detect_b_ms} ms ({t.why_b or 'no event'}); "
              f"healthy again after {restore_s} s", flush=True)
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
        dead = [(s.topo.prefix, ev) for s in (self.a, self.b) for ev in s.api.get("/events?limit=1000")
                if ev.get("kind") == "gateway" and ev.get("reason") == "dead" and ev["ts"] >= t0]
        return {"seconds": seconds, "dead_events": len(dead),
                "partner_down_events": sum(1 for _, ev in dead if str(ev.get("detail", "")).startswith("partner down")),
                "detail": [f"{p}: {ev['src']}: {ev.get('detail')}" for p, ev in dead][:10]}

    @staticmethod
    def lan_rx(site: Site, gw: str) -> int:
        """Frames the gateway's LAN interface received from its switch."""
        return int(sh("ip", "netns", "exec", site.topo.ns(gw), "cat", "/sys/class/net/lan0/statistics/rx_packets")
                   .stdout.strip())

    @staticmethod
    def _probe(netns: str, dst: str) -> subprocess.Popen[str]:
        # -c, not -w: with a deadline ping quits at the first error, and a gateway whose charon
        # died answers "net unreachable" until its hosts are failed over.
        return subprocess.Popen(["ip", "netns", "exec", netns, "ping", "-n", "-D", "-i", str(PING_INTERVAL_S), "-W", "1",
                                 "-c", str(PROBE_PINGS), dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _running_two_site() -> RunState | None:
    """The running two-site emulation's state. A degraded one (a stage such as the simulated
    hosts failed) is used too: every trial checks that the gateways are healthy and that its
    flows enter the victim's pair."""
    state = RunState.load(STATE)
    if state is None or state.phase not in ("up", "degraded") or state.info.get("kind") != "two-site":
        return None
    if state.phase == "degraded":
        failed = {k[6:]: v for k, v in state.info.items() if k.startswith("stage.") and v.startswith("failed")}
        print(f"  warning: the two-site emulation is degraded ({failed}); measuring on it anyway", flush=True)
    return state


@contextmanager
def _emulation(topology: Path) -> Iterator[tuple[list[Topology], RunState]]:
    """The running two-site emulation, or one booted from `topology` (and stopped afterwards)."""
    state = _running_two_site()
    if state is not None:
        _, sites = load_two_site(Path(state.topology))
        yield sites, state
        return
    if RunState.load(STATE) is not None:
        raise BenchError(f"another emulation is running ({STATE}); `make stop` first, or boot the two-site one")
    if os.geteuid() != 0:
        raise BenchError("the two-site failover benchmark needs root (namespaces, signals to charon)")
    print(f"== two-site emulation not up: booting {topology}", flush=True)
    cmd = [sys.executable, "-m", "topologies.run"]
    try:
        up = subprocess.run([*cmd, "up", "--topology", str(topology)], cwd=REPO, capture_output=True, text=True)
        state = _running_two_site()
        if state is None:
            raise BenchError(f"the two-site emulation did not come up:\n{(up.stdout + up.stderr)[-2000:]}")
        _, sites = load_two_site(topology)
        yield sites, state
    finally:
        subprocess.run([*cmd, "down", "--topology", str(topology)], cwd=REPO, capture_output=True, text=True)


def run_trials(trials: int = 5, kinds: Sequence[str] = KINDS, topology: Path = TWO_SITE_TOPOLOGY,
               soak_s: float = 0.0) -> tuple[list[Trial], dict[str, Any] | None]:
    """Every trial of every kind (see the module doc), then a soak of `soak_s` seconds (0: none)."""
    bad = [k for k in kinds if k not in KINDS]
    if bad or trials < 1 or soak_s < 0:
        raise BenchError(f"kinds must be among {KINDS}, trials >= 1 and soak >= 0 (got {list(kinds)}, {trials}, "
                         f"{soak_s})")
    out: list[Trial] = []
    soak: dict[str, Any] | None = None
    with _emulation(topology) as (sites, state):
        emu = TwoSites(sites, state)
        for kind in kinds:
            print(f"== two-site {kind}: {trials} trials", flush=True)
            out += [emu.trial(kind, i) for i in range(trials)]
        if soak_s > 0:
            print(f"== two-site soak: {soak_s:.0f} s under load", flush=True)
            soak = emu.soak(soak_s)
            print(f"  {soak}", flush=True)
    return out, soak


def summarize(trials: Sequence[Trial]) -> dict[str, float]:
    """The keys `measure` returns, from trials."""
    out: dict[str, float] = {}
    for kind in dict.fromkeys(t.kind for t in trials):
        ts = [t for t in trials if t.kind == kind]
        a_to_b = statistics.median(t.gap_a_to_b_ms for t in ts)
        b_to_a = statistics.median(t.gap_b_to_a_ms for t in ts)
        out[f"failover_{kind}_ms"] = round(max(a_to_b, b_to_a), 1)
        out[f"failover_{kind}_a_to_b_ms"] = round(a_to_b, 1)
        out[f"failover_{kind}_b_to_a_ms"] = round(b_to_a, 1)
        out[f"failover_{kind}_max_ms"] = max(max(t.gap_a_to_b_ms, t.gap_b_to_a_ms) for t in ts)
    return out


def measure(trials: int = 5, kinds: Sequence[str] = KINDS, topology: Path = TWO_SITE_TOPOLOGY) -> dict[str, float]:
    """Median longest gap (ms) over `trials` trials per kind of failure of a site A gateway.

    Uses the running two-site emulation when one is up (state `kind: two-site`, phase up);
    otherwise boots `topology` and stops it afterwards. Needs root; call it under
    `flock /tmp/supergw-netns.lock`. Keys, for each kind in `kinds`:
    `failover_<kind>_ms` (the worse direction's median), `failover_<kind>_a_to_b_ms` and
    `failover_<kind>_b_to_a_ms` (median gap of a flow entering the victim's pair at site A,
    resp. site B), `failover_<kind>_max_ms` (worst trial, either direction).
    Raises `BenchError` (bench.failover.two_site) when the emulation cannot be booted or probed.
    """
    return summarize(run_trials(trials, kinds, topology)[0])


def write(trials: Sequence[Trial], n_trials: int, topology: str = "topologies/two-site.yaml",
          soak: dict[str, Any] | None = None) -> None:
    summary = summarize(trials)
    metrics: dict[str, Metric] = {}
    if soak is not None:
        metrics["spurious_failovers_soak_two_site"] = Metric(
            soak["dead_events"], "failovers",
            note=f"goal 0; {soak['seconds']:.0f} s, 1200 B pings every 2 ms from every host to the other site and two "
                 f"busy loops; {soak['partner_down_events']} of them 'partner down'; {soak['detail']}")
    for kind in dict.fromkeys(t.kind for t in trials):
        k = f"failover_{kind}"
        metrics[f"{k}_ms"] = Metric(summary[f"{k}_ms"], "ms", goal=GOAL_MS, higher_is_better=False,
                                    note="median, the worse of the two directions")
        for d, label in (("a_to_b", "A -> B flow (enters the victim at site A)"),
                         ("b_to_a", "B -> A flow (enters the victim's partner at site B)")):
            metrics[f"{k}_{d}_ms"] = Metric(summary[f"{k}_{d}_ms"], "ms", goal=GOAL_MS, higher_is_better=False,
                                            note=f"median, {label}")
        metrics[f"{k}_max_ms"] = Metric(summary[f"{k}_max_ms"], "ms", goal=GOAL_MS, higher_is_better=False,
                                        note="worst trial, either direction")
        detects = [t.detect_b_ms for t in trials if t.kind == kind and t.detect_b_ms is not None]
        metrics[f"{k}_partner_detect_ms"] = Metric(
            statistics.median(detects) if detects else None, "ms",
            note="median, failure -> site B's 'gateway dead' event for the partner")
    series = [Series(f"{kind} {d.replace('_to_', '->').upper()}",
                     x=[i + 1 for i in range(sum(1 for t in trials if t.kind == kind))],
                     y=[getattr(t, f"gap_{d}_ms") for t in trials if t.kind == kind],
                     xlabel="trial", ylabel="longest gap (ms)")
              for kind in dict.fromkeys(t.kind for t in trials) for d in DIRECTIONS]
    method = (
        "Two-site emulation (`make run TOPO=two-site`: two eBPF switches, two controllers, N strongSwan gateway "
        "pairs with kernel-libipsec, real agents), shipped defaults: UDP heartbeats every "
        f"{HEARTBEAT_MS} ms, dead after {MISSED_HEARTBEATS} missed; pair beacons between the agents of each pair "
        f"through their tunnel at the same cadence, partner down after {MISSED_HEARTBEATS} missed (or when the "
        "partner says its charon or LAN is down); port monitor on. Per trial gateway i of site A is frozen (SIGSTOP "
        "charon + agent, link up), killed (SIGKILL both) or unplugged (its LAN interface down) while two flows cross "
        "its pair, one each way (`ping -D -i 0.01`, 500 pings, failure after 1 s), each returning over another pair "
        "(host buckets pinned for the trial): the A -> B flow's longest gap between replies is the time until site A "
        "stops using the victim, the B -> A flow's the time until site B stops using the victim's partner. "
        f"{n_trials} trials per kind, i rotating over the pairs; the victim is restored and both sites are healthy "
        f"again before the next trial. Topology: {topology}. The machine (2 cores) is shared with other work."
    )
    paths = write_report("failover-two-site", metrics, [vars(t) for t in trials], series,
                         title="Gateway failover on the two-site emulation, both directions (shipped defaults)",
                         method=method)
    print(f"wrote {paths.json}, {paths.markdown}, {paths.png}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.failover --two-site", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5, help="trials per kind of failure (default 5)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    ap.add_argument("--topology", type=Path, default=TWO_SITE_TOPOLOGY, help="two-site file to boot if none is up")
    ap.add_argument("--soak-s", type=float, default=60.0, help="soak under load afterwards, seconds (0: none; default 60)")
    args = ap.parse_args(argv)
    try:
        trials, soak = run_trials(args.trials, [k for k in args.kinds.split(",") if k], args.topology, args.soak_s)
    except BenchError as exc:
        print(f"bench.failover --two-site: {exc}", file=sys.stderr)
        return 1
    ts, _ = load_two_site(args.topology)
    write(trials, args.trials, f"{args.topology.name} (N = {ts.gateways} pairs, {ts.hosts_per_site} namespace hosts per "
                               f"site, gateway CPU cap {ts.gateway_cpu_percent} % of a core"
                               f"{'' if ts.simulated_hosts is None else f', {ts.simulated_hosts.count} simulated hosts'})",
          soak)
    return 0
