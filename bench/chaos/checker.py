"""The chaos run's invariants, as pure functions and small trackers fed by the run's samplers
(bench/chaos/live.py) while it runs: each returns the violations it sees *now*, so the run
stops at the first one rather than finding it at the end.

- **Flows** (`FlowTracker`): every flow's silences (last answer -> next answer, or -> now
  while it lasts). Each silence is *charged* to one fault (`charge`): of the faults that hit
  this flow (a gateway fault on a pair the flow crosses, bench/chaos/paths.py; a switch
  restart, WAN burst or rebalance storm: every flow) and whose window (injection -> undo +
  settle) reaches the silence's start, the one injected nearest to when it began (the last
  before it, or one recorded up to INJECT_LAG_S after its last answer). It may last
  that fault's budget, not a sum of every fault around; a controller fault never causes a
  silence (the data plane forwards without a controller) but a gateway fault's failover
  waits for a controller, so a charged gateway fault gets the budget of a controller fault
  overlapping the silence when that is longer (the HA goal: takeover + failover in 1 s). A
  silence charged to no fault may last BASELINE_S. Every allowance is one probe interval
  longer (the silence starts at the last answer). An ongoing silence is a violation as soon
  as it is longer than that.
- **Loss rate** (bench/chaos/loss.py): per flow and window of probes, the share lost.
- **Buckets** (`StuckTracker`): a bucket unassigned, or on a gateway its controller counts
  dead, for longer than the largest budget of the faults around (baseline: the failover budget).
- **Split brain** (`split_brain`): two terms' accepted switch-write windows that overlap.
- **Intent** (`intent_diff`): the pins, drains and weights set at the start, as the leader shows them.
- **Growth** (`growth`): a process whose RSS, fds, threads or asyncio tasks end a run well
  above where they stood after its warm-up.
- **Logs** (`LogScanner`): tracebacks, panics and fatal errors in the processes' logs.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos.paths import PathBook
from bench.chaos.schedule import GATEWAY_BUDGET_S, Fault

BASELINE_S = GATEWAY_BUDGET_S  # a silence no fault explains: as long as a failover may take
# A fault's recorded start is taken after it was injected (a signal, an `ip link`): a silence
# whose last answer came up to this long before it is still the fault's.
INJECT_LAG_S = 1.0
# The bucket maps behind the flows' paths are read every 0.5 s (plus the read): a gateway
# fault hits the flows that crossed its pair this long before its recorded start too.
PATH_LOOKBACK_S = 2.0
CAUSES = ("gateway", "switch", "wan", "storm")  # groups whose faults silence flows themselves


@dataclass(frozen=True)
class Violation:
    invariant: str  # flow | bucket | split_brain | intent | growth | log | fault
    what: str
    at: float  # run offset, seconds

    def line(self) -> str:
        return f"[t+{self.at:.1f}s] {self.invariant}: {self.what}"


@dataclass(frozen=True)
class Injected:
    """A fault as it ran: run offsets of its injection and its undo (None while it lasts), and
    the target it was aimed at when injected ("" before)."""
    fault: Fault
    start: float
    undone: float | None
    target: str = ""

    def window(self, now: float, settle_s: float) -> tuple[float, float]:
        return self.start, (now if self.undone is None else self.undone + settle_s)

    @property
    def budget_s(self) -> float:
        return self.fault.budget_s


def overlapping(faults: Iterable[Injected], lo: float, hi: float, now: float, settle_s: float) -> list[Injected]:
    return [f for f in faults if f.window(now, settle_s)[0] <= hi and lo <= f.window(now, settle_s)[1]]


def allowed_s(faults: Sequence[Injected], lo: float, hi: float, now: float, settle_s: float, slack_s: float) -> float:
    """What a bucket may stay stuck from `lo` to `hi`: the largest budget of the faults
    around (BASELINE_S when none), plus `slack_s`."""
    over = overlapping(faults, lo, hi, now, settle_s)
    return max([BASELINE_S, *(f.budget_s for f in over)]) + slack_s


def hits(f: Injected, flow: str, paths: PathBook, now: float, settle_s: float) -> bool:
    """Whether fault `f` can silence `flow` by itself: a gateway fault when the flow crossed
    the target's pair around it; a switch restart, WAN burst or storm always (every flow
    crosses both switches and the WAN; a storm moves any bucket); a controller fault never."""
    group = f.fault.group
    if group not in CAUSES:
        return False
    if group != "gateway":
        return True
    target = f.target or f.fault.target
    pair = paths.pair_of.get(target)
    lo, hi = f.window(now, settle_s)
    return pair is not None and pair in paths.pairs(flow, lo - PATH_LOOKBACK_S, hi)


def charge(faults: Sequence[Injected], flow: str, start: float, end: float, now: float, settle_s: float,
           paths: PathBook) -> tuple[Injected | None, float]:
    """The fault a silence of `flow` from `start` to `end` is charged to (None: none), and
    what it may last (without the probe-interval slack); see the module doc."""
    causes = [f for f in faults if f.start <= start + INJECT_LAG_S and f.window(now, settle_s)[1] >= start
              and hits(f, flow, paths, now, settle_s)]
    if not causes:
        return None, BASELINE_S
    cause = min(causes, key=lambda f: abs(f.start - start))  # the latest before it, or one injected as it began
    return cause, max(BASELINE_S, budget_s(cause, faults, start, end, now, settle_s))


def budget_s(cause: Injected, faults: Sequence[Injected], lo: float, hi: float, now: float, settle_s: float) -> float:
    """What a silence from `lo` to `hi` charged to `cause` may last: its budget, or for a
    gateway fault the longer budget of a controller fault around (the failover waits for it)."""
    if cause.fault.group != "gateway":
        return cause.budget_s
    return max([cause.budget_s, *(f.budget_s for f in overlapping(faults, lo, hi, now, settle_s)
                                  if f.fault.group not in CAUSES)])


@dataclass(frozen=True)
class Silence:
    flow: str
    start: float  # run offset of the last answer before it
    end: float  # run offset of the answer that ended it (or now, while it lasts)
    ongoing: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class FlowTracker:
    """Answers per flow (run offsets); silences longer than `record_s` are kept."""
    interval_s: float  # the probes' spacing: the slack of every budget
    settle_s: float
    paths: PathBook
    record_s: float = 0.1
    last: dict[str, float] = field(default_factory=dict)
    silences: list[Silence] = field(default_factory=list)
    reported: set[tuple[str, float]] = field(default_factory=set)

    def answer(self, flow: str, at: float) -> None:
        prev = self.last.get(flow)
        if prev is not None and at > prev:
            if at - prev >= self.record_s:
                self.silences.append(Silence(flow, prev, at, False))
            self.last[flow] = at
        elif prev is None:
            self.last[flow] = at

    def check(self, faults: Sequence[Injected], now: float) -> list[Violation]:
        out: list[Violation] = []
        current = [Silence(f, t, now, True) for f, t in self.last.items()]
        for s in [*self.silences, *current]:
            if s.seconds <= BASELINE_S + self.interval_s or (s.flow, s.start) in self.reported:
                continue
            cause, budget = charge(faults, s.flow, s.start, s.end, now, self.settle_s, self.paths)
            limit = budget + self.interval_s
            if s.seconds > limit:
                self.reported.add((s.flow, s.start))
                near = [f.fault.describe() + (f" -> {f.target}" if f.target else "")
                        for f in overlapping(faults, s.start, s.end, now, self.settle_s)]
                out.append(Violation("flow", f"{s.flow}: no answer for {1000 * s.seconds:.0f} ms"
                                     + (" (still silent)" if s.ongoing else "")
                                     + f" from t+{s.start:.2f}s, allowed {1000 * limit:.0f} ms (charged to "
                                     + (cause.fault.describe() if cause else "no fault on its path")
                                     + f"; pairs it crossed: {sorted(self.paths.pairs(s.flow, s.start, s.end))}"
                                     + "); faults around it: " + (", ".join(near) or "none"), now))
        return out

    def charged(self, faults: Sequence[Injected], now: float) -> dict[int, list[Silence]]:
        """fault seq -> the recorded silences charged to it."""
        out: dict[int, list[Silence]] = {}
        for s in self.silences:
            cause, _ = charge(faults, s.flow, s.start, s.end, now, self.settle_s, self.paths)
            if cause is not None:
                out.setdefault(cause.fault.seq, []).append(s)
        return out


@dataclass
class StuckTracker:
    """Since when each bucket has been unassigned or on a dead gateway (per site)."""
    settle_s: float
    slack_s: float  # how often the buckets are read
    since: dict[tuple[str, int], tuple[float, str]] = field(default_factory=dict)
    reported: set[tuple[str, int, float]] = field(default_factory=set)

    def observe(self, site: str, buckets: Mapping[int, str | None], dead: set[str], now: float) -> None:
        bad = {b: ("unassigned" if g is None else f"on dead {g}") for b, g in buckets.items() if g is None or g in dead}
        for key in [k for k in self.since if k[0] == site and k[1] not in bad]:
            del self.since[key]
        for b, why in bad.items():
            self.since.setdefault((site, b), (now, why))

    def check(self, faults: Sequence[Injected], now: float) -> list[Violation]:
        out = []
        for (site, b), (t0, why) in sorted(self.since.items()):
            limit = allowed_s(faults, t0, now, now, self.settle_s, self.slack_s)
            if now - t0 > limit and (site, b, t0) not in self.reported:
                self.reported.add((site, b, t0))
                out.append(Violation("bucket", f"site {site} bucket {b} {why} for {now - t0:.1f} s "
                                                f"(allowed {limit:.1f} s)", now))
        return out


def split_brain(pairs: Iterable[tuple[int, int]], seen: set[tuple[int, int]], now: float) -> list[Violation]:
    """Overlapping write windows (supergw_controller.ha.view.overlaps) not reported yet."""
    out = []
    for pair in sorted(set(pairs) - seen):
        seen.add(pair)
        out.append(Violation("split_brain", f"terms {pair[0]} and {pair[1]}: accepted switch writes overlap", now))
    return out


@dataclass(frozen=True)
class Intent:
    """What the operator set at the start, per site: weights, drains, pins."""
    weights: Mapping[str, float]
    drained: frozenset[str]
    pins: Mapping[int, str]


def intent_diff(want: Intent, weights: Mapping[str, float], drained: set[str], pins: Mapping[int, str]) -> list[str]:
    out = [f"{g} weight {weights.get(g)} (set {w:g})" for g, w in want.weights.items() if weights.get(g) != w]
    out += [f"{g} no longer drained" for g in sorted(want.drained - drained)]
    out += [f"{g} drained, not by the run" for g in sorted(drained - want.drained)]
    out += [f"bucket {b} pinned to {pins.get(b)} (set {g})" for b, g in want.pins.items() if pins.get(b) != g]
    out += [f"bucket {b} pinned to {g}, not by the run" for b, g in pins.items() if b not in want.pins]
    return out


# --- growth ---------------------------------------------------------------------------------

GROWTH_LIMITS: dict[str, float] = {"rss_mb": 64.0, "fds": 64.0, "threads": 32.0, "tasks": 64.0}  # absolute growth
GROWTH_FACTOR = 1.5  # and relative: the last quarter's median over the first quarter's
GROWTH_MIN_SAMPLES = 20


def growth(series: Mapping[str, Sequence[tuple[float, float]]], warmup_s: float, now: float) -> list[Violation]:
    """`series`: "<process> <metric>" (metric a GROWTH_LIMITS key) -> (run offset, value),
    for one process lifetime (a restarted process is a new series). Unbounded growth: after
    `warmup_s`, the median of the last quarter of the samples exceeds the first quarter's by
    both GROWTH_FACTOR and the metric's absolute limit."""
    out = []
    for name, pts in series.items():
        metric = name.rsplit(" ", 1)[-1]
        vals = [v for t, v in pts if t >= pts[0][0] + warmup_s]
        if metric not in GROWTH_LIMITS or len(vals) < GROWTH_MIN_SAMPLES:
            continue
        q = len(vals) // 4
        first, last = statistics.median(vals[:q]), statistics.median(vals[-q:])
        if last - first > GROWTH_LIMITS[metric] and last > GROWTH_FACTOR * max(first, 1.0):
            out.append(Violation("growth", f"{name}: {first:g} -> {last:g} over the run (limit +{GROWTH_LIMITS[metric]:g} "
                                           f"and x{GROWTH_FACTOR})", now))
    return out


# --- logs ---------------------------------------------------------------------------------------

LOG_PATTERNS = re.compile(r"Traceback \(most recent call last\)|^panic: |^fatal error: |\"level\":\"(panic|fatal)\"",
                          re.MULTILINE)


@dataclass
class LogScanner:
    """Reads only what each log file gained since the last scan (a file that shrank is read again)."""
    offsets: dict[Path, int] = field(default_factory=dict)

    def scan(self, files: Iterable[Path], now: float) -> list[Violation]:
        out = []
        for path in files:
            try:
                size = path.stat().st_size
                start = self.offsets.get(path, 0)
                if size < start:
                    start = 0
                with open(path, "rb") as f:
                    f.seek(start)
                    data = f.read(size - start)
            except OSError:
                continue
            cut = data.rfind(b"\n") + 1  # whole lines only: the rest is read next time
            self.offsets[path] = start + cut
            text = data[:cut].decode(errors="replace")
            for m in LOG_PATTERNS.finditer(text):
                line_end = text.find("\n", m.start())
                out.append(Violation("log", f"{path.name}: {text[m.start():line_end].strip()[:200]}", now))
        return out


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100) of `values`; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]
