"""One chaos run on the running two-site emulation: operator intent set, flows both ways,
the schedule's faults injected on time (each in a thread of its own, so they overlap as
scheduled), and two checker loops feeding bench/chaos/checker.py until the end or the first
violation."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos import checker, live
from bench.chaos.checker import FlowTracker, Injected, Intent, LogScanner, StuckTracker, Violation
from bench.chaos.faults import Driver, FaultError, Outcome
from bench.chaos.loss import Judged, LossTracker
from bench.chaos.paths import FlowRoute, PathBook, pair_index
from bench.chaos.schedule import SETTLE_S, Fault
from bench.gaps import REPLY_WINDOW_S
from supergw_controller.ha.view import overlaps, write_windows
from supergw_proto.api import ReplicaHealth
from supergw_proto.rest import ApiError, ControllerClient
from topologies import ha
from topologies.emulation import Emulation
from topologies.poll import Timeout
from topologies.site import Site

WEIGHT = 2.0  # site A's first gateway
FLOW_CHECK_S = 0.25
REST_CHECK_S = 0.5
RESOURCE_EVERY_S = 5.0
GROWTH_WARMUP_S = 120.0
READ_TIMEOUT_S = 1.5


class RunError(RuntimeError):
    """The run could not start (the emulation is not healthy, a flow does not work)."""


@dataclass
class Record:
    """Everything the report needs, filled while the run goes."""
    seed: int
    minutes: float
    schedule: list[Fault]
    injected: dict[int, Injected] = field(default_factory=dict)
    outcomes: dict[int, str] = field(default_factory=dict)  # seq -> resolved target and detail
    violations: list[Violation] = field(default_factory=list)
    resources: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    intent: dict[str, Any] = field(default_factory=dict)
    flows: list[str] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)
    recovery_s: dict[int, float] = field(default_factory=dict)
    silences: list[checker.Silence] = field(default_factory=list)
    charged: dict[int, list[checker.Silence]] = field(default_factory=dict)  # fault seq -> silences charged to it
    windows: list[Judged] = field(default_factory=list)  # the loss-rate windows as judged
    routes: list[FlowRoute] = field(default_factory=list)
    carried_s: dict[str, float] = field(default_factory=dict)  # gateway -> seconds it carried a leg of a flow
    aimed: dict[int, str] = field(default_factory=dict)  # gateway fault seq -> why its target changed
    ended_at: float = 0.0
    logs: list[Path] = field(default_factory=list)


class ChaosRun:
    def __init__(self, emu: Emulation, record: Record, say: Callable[[str], None]) -> None:
        self.emu, self.rec, self.say = emu, record, say
        self.driver = Driver(emu)
        self.a, self.b = self.driver.a, self.driver.b
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.t0 = time.time()
        self.paths = PathBook([], pair_index([[g.name for g in site.topo.gateways] for site in (self.a, self.b)]))
        self.flows = FlowTracker(interval_s=live.PING_INTERVAL_S, settle_s=SETTLE_S, paths=self.paths)
        self.loss = LossTracker(interval_s=live.PING_INTERVAL_S, settle_s=SETTLE_S, reply_window_s=REPLY_WINDOW_S,
                                paths=self.paths)
        self.driver.aim = self.aim
        self.stuck = StuckTracker(settle_s=SETTLE_S, slack_s=REST_CHECK_S + READ_TIMEOUT_S)
        self.logs = LogScanner()
        self.split_seen: set[tuple[int, int]] = set()
        self.intent: dict[str, Intent] = {}
        self.readers: dict[str, ControllerClient] = {}

    # --- helpers ------------------------------------------------------------------------
    def now(self) -> float:
        return time.time() - self.t0

    def reader(self, site: Site, replica: str | None) -> ControllerClient:
        """A client with a short timeout: a frozen replica must not hold the checker for long."""
        key = f"{site.prefix}/{replica}"
        if key not in self.readers:
            self.readers[key] = ControllerClient(site.topo.api_url(replica), site.token, timeout=READ_TIMEOUT_S)
        return self.readers[key]

    def violate(self, found: list[Violation]) -> None:
        if not found:
            return
        with self.lock:
            self.rec.violations.extend(found)
        for v in found:
            self.say(f"VIOLATION {v.line()}")
        self.stop.set()

    def faults_now(self) -> list[Injected]:
        with self.lock:
            return list(self.rec.injected.values())

    def site_leader(self, views: dict[str, ReplicaHealth | None]) -> str | None:
        return ha.agreed_leader(views)

    # --- setup ----------------------------------------------------------------------------
    def settle(self, timeout: float = 90.0) -> None:
        """Every gateway alive at both sites, one agreed leader at site A."""
        try:
            leader = self.a.agreed_leader(timeout=timeout, primary=True)
            for site, replica in ((self.a, leader), (self.b, None)):
                site.wait_gateways(lambda gws: all(g.state in ("alive", "drained") for g in gws.values()),
                                   "every gateway alive", timeout, replica)
        except Timeout as exc:
            raise RunError(f"the emulation is not healthy: {exc}") from None

    def set_intent(self) -> None:
        """Site A: its first gateway weighs WEIGHT, the second host's bucket is pinned to its
        second gateway, its last gateway is drained."""
        leader = self.a.agreed_leader(timeout=30, primary=True)
        api = self.a.api(leader)
        gws = [g.name for g in self.a.topo.gateways]
        if len(gws) < 3:
            raise RunError("bench/chaos needs 3 or more gateways per site (one is drained, one carries a pin)")
        host_ip = str(self.a.topo.hosts[1].ip)
        bucket = next((h.bucket for h in api.hosts() if h.ip == host_ip), 7)
        api.set_weight(gws[0], WEIGHT)
        api.pin(bucket, gws[1])
        api.drain(gws[-1])
        self.intent["a"] = Intent({g: (WEIGHT if g == gws[0] else 1.0) for g in gws}, frozenset({gws[-1]}),
                                  {bucket: gws[1]})
        self.rec.intent = {"site": "a", "weights": dict(self.intent["a"].weights), "drained": [gws[-1]],
                           "pins": {str(bucket): gws[1]}, "pinned_host": self.a.topo.hosts[1].name}
        try:
            self.a.wait_gateways(lambda g: g[gws[-1]].buckets == 0, f"{gws[-1]} drained", 20, leader)
        except Timeout as exc:
            raise RunError(str(exc)) from None

    def clear_intent(self) -> None:
        """Undo `set_intent` (the emulation may be someone's `make run`), best effort."""
        want = self.intent.get("a")
        if want is None:
            return
        try:
            api = self.a.api(self.a.agreed_leader(timeout=30))
            for g in want.drained:
                api.undrain(g)
            for b in want.pins:
                api.unpin(b)
            for g in want.weights:
                api.set_weight(g, 1.0)
        except (ApiError, Timeout) as exc:
            self.say(f"could not undo the run's pins/drain/weights: {exc}")

    def flow_specs(self) -> list[live.FlowSpec]:
        """Every host of each site pings a host of the other: requests and answers cross both ways."""
        out = []
        for src, dst in ((self.a, self.b), (self.b, self.a)):
            hs, hd = src.topo.hosts, dst.topo.hosts
            for i, h in enumerate(hs):
                peer = hd[(i + (0 if src is self.a else 1)) % len(hd)]
                out.append(live.FlowSpec(f"{h.name} -> {peer.name}", src.topo.ns(h.name), str(peer.ip)))
        return out

    # --- the checker loops -------------------------------------------------------------------
    def on_probe(self, flow: str, probe: live.Probe) -> None:
        with self.lock:
            if probe.arrival is not None:
                self.flows.answer(flow, probe.arrival - self.t0)
            self.loss.probe(flow, probe.seq, probe.sent - self.t0, probe.answered)

    def log_files(self) -> list[Path]:
        return sorted(p for s in (self.a, self.b) for p in s.paths.logs.glob("*.log"))

    def fast_loop(self) -> None:
        """Flows, stuck buckets and logs, every FLOW_CHECK_S."""
        last_logs = 0.0
        while not self.stop.wait(FLOW_CHECK_S):
            now, faults = self.now(), self.faults_now()
            with self.lock:
                found = self.flows.check(faults, now) + self.stuck.check(faults, now) + self.loss.check(faults, now)
            if now - last_logs >= 2.0:
                found += self.logs.scan(self.log_files(), now)
                last_logs = now
            self.violate(found)

    def rest_loop(self) -> None:
        """Who leads, write windows, buckets, intent and resources, read over REST and /proc."""
        last_res = last_growth = -1e9
        while not self.stop.wait(REST_CHECK_S):
            now = self.now()
            found: list[Violation] = []
            names = self.a.topo.controller.replica_names()
            views: dict[str, ReplicaHealth | None] = {}
            for n in names:
                try:
                    h = self.reader(self.a, n).health()
                    views[n] = h if isinstance(h, ReplicaHealth) else None
                except ApiError:
                    views[n] = None
            found += self.check_split_brain(views, now)
            leader = self.site_leader(views)
            maps: dict[str, dict[int, str | None]] = {}
            for site, replica in ((self.a, leader), (self.b, None)):
                if site is self.a and leader is None:
                    continue
                found += self.check_site(site, replica, now, maps)
            with self.lock:
                self.paths.observe(now, maps)
            if now - last_res >= RESOURCE_EVERY_S:
                last_res = now
                self.sample_resources(now, leader)
            if now - last_growth >= 30.0:
                last_growth = now
                with self.lock:
                    series = {k: list(v) for k, v in self.rec.resources.items()}
                found += checker.growth(series, GROWTH_WARMUP_S, now)
            self.violate(found)

    def check_split_brain(self, views: dict[str, ReplicaHealth | None], now: float) -> list[Violation]:
        raw = {n: {**h.ha.model_dump(), "switch_role": h.role} if h is not None else {} for n, h in views.items()}
        try:
            windows = write_windows(raw)
        except ValueError as exc:
            return [Violation("split_brain", f"the replicas' write windows disagree: {exc}", now)]
        return checker.split_brain(overlaps(windows), self.split_seen, now)

    def check_site(self, site: Site, replica: str | None, now: float,
                   maps: dict[str, dict[int, str | None]]) -> list[Violation]:
        """Stuck buckets and (site A) the intent, as `replica` shows them; its bucket map into `maps`."""
        api = self.reader(site, replica)
        try:
            gws = api.gateways()
            buckets = api.buckets()
        except ApiError:
            return []
        maps[site.prefix] = {b.bucket: b.gateway for b in buckets}
        dead = {g.name for g in gws if g.state == "dead"}
        with self.lock:
            self.stuck.observe(site.prefix, {b.bucket: b.gateway for b in buckets}, dead, now)
        want = self.intent.get("a") if site is self.a else None
        if want is None:
            return []
        diff = checker.intent_diff(want, {g.name: g.weight for g in gws}, {g.name for g in gws if g.drained},
                                   {b.bucket: b.pinned for b in buckets if b.pinned})
        return [Violation("intent", f"site A leader {replica}: {d}", now) for d in diff]

    def sample_resources(self, now: float, leader: str | None) -> None:
        procs = [r for r in self.emu.state.processes if r.site in (self.a.prefix, self.b.prefix)]
        ctl = {f"{self.a.prefix}/{self.a.slot(n).process}": self.reader(self.a, n)
               for n in self.a.topo.controller.replica_names()}
        ctl[f"{self.b.prefix}/{self.b.slot(None).process}"] = self.reader(self.b, None)
        got = live.sample(procs, ctl)
        with self.lock:
            for k, v in got.items():
                self.rec.resources.setdefault(k, []).append((round(now, 1), v))

    # --- the run ------------------------------------------------------------------------------
    def fire(self, fault: Fault) -> None:
        def injected(target: str) -> None:
            with self.lock:
                self.rec.injected[fault.seq] = Injected(fault, self.now(), None, target)
            self.say(f"t+{self.now():6.1f}s inject {fault.describe()} -> {target}")
        try:
            out: Outcome = self.driver.run(fault, self.stop, injected)
        except FaultError as exc:
            self.violate([Violation("fault", str(exc), self.now())])
            return
        except Exception as exc:  # a component that would not start again: a defect, stop and keep the logs
            self.violate([Violation("fault", f"{fault.describe()}: {type(exc).__name__}: {exc}", self.now())])
            return
        finally:
            with self.lock:
                if (i := self.rec.injected.get(fault.seq)) is not None:
                    self.rec.injected[fault.seq] = Injected(i.fault, i.start, self.now(), i.target)
        with self.lock:
            self.rec.outcomes[fault.seq] = f"{out.target}{' (' + out.detail + ')' if out.detail else ''}"
        if out.skipped:
            self.say(f"t+{self.now():6.1f}s skipped {fault.describe()}: {out.detail}")

    def go(self) -> Record:
        self.settle()
        self.set_intent()
        specs = self.flow_specs()
        pings = live.Pings(specs, self.on_probe)
        self.rec.flows = [f.name for f in pings.flows]
        pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fault")
        loops = [threading.Thread(target=f, name=f.__name__, daemon=True) for f in (self.fast_loop, self.rest_loop)]
        pending: list[Future[None]] = []
        try:
            self.t0 = time.time()
            pings.start()
            self.wait_flows()
            self.route_flows(specs)
            for t in loops:
                t.start()
            end = 60.0 * self.rec.minutes
            for fault in self.rec.schedule:
                if self.stop.wait(max(0.0, fault.at_s - self.now())):
                    break
                pending.append(pool.submit(self.fire, fault))
            self.stop.wait(max(0.0, end - self.now()))
            for f in pending:
                f.result()
            self.stop.wait(SETTLE_S)  # every fault undone: the last ones settle under watch
        finally:
            self.stop.set()
            pool.shutdown(wait=True)
            for t in loops:
                t.join(timeout=10)
            pings.stop()
            self.rec.ended_at = self.now()
            self.finish(pings)
            self.clear_intent()
            for c in self.readers.values():
                c.close()
        return self.rec

    def wait_flows(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                missing = [f for f in self.rec.flows if f not in self.flows.last]
            if not missing:
                return
            time.sleep(0.2)
        raise RunError(f"flows without an answer {timeout:.0f} s after they started: {missing}")

    def finish(self, pings: live.Pings) -> None:
        now = self.now()
        with self.lock:
            faults = list(self.rec.injected.values())
            self.rec.violations += self.loss.check(faults, now, final=True)
            self.rec.windows = list(self.loss.judged)
            self.rec.sent, self.rec.answered = dict(pings.sent), dict(pings.answered)
            self.rec.silences = list(self.flows.silences)
            self.rec.charged = self.flows.charged(faults, now)
            for seq in self.rec.injected:
                self.rec.recovery_s[seq] = max((x.seconds for x in self.rec.charged.get(seq, [])), default=0.0)
            self.rec.carried_s = carried_seconds(self.paths, now)
        self.rec.logs = self.log_files()

    # --- flows on every gateway, faults where the flows are -------------------------------------
    def host_buckets(self, site: Site) -> dict[str, int]:
        """Host name -> its bucket, from the controller that leads the site (hosts learned once they sent)."""
        replica = self.a.agreed_leader(timeout=30, primary=True) if site is self.a else None
        by_ip = {h.ip: h.bucket for h in site.api(replica).hosts() if h.ip}
        missing = [h.name for h in site.topo.hosts if str(h.ip) not in by_ip]
        if missing:
            raise RunError(f"{site.prefix}: hosts not learned although their flows run: {missing}")
        return {h.name: by_ip[str(h.ip)] for h in site.topo.hosts}

    def route_flows(self, specs: list[live.FlowSpec]) -> None:
        """Every flow's legs (the buckets its request and its answer enter by), then the hosts'
        buckets spread so that every gateway that may carry traffic carries a flow's leg (the
        drained one cannot), by operator moves (not pins: the rebalancer and the storms may move
        them again; the report says how long each gateway carried one)."""
        buckets = {site.prefix: self.host_buckets(site) for site in (self.a, self.b)}
        site_of = {h.name: site for site in (self.a, self.b) for h in site.topo.hosts}
        routes = []
        for f in specs:
            src, dst = (x.strip() for x in f.name.split("->"))
            routes.append(FlowRoute(f.name, site_of[src].prefix, buckets[site_of[src].prefix][src],
                                    site_of[dst].prefix, buckets[site_of[dst].prefix][dst]))
        for site in (self.a, self.b):
            replica = self.a.agreed_leader(timeout=30, primary=True) if site is self.a else None
            moves = spread_moves(list(buckets[site.prefix].values()), site.api(replica).buckets(),
                                 [g.name for g in site.api(replica).gateways() if g.state == "alive" and not g.drained])
            for bucket, gw in moves:
                site.api(replica).move(bucket, gw)
            if moves:
                self.say(f"{site.prefix}: flows spread over every gateway: {', '.join(f'bucket {b} -> {g}' for b, g in moves)}")
        with self.lock:
            self.paths.routes = routes
            self.rec.routes = routes

    def aim(self, fault: Fault) -> str:
        """The gateway a gateway fault hits: its scheduled target when that one's pair carries a
        flow now, else one of its site's gateways whose pair does (seeded by the fault, so a
        replay with the same flows aims alike)."""
        site = self.a if fault.site == "a" else self.b
        with self.lock:
            pairs = self.paths.pairs_now()
        names = [g.name for g in site.topo.gateways]
        if self.paths.pair_of.get(fault.target) in pairs:
            return fault.target
        carrying = [g for g in names if self.paths.pair_of[g] in pairs]
        if not carrying:
            return fault.target
        chosen = random.Random(fault.seq).choice(carrying)
        with self.lock:
            self.rec.aimed[fault.seq] = f"{fault.target} carried no flow: {chosen} instead"
        return chosen


def spread_moves(host_buckets: list[int], buckets: list[Any], eligible: list[str]) -> list[tuple[int, str]]:
    """Operator moves that leave every `eligible` gateway with a host's bucket (unpinned ones
    only, taken from the gateway holding most of them)."""
    owner = {b.bucket: b.gateway for b in buckets}
    pinned = {b.bucket for b in buckets if b.pinned}
    held: dict[str, list[int]] = {g: [] for g in eligible}
    for b in dict.fromkeys(host_buckets):
        if owner.get(b) in held:
            held[str(owner[b])].append(b)
    moves: list[tuple[int, str]] = []
    for g in eligible:
        if held[g]:
            continue
        donor = max(held, key=lambda d: len([b for b in held[d] if b not in pinned]))
        free = [b for b in held[donor] if b not in pinned]
        if len(held[donor]) < 2 or not free:
            break  # fewer hosts than gateways: nothing to spare
        b = free[-1]
        held[donor].remove(b)
        held[g].append(b)
        moves.append((b, g))
    return moves


def carried_seconds(paths: PathBook, now: float) -> dict[str, float]:
    """Per gateway, the seconds of the run some flow crossed its pair (both members of a pair
    carry each flow that crosses it: one encrypts, the other decrypts)."""
    covered: dict[int, list[tuple[float, float]]] = {}
    for hist in paths.history.values():
        for i, (since, pairs) in enumerate(hist):
            until = hist[i + 1][0] if i + 1 < len(hist) else now
            for p in pairs:
                covered.setdefault(p, []).append((since, until))
    return {g: round(_union(covered.get(p, [])), 1) for g, p in paths.pair_of.items()}


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total
